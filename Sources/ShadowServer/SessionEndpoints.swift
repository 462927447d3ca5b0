#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import Logging
public import ShadowApple
public import ShadowCore
public import ShadowCredentials
import ShadowDPoP
public import HTTPTypes
public import ShadowJOSE
public import ShadowSessions

/// An HTTP answer, framework-neutral: a status, headers and a JSON body.
public struct SessionHTTPResponse: Sendable, Error {
    public let status: HTTPResponse.Status
    public let headers: HTTPFields
    public let body: [UInt8]

    static func json(
        _ status: HTTPResponse.Status, _ value: JSONValue, headers: HTTPFields = [:]
    ) -> SessionHTTPResponse {
        SessionHTTPResponse(
            status: status, headers: [.contentType: "application/json", .cacheControl: "no-store"] + headers,
            body: Array(value.serialized().utf8))
    }

    /// `{"error":{"code","message"}}`, the shape of every error ShadowKeys' routes answer.
    static func error(
        _ status: HTTPResponse.Status, _ code: String, _ message: String, headers: HTTPFields = [:]
    )
        -> SessionHTTPResponse
    {
        json(status, ["error": .error(code: code, message: message)], headers: headers)
    }
}

/// The session routes' logic (Docs/sessions.md, "Requests and answers"), with no HTTP framework: a body and
/// headers in, a status and a JSON body out. ShadowHummingbird mounts it.
public final class SessionEndpoints: Sendable {
    public struct Limits: Sendable {
        /// Per client IP on every `/auth/*` route (default 60 a minute, bursts of 20).
        public var perIP: RateLimit
        /// Per user (or, on refresh, per session) (default 30 a minute, bursts of 10).
        public var perUser: RateLimit

        public init() {
            perIP = .perMinute(60)
            perUser = .perMinute(30)
        }
    }

    public let authority: SessionAuthority
    /// With a credential-state store, sign-ins are recorded in it and superseded identity tokens
    /// refused (``SessionStateRules``).
    public let rules: SessionStateRules?
    let validator: AppleIdentityTokenValidator
    let appleKeys: any JWKSource
    let appleClients: [String: AppleAuthClient]
    let limits: Limits
    let introspectionClients: [String: SecretBytes]
    let logger: Logger
    /// How proofs are checked, at every route against the store's replay table.
    public let dpop: DPoPPolicy
    /// The check of a protected route's caller (`GET /auth/sessions`, `DELETE
    /// /auth/sessions/{id}`; also a `SessionMiddleware` made from it), with the store's replay
    /// table: a proof accepted by one instance is refused by every other on the same database.
    public let access: ProtectedRouteAccess

    /// The largest body read.
    public static let maxBodyBytes = 16 << 10

    /// - Parameters:
    ///   - appleClients: by client ID, the clients that exchange the authorization code (and keep
    ///     Apple's refresh token for the re-check).
    ///   - introspectionClients: confidential clients (ID and secret) allowed RFC 7009 revocation
    ///     and RFC 7662 introspection with HTTP Basic.
    ///   - states: the credential-state store a sign-in is recorded in (see ``SessionStateRules``).
    ///   - dpop: how DPoP proofs are checked (Docs/dpop.md).
    public init(
        authority: SessionAuthority, validator: AppleIdentityTokenValidator, appleKeys: any JWKSource,
        appleClients: [String: AppleAuthClient], limits: Limits = Limits(),
        introspectionClients: [String: SecretBytes] = [:], states: (any CredentialStateStore)? = nil,
        dpop: DPoPPolicy = DPoPPolicy(), logger: Logger = Logger(label: "shadow-keys.sessions")
    ) {
        self.dpop = dpop
        self.access = ProtectedRouteAccess(authority: authority, policy: dpop, replay: authority.replayCache)
        self.authority = authority
        self.rules = states.map { SessionStateRules(authority: authority, states: $0) }
        self.validator = validator
        self.appleKeys = appleKeys
        self.appleClients = appleClients
        self.limits = limits
        self.introspectionClients = introspectionClients
        self.logger = logger
    }

    // MARK: Requests

    /// A JSON object body, checked: 415 for another content type, 413 over the cap, 400 otherwise bad.
    static func jsonBody(_ body: [UInt8], contentType: String?) -> Result<JSONObject, SessionHTTPResponse> {
        guard isMediaType(contentType, "application/json") else {
            return .failure(.error(415, "unsupported_media_type", "send the body as application/json"))
        }
        guard body.count <= maxBodyBytes else {
            return .failure(.error(413, "body_too_large", "the body is over \(maxBodyBytes) bytes"))
        }
        return StrictJSON.object(body, limits: .jose).mapError { .error(400, "invalid_request", "the body is \($0)") }
    }

