#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Crypto
import ShadowApple
public import ShadowCore
public import ShadowJWKS
import HTTPTypes

/// The error ShadowTokenSource throws. Equal by code.
public typealias TokenError = ModuleError<TokenErrorCode>

/// The codes of `TokenError`. New codes may be added; switch with a `default`.
public struct TokenErrorCode: ShadowKeysErrorCode {
    public let name: String
    private init(_ name: String) { self.name = name }

    /// The provider answered `invalid_grant`: the refresh token is revoked or expired, and the
    /// user must sign in again (`vault login`). The entry is marked; nothing retries it.
    public static let reauthenticationRequired = TokenErrorCode("reauthentication_required")
    /// The provider answered 5xx or could not be reached, after every retry.
    public static let providerUnavailable = TokenErrorCode("provider_unavailable")
    /// The provider refused the request for another reason (its `error` is in the reason).
    public static let rejected = TokenErrorCode("provider_rejected")
    /// The provider's answer is not a token response.
    public static let invalidResponse = TokenErrorCode("invalid_response")
    /// The vault entry is not set up for refreshing (no `vault login`), or a setting is invalid.
    public static let notConfigured = TokenErrorCode("not_configured")
    /// Another process held the refresh lock past the timeout.
    public static let lockTimeout = TokenErrorCode("lock_timeout")
}

/// Where and how to refresh: an OAuth 2.0 token endpoint (RFC 6749, section 6) and the client's
/// credentials.
public struct OAuthClient: Sendable, Hashable {
    /// How the client authenticates at the token endpoint (RFC 6749, section 2.3.1).
    public enum Authentication: String, Sendable, Hashable, CaseIterable {
        /// HTTP Basic with the form-encoded client ID and secret.
        case clientSecretBasic = "client_secret_basic"
        /// `client_id` and `client_secret` in the form.
        case clientSecretPost = "client_secret_post"
        /// A public client: `client_id` only (PKCE clients, RFC 7636).
        case none
    }

    /// The presets: which endpoint and authentication a provider uses.
    public enum Preset: String, Sendable, Hashable, CaseIterable {
        /// Google's OAuth 2.0 endpoint; refresh tokens live 90 days (the integration's policy).
        case google
        /// Sign in with Apple: the client secret is a JWT made from the `.p8` key.
        case apple
        /// Any RFC 6749 server.
        case generic

        public var tokenEndpoint: String? {
            switch self {
            case .google: return "https://oauth2.googleapis.com/token"
            case .apple: return "https://appleid.apple.com/auth/token"
            case .generic: return nil
            }
        }

        public var authorizationEndpoint: String? {
            switch self {
            case .google: return "https://accounts.google.com/o/oauth2/v2/auth"
            case .apple: return "https://appleid.apple.com/auth/authorize"
            case .generic: return nil
            }
        }

        /// How long a refresh token lives, when the provider says so: Google's 90 days.
        public var refreshTokenLifetime: TimeInterval? { self == .google ? 90 * 86_400 : nil }
    }

    public var preset: Preset
    public var tokenEndpoint: String
    public var clientID: String
    public var authentication: Authentication

    public init(
        preset: Preset, tokenEndpoint: String? = nil, clientID: String, authentication: Authentication? = nil
    )
        throws
    {
        guard let endpoint = tokenEndpoint ?? preset.tokenEndpoint else {
            throw TokenError(.notConfigured, "a generic client needs its token endpoint")
        }
        guard !clientID.isEmpty, clientID.utf8.count <= 255,
            clientID.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F })
        else { throw TokenError(.notConfigured, "a client ID is 1 to 255 printable characters") }
        self.preset = preset
        self.tokenEndpoint = endpoint
        self.clientID = clientID
        self.authentication = authentication ?? (preset == .apple ? .clientSecretPost : .clientSecretBasic)
    }
}

/// What a token endpoint answered (RFC 6749, section 5.1).
public struct TokenResponse: Sendable, CustomStringConvertible {
    public let accessToken: SecretBytes
    public let expiresIn: Int
    /// A rotated refresh token, when the server sent one.
    public let refreshToken: SecretBytes?
    public let scope: String?

