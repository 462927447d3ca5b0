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
    struct Remove: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm", abstract: "Delete the entry NAME (exit 32 when there is none).")

        @Argument(help: "The entry's name.")
        var name: String

        @OptionGroup var vault: VaultOptions

        @Flag(help: "Print JSON.")
        var json = false

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func validate() throws { try vault.requireKey() }

        func run() async throws {
            try await reportingFailures(json: json) {
                try vault.open().removeSync(named: name)
                if json { Console.json(["removed": .string(name)]) }
            }
        }
    }
}
