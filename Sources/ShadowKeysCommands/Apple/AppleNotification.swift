import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowApple
import ShadowCore
import ShadowCrypto
import ShadowJOSE
import ShadowJWKS

extension AppleCommand {
    struct Notification: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "notification",
            abstract: "Verify a server-to-server notification body from stdin and print the event.",
            discussion:
                """
                Exit 0, 10 (body or JWS malformed), 11 (signature or key), 12 (claims or events rejected), 13 (keys \
                unavailable), 64.
                """
        )
        @Option(name: .customLong("aud"), help: "An accepted client ID; repeatable.") var audiences: [String] = []
        @OptionGroup var keySource: KeySourceOptions
        @Option(help: "Verify as of this time: epoch seconds or RFC 3339.") var now: String?
        @Option(help: "Allowed clock skew, seconds.") var leeway: Double = 60
        @Flag(help: "Print compact JSON.") var json = false

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func validate() throws {
            guard !audiences.isEmpty else {
                throw ValidationError("give the client IDs the notification may be for with --aud")
            }
            try keySource.validate(default: Apple.keysURL)
            if keySource.jwks == "-" {
                throw ValidationError("the notification body comes on stdin; give --jwks as a URL or file")
            }
            try checkLeeway(leeway)
            _ = try parseNow(now)
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                let notification = try await readNotification(
                    keySource: keySource, audiences: audiences, leeway: leeway, now: now)
                if !notification.isKnownType {
                    Console.warn("unknown notification type \(notification.rawType.quotedForMessage)")
                }
                Console.out(JSONValue.object(notification.json).serializedForTerminal(pretty: !json))
            }
        }
    }
}