    public var description: String { "TokenResponse(expires in \(expiresIn) s, redacted)" }
}

/// The refresh and code grants over an ``HTTPTransport``, with retries.
public struct OAuthTokenEndpoint: Sendable {
    public struct Policy: Sendable {
        /// Per-request timeout.
        public var timeout: Duration = .seconds(10)
        /// Extra attempts after a 5xx, a 429 or a transport failure.
        public var retries = 3
        /// The first back-off (doubled each retry, with full jitter).
        public var backoff: Duration = .milliseconds(500)
        /// The longest wait a `Retry-After` may ask for; longer answers end the retries.
        public var maxRetryAfter: Duration = .seconds(30)
        /// Plain http:// to a loopback address (tests only).
        public var allowLoopbackHTTP = false

        public init() {}
    }

    public let client: OAuthClient
    public let policy: Policy
    let transport: any HTTPTransport

    /// The longest `expires_in` accepted: a year.
    static let maxExpiresIn: Int64 = 366 * 86_400

    public init(client: OAuthClient, transport: any HTTPTransport, policy: Policy = Policy()) throws {
        do {
            try URLPolicy.check(client.tokenEndpoint, allowLoopbackHTTP: policy.allowLoopbackHTTP)
        } catch let error as HTTPTransportError {
            throw TokenError(.notConfigured, "the token endpoint: \(error.message)")
        }
        self.client = client
        self.policy = policy
        self.transport = transport
    }

    /// `grant_type=refresh_token`.
    public func refresh(
        _ refreshToken: SecretBytes, clientSecret: SecretBytes?, scope: String? = nil
    ) async throws
        -> TokenResponse
    {
        var fields = [("grant_type", "refresh_token"), ("refresh_token", refreshToken.utf8String)]
        if let scope { fields.append(("scope", scope)) }
        return try await post(fields, clientSecret: clientSecret)
    }

    /// `grant_type=authorization_code`, with the PKCE verifier (RFC 7636) when one was used.
    public func exchange(
        code: SecretBytes, redirectURI: String?, codeVerifier: String?, clientSecret: SecretBytes?
    )
        async throws -> TokenResponse
    {
        var fields = [("grant_type", "authorization_code"), ("code", code.utf8String)]
        if let redirectURI { fields.append(("redirect_uri", redirectURI)) }
        if let codeVerifier { fields.append(("code_verifier", codeVerifier)) }
        let response = try await post(fields, clientSecret: clientSecret)
        guard response.refreshToken != nil else {
            throw TokenError(.invalidResponse, "the code exchange returned no refresh_token (ask for offline access)")
        }
        return response
    }

    /// The largest token-endpoint answer read (256 KiB); a larger one is `invalid_response`.
    public static let maxResponseBytes = 256 * 1024

