public import Hummingbird
import HTTPTypes
public import NIOCore
public import ShadowDPoP
import ShadowCore
import ShadowJOSE
public import ShadowServer
public import ShadowSessions

/// A request context that carries the caller's verified session (``SessionMiddleware``).
public protocol SessionRequestContext: RequestContext {
    var session: SessionClaims? { get set }
}

/// The context `shadow-keys-server serve` uses: the peer's address (for rate limits), a verified
/// session, and a verified Apple identity.
public struct ShadowRequestContext: SessionRequestContext, RemoteAddressRequestContext, AppleIdentityRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    public var session: SessionClaims?
    public var appleIdentity: AuthenticatedAppleIdentity?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
        session = nil
        appleIdentity = nil
    }
}

/// Verifies the access token of every request against the ring's public keys (refreshed from
/// the store every 30 s, never read per request) and puts its typed claims into the context. A
/// token bound to a DPoP key is accepted only as `Authorization: DPoP` with a proof by that key
/// for this request (RFC 9449 §7; replays are caught in this process's memory, or in the session
/// store's table when given it), never as a bearer token (Docs/dpop.md). Revocation reaches it
/// within one access-token lifetime; `checkSession` adds a read of the session's row per
/// request, so a revoked session is refused at once.
public struct SessionMiddleware<Context: SessionRequestContext>: RouterMiddleware {
    public let access: ProtectedRouteAccess
    public let checkSession: Bool
    public var authority: SessionAuthority { access.authority }

    /// - Parameter replay: where accepted proofs are remembered: this process's memory (the
    ///   default: no store read or write per request), or `authority.replayCache`, the session
    ///   store's table, which every instance on that database shares (one store write per bound
    ///   request; Docs/dpop.md, "Replay").
    public init(
        authority: SessionAuthority, checkSession: Bool = false, dpop: DPoPPolicy = DPoPPolicy(),
        replay: any DPoPReplayCache = DPoPMemoryReplayCache()
    ) {
        self.init(
            access: ProtectedRouteAccess(authority: authority, policy: dpop, replay: replay), checkSession: checkSession
        )
    }

    /// A middleware sharing the session routes' check (``SessionEndpoints/access``) and their
    /// replay table in the store.
    public init(access: ProtectedRouteAccess, checkSession: Bool = false) {
        self.access = access
        self.checkSession = checkSession
    }

    public func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let (authorization, proofs) = SessionRouteSupport.credentials(request.headers)
        let claims: SessionClaims
        switch await access.caller(
            authorization: authorization, dpop: proofs, method: request.method.rawValue, path: request.uri.path)
        {
        case .failure(let answer): return SessionRouteSupport.respond(answer)
        case .success(let value): claims = value
        }
        do {
            if checkSession, try await !authority.isLive(claims) {
                return jsonError(
                    .unauthorized, "invalid_token", "the session was revoked",
                    challenge: #"Bearer realm="shadow-keys", error="invalid_token""#)
            }
        } catch {
            return jsonError(.serviceUnavailable, "store_unavailable", "the session store could not be read")
        }
        var context = context
        context.session = claims
        return try await next(request, context)
    }
}

