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
    struct ApplyNotification: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "apply-notification",
            abstract: "Verify a server-to-server notification body from stdin and apply its event.",
            discussion: "An undocumented event type is reported and changes nothing (exit 0).")
        @Option(
            name: .customLong("client-id"),
            help: "The client ID the state belongs to (default: the notification's aud).")
        var clientID: String?
        @Option(name: .customLong("aud"), help: "An accepted client ID; repeatable. Default: --client-id.")
        var audiences: [String] = []
        @OptionGroup var keySource: KeySourceOptions
        @Option(help: "Verify as of this time: epoch seconds or RFC 3339.") var now: String?
        @Option(help: "Allowed clock skew, seconds.") var leeway: Double = 60
        @OptionGroup var store: StoreOptions
        @Flag(help: "Print JSON.") var json = false

        var acceptedAudiences: [String] { audiences.isEmpty ? clientID.map { [$0] } ?? [] : audiences }

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func validate() throws {
            try store.requireKey()
            guard !acceptedAudiences.isEmpty else {
                throw ValidationError("give --client-id or --aud: the client IDs the notification may be for")
            }
            if let clientID, !audiences.isEmpty, !audiences.contains(where: { $0.exactlyEquals(clientID) }) {
                throw ValidationError("--client-id must be one of the --aud values")
            }
            try keySource.validate(default: Apple.keysURL)
            if keySource.jwks == "-" || store.keyUsesStdin {
                throw ValidationError(
                    "the notification body comes on stdin; give --jwks and the passphrase another way")
            }
            try checkLeeway(leeway)
            _ = try parseNow(now)
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                let notification = try await readNotification(
                    keySource: keySource, audiences: acceptedAudiences, leeway: leeway, now: now)
                guard
                    let event = try CredentialEvent.notification(
                        notification, clientID: clientID ?? notification.audience)
                else {
                    Console.warn("unknown notification type \(notification.rawType.quotedForMessage); nothing applied")
                    printChanges([], json: json)
                    return
                }
                printChanges(try await store.withStore(create: true) { try await $0.apply([event]) }, json: json)
            }
        }
    }
}