    private func post(_ fields: [(String, String)], clientSecret: SecretBytes?) async throws -> TokenResponse {
        var fields = fields
        var request = TransportRequest(
            method: .post, url: client.tokenEndpoint,
            headerFields: [
                .contentType: "application/x-www-form-urlencoded", .accept: "application/json",
                .userAgent: "shadow-keys/0.1 (token source)",
            ], timeout: policy.timeout, maxResponseBytes: Self.maxResponseBytes, requiresTLS13: client.preset == .apple)
        switch client.authentication {
        case .clientSecretBasic:
            guard let clientSecret else {
                throw TokenError(.notConfigured, "client_secret_basic needs a client secret")
            }
            // RFC 6749, section 2.3.1: each part form-encoded, then Basic.
            let pair =
                FormEncoding.encode([("", client.clientID)]).dropFirst() + [UInt8(ascii: ":")]
                + FormEncoding.encode([("", clientSecret.utf8String)]).dropFirst()
            request.headerFields[.authorization] = "Basic " + Data(pair).base64EncodedString()
        case .clientSecretPost:
            guard let clientSecret else { throw TokenError(.notConfigured, "client_secret_post needs a client secret") }
            fields += [("client_id", client.clientID), ("client_secret", clientSecret.utf8String)]
        case .none:
            fields.append(("client_id", client.clientID))
        }
        request.body = FormEncoding.encode(fields)
        var backoff = policy.backoff
        var attempt = 0
        while true {
            var wait = Duration.zero
            var failure = TokenError(.providerUnavailable, "the token endpoint did not answer")
            do {
                let response = try await transport.send(request)
                if response.status.kind == .successful { return try Self.parse(response) }
                // A 5xx or a 429 is worth another try; any other answer is the provider's refusal.
                guard response.status.kind == .serverError || response.status == .tooManyRequests else {
                    throw Self.rejection(response)
                }
                failure = TokenError(.providerUnavailable, "the token endpoint answered HTTP \(response.status.code)")
                // RFC 9110 §10.2.3: delay-seconds or an HTTP-date, read as the key-set fetch reads it.
                let asked = HTTPCaching.retryAfter(response.headerFields, now: Date())
                if let asked, asked > policy.maxRetryAfter.inSeconds { throw failure }
                wait = max(Self.jitter(backoff), .seconds(asked ?? 0))
            } catch let error as HTTPTransportError {
                if error.kind == .forbiddenURL { throw TokenError(.notConfigured, error.message) }
                // An answer over the cap is a wrong answer, not an outage: never retried.
                if error.kind == .bodyTooLarge {
                    throw TokenError(
                        .invalidResponse,
                        "the token endpoint's answer is over \(Self.maxResponseBytes / 1024) KiB: \(error.message)")
                }
                failure = TokenError(.providerUnavailable, "the token endpoint: \(error.message)")
                wait = Self.jitter(backoff)
            }
            guard attempt < policy.retries else { throw failure }
            attempt += 1
            try await Task.sleep(for: wait)
            backoff *= 2
        }
    }

    /// Full jitter: a uniform wait between zero and the back-off.
    static func jitter(_ backoff: Duration) -> Duration {
        let milliseconds = max(1, Int(backoff.inSeconds * 1000))
        return .milliseconds(Int.random(in: 0...milliseconds))
    }

    package static func rejection(_ response: TransportResponse) -> TokenError {
        let object = (try? StrictJSON.parse(response.body, limits: .jose))?.objectValue
        let error = object?["error"]?.stringValue
        if error == "invalid_grant" {
            return TokenError(
                .reauthenticationRequired,
                "the provider answered invalid_grant: the refresh token was revoked or expired; sign in again")
        }
        // The provider's words are its text, not a secret: bounded, and made printable.
        func printable(_ text: String, _ limit: Int) -> String {
            String(
                String.UnicodeScalarView(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }).prefix(
                    limit))
        }
        let code = error.map { " " + printable($0, 64) } ?? ""
        let description = object?["error_description"]?.stringValue.map { ": " + printable($0, 200) } ?? ""
        return TokenError(.rejected, "the token endpoint answered HTTP \(response.status.code)\(code)\(description)")
    }

    package static func parse(_ response: TransportResponse) throws -> TokenResponse {
        guard let object = (try? StrictJSON.parse(response.body, limits: .jose))?.objectValue else {
            throw TokenError(.invalidResponse, "the token response is not a JSON object")
        }
        guard let accessToken = object["access_token"]?.stringValue, !accessToken.isEmpty,
            accessToken.utf8.count <= 16 << 10
        else { throw TokenError(.invalidResponse, "the token response has no access_token") }
        guard let type = object["token_type"]?.stringValue, type.lowercased() == "bearer" else {
            throw TokenError(.invalidResponse, "the token response's token_type is not Bearer")
        }
        guard let expiresIn = object["expires_in"]?.numberValue?.int64Value, (1...maxExpiresIn).contains(expiresIn)
        else { throw TokenError(.invalidResponse, "the token response's expires_in is not 1 to \(maxExpiresIn) s") }
        var refreshToken: SecretBytes?
        if let value = object["refresh_token"] {
            guard let text = value.stringValue, !text.isEmpty, text.utf8.count <= 16 << 10 else {
                throw TokenError(.invalidResponse, "the token response's refresh_token is not a string")
            }
            refreshToken = SecretBytes(utf8: text)
        }
        let scope = object["scope"]?.stringValue.map { String($0.prefix(4096)) }
        return TokenResponse(
            accessToken: SecretBytes(utf8: accessToken), expiresIn: Int(expiresIn), refreshToken: refreshToken,
            scope: scope)
    }
}

