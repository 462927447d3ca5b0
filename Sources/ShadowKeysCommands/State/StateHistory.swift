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
    struct History: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "history",
            abstract: "Print a user's transitions from the audit log (checking the log's chain first).")
        @OptionGroup var query: UserQueryOptions

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func run() async throws {
            try await reportingFailures(json: query.json) {
                let entries = try await query.store.withStore(create: false) { store in
                    // The whole chain first, clear columns included: a line moved to another
                    // user, or hidden from this one, is tampering (31), not a shorter history.
                    _ = try await store.verifyAudit()
                    return try await store.history(clientID: query.user.clientID, subject: query.user.subject)
                }
                if query.json {
                    Console.json([
                        "client_id": .string(query.user.clientID), "sub": .string(query.user.subject),
                        "entries": .array(entries.map { .object(auditJSON($0)) }),
                    ])
                    return
                }
                if entries.isEmpty {
                    Console.note("no transitions recorded for \(query.user.subject.quotedForMessage)")
                }
                for entry in entries {
                    Console.out(
                        """
                        \(Timestamp.rfc3339Exact(millisecondsToDate(entry.eventTimeMilliseconds)))  \(entry.old) -> \
                        \(entry.new)  \(entry.cause.rawValue)  \(entry.eventID.terminalSafe)
                        """
                    )
                }
            }
        }
    }
}
