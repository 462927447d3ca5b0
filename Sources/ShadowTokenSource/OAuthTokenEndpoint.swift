#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Crypto
import ShadowApple
public import ShadowCore
public import ShadowDPoP
public import ShadowJWKS
import HTTPTypes
import Synchronization

/// What a token endpoint answered (RFC 6749, section 5.1).
public struct TokenResponse: Sendable, CustomStringConvertible {
    public let accessToken: SecretBytes
    public let expiresIn: Int
    /// A rotated refresh token, when the server sent one.
    public let refreshToken: SecretBytes?
    public let scope: String?
    /// `Bearer`, or `DPoP` for a token bound to the key that signed the request's proof (RFC 9449 §5).
    public let tokenType: String

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
    /// The key that signs a DPoP proof for every request (RFC 9449 §5), when the provider binds
    /// tokens; nil for bearer tokens.
    public let dpop: DPoPSigner?
    /// The provider's latest `DPoP-Nonce` (§8), sent in the next proof.
    let nonce = NonceBox()

    /// The `DPoP` and `DPoP-Nonce` headers' names.
    static let proofHeader = HTTPField.Name("DPoP") ?? .authorization
    static let nonceHeader = HTTPField.Name("DPoP-Nonce") ?? .authorization

    /// The longest `expires_in` accepted: a year.
    static let maxExpiresIn: Int64 = 366 * 86_400

    public init(
        client: OAuthClient, transport: any HTTPTransport, policy: Policy = Policy(), dpop: DPoPSigner? = nil
    ) throws {
        do {
            try URLPolicy.check(client.tokenEndpoint, allowLoopbackHTTP: policy.allowLoopbackHTTP)
        } catch let error as HTTPTransportError {
            throw TokenError(.notConfigured, "the token endpoint: \(error.message)")
        }
        self.client = client
        self.policy = policy
        self.transport = transport
        self.dpop = dpop
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
        var nonceRetries = 0
        while true {
            var wait = Duration.zero
            var failure = TokenError(.providerUnavailable, "the token endpoint did not answer")
            do {
                // A fresh proof for every attempt: a proof is used once (RFC 9449 §11.1).
                if let dpop {
                    do {
                        request.headerFields[Self.proofHeader] = try dpop.proof(
                            method: "POST", url: client.tokenEndpoint, nonce: nonce.value)
                    } catch let error as DPoPError {
                        throw TokenError(.notConfigured, "a DPoP proof for the token endpoint: \(error.reason)")
                    }
                }
                let response = try await transport.send(request)
                let askedNonce = nonce.update(from: response.headerFields[Self.nonceHeader])
                if response.status.kind == .successful { return try Self.parse(response, dpop: dpop != nil) }
                // §8: the provider asks for its nonce; the next proof carries it, at once.
                if dpop != nil, askedNonce, nonceRetries < 2, Self.errorCode(response) == "use_dpop_nonce" {
                    nonceRetries += 1
                    continue
                }
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

    /// The OAuth `error` of an error answer, if it has one.
    static func errorCode(_ response: TransportResponse) -> String? {
        (try? StrictJSON.parse(response.body, limits: .jose))?.objectValue?["error"]?.stringValue
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

    /// A token response; `dpop` when the request carried a proof, so a `DPoP` token type is
    /// expected (a provider may still answer `Bearer`).
    package static func parse(_ response: TransportResponse, dpop: Bool = false) throws -> TokenResponse {
        guard let object = (try? StrictJSON.parse(response.body, limits: .jose))?.objectValue else {
            throw TokenError(.invalidResponse, "the token response is not a JSON object")
        }
        guard let accessToken = object["access_token"]?.stringValue, !accessToken.isEmpty,
            accessToken.utf8.count <= 16 << 10
        else { throw TokenError(.invalidResponse, "the token response has no access_token") }
        guard let type = object["token_type"]?.stringValue, type.lowercased() == "bearer" || type.lowercased() == "dpop"
        else { throw TokenError(.invalidResponse, "the token response's token_type is not Bearer or DPoP") }
        let tokenType = type.lowercased() == "dpop" ? "DPoP" : "Bearer"
        if tokenType == "DPoP" && !dpop {
            throw TokenError(.invalidResponse, "the provider bound the token to a DPoP key, but the request sent none")
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
            scope: scope, tokenType: tokenType)
    }
}

/// The provider's latest DPoP nonce, shared by the attempts of one endpoint.
final class NonceBox: Sendable {
    private let stored = Mutex<String?>(nil)

    var value: String? { stored.withLock { $0 } }

    /// Keeps `header` when it is a nonce a proof can carry; true when it is new.
    func update(from header: String?) -> Bool {
        guard let header, (1...512).contains(header.utf8.count),
            header.utf8.allSatisfy({ $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0) })
        else { return false }
        return stored.withLock { value in
            defer { value = header }
            return value != header
        }
    }
}

extension SecretBytes {
    /// The bytes as UTF-8 text, for the one place a secret must become a form field.
    var utf8String: String { withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }
}
