import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowJWKS
import ShadowTokenSource
import ShadowVault

extension VaultCommand {
    struct Token: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "token",
            abstract: "Print a valid access token for NAME, refreshing it first when it is near its expiry.",
            discussion: """
                For curl -H "Authorization: Bearer $(shadow-keys vault token NAME)". NAME is set up with \
                `vault login`. Processes that ask at once near expiry share one refresh (the lock file \
                <vault>.refresh.lock); the rotated refresh token and the new access token are saved in one \
                atomic write before the token is printed. Exit codes: 0; 43 reauthentication required (the \
                provider refused the refresh token: run `vault login` again; nothing is retried); 41 the \
                provider refused the request; 42 the provider was unavailable after retries; 30-33 vault; 64 \
                usage (NAME not set up for refreshing).
                """)

        @Argument(help: "The token source's name (its refresh token's entry).") var name: String
        @OptionGroup var vault: VaultOptions
        @OptionGroup var network: NetworkOptions
        /// `--skew`'s default, which the direct reader shares.
        static let defaultSkew = 60
        @Option(help: "Refresh when the token has fewer than this many seconds left (0 to 86400).")
        var skew: Int = defaultSkew
        @Flag(help: "Print JSON: the token, its expiry, its scopes, and whether it was refreshed.") var json = false
        @Flag(name: [.customShort("n"), .customLong("no-newline")], help: "Do not print a newline after the token.")
        var noNewline = false
        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func validate() throws {
            try vault.requireKey()
            guard (0...86_400).contains(skew) else { throw ValidationError("--skew: 0 to 86400 seconds") }
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                var policy = OAuthTokenEndpoint.Policy()
                policy.allowLoopbackHTTP = network.allowHTTPLoopback
                let source = try TokenSource(
                    vault: try vault.open(), name: name, transport: try network.transport(), skew: .seconds(skew),
                    policy: policy, lockTimeout: .seconds(max(vault.lockTimeout, 30)))
                let token = try await source.token()
                for warning in token.warnings { Console.warn(warning) }
                if json {
                    let expiresIn = max(0, Int(token.expiresAt.timeIntervalSinceNow.rounded(.down)))
                    token.token.withUnsafeBytes { bytes in
                        Console.json([
                            "token": .string(String(decoding: bytes, as: UTF8.self)),
                            "expires_at": .string(Timestamp.rfc3339(token.expiresAt)), "expires_in": .int(expiresIn),
                            "scope": token.scope.map(JSONValue.string) ?? .null,
                            "scopes": .array((token.scope ?? "").split(separator: " ").map { .string(String($0)) }),
                            "refreshed": .bool(token.refreshed), "token_type": .string(token.tokenType),
                        ])
                    }
                } else {
                    token.token.withUnsafeBytes { Console.outBytes($0, newline: !noNewline) }
                }
            }
        }
    }
}
