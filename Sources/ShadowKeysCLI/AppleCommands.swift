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

/// The inputs of a client secret, shared by `client-secret` and every `apple` subcommand.
struct ClientSecretOptions: ParsableArguments {
    @Option(name: .customLong("p8"), help: "The Sign in with Apple private key (.p8, PKCS#8 PEM, P-256).")
    var p8: String

    @Option(name: .customLong("team-id"), help: "The 10-character Team ID (A-Z, 0-9).")
    var teamID: String

    @Option(name: .customLong("key-id"), help: "The 10-character Key ID of the .p8 key.")
    var keyID: String

    @Option(name: .customLong("client-id"), help: "The App ID or Services ID (case kept).")
    var clientID: String

    @Option(help: "Client secret lifetime in seconds (at most 15777000).")
    var ttl: Int = Int(ClientSecretBuilder.defaultLifetime)

    func validate() throws {
        let identifier = #/^[A-Z0-9]{10}$/#
        guard teamID.wholeMatch(of: identifier) != nil else { throw ValidationError("--team-id must be 10 characters A-Z and 0-9") }
        guard keyID.wholeMatch(of: identifier) != nil else { throw ValidationError("--key-id must be 10 characters A-Z and 0-9") }
        guard !clientID.isEmpty, clientID.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw ValidationError("--client-id must be printable ASCII without spaces")
        }
        guard ttl >= 1, ttl <= Int(ClientSecretBuilder.maximumLifetime) else { throw ValidationError("--ttl must be 1 to \(Int(ClientSecretBuilder.maximumLifetime)) seconds") }
    }

    /// Reads the key (exit 65 when unreadable or not a P-256 .p8) and builds the secret maker.
    func builder() throws -> ClientSecretBuilder {
        warnIfReadableByOthers(p8, what: ".p8 key file")
        let pem: [UInt8]
        do {
            guard let bytes = try Files.read(p8, limit: 64 * 1024) else { throw CLIError(.malformedInput, "the .p8 file \(p8) is too large to be a key") }
            pem = bytes
        } catch let error as FileError {
            throw CLIError(.malformedInput, code: "invalid_key", "cannot read the .p8 key: \(error)")
        }
        do {
            let key = try AppleSigningKey(pem: String(decoding: pem, as: UTF8.self))
            return try ClientSecretBuilder(key: key, teamID: teamID, keyID: keyID, clientID: clientID, lifetime: TimeInterval(ttl))
        } catch let error as AppleError where error.code == .invalidKey {
            throw CLIError(.malformedInput, code: "invalid_key", "\(p8): \(error.reason)")
        }
    }
}

struct ClientSecretCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "client-secret",
        abstract: "Make a Sign in with Apple client secret (ES256 JWT) from a .p8 key.",
        discussion: "Prints the JWT, or with --json the JWT and its claims. Never prints key material. Exit 64 for bad IDs or TTL, 65 for an unreadable or wrong key file."
    )

    @OptionGroup var credentials: ClientSecretOptions

    @Option(help: "Issue the secret as of this time: epoch seconds or RFC 3339. Default: now.")
    var now: String?

    @Flag(help: "Print {\"client_secret\", \"header\", \"claims\", \"expires_at\"}.")
    var json = false

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
                "client_secret": .string(secret.token), "header": .object(jws.header.json), "claims": .object(try jws.unverifiedPayload()),
                "expires_at": .string(Timestamp.rfc3339(secret.expiresAt)),
            ])
        }
    }
}

/// Where Apple's endpoints are, and how to reach them.
struct AppleEndpointOptions: ParsableArguments {
    @Option(name: .customLong("base-url"), help: "Apple's auth base URL (for mirrors and tests).")
    var baseURL: String = Apple.baseURL

    @Option(name: .customLong("jwks"), help: "Key set for id_token verification: URL or file. Default: <base-url>/auth/keys.")
    var jwks: String?

    @Flag(name: .customLong("allow-http-loopback"), help: "Allow plain http:// to 127.0.0.1 or ::1 (tests).")
    var allowHTTPLoopback = false

    func validate() throws {
        do { try URLPolicy.check(baseURL + "/auth/token", allowLoopbackHTTP: allowHTTPLoopback) } catch let error as HTTPTransportError {
            throw ValidationError("--base-url: \(error.message)")
        }
    }

