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
            TTL, or a --now that makes a secret Apple refuses (iat more than 60 s ahead of this machine's clock, or \
            exp more than six months after it); a secret already expired by this clock draws a warning. 65 for an \
            unreadable or wrong key file.
            """
    )

    @OptionGroup var credentials: ClientSecretOptions

    @Option(help: "Issue the secret as of this time: epoch seconds or RFC 3339. Default: now.")
    var now: String?

    @Flag(help: "Print {\"client_secret\", \"header\", \"claims\", \"expires_at\"}.")
    var json = false

    @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

    /// How far ahead of this machine's clock `--now` may put `iat`: Apple refuses a secret issued
    /// in the future, and clocks drift.
    static let futureSkew: Double = 60

    func validate() throws {
        let issued = try parseNow(now).now.timeIntervalSince1970
        guard now != nil else { return }
        try Self.check(issued: issued, ttl: credentials.ttl, clock: Date().timeIntervalSince1970)
    }

    /// Refuses a `--now` that makes a secret Apple refuses outright, judged by this machine's
    /// `clock`: `iat` more than ``futureSkew`` ahead of it, or `exp` more than six months after it.
    static func check(issued: Double, ttl: Int, clock: Double) throws {
        if issued > clock + futureSkew {
            throw ValidationError(
                """
                --now: iat would be \(Int(issued - clock)) s after this machine's clock; Apple refuses a secret issued \
                in the future
                """
            )
        }
        let expires = issued + Double(ttl)
        if expires > clock + ClientSecretBuilder.maximumLifetime {
            throw ValidationError(
                """
                --now with --ttl \(ttl): exp would be \(Int(expires - clock)) s after this machine's clock, \
                beyond Apple's six months (\(Int(ClientSecretBuilder.maximumLifetime)) s)
                """)
        }
    }

    func run() async throws {
        try await reportingFailures(json: false) {
            let builder = try credentials.builder()
            let secret = try builder.make(issuedAt: try parseNow(now).now)
            if now != nil, secret.expiresAt <= Date() {
                Console.warn("the secret expired at \(Timestamp.rfc3339(secret.expiresAt)); Apple refuses it")
            }
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
