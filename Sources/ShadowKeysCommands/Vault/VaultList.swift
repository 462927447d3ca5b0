import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowCrypto
import ShadowVault

extension VaultCommand {
    struct List: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "List entries and their metadata; never secrets.")

        @OptionGroup var vault: VaultOptions

        @Flag(help: "Print JSON.")
        var json = false

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func validate() throws { try vault.requireKey() }

        func run() async throws {
            try await reportingFailures(json: json) {
                let opened = try vault.open()
                let now = Date()
                let entries = try opened.contents().entries
                if json {
                    Console.json([
                        "entries": .array(entries.map { .object(entryJSON($0, expired: $0.isExpired(at: now))) })
                    ])
                    return
                }
                for entry in entries {
                    let subject = (entry.subject ?? "-").terminalSafe
                    var line =
                        "\(entry.name.terminalSafe)\t\(entry.provider.rawValue)\t\(entry.kind.rawValue)\t\(subject)\t"
                    line +=
                        entry.expiresAt.map { Timestamp.rfc3339($0) + (entry.isExpired(at: now) ? " (expired)" : "") }
                        ?? "-"
                    Console.out(line)
                }
            }
        }
    }
}