    func client(_ credentials: ClientSecretOptions) throws -> AppleAuthClient {
        var configuration = AppleAuthClient.Configuration()
        configuration.baseURL = baseURL
        configuration.allowLoopbackHTTP = allowHTTPLoopback
        let keysURL = jwks ?? baseURL + "/auth/keys"
        let source = try KeySourceOptions.parse(["--jwks", keysURL] + (allowHTTPLoopback && KeySourceOptions.isURL(keysURL) ? ["--allow-http-loopback"] : []))
        return try AppleAuthClient(
            configuration: configuration, secrets: ClientSecretProvider(builder: try credentials.builder()),
            transport: HelperTransport(allowLoopbackHTTP: allowHTTPLoopback), identityTokenKeys: try source.keys())
    }
}

/// A secret read from stdin, a file or an environment variable (named `--<name>-stdin` etc.).
struct SecretSource {
    let name: String
    let stdin: Bool
    let file: String?
    let environment: String?

    func validate() throws {
        guard [stdin ? "x" : nil, file, environment].compactMap({ $0 }).count == 1 else {
            throw ValidationError("give the \(name) with exactly one of --\(name)-stdin, --\(name)-file or --\(name)-env (never on the command line)")
        }
    }

    func read() throws -> SecretBytes {
        let options = try PassphraseOptions.parse(
            stdin ? ["--passphrase-stdin"] : file.map { ["--passphrase-file", $0] } ?? ["--passphrase-env", environment ?? ""])
        guard let secret = try options.read() else { throw CLIError(.usage, "no \(name) given") }
        return secret
    }
}

private func tokenJSON(_ response: AppleTokenResponse) -> JSONValue {
    func reveal(_ secret: SecretBytes?) -> JSONValue { secret.map { .string($0.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }) } ?? .null }
    return [
        "access_token": reveal(response.accessToken), "token_type": .string(response.tokenType), "expires_in": .int(response.expiresIn),
        "refresh_token": reveal(response.refreshToken), "id_token": response.idToken.map(JSONValue.string) ?? .null,
        "identity": response.identity.map { .object($0.json) } ?? .null,
    ]
}