extension RouterMethods where Context: RemoteAddressRequestContext {
    /// The session routes (Docs/sessions.md, "Requests and answers"): `POST /auth/apple`, `/auth/refresh`,
    /// `/auth/logout`, `/auth/revoke`, `/auth/introspect`, `GET /auth/sessions`,
    /// `DELETE /auth/sessions/{id}` and `GET /.well-known/jwks.json`. The client address the
    /// per-IP limit counts is the peer's, or, for a peer among `trustedProxies`, the one its
    /// `Forwarded` or `X-Forwarded-For` header names (``ClientAddress``).
    @discardableResult
    public func addSessionRoutes(
        _ endpoints: SessionEndpoints, bodyTimeout: Duration = .seconds(10), trustedProxies: TrustedProxies = .none
    ) -> Self {
        /// A POST route's body, type, client address, `Authorization` and `DPoP` values.
        typealias Handler = @Sendable ([UInt8], String?, String, String?, [String]) async -> SessionHTTPResponse
        func post(_ path: RouterPath, _ handler: @escaping Handler) {
            self.post(path) { request, context -> Response in
                let read = await SessionRouteSupport.body(request, bodyTimeout: bodyTimeout)
                guard let bytes = read.bytes else { return read.refusal ?? SessionRouteSupport.unreadable }
                let (authorization, proofs) = SessionRouteSupport.credentials(request.headers)
                return SessionRouteSupport.respond(
                    await handler(
                        bytes, request.headers[.contentType],
                        SessionRouteSupport.ip(request, context, trusted: trustedProxies), authorization, proofs))
            }
        }
        post("/auth/apple") { body, type, ip, _, proofs in
            await endpoints.signIn(body: body, contentType: type, clientIP: ip, dpop: proofs)
        }
        post("/auth/refresh") { body, type, ip, _, proofs in
            await endpoints.refresh(body: body, contentType: type, clientIP: ip, dpop: proofs)
        }
        post("/auth/logout") { body, type, ip, _, proofs in
            await endpoints.logout(body: body, contentType: type, clientIP: ip, dpop: proofs)
        }
        post("/auth/revoke") { body, type, _, authorization, _ in
            await endpoints.revoke(body: body, contentType: type, authorization: authorization)
        }
        post("/auth/introspect") { body, type, _, authorization, _ in
            await endpoints.introspect(body: body, contentType: type, authorization: authorization)
        }
        get("/auth/sessions") { request, context -> Response in
            let (authorization, proofs) = SessionRouteSupport.credentials(request.headers)
            return SessionRouteSupport.respond(
                await endpoints.sessions(
                    authorization: authorization,
                    clientIP: SessionRouteSupport.ip(request, context, trusted: trustedProxies), dpop: proofs,
                    path: request.uri.path, method: request.method.rawValue))
        }
        delete("/auth/sessions/:id") { request, context -> Response in
            let (authorization, proofs) = SessionRouteSupport.credentials(request.headers)
            return SessionRouteSupport.respond(
                await endpoints.deleteSession(
                    context.parameters.get("id") ?? "", authorization: authorization,
                    clientIP: SessionRouteSupport.ip(request, context, trusted: trustedProxies), dpop: proofs,
                    path: request.uri.path))
        }
        get("/.well-known/jwks.json") { _, _ -> Response in SessionRouteSupport.respond(await endpoints.jwks()) }
        return self
    }
}

enum SessionRouteSupport {
    /// `Authorization` (several values joined by ", ", as `HTTPFields` gives them) and every
    /// `DPoP` value, in one pass over the fields: the subscripts make a lazy sequence and join
    /// it for each name.
    static func credentials(_ headers: HTTPFields) -> (authorization: String?, proofs: [String]) {
        var authorization: String?
        var proofs: [String] = []
        for field in headers {
            if field.name == .authorization {
                authorization = authorization.map { $0 + ", " + field.value } ?? field.value
            } else if field.name == DPoPPolicy.proofHeader {
                proofs.append(field.value)
            }
        }
        return (authorization, proofs)
    }

    /// The client's address: the peer's, or the one a trusted proxy forwarded.
    static func ip(_ request: Request, _ context: some RemoteAddressRequestContext, trusted: TrustedProxies) -> String {
        let peer: String
        switch context.remoteAddress {
        case .v4(let address)?: peer = address.host
        case .v6(let address)?: peer = address.host
        default: peer = "unknown"
        }
        guard !trusted.isEmpty else { return peer }
        return ClientAddress.resolve(
            peer: peer, forwarded: request.headers.filter { $0.name.canonicalName == "forwarded" }.map(\.value),
            xForwardedFor: request.headers.filter { $0.name.canonicalName == "x-forwarded-for" }.map(\.value),
            trusted: trusted)
    }

    static let unreadable = jsonError(.badRequest, "invalid_request", "the body could not be read")
    /// The body, or the refusal to answer instead (413 over the cap, 408 too slow). A refusal is
    /// `no-store`, as every session answer, and closes the connection: the body left unread must
    /// not be read as the next request.
    static func body(_ request: Request, bodyTimeout: Duration) async -> (bytes: [UInt8]?, refusal: Response?) {
        let limit = SessionEndpoints.maxBodyBytes
        let closing: HTTPFields = [.cacheControl: "no-store", .connection: "close"]
        if let declared = request.headers[.contentLength], let length = Int(declared), length > limit {
            return (
                nil,
                jsonError(.contentTooLarge, "body_too_large", "the body is over \(limit) bytes", headers: closing)
            )
        }
        let stream = request.body
        do {
            let buffer = try await withDeadline(bodyTimeout) { try await stream.collect(upTo: limit) }
            return (Array(buffer.readableBytesView), nil)
        } catch is NIOTooManyBytesError {
            return (
                nil,
                jsonError(.contentTooLarge, "body_too_large", "the body is over \(limit) bytes", headers: closing)
            )
        } catch {
            return (
                nil,
                jsonError(.requestTimeout, "request_timeout", "the body did not arrive in time", headers: closing)
            )
        }
    }
    static func respond(_ answer: SessionHTTPResponse) -> Response {
        Response(
            status: answer.status, headers: answer.headers, body: .init(byteBuffer: ByteBuffer(bytes: answer.body)))
    }
}
