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
    struct History: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "history", abstract: "Print a user's transitions from the audit log (checking the log's chain first).")
        @OptionGroup var user: UserOptions
        @OptionGroup var vault: VaultOptions
        @Flag(help: "Print JSON.") var json = false

        func validate() throws { try vault.requireKey() }

        func run() async throws {
            try await reportingFailures(json: json) {
                let entries = try credentialStore(vault).historySync(clientID: user.clientID, subject: user.subject)
                if json {
                    Console.json(["client_id": .string(user.clientID), "sub": .string(user.subject), "entries": .array(entries.map { .object(auditJSON($0)) })])
                    return
                }
                if entries.isEmpty { Console.err("shadow-keys: no transitions recorded for \(user.subject.quotedForMessage)") }
                for entry in entries {
                    Console.out("\(Timestamp.rfc3339(millisecondsToDate(entry.eventTimeMilliseconds)))  \(entry.old) -> \(entry.new)  \(entry.cause.rawValue)  \(entry.eventID.terminalSafe)")
                }
            }
        }
    }
}
