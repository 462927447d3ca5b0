import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowDPoP
import ShadowJWKS
import ShadowTokenSource
import ShadowVault

extension VaultCommand {
    struct Login: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "login",
            abstract: "Set NAME up as a token source: store its first refresh token and how to refresh it.",
            discussion: """
                The refresh token comes from stdin (--refresh-token-stdin), or from a sign-in: with --code-stdin \
                the authorization URL (PKCE, S256) is printed on stderr, and stdin gives the code or the whole \
                redirect URL, which is then exchanged. The client secret comes from --client-secret-file or \
                --client-secret-env; for --preset apple, from --p8 FILE with --team-id and --key-id (a client \
                secret is made from it when needed). With --dpop (and --code-stdin) a new P-256 key is made and \
                kept in the vault as NAME.dpop; every request to the token endpoint carries a DPoP proof by it \
                (RFC 9449), so the provider can bind the tokens to it. Everything is stored in one write: NAME \
                (the refresh token and the settings), NAME.client-secret, NAME.p8, NAME.dpop, NAME.access.
                """)

        @Argument(help: "The token source's name.") var name: String
        @OptionGroup var vault: VaultOptions
        @OptionGroup var network: NetworkOptions
        @Option(help: "google, apple or generic.") var preset: String = "generic"
        @Option(name: .customLong("client-id")) var clientID: String
        @Option(name: .customLong("token-endpoint"), help: "The token endpoint (a preset's is the default).")
        var tokenEndpoint: String?
        @Option(name: .customLong("authorization-endpoint"), help: "For --code-stdin (a preset's is the default).")
        var authorizationEndpoint: String?
        @Option(help: "client_secret_basic, client_secret_post or none (a public PKCE client).") var auth: String?
        @Option(help: "The scopes to ask for, space-separated.") var scope: String?
        @Option(name: .customLong("redirect-uri"), help: "For --code-stdin.") var redirectURI: String?
        @Option(name: .customLong("client-secret-file")) var clientSecretFile: String?
        @Option(name: .customLong("client-secret-env")) var clientSecretEnvironment: String?
        @Option(help: "Apple's .p8 key file (--preset apple).") var p8: String?
        @Option(name: .customLong("team-id")) var teamID: String?
        @Option(name: .customLong("key-id")) var keyID: String?
        @Option(help: "The user the tokens belong to (a `sub`).") var subject: String?
        @Flag(name: .customLong("refresh-token-stdin"), help: "Read the refresh token from stdin.")
        var refreshTokenStdin = false
        @Flag(name: .customLong("code-stdin"), help: "Sign in: print the URL, read the code from stdin.")
        var codeStdin = false
        @Flag(help: "Make a DPoP key (kept in the vault) and send a proof by it with every token request.")
        var dpop = false
        @Flag(help: "Print JSON.") var json = false
        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func client() throws -> OAuthClient {
            guard let preset = OAuthClient.Preset(rawValue: preset) else {
                throw ValidationError("--preset: one of google, apple, generic")
            }
            var authentication: OAuthClient.Authentication?
            if let auth {
                guard let known = OAuthClient.Authentication(rawValue: auth) else {
                    throw ValidationError("--auth: one of client_secret_basic, client_secret_post, none")
                }
                authentication = known
            }
            do {
                return try OAuthClient(
                    preset: preset, tokenEndpoint: tokenEndpoint, clientID: clientID, authentication: authentication)
            } catch let error as TokenError { throw ValidationError(error.reason) }
        }

        func validate() throws {
            try vault.requireKey()
            guard refreshTokenStdin != codeStdin else {
                throw ValidationError("give one of --refresh-token-stdin or --code-stdin")
            }
            if vault.keyUsesStdin { throw ValidationError("stdin gives the token or code: give the key another way") }
            if dpop && !codeStdin {
                throw ValidationError(
                    "--dpop binds the tokens of a new sign-in to a new key: use it with --code-stdin")
            }
            let client = try client()
            if let problem = TokenSourceEntries.nameProblem(name, client: client) { throw ValidationError(problem) }
            try network.check(client.tokenEndpoint, option: "--token-endpoint")
            if codeStdin {
                guard redirectURI != nil else { throw ValidationError("--code-stdin needs --redirect-uri") }
                guard authorizationEndpoint ?? client.preset.authorizationEndpoint != nil else {
                    throw ValidationError("--code-stdin needs --authorization-endpoint for a generic client")
                }
            }
            if client.preset == .apple {
                guard p8 != nil, teamID != nil, keyID != nil else {
                    throw ValidationError("--preset apple needs --p8, --team-id and --key-id")
                }
            } else if client.authentication != .none {
                guard (clientSecretFile == nil) != (clientSecretEnvironment == nil) else {
                    throw ValidationError(
                        "\(client.authentication.rawValue) needs one of --client-secret-file or --client-secret-env")
                }
            }
            // RFC 6749, 3.3: scope tokens of %x21 / %x23-5B / %x5D-7E, separated by spaces.
            if let scope,
                scope.isEmpty || scope.utf8.count > 4096
                    || !scope.utf8.allSatisfy({ (0x20...0x7E).contains($0) && $0 != 0x22 && $0 != 0x5C })
            {
                throw ValidationError(
                    #"--scope: 1 to 4096 bytes of scope tokens and spaces (printable ASCII but " and \, RFC 6749 3.3)"#)
            }
        }

        /// Exit 73 (`exists`) for an entry vault login would replace (``TokenSourceEntries/conflict(in:name:)``).
        static func refuseConflict(_ conflict: String?) throws {
            guard let conflict else { return }
            throw CLIError(
                .cannotCreate, code: "exists",
                "\(conflict): vault login never replaces it; remove it (vault rm) or choose another name")
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                let client = try client()
                let tokenVault = try vault.open()
                // Before any secret is read or code spent; the write checks again under its lock.
                try Self.refuseConflict(
                    try tokenVault.withLockedContents { TokenSourceEntries.conflict(in: $0, name: name) })
                var entries: [VaultEntry] = []
                let provider: VaultEntry.Provider =
                    switch client.preset {
                    case .google: .google
                    case .apple: .apple
                    case .generic: .other
                    }
                var clientSecret: SecretBytes?
                if client.preset == .apple, let p8, let teamID, let keyID {
                    let pem = try SecretInput(origin: .file(p8), what: ".p8 key").secret()
                    entries.append(
                        VaultEntry(
                            name: TokenSourceEntries.p8(name), secret: pem, provider: .apple, kind: .key,
                            labels: TokenSourceEntries.appleKeyLabels(teamID: teamID, keyID: keyID)))
                } else if client.authentication != .none {
                    let origin: SecretInput.Origin =
                        clientSecretFile.map { .file($0) } ?? .environment(clientSecretEnvironment ?? "")
                    let secret = try SecretInput(origin: origin, what: "client secret").secret()
                    clientSecret = secret
                    entries.append(
                        VaultEntry(
                            name: TokenSourceEntries.clientSecret(name), secret: secret, provider: provider,
                            kind: .other
                        ))
                }
                var refreshToken: SecretBytes
                var access: VaultEntry?
                if refreshTokenStdin {
                    refreshToken = try SecretInput(origin: .standardInput, what: "refresh token").secret()
                } else {
                    var policy = OAuthTokenEndpoint.Policy()
                    policy.allowLoopbackHTTP = network.allowHTTPLoopback
                    let pkce = PKCE()
                    let url = pkce.authorizationURL(
                        endpoint: authorizationEndpoint ?? client.preset.authorizationEndpoint ?? "", client: client,
                        redirectURI: redirectURI ?? "", scope: scope)
                    Console.err("Open this URL, sign in, then paste the code or the whole redirect URL:")
                    Console.err(url)
                    let pasted = try SecretInput(origin: .standardInput, what: "authorization code").secret()
                    let code = try pkce.code(fromPasted: pasted.withUnsafeBytes { String(decoding: $0, as: UTF8.self) })
                    if client.preset == .apple {
                        // The Apple client secret is made the same way the token source makes it.
                        throw CLIError(
                            .usage,
                            """
                            --code-stdin with --preset apple: exchange the code with `apple token` and store the \
                            refresh token with --refresh-token-stdin
                            """)
                    }
                    var signer: DPoPSigner?
                    if dpop {
                        let (entry, made) = try TokenSourceEntries.newDPoPKey(for: name, provider: provider)
                        entries.append(entry)
                        signer = made
                    }
                    let endpoint = try OAuthTokenEndpoint(
                        client: client, transport: try network.transport(), policy: policy, dpop: signer)
                    let response = try await endpoint.exchange(
                        code: code, redirectURI: redirectURI, codeVerifier: pkce.verifier, clientSecret: clientSecret)
                    refreshToken = response.refreshToken ?? SecretBytes([])
                    var fresh = VaultEntry(
                        name: TokenSourceEntries.access(name), secret: response.accessToken, provider: provider,
                        kind: .accessToken, subject: subject,
                        expiresAt: Date().addingTimeInterval(Double(response.expiresIn)))
                    if let granted = response.scope ?? scope { fresh.labels["oauth.scope"] = granted }
                    fresh.labels["oauth.token_type"] = response.tokenType
                    access = fresh
                }
                var labels = TokenSourceEntries.labels(client: client, scope: scope, issuedAt: Date())
                if dpop { labels[TokenSourceEntries.dpopLabel] = "ES256" }
                entries.append(
                    VaultEntry(
                        name: name, secret: refreshToken, provider: provider, kind: .refreshToken, subject: subject,
                        labels: labels))
                for entry in entries + [access].compactMap({ $0 }) { try entry.validate() }
                let now = Date()
                try tokenVault.update { contents in
                    // Another entry is never replaced: only NAME's own entries, when NAME is a source.
                    try Self.refuseConflict(TokenSourceEntries.conflict(in: contents, name: name))
                    for entry in entries { contents.put(entry, now: now) }
                    if let access {
                        contents.put(access, now: now)
                    } else {
                        // The old grant's access token is not this one's.
                        _ = contents.remove(named: TokenSourceEntries.access(name))
                    }
                    // Nor is an old grant's DPoP key.
                    if !dpop { _ = contents.remove(named: TokenSourceEntries.dpop(name)) }
                }
                if json {
                    Console.json([
                        "name": .string(name), "preset": .string(client.preset.rawValue),
                        "token_endpoint": .string(client.tokenEndpoint), "signed_in": .bool(access != nil),
                    ])
                } else {
                    Console.note(
                        "stored \(name.quotedForMessage): `shadow-keys vault token \(name)` prints its access token")
                }
            }
        }
    }
}
