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
    struct RecordMigration: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "record-migration",
            abstract: "Record an app-transfer migration result: the subject --from is now --to.")
        @Option(name: .customLong("client-id"), help: "The client ID the state belongs to.") var clientID: String
        @Option(help: "The user's subject before the transfer (transfer_sub).") var from: String
        @Option(help: "The user's subject after the transfer.") var to: String
        @Option(help: "When the migration happened: epoch seconds or RFC 3339. Default: now.") var at: String?
        @OptionGroup var store: StoreOptions
        @Flag(help: "Print JSON.") var json = false

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func validate() throws {
            try store.requireKey()
            if from.exactlyEquals(to) { throw ValidationError("--from and --to name the same subject") }
            _ = try eventTime(at)
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                let event = try CredentialEvent.migration(clientID: clientID, from: from, to: to, at: try eventTime(at))
                printChanges(try await store.withStore(create: true) { try await $0.apply([event]) }, json: json)
            }
        }
    }
}
