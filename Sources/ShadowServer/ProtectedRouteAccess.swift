public import HTTPTypes
import ShadowCore
public import ShadowDPoP
import ShadowJOSE
public import ShadowSessions

/// How the session routes and `SessionMiddleware` check DPoP proofs (Docs/dpop.md, "Sessions").
/// Whether DPoP is required is the sessions' setting (`SessionConfiguration.requireDPoP`).
public struct DPoPPolicy: Sendable {
    public var verifier: DPoPVerifier
    /// The nonces every proof must carry; nil when none is required.
    public var nonces: DPoPNonces?

    public init(verifier: DPoPVerifier = DPoPVerifier(), nonces: DPoPNonces? = nil) {
        self.verifier = verifier
        self.nonces = nonces
    }

    /// The `DPoP-Nonce` header's name.
    public static let nonceHeader = HTTPField.Name("DPoP-Nonce") ?? .contentType
    /// The `DPoP` header's name.
    public static let proofHeader = HTTPField.Name("DPoP") ?? .contentType

    /// The current nonce as a header, when nonces are required.
    var nonceFields: HTTPFields {
        guard let nonces else { return [:] }
        return [Self.nonceHeader: nonces.current()]
    }
}

/// Who calls a protected route: the access token checked (no store read), and for a token bound
/// to a DPoP key, its proof (RFC 9449 §7): `Authorization: DPoP <token>` with a `DPoP` header whose
/// `ath` is the token's hash and whose key is the token's `cnf.jkt`. A bound token sent as a
/// bearer token is refused (§7.1). A proof is accepted once by `replay`: this process's memory by
/// default (no store read or write), or the session store's table
/// (``SessionAuthority/replayCache``), which every instance on that database shares, for one
/// store write per bound request.
public struct ProtectedRouteAccess: Sendable {
    public let authority: SessionAuthority
    public let policy: DPoPPolicy
    /// Where accepted proofs are remembered.
    public let replay: any DPoPReplayCache

    public init(
        authority: SessionAuthority, policy: DPoPPolicy = DPoPPolicy(),
        replay: any DPoPReplayCache = DPoPMemoryReplayCache()
    ) {
        self.authority = authority
        self.policy = policy
        self.replay = replay
    }

    enum Scheme { case bearer, dpop }

    /// The request URL proofs are compared with: the issuer, then the request's path.
    func url(path: String) -> String { SessionEndpoints.url(issuer: authority.configuration.issuer, path: path) }

    /// The `WWW-Authenticate` challenges for a refusal: DPoP's always (with `algs`), Bearer's too
    /// unless DPoP is required; `error` on the scheme the request used.
    func challenges(_ error: String?, scheme: Scheme?) -> HTTPFields {
        var fields = HTTPFields()
        let algorithms = policy.verifier.challengeAlgorithms
        if !authority.configuration.requireDPoP {
            let bearerError = scheme == .bearer ? error.map { #", error="\#($0)""# } ?? "" : ""
            fields.append(HTTPField(name: .wwwAuthenticate, value: #"Bearer realm="shadow-keys""# + bearerError))
        }
        let dpopError = scheme != .bearer ? error.map { #", error="\#($0)""# } ?? "" : ""
        fields.append(HTTPField(name: .wwwAuthenticate, value: #"DPoP algs="\#(algorithms)""# + dpopError))
        return fields
    }

    func refusal(
        _ code: String, _ message: String, scheme: Scheme?, extra: HTTPFields = [:], status: HTTPResponse.Status = 401
    ) -> SessionHTTPResponse {
        var headers = challenges(code == "missing_token" ? nil : code, scheme: scheme)
        headers.append(contentsOf: extra)
        return .error(status, code, message, headers: headers)
    }

    /// The caller's verified claims, or the answer to give: 401 with `WWW-Authenticate` (RFC 6750,
    /// RFC 9449 §7.1), 400 `invalid_request` for a header that is not one token (two credentials,
    /// or two headers), or 503 when the replay cache is full.
    /// - Parameters:
    ///   - dpop: every `DPoP` header value of the request.
    ///   - method: the request's method; `path`: its path, without the query.
    public func caller(
        authorization: String?, dpop: [String], method: String, path: String
    ) async -> Result<SessionClaims, SessionHTTPResponse> {
        let scheme: Scheme
        let token: String
        if let header = authorization, let value = BearerToken.token(in: header, scheme: "dpop") {
            (scheme, token) = (.dpop, value)
        } else if let header = authorization, let value = BearerToken.from(header: header) {
            (scheme, token) = (.bearer, value)
        } else {
            return .failure(
                refusal(
                    "missing_token",
                    "send the access token as Authorization: Bearer <token>, or DPoP <token> with a proof",
                    scheme: nil))
        }
        // RFC 6750 §3.1: a malformed request, such as two credentials, is invalid_request (400).
        guard BearerToken.isToken68(token) else {
            return .failure(
                refusal(
                    "invalid_request",
                    "the Authorization header holds one token (letters, digits, -._~+/, then any =), and only one",
                    scheme: scheme, status: 400))
        }
        let claims: SessionClaims
        do {
            claims = try await authority.verifier().verify(token)
        } catch let error as SessionError where error.code == .invalidToken {
            return .failure(refusal("invalid_token", error.reason, scheme: scheme))
        } catch {
            return .failure(.error(503, "store_unavailable", "the session keys could not be read"))
        }
        switch (scheme, claims.keyThumbprint) {
        case (.bearer, .some):
            return .failure(
                refusal(
                    "invalid_token", "the token is bound to a DPoP key: send it as Authorization: DPoP with a proof",
                    scheme: .bearer))
        case (.bearer, nil):
            if authority.configuration.requireDPoP {
                return .failure(refusal("invalid_token", "this server requires DPoP-bound tokens", scheme: .bearer))
            }
            return .success(claims)
        case (.dpop, nil):
            return .failure(
                refusal("invalid_token", "the token is not bound to a DPoP key: send it as Bearer", scheme: .dpop))
        case (.dpop, .some(let thumbprint)):
            do {
                _ = try await policy.verifier.verify(
                    dpop, method: method, url: url(path: path), accessToken: token, boundTo: thumbprint,
                    nonces: policy.nonces, replay: replay)
                return .success(claims)
            } catch let error as DPoPError {
                switch error.code {
                case .useNonce:
                    return .failure(refusal("use_dpop_nonce", error.reason, scheme: .dpop, extra: policy.nonceFields))
                case .unavailable:
                    return .failure(.error(503, "store_unavailable", error.reason, headers: [.retryAfter: "1"]))
                default:
                    return .failure(refusal("invalid_dpop_proof", "\(error.codeName): \(error.reason)", scheme: .dpop))
                }
            } catch {
                return .failure(.error(503, "store_unavailable", "the DPoP replay cache failed"))
            }
        }
    }
}