    /// Whether a `Content-Type` value names `type` (lowercase ASCII): its media type, the part
    /// before any `;` parameters without the spaces and tabs around it, equal to `type` with
    /// letters in either case (RFC 9110, 8.3.1). Read byte by byte, with no copy of the value.
    package static func isMediaType(_ contentType: String?, _ type: StaticString) -> Bool {
        guard let contentType else { return false }
        var value = contentType.utf8[...]
        if let semicolon = value.firstIndex(of: UInt8(ascii: ";")) { value = value[..<semicolon] }
        func isSpace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        while let first = value.first, isSpace(first) { value = value.dropFirst() }
        while let last = value.last, isSpace(last) { value = value.dropLast() }
        return type.withUTF8Buffer { expected in
            value.count == expected.count
                && zip(value, expected).allSatisfy { byte, wanted in
                    (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 32 == wanted : byte == wanted
                }
        }
    }

    func limited(_ key: String, _ limit: RateLimit) async -> SessionHTTPResponse? {
        do {
            return limitRefusal(.success(try await authority.admit(key, limit: limit)))
        } catch {
            return limitRefusal(.failure(error))
        }
    }

    /// A rate limit's answer: nil when allowed, else 429 with `Retry-After`, or 503.
    func limitRefusal(_ answer: Result<Int?, any Error>) -> SessionHTTPResponse? {
        switch answer {
        case .success(nil): return nil
        case .success(let wait?):
            return .error(
                429, "rate_limited", "too many requests; retry in \(wait) s", headers: [.retryAfter: String(wait)])
        case .failure: return .error(503, "store_unavailable", "the session store is unavailable")
        }
    }

    func tokens(_ issued: IssuedTokens, withUser: Bool) -> SessionHTTPResponse {
        var object: JSONObject = [
            "accessToken": .string(issued.accessToken), "refreshToken": .string(issued.refreshToken),
            "tokenType": .string(issued.tokenType), "expiresIn": .int(issued.expiresIn),
        ]
        if withUser { object.set("userId", .string(issued.userID.uuidString.lowercased())) }
        return .json(200, .object(object), headers: dpop.nonceFields)
    }

    /// The URL a request's proof names: the issuer without a trailing `/`, then the path.
    static func url(issuer: String, path: String) -> String {
        (issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer) + path
    }

    /// The request's DPoP proof at a token route (`path`), checked and recorded in the store's
    /// replay table, or nil when there is none; or the answer to give: 400 `invalid_dpop_proof`,
    /// 400 `use_dpop_nonce` with the current nonce, 503 when the store is down. Every check but
    /// the replay's reads and writes nothing.
    func tokenRouteProof(_ values: [String], path: String) async -> Result<DPoPProof?, SessionHTTPResponse> {
        await spent(checkedProof(values, path: path))
    }

    /// Every check of the proof at `path` but the replay's: no store read or write.
    func checkedProof(_ values: [String], path: String) -> Result<DPoPProof?, SessionHTTPResponse> {
        guard !values.isEmpty else { return .success(nil) }
        do {
            return .success(
                try dpop.verifier.verify(
                    values, method: "POST", url: Self.url(issuer: authority.configuration.issuer, path: path),
                    nonces: dpop.nonces))
        } catch {
            return .failure(proofFailure(error))
        }
    }

    /// The replay check of a proof ``checkedProof(_:path:)`` passed: its row written in the store.
    func spent(_ checked: Result<DPoPProof?, SessionHTTPResponse>) async -> Result<DPoPProof?, SessionHTTPResponse> {
        guard case .success(let proof?) = checked else { return checked }
        do {
            try await dpop.verifier.spend(proof, in: authority.replayCache)
            return checked
        } catch {
            return .failure(proofFailure(error))
        }
    }

    private func proofFailure(_ error: any Error) -> SessionHTTPResponse {
        guard let error = error as? DPoPError else {
            return .error(503, "store_unavailable", "the session store is unavailable")
        }
        switch error.code {
        case .useNonce:
            return .error(400, "use_dpop_nonce", error.reason, headers: dpop.nonceFields)
        case .unavailable:
            return .error(503, "store_unavailable", "the session store is unavailable")
        default:
            return .error(400, "invalid_dpop_proof", "\(error.codeName): \(error.reason)", headers: dpop.nonceFields)
        }
    }

    func failure(_ error: any Error) -> SessionHTTPResponse {
        switch error {
        case let error as SessionError:
            switch error.code {
            case .invalidGrant, .reuseDetected:
                return .error(401, error.codeName, error.reason)
            case .invalidProof:
                return .error(400, error.codeName, error.reason, headers: dpop.nonceFields)
            case .invalidParameter:
                return .error(400, "invalid_request", error.reason)
            default:
                logger.error("session store failed", metadata: ["code": "\(error.codeName)"])
                return .error(503, "store_unavailable", "the session store is unavailable")
            }
        default:
            logger.error("session store failed", metadata: ["error": "\(type(of: error))"])
            return .error(503, "store_unavailable", "the session store is unavailable")
        }
    }

    /// `POST /auth/apple`: `{"identityToken","authorizationCode","nonce"?,"deviceName"?}`. With a
    /// `DPoP` header (`dpop`, every value), the session is bound to the proof's key.
    public func signIn(
        body: [UInt8], contentType: String?, clientIP: String, dpop proofs: [String] = []
    ) async -> SessionHTTPResponse {
        if let refused = await limited("ip:" + clientIP, limits.perIP) { return refused }
        let object: JSONObject
        switch Self.jsonBody(body, contentType: contentType) {
        case .failure(let response): return response
        case .success(let value): object = value
        }
        if proofs.isEmpty, authority.configuration.requireDPoP {
            return .error(
                400, "invalid_dpop_proof", "missing_proof: this server binds every session to a DPoP key",
                headers: dpop.nonceFields)
        }
        let proof: DPoPProof?
        switch await tokenRouteProof(proofs, path: "/auth/apple") {
        case .failure(let response): return response
        case .success(let value): proof = value
        }
        guard let identityToken = object["identityToken"]?.stringValue,
            let code = object["authorizationCode"]?.stringValue, !code.isEmpty, code.utf8.count <= 1024
        else { return .error(400, "invalid_request", "identityToken and authorizationCode are required strings") }
        let nonce = object["nonce"]?.stringValue
        let device = object["deviceName"]?.stringValue ?? "unnamed device"
        var validator = self.validator
        validator.nonce = nonce
        let identity: AppleIdentityToken
        do {
            identity = try await validator.validate(identityToken, keys: appleKeys)
        } catch let error as JOSEError {
            if error.code == .keysUnavailable {
                return .error(503, "keys_unavailable", "Apple's keys are unavailable")
            }
            return .error(401, error.codeName, error.reason)
        } catch {
            return .error(503, "keys_unavailable", "Apple's keys are unavailable")
        }
        guard let client = appleClients[identity.audience] else {
            return .error(401, "claims_rejected", "the identity token is for a client this server does not sign in")
        }
        if let rules, let refused = await stateRefusal({ try await rules.admit(identity) }) { return refused }
        let exchanged: AppleTokenResponse
        do {
            exchanged = try await client.exchange(code: SecretBytes(utf8: code), nonce: nonce)
        } catch let error as AppleError {
            switch error.code {
            case .invalidGrant: return .error(401, "invalid_grant", "Apple refused the authorization code")
            case .serverError, .transport, .invalidResponse:
                return .error(503, "apple_unavailable", "Apple could not be reached to exchange the code")
            default: return .error(401, error.codeName, "Apple refused the code exchange")
            }
        } catch {
            return .error(503, "apple_unavailable", "Apple could not be reached to exchange the code")
        }
        guard exchanged.identity.map({ $0.subject.exactlyEquals(identity.subject) }) ?? true else {
            return .error(401, "claims_rejected", "the authorization code belongs to another user")
        }
        if let rules,
            let refused = await stateRefusal({ try await rules.recordSignIn(identity, rawToken: identityToken) })
        {
            return refused
        }
        let issued: IssuedTokens
        do {
            issued = try await authority.signIn(
                appleSubject: identity.subject, appleClientID: identity.audience,
                appleRefreshToken: exchanged.refreshToken, device: device, keyThumbprint: proof?.thumbprint,
                appleTransferSubject: identity.transferSubject)
        } catch {
            return failure(error)
        }
        // A revocation applied after the check above but before the session existed ended none
        // of it (its notification found no session): checked again now that it exists. A refusal
        // hands out no token, and the session is revoked.
        if let rules, let refused = await stateRefusal({ try await rules.admit(identity) }) {
            _ = try? await authority.revoke(session: issued.session, user: issued.userID)
            return refused
        }
        return tokens(issued, withUser: true)
    }

    /// The answer to give when the credential-state step fails: 401 `superseded` for an identity
    /// token a revocation or transfer made stale, 503 when the store cannot be read or written.
    func stateRefusal(_ step: () async throws -> Void) async -> SessionHTTPResponse? {
        do {
            try await step()
            return nil
        } catch let error as CredentialError where error.code == .superseded {
            return .error(401, error.codeName, error.reason)
        } catch {
            logger.error("credential state failed", metadata: ["error": "\(String(describing: error))"])
            return .error(503, "store_unavailable", "the credential-state store is unavailable")
        }
    }

    /// The JSON body's `refreshToken`, authenticated (its MAC, before any store read), then the
    /// IP's rate limit (unless `limitIP` is false: the caller counts it): the token, or the answer
    /// to give instead. A token that is malformed or not ours is nil and never reaches the store.
    func refreshTokenRequest(
        _ body: [UInt8], contentType: String?, clientIP: String, limitIP: Bool = true
    ) async
        -> Result<RefreshToken?, SessionHTTPResponse>
    {
        let text: String
        switch Self.jsonBody(body, contentType: contentType) {
        case .failure(let response): return .failure(response)
        case .success(let object):
            guard let value = object["refreshToken"]?.stringValue else {
                return .failure(.error(400, "invalid_request", "refreshToken is a required string"))
            }
            text = value
        }
        let token = try? authority.authenticate(refreshToken: text)
        if limitIP, token != nil, let refused = await limited("ip:" + clientIP, limits.perIP) {
            return .failure(refused)
        }
        return .success(token)
    }

    /// `POST /auth/refresh`: `{"refreshToken"}`, with a `DPoP` proof by the session's key when
    /// it is bound to one (`dpop`, every value).
    public func refresh(
        body: [UInt8], contentType: String?, clientIP: String, dpop proofs: [String] = []
    ) async -> SessionHTTPResponse {
        let token: RefreshToken
        switch await refreshTokenRequest(body, contentType: contentType, clientIP: clientIP, limitIP: false) {
        case .failure(let response): return response
        case .success(let checked?): token = checked
        case .success(nil): return .error(401, "invalid_grant", "the refresh token is malformed or not ours")
        }
        // The IP's and the session's rate limits and the proof's replay row are independent
        // writes: handed to the store together, after the proof's checks that need no store, they
        // share one group commit. Each counts as it would one after the other: a refused proof
        // still counts against the limits, and a limited request's proof is still spent. The IP's
        // refusal is answered first. The session's row is read in the same trip (one statement on
        // PostgreSQL), and the refresh starts from it.
        let verified = checkedProof(proofs, path: "/auth/refresh")
        let passed = try? verified.get()
        let admitted = await authority.admit(
            [("ip:" + clientIP, limits.perIP), ("session:" + token.family.description, limits.perUser)],
            replay: passed.map(dpop.verifier.replayEntry), reading: token.family)
        for wait in admitted.waits {
            if let refused = limitRefusal(wait) { return refused }
        }
        let proof: DPoPProof?
        switch verified {
        case .failure(let response): return response
        case .success(let value): proof = value
        }
        if let spent = admitted.replay {
            do { try DPoPVerifier.spent(spent) } catch { return proofFailure(error) }
        }
        do {
            return tokens(try await authority.refresh(token, proof: proof, read: admitted.session), withUser: false)
        } catch {
            return failure(error)
        }
    }

    /// `POST /auth/logout`: `{"refreshToken"}`; revokes its session. Always 200 for a well-formed
    /// request (RFC 7009, 2.2: an unknown token is no error; one that is not ours reads no store),
    /// but a session bound to a DPoP key is ended only with a proof by that key (`dpop`, for
    /// `POST <issuer>/auth/logout`): without one, 400 `invalid_dpop_proof` and the session stays.
    public func logout(
        body: [UInt8], contentType: String?, clientIP: String, dpop proofs: [String] = []
    ) async -> SessionHTTPResponse {
        let token: RefreshToken
        switch await refreshTokenRequest(body, contentType: contentType, clientIP: clientIP) {
        case .failure(let response): return response
        case .success(let checked?): token = checked
        case .success(nil): return .json(200, ["revoked": false])
        }
        let proof: DPoPProof?
        switch await tokenRouteProof(proofs, path: "/auth/logout") {
        case .failure(let response): return response
        case .success(let value): proof = value
        }
        do {
            return .json(200, ["revoked": .bool(try await authority.logout(token, proof: proof))])
        } catch {
            return failure(error)
        }
    }

    /// The confidential client of an `Authorization: Basic` header (its ID and secret each
    /// form-decoded, RFC 6749, 2.3.1), or a 401.
    func confidentialClient(_ authorization: String?) -> SessionHTTPResponse? {
        let challenge: HTTPFields = [.wwwAuthenticate: #"Basic realm="shadow-keys""#]
        guard let authorization, authorization.lowercased().hasPrefix("basic "),
            let decoded = Data(base64Encoded: String(authorization.dropFirst(6))),
            let text = String(data: decoded, encoding: .utf8),
            case let halves = text.split(byte: UInt8(ascii: ":"), maxSplits: 1, omittingEmptySubsequences: false),
            halves.count == 2
        else { return .error(401, "invalid_client", "authenticate with HTTP Basic", headers: challenge) }
        // RFC 6749, 2.3.1: the ID and the secret are each form-encoded before they are joined.
        let id = FormDecoding.value(halves[0])
        let secret = Array(FormDecoding.value(halves[1]).utf8)
        guard let expected = introspectionClients[id],
            expected.withUnsafeBytes({ ConstantTime.equals(Array($0), secret) })
        else { return .error(401, "invalid_client", "unknown client or wrong secret", headers: challenge) }
        return nil
    }

    /// A confidential client's form request: its `token`, or the answer to give instead.
    func formToken(_ body: [UInt8], contentType: String?, authorization: String?) -> Result<String, SessionHTTPResponse>
    {
        if let refused = confidentialClient(authorization) { return .failure(refused) }
        guard Self.isMediaType(contentType, "application/x-www-form-urlencoded") else {
            return .failure(
                .error(415, "unsupported_media_type", "send the body as application/x-www-form-urlencoded"))
        }
        guard body.count <= Self.maxBodyBytes else {
            return .failure(.error(413, "body_too_large", "the body is too large"))
        }
        let tokens = FormDecoding.fields("token", in: String(decoding: body, as: UTF8.self))
        guard tokens.count <= 1 else {
            return .failure(.error(400, "invalid_request", "the form gives token more than once (RFC 6749, 3.1)"))
        }
        guard let token = tokens.first, !token.isEmpty else {
            return .failure(.error(400, "invalid_request", "the form has no token"))
        }
        return .success(token)
    }

    /// `POST /auth/revoke` (RFC 7009): form `token=…`, a confidential client by HTTP Basic.
    public func revoke(body: [UInt8], contentType: String?, authorization: String?) async -> SessionHTTPResponse {
        let token: String
        switch formToken(body, contentType: contentType, authorization: authorization) {
        case .failure(let response): return response
        case .success(let value): token = value
        }
        do {
            _ = try await authority.revoke(refreshToken: token)
            return SessionHTTPResponse(status: .ok, headers: [.cacheControl: "no-store"], body: [])
        } catch {
            return failure(error)
        }
    }

    /// `POST /auth/introspect` (RFC 7662): form `token=…` (a refresh or an access token).
    public func introspect(body: [UInt8], contentType: String?, authorization: String?) async -> SessionHTTPResponse {
        let token: String
        switch formToken(body, contentType: contentType, authorization: authorization) {
        case .failure(let response): return response
        case .success(let value): token = value
        }
        do {
            if let row = try await authority.introspect(refreshToken: token) {
                var object: JSONObject = [
                    "active": true, "token_type": "refresh_token", "sub": .string(row.user.uuidString.lowercased()),
                    "sid": .string(row.id.description), "exp": .int(row.expiresAt / 1000),
                    "iat": .int(row.rotatedAt / 1000), "client_id": .string(authority.configuration.clientID),
                ]
                if let thumbprint = row.keyThumbprint { object.set("cnf", ["jkt": .string(thumbprint)]) }
                return .json(200, .object(object))
            }
            if let claims = try? await authority.verifier().verify(token), try await authority.isLive(claims) {
                var object: JSONObject = [
                    "active": true, "token_type": claims.keyThumbprint == nil ? "Bearer" : "DPoP",
                    "sub": .string(claims.userID.uuidString.lowercased()),
                    "sid": .string(claims.session.description),
                    "exp": .int(Int64(claims.expiresAt.timeIntervalSince1970)),
                    "iat": .int(Int64(claims.issuedAt.timeIntervalSince1970)),
                    "client_id": .string(claims.clientID),
                    "jti": .string(claims.tokenID),
                ]
                // RFC 9449 §6.2: the key the token is bound to.
                if let thumbprint = claims.keyThumbprint { object.set("cnf", ["jkt": .string(thumbprint)]) }
                return .json(200, .object(object))
            }
            return .json(200, ["active": false])
        } catch {
            return failure(error)
        }
    }

    /// The caller's user's live sessions; nil when the caller's own session is not one of them
    /// (revoked, past its end, idle too long). The device routes answer only a caller whose
    /// session could still refresh, so a signed-out device, or a thief whose session reuse
    /// detection ended, cannot list or end the user's other sessions within the token's hour.
    /// The caller's own session is read by its ID, so a user with more sessions than the list
    /// holds is not refused.
    func liveSessions(of claims: SessionClaims) async throws -> [SessionRow]? {
        guard try await authority.isLive(claims) else { return nil }
        return try await authority.sessions(user: claims.userID).filter(authority.isLive)
    }

    /// 401 `invalid_token` for an access token whose own session has ended.
    func ended(_ claims: SessionClaims) -> SessionHTTPResponse {
        access.refusal(
            "invalid_token", "the session of this access token has ended",
            scheme: claims.keyThumbprint == nil ? .bearer : .dpop)
    }

    /// `GET /auth/sessions`: the caller's devices. `dpop`: the request's `DPoP` header values;
    /// `method`: the request's (`HEAD` too), which a proof's `htm` must name.
    public func sessions(
        authorization: String?, clientIP: String, dpop proofs: [String] = [], path: String = "/auth/sessions",
        method: String = "GET"
    ) async -> SessionHTTPResponse {
        if let refused = await limited("ip:" + clientIP, limits.perIP) { return refused }
        let claims: SessionClaims
        switch await access.caller(authorization: authorization, dpop: proofs, method: method, path: path) {
        case .failure(let response): return response
        case .success(let value): claims = value
        }
        if let refused = await limited("user:" + claims.userID.uuidString.lowercased(), limits.perUser) {
            return refused
        }
        do {
            guard let rows = try await liveSessions(of: claims) else { return ended(claims) }
            return .json(
                200,
                [
                    "sessions": .array(
                        rows.map { row in
                            [
                                "id": .string(row.id.description), "deviceName": .string(row.device),
                                "createdAt": .string(Timestamp(milliseconds: row.createdAt)?.rfc3339Exact ?? ""),
                                "lastUsedAt": .string(Timestamp(milliseconds: row.lastUsedAt)?.rfc3339Exact ?? ""),
                                "current": .bool(row.id == claims.session),
                            ]
                        })
                ])
        } catch {
            return failure(error)
        }
    }

    /// `DELETE /auth/sessions/{id}`: revokes one of the caller's sessions (404 when it is not theirs).
    public func deleteSession(
        _ id: String, authorization: String?, clientIP: String, dpop proofs: [String] = [], path: String? = nil
    ) async -> SessionHTTPResponse {
        if let refused = await limited("ip:" + clientIP, limits.perIP) { return refused }
        let claims: SessionClaims
        switch await access.caller(
            authorization: authorization, dpop: proofs, method: "DELETE", path: path ?? "/auth/sessions/\(id)")
        {
        case .failure(let response): return response
        case .success(let value): claims = value
        }
        do {
            guard try await authority.isLive(claims) else { return ended(claims) }
            // Only a live session of the caller's is theirs to end; each is read by its ID.
            guard let session = SessionID(id), try await authority.liveSession(session, of: claims.userID) != nil,
                try await authority.revoke(session: session, user: claims.userID)
            else {
                return .error(404, "not_found", "no such session")
            }
            return .json(200, ["revoked": true])
        } catch {
            return failure(error)
        }
    }

    /// `GET /.well-known/jwks.json`: the ring's public keys, with `Cache-Control`.
    public func jwks() async -> SessionHTTPResponse {
        do {
            let (document, maxAge) = try await authority.jwks()
            return SessionHTTPResponse(
                status: .ok,
                headers: [.contentType: "application/jwk-set+json", .cacheControl: "public, max-age=\(maxAge)"],
                body: Array(document.utf8))
        } catch {
            return failure(error)
        }
    }
}
