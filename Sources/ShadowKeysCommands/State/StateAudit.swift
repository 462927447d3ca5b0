import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowApple
import ShadowCore
import ShadowCredentials
import ShadowJOSE

extension StateCommand {
    struct Audit: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "audit",
            abstract:
                "Check the audit log's hash chain against the vault (--verify), or print its entries as JSON lines.",
            discussion: "Exit 31 when a line was edited, removed, reordered or added, or the log was truncated.")
        @Flag(help: "Check the chain and print a summary instead of the entries.") var verify = false
        @OptionGroup var store: StoreOptions
        @Flag(help: "Print JSON.") var json = false

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func validate() throws { try store.requireKey() }

        func run() async throws {
            try await reportingFailures(json: json, valid: true) {
                let location = try store.location()
                guard verify else {
                    for entry in try await store.withStore(create: false, { try await $0.auditEntries() }) {
                        Console.json(.object(auditJSON(entry)))
                    }
                    return
                }
                let report = try await store.withStore(create: false) { try await $0.verifyAudit() }
                let log: String = if case .vault(let path) = location { path + ".audit" } else { location.description }
                if json {
                    Console.json([
                        "valid": true, "log": .string(log), "entries": .int(report.entries),
                        "uncommitted": .int(report.uncommitted),
                        "partial_tail": .bool(report.partialTail),
                    ])
                } else {
                    Console.out("audit log intact: \(report.entries) entries")
                }
                if report.uncommitted > 0 || report.partialTail {
                    Console.note(
                        """
                        note: the log ends with \(report.uncommitted) uncommitted \
                        line(s)\(report.partialTail ? " and a partial line" : "") from an interrupted write; they \
                        never took effect and the next write drops them
                        """
                    )
                }
            }
        }
    }
}
