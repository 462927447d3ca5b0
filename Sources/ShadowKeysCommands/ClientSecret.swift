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

struct ClientSecretCommand: AsyncParsableCommand, QuietCommand {
    static let configuration = CommandConfiguration(
        commandName: "client-secret",
        abstract: "Make a Sign in with Apple client secret (ES256 JWT) from a .p8 key.",
        discussion:
            """
            Prints the JWT, or with --json the JWT and its claims. Never prints key material. Exit 64 for bad IDs or \
            TTL, 65 for an unreadable or wrong key file.
            """
    )

    @OptionGroup var credentials: ClientSecretOptions

    @Option(help: "Issue the secret as of this time: epoch seconds or RFC 3339. Default: now.")
    var now: String?

    @Flag(help: "Print {\"client_secret\", \"header\", \"claims\", \"expires_at\"}.")
    var json = false

    @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

    func validate() throws { _ = try parseNow(now) }

    func run() async throws {
        try await reportingFailures(json: false) {
            let builder = try credentials.builder()
            let secret = try builder.make(issuedAt: try parseNow(now).now)
            guard json else {
                Console.out(secret.token)
                return
            }
            let jws = try CompactJWS(secret.token)
            Console.json([
                "client_secret": .string(secret.token), "header": .object(jws.header.json),
                "claims": .object(try jws.unverifiedPayload()),
                "expires_at": .string(Timestamp.rfc3339(secret.expiresAt)),
            ])
        }
    }
}
