import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import ShadowCore

public import ShadowJOSE
public import ShadowJWKS
import HTTPTypes

/// Apple's token endpoint response (`/auth/token`). Tokens are secrets and do not print.
public struct AppleTokenResponse: Sendable, CustomStringConvertible {
    /// `access_token`.
    public let accessToken: SecretBytes?
    /// `token_type` (`Bearer`).
    public let tokenType: String
    /// `expires_in`, seconds.
    public let expiresIn: Int
    /// `refresh_token` (authorization-code exchanges only).
    public let refreshToken: SecretBytes?
    /// `id_token`, verified.
    public let idToken: String?
    /// The verified identity token's claims, when there was one.
    public let identity: AppleIdentityToken?

    public var description: String {
        """
        AppleTokenResponse(token_type: \(tokenType), expires_in: \(expiresIn), refresh_token: \
        \(refreshToken == nil ? "none" : "redacted"), identity: \(identity?.subject ?? "none"))
        """
    }
}

/// What `/auth/usermigrationinfo` says about a transferred user.
public struct AppleMigratedUser: Sendable, Equatable {
    /// The user's `sub` under the receiving team.
    public let subject: String
    /// The (private relay) email, when Apple returns one.
    public let email: String?
    /// Whether the email is a private relay address.
    public let isPrivateEmail: Bool?
}

/// Which kind of token to revoke (`token_type_hint`).
public enum AppleTokenKind: String, Sendable {
    case refreshToken = "refresh_token"
    case accessToken = "access_token"
}

/// A client for Apple's Sign in with Apple REST endpoints: code exchange, refresh-token
/// validation, revocation, and user migration for app transfers.
///
/// Apple's `error` values become ``AppleError`` codes; 4xx answers are never retried; 5xx answers
/// and transport failures (timeouts included) are retried with exponential back-off.
public struct AppleAuthClient: Sendable {
    /// Endpoints, timeouts and retry policy.
    public struct Configuration: Sendable {
        /// Where Apple's endpoints live; tests point it at a loopback fake.
        public var baseURL: String = Apple.baseURL
        /// Per-request timeout. Default 10 s.
        public var timeout: Duration = .seconds(10)
        /// Extra attempts after a 5xx or transport failure.
        public var retries: Int = 2
        /// First back-off delay, doubled each retry. Default 0.5 s.
        public var backoff: Duration = .milliseconds(500)
        /// Allow plain http:// to a loopback address (tests only).
        public var allowLoopbackHTTP = false
        /// Sent as `User-Agent`.
        public var userAgent = "shadow-keys/0.1 (Sign in with Apple)"

        public init() {}
    }

    public let configuration: Configuration
    private let secrets: ClientSecretProvider
    private let transport: any HTTPTransport
    private let validator: AppleIdentityTokenValidator
    private let keys: any JWKSource

    /// A client that authenticates with `secrets` and verifies `id_token`s against `identityTokenKeys`
    /// (normally Apple's JWK Set, fetched).
    public init(
        configuration: Configuration = Configuration(), secrets: ClientSecretProvider, transport: any HTTPTransport,
        identityTokenKeys: any JWKSource, clock: WallClock = .system
    ) throws {
        try URLPolicy.check(configuration.baseURL + "/auth/token", allowLoopbackHTTP: configuration.allowLoopbackHTTP)
        self.configuration = configuration
        self.secrets = secrets
        self.transport = transport
        self.keys = identityTokenKeys
        self.validator = AppleIdentityTokenValidator(clientIDs: [secrets.clientID], clock: clock)
    }

    // MARK: - Tokens

    /// The longest `expires_in` accepted in a token response: a year (Apple's is an hour).
    static let maxExpiresIn: Int64 = 366 * 86_400