extension SecretBytes {
    /// The bytes as UTF-8 text, for the one place a secret must become a form field.
    var utf8String: String { withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }
}

/// Proof Key for Code Exchange (RFC 7636) with S256, and the authorization request's URL.
public struct PKCE: Sendable, CustomStringConvertible {
    /// 43 characters of base64url from 32 random bytes (RFC 7636, section 4.1).
    public let verifier: String
    /// BASE64URL(SHA-256(verifier)).
    public let challenge: String
    /// A random `state`, to match the redirect against.
    public let state: String

    public init() {
        verifier = Base64URL.encode(SecretBytes.random(count: 32).withUnsafeBytes { Array($0) })
        challenge = Self.challenge(for: verifier)
        state = Base64URL.encode(SecretBytes.random(count: 16).withUnsafeBytes { Array($0) })
    }

    /// The verifier is the proof the code is ours: it never prints.
    public var description: String { "PKCE(challenge \(challenge), verifier redacted)" }

    public static func challenge(for verifier: String) -> String {
        Base64URL.encode(Array(SHA256.hash(data: Array(verifier.utf8))))
    }

    /// The URL to send the user to (RFC 6749, section 4.1.1, with RFC 7636's two parameters).
    /// Google also gets `access_type=offline` and `prompt=consent`, without which it returns no
    /// refresh token.
    public func authorizationURL(
        endpoint: String, client: OAuthClient, redirectURI: String, scope: String?
    ) -> String {
        var fields = [
            ("response_type", "code"), ("client_id", client.clientID), ("redirect_uri", redirectURI),
            ("state", state), ("code_challenge", challenge), ("code_challenge_method", "S256"),
        ]
        if let scope { fields.append(("scope", scope)) }
        if client.preset == .google { fields += [("access_type", "offline"), ("prompt", "consent")] }
        if client.preset == .apple { fields.append(("response_mode", "form_post")) }
        // In a URL's query a space is %20 (the form encoding's + would do for most servers, not all).
        let query = String(decoding: FormEncoding.encode(fields), as: UTF8.self).split(
            separator: "+", omittingEmptySubsequences: false
        ).joined(separator: "%20")
        return endpoint + (endpoint.contains("?") ? "&" : "?") + query
    }

    /// The code from what the user pasted: the code itself, or the redirect URL (whose `state`
    /// must be this one's).
    public func code(fromPasted pasted: String) throws -> SecretBytes {
        let text = pasted.trimmingNewlines
        guard
            let query = text.split(separator: "?", maxSplits: 1).dropFirst().first
                ?? (text.contains("code=") ? Substring(text) : nil)
        else {
            guard !text.isEmpty, text.utf8.count <= 4096, !text.contains(" ") else {
                throw TokenError(.notConfigured, "no authorization code was given")
            }
            return SecretBytes(utf8: text)
        }
        var code: String?
        var returnedState: String?
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { continue }
            let value = FormDecoding.value(parts[1])
            if parts[0] == "code" { code = value }
            if parts[0] == "state" { returnedState = value }
            if parts[0] == "error" {
                throw TokenError(.rejected, "the authorization server answered \(value.prefix(64))")
            }
        }
        guard let code, !code.isEmpty else { throw TokenError(.notConfigured, "the redirect URL holds no code") }
        guard returnedState == state else {
            throw TokenError(.rejected, "the redirect URL's state is not this sign-in's: refusing the code")
        }
        return SecretBytes(utf8: code)
    }
}

extension String {
    fileprivate var trimmingNewlines: String {
        var text = Substring(self)
        while let last = text.last, last == "\n" || last == "\r" || last == " " { text = text.dropLast() }
        while let first = text.first, first == " " { text = text.dropFirst() }
        return String(text)
    }
}