struct AppleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apple",
        abstract: "Sign in with Apple server flows: token exchange, refresh validation, revocation, migration, notifications.",
        discussion: """
            Exit codes: 0 success, 40 invalid_grant (code or token expired, used or revoked), 41 Apple
            refused the request (invalid_client, invalid_request, …), 42 Apple unavailable (5xx or no
            answer after retries), 11/12/13 id_token or notification verification failed, 64 usage,
            65 .p8 key unreadable or wrong.
            """,
        subcommands: [Token.self, Refresh.self, Revoke.self, Migrate.self, Notification.self]
    )

    struct Token: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Exchange an authorization code for tokens; the id_token is verified.")
        @OptionGroup var credentials: ClientSecretOptions
        @OptionGroup var endpoint: AppleEndpointOptions
        @Flag(name: .customLong("code-stdin"), help: "Read the authorization code from stdin.") var codeStdin = false
        @Option(name: .customLong("code-file"), help: "Read the authorization code from this file.") var codeFile: String?
        @Option(name: .customLong("code-env"), help: "Read the authorization code from this environment variable.") var codeEnv: String?
        @Option(name: .customLong("redirect-uri"), help: "The redirect URI used in the authorization request (web sign-in).") var redirectURI: String?
        @Option(help: "The nonce sent in the authorization request; the id_token must carry it or its SHA-256 hex.") var nonce: String?
        @Flag(help: "Print compact JSON.") var json = false

        var code: SecretSource { SecretSource(name: "code", stdin: codeStdin, file: codeFile, environment: codeEnv) }
        func validate() throws { try code.validate() }

        func run() async throws {
            try await reportingFailures(json: json) {
                let response = try await endpoint.client(credentials).exchange(code: try code.read(), redirectURI: redirectURI, nonce: nonce)
                Console.out(tokenJSON(response).serializedForTerminal(pretty: !json))
            }
        }
    }

    struct Refresh: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Validate a refresh token with Apple (about once a day per token at most).")
        @OptionGroup var credentials: ClientSecretOptions
        @OptionGroup var endpoint: AppleEndpointOptions
        @Flag(name: .customLong("token-stdin"), help: "Read the refresh token from stdin.") var tokenStdin = false
        @Option(name: .customLong("token-file"), help: "Read the refresh token from this file.") var tokenFile: String?
        @Option(name: .customLong("token-env"), help: "Read the refresh token from this environment variable.") var tokenEnv: String?
        @Flag(help: "Print compact JSON.") var json = false

        var token: SecretSource { SecretSource(name: "token", stdin: tokenStdin, file: tokenFile, environment: tokenEnv) }
        func validate() throws { try token.validate() }

        func run() async throws {
            try await reportingFailures(json: json) {
                let response = try await endpoint.client(credentials).refresh(try token.read())
                Console.out(tokenJSON(response).serializedForTerminal(pretty: !json))
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke a refresh or access token.")
        @OptionGroup var credentials: ClientSecretOptions
        @OptionGroup var endpoint: AppleEndpointOptions
        @Flag(name: .customLong("token-stdin"), help: "Read the token from stdin.") var tokenStdin = false
        @Option(name: .customLong("token-file"), help: "Read the token from this file.") var tokenFile: String?
        @Option(name: .customLong("token-env"), help: "Read the token from this environment variable.") var tokenEnv: String?
        @Option(help: "What the token is: refresh or access.") var kind: String = "refresh"
        @Flag(help: "Print {\"revoked\": true}.") var json = false

        var token: SecretSource { SecretSource(name: "token", stdin: tokenStdin, file: tokenFile, environment: tokenEnv) }
        func validate() throws {
            try token.validate()
            guard kind == "refresh" || kind == "access" else { throw ValidationError("--kind is refresh or access") }
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                try await endpoint.client(credentials).revoke(try token.read(), kind: kind == "refresh" ? .refreshToken : .accessToken)
                if json { Console.json(["revoked": true]) }
            }
        }
    }

    struct Migrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "User migration for app transfers: --sub S --target TEAM gives the transfer_sub (sending team); --transfer-sub T gives the new sub (receiving team).")
        @OptionGroup var credentials: ClientSecretOptions
        @OptionGroup var endpoint: AppleEndpointOptions
        @Option(help: "The user's sub under the sending team.") var sub: String?
        @Option(help: "The receiving team's Team ID.") var target: String?
        @Option(name: .customLong("transfer-sub"), help: "A transfer_sub received from the sending team.") var transferSub: String?
        @Flag(help: "Print compact JSON.") var json = false

        func validate() throws {
            switch (sub, target, transferSub) {
            case (.some, .some, nil), (nil, nil, .some): break
            default: throw ValidationError("give --sub and --target, or --transfer-sub")
            }
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                let client = try endpoint.client(credentials)
                let token = try await client.migrationAccessToken()
                if let sub, let target {
                    let transfer = try await client.transferSubject(for: sub, to: target, accessToken: token)
                    Console.out(JSONValue.object(["transfer_sub": .string(transfer)]).serializedForTerminal(pretty: !json))
                } else if let transferSub {
                    let user = try await client.migratedUser(forTransferSubject: transferSub, accessToken: token)
                    Console.out(JSONValue.object([
                        "sub": .string(user.subject), "email": user.email.map(JSONValue.string) ?? .null, "is_private_email": user.isPrivateEmail.map(JSONValue.bool) ?? .null,
                    ]).serializedForTerminal(pretty: !json))
                }
            }
        }
    }

    struct Notification: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Verify a server-to-server notification body from stdin and print the event.",
            discussion: "Exit 0, 10 (body or JWS malformed), 11 (signature or key), 12 (claims or events rejected), 13 (keys unavailable), 64.")
        @Option(name: .customLong("aud"), help: "An accepted client ID; repeatable.") var audiences: [String] = []
        @OptionGroup var keySource: KeySourceOptions
        @Option(help: "Verify as of this time: epoch seconds or RFC 3339.") var now: String?
        @Option(help: "Allowed clock skew, seconds.") var leeway: Double = 60
        @Flag(help: "Print compact JSON.") var json = false

        func validate() throws {
            guard !audiences.isEmpty else { throw ValidationError("give the client IDs the notification may be for with --aud") }
            try keySource.validate(default: Apple.keysURL)
            if keySource.jwks == "-" { throw ValidationError("the notification body comes on stdin; give --jwks as a URL or file") }
            try checkLeeway(leeway)
            _ = try parseNow(now)
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                let notification = try await readNotification(keySource: keySource, audiences: audiences, leeway: leeway, now: now)
                if !notification.isKnownType { Console.err("shadow-keys: warning: unknown notification type \(notification.rawType.quotedForMessage)") }
                Console.out(JSONValue.object(notification.json).serializedForTerminal(pretty: !json))
            }
        }
    }
}

/// Reads a notification POST body from stdin and verifies it against `keySource` (Apple's key
/// set by default).
func readNotification(keySource: KeySourceOptions, audiences: [String], leeway: Double, now: String?) async throws -> AppleNotification {
    guard let body = try Files.readAll(0, limit: AppleNotificationVerifier.maxBodyBytes, path: "stdin") else {
        throw CLIError(.malformedToken, "notification body exceeds \(AppleNotificationVerifier.maxBodyBytes) bytes")
    }
    let verifier = AppleNotificationVerifier(clientIDs: audiences, leeway: leeway, clock: try parseNow(now))
    return try await verifier.verify(body: trimWhitespace(body), keys: keySource.keys(default: Apple.keysURL))
}