    /// Exchanges an authorization code (`grant_type=authorization_code`); the returned `id_token`
    /// is verified, with `nonce` when the sign-in used one.
    public func exchange(
        code: SecretBytes, redirectURI: String? = nil, nonce: String? = nil
    ) async throws -> AppleTokenResponse {
        var fields =
            try credentials() + [
                ("grant_type", "authorization_code"),
                ("code", code.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }),
            ]
        if let redirectURI { fields.append(("redirect_uri", redirectURI)) }
        return try await tokenResponse(try await post("/auth/token", fields), nonce: nonce, requireRefreshToken: true)
    }

    /// Validates a refresh token (`grant_type=refresh_token`). Apple throttles this to about once
    /// a day per token; see ``RefreshValidationTracker``.
    public func refresh(_ refreshToken: SecretBytes) async throws -> AppleTokenResponse {
        let fields =
            try credentials() + [
                ("grant_type", "refresh_token"),
                ("refresh_token", refreshToken.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }),
            ]
        return try await tokenResponse(try await post("/auth/token", fields), nonce: nil, requireRefreshToken: false)
    }

    /// Revokes a refresh or access token (`/auth/revoke`).
    public func revoke(_ token: SecretBytes, kind: AppleTokenKind) async throws {
        let fields =
            try credentials() + [
                ("token", token.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }),
                ("token_type_hint", kind.rawValue),
            ]
        _ = try await post("/auth/revoke", fields)
    }

    // MARK: - Migration

    /// An access token for user migration (`grant_type=client_credentials`, `scope=user.migration`).
    public func migrationAccessToken() async throws -> SecretBytes {
        let response = try await post(
            "/auth/token", try credentials() + [("grant_type", "client_credentials"), ("scope", "user.migration")])
        let object = try jsonObject(response)
        guard let token = object["access_token"]?.stringValue, !token.isEmpty else {
            throw AppleError(.invalidResponse, "the migration token response has no access_token")
        }
        return SecretBytes(utf8: token)
    }

    /// The sending team's step: the `transfer_sub` for one of its users, to give the receiving team.
    public func transferSubject(
        for subject: String, to targetTeamID: String, accessToken: SecretBytes
    ) async throws -> String {
        let response = try await post(
            "/auth/usermigrationinfo", try credentials() + [("sub", subject), ("target", targetTeamID)],
            bearer: accessToken)
        guard let transfer = try jsonObject(response)["transfer_sub"]?.stringValue, !transfer.isEmpty else {
            throw AppleError(.invalidResponse, "the migration response has no transfer_sub")
        }
        return transfer
    }

    /// The receiving team's step: the user's new `sub` (and email) for a `transfer_sub`.
    public func migratedUser(
        forTransferSubject transferSubject: String, accessToken: SecretBytes
    ) async throws -> AppleMigratedUser {
        let response = try await post(
            "/auth/usermigrationinfo", try credentials() + [("transfer_sub", transferSubject)], bearer: accessToken)
        let object = try jsonObject(response)
        guard let subject = object["sub"]?.stringValue, !subject.isEmpty else {
            throw AppleError(.invalidResponse, "the migration response has no sub")
        }
        let privateEmail = AppleIdentityToken.flexibleBool(object["is_private_email"]) ?? nil
        return AppleMigratedUser(subject: subject, email: object["email"]?.stringValue, isPrivateEmail: privateEmail)
    }

    // MARK: - Transport

    private func credentials() throws -> [(String, String)] {
        [("client_id", secrets.clientID), ("client_secret", try secrets.secret().token)]
    }

    /// POSTs a form, retrying 5xx and transport failures; returns a 2xx response.
    private func post(
        _ path: String, _ fields: [(String, String)], bearer: SecretBytes? = nil
    ) async throws -> TransportResponse {
        // Apple requires TLS 1.3 for every call; a mirror at another base URL too.
        var request = TransportRequest(
            method: .post, url: configuration.baseURL + path,
            headerFields: [
                .contentType: "application/x-www-form-urlencoded", .accept: "application/json",
                .userAgent: configuration.userAgent,
            ], timeout: configuration.timeout, maxResponseBytes: 256 * 1024, requiresTLS13: true)
        if let bearer {
            request.headerFields[.authorization] =
                "Bearer " + bearer.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        }
        request.body = FormEncoding.encode(fields)
        var delay = configuration.backoff
        var attempt = 0
        while true {
            let failure: AppleError
            do {
                let response = try await transport.send(request)
                switch response.status.kind {
                case .successful: return response
                case .serverError:
                    failure = AppleError(
                        .serverError, "Apple answered HTTP \(response.status.code) for \(path)",
                        status: response.status.code)
                default: throw Self.rejection(response, path: path)
                }
            } catch let error as HTTPTransportError {
                if error.kind == .forbiddenURL { throw AppleError(.invalidParameter, error.message) }
                failure = AppleError(.transport, "\(path): \(error.message)")
            }
            guard attempt < configuration.retries else { throw failure }
            attempt += 1
            try await Task.sleep(for: delay)
            delay *= 2
        }
    }

    /// The error for a 4xx answer: Apple's `error` field when it has one.
    private static func rejection(_ response: TransportResponse, path: String) -> AppleError {
        let object = (try? StrictJSON.parse(response.body, limits: .jose))?.objectValue
        guard let error = object?["error"]?.stringValue else {
            return AppleError(
                .rejected, "Apple answered HTTP \(response.status.code) for \(path)", status: response.status.code)
        }
        let detail = object?["error_description"]?.stringValue.map { ": \($0)" } ?? ""
        return AppleError(
            .fromApple(error), "Apple refused \(path) with \(error)\(detail)", status: response.status.code)
    }

    private func jsonObject(_ response: TransportResponse) throws -> JSONObject {
        guard let object = (try? StrictJSON.parse(response.body, limits: .jose))?.objectValue else {
            throw AppleError(.invalidResponse, "Apple's answer is not a JSON object")
        }
        return object
    }

    private func tokenResponse(
        _ response: TransportResponse, nonce: String?, requireRefreshToken: Bool
    ) async throws -> AppleTokenResponse {
        let object = try jsonObject(response)
        guard let accessToken = object["access_token"]?.stringValue, let tokenType = object["token_type"]?.stringValue,
            let expiresIn = object["expires_in"]?.numberValue?.int64Value
        else { throw AppleError(.invalidResponse, "the token response lacks access_token, token_type or expires_in") }
        guard (0...Self.maxExpiresIn).contains(expiresIn) else {
            throw AppleError(
                .invalidResponse, "the token response's expires_in \(expiresIn) is outside 0 to \(Self.maxExpiresIn) s")
        }
        let refreshToken = object["refresh_token"]?.stringValue
        if requireRefreshToken && refreshToken == nil {
            throw AppleError(.invalidResponse, "the code exchange returned no refresh_token")
        }
        var identity: AppleIdentityToken?
        let idToken = object["id_token"]?.stringValue
        if let idToken {
            var validator = self.validator
            validator.nonce = nonce
            do {
                identity = try await validator.validate(idToken, keys: keys)
            } catch let error as JOSEError where error.code == .malformedToken {
                // Apple's answer is of the wrong shape; the token was not the caller's to give.
                throw AppleError(.invalidResponse, "the token response's id_token is malformed: \(error.reason)")
            }
        } else if requireRefreshToken {
            throw AppleError(.invalidResponse, "the code exchange returned no id_token")
        }
        return AppleTokenResponse(
            accessToken: SecretBytes(utf8: accessToken), tokenType: tokenType, expiresIn: Int(expiresIn),
            refreshToken: refreshToken.map { SecretBytes(utf8: $0) },
            idToken: idToken, identity: identity)
    }
}

/// `application/x-www-form-urlencoded` (WHATWG URL §5): unreserved bytes as they are, space as
/// `+`, everything else as `%XX`.
package enum FormEncoding {
    package static func encode(_ fields: [(String, String)]) -> [UInt8] {
        var out: [UInt8] = []
        for (index, (name, value)) in fields.enumerated() {
            if index > 0 { out.append(UInt8(ascii: "&")) }
            append(name, to: &out)
            out.append(UInt8(ascii: "="))
            append(value, to: &out)
        }
        return out
    }

    private static func append(_ text: String, to out: inout [UInt8]) {
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "*"):
                out.append(byte)
            case UInt8(ascii: " "):
                out.append(UInt8(ascii: "+"))
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
    }
}
