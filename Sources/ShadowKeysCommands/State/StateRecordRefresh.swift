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
    struct RecordRefresh: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "record-refresh",
            abstract:
                "Record the result of validating a user's refresh token: ok, or Apple's invalid_grant (a revocation).")
        @OptionGroup var user: UserOptions
        @Option(help: "ok or invalid_grant.") var result: String
        @Option(help: "When Apple answered: epoch seconds or RFC 3339. Default: now.") var at: String?
        @OptionGroup var store: StoreOptions
        @Flag(help: "Print JSON.") var json = false

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func validate() throws {
            try store.requireKey()
            guard ["ok", "invalid_grant"].contains(result) else {
                throw ValidationError("--result: ok or invalid_grant")
            }
            _ = try eventTime(at)
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                let event = try CredentialEvent.refresh(
                    succeeded: result == "ok", clientID: user.clientID, subject: user.subject, at: try eventTime(at))
                printChanges(try await store.withStore(create: true) { try await $0.apply([event]) }, json: json)
            }
        }
    }
}
