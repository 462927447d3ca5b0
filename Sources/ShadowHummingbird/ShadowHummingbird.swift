public import Hummingbird
import HTTPTypes
import NIOCore
public import ShadowApple
import ShadowCore
public import ShadowCredentials
public import ShadowJOSE
public import ShadowServer

/// A verified Sign in with Apple identity, as the middleware puts it into the request context.
/// A class: the router copies the context several times a request, and the token is large.
public final class AuthenticatedAppleIdentity: Sendable {
    /// The verified identity token.
    public let token: AppleIdentityToken
    /// The user's credential state, when the middleware has a store.
    public let status: CredentialStatus?

    init(token: AppleIdentityToken, status: CredentialStatus?) {
        self.token = token
        self.status = status
    }
}

/// A request context that can carry a verified Apple identity.
public protocol AppleIdentityRequestContext: RequestContext {
    var appleIdentity: AuthenticatedAppleIdentity? { get set }
}

/// The plain context with an Apple identity.
public struct AppleIdentityContext: AppleIdentityRequestContext {
    public var coreContext: CoreRequestContextStorage
    public var appleIdentity: AuthenticatedAppleIdentity?

    public init(source: Source) {
        coreContext = .init(source: source)
        appleIdentity = nil
    }
}

/// Verifies the bearer identity token of every request (Apple's rules, or any issuer through the
/// validator given) and puts the identity, and with a store its credential state, into the context.
/// Refuses with 401 and a JSON body `{"error":{"code","message"}}`: no or malformed bearer token,
/// a token that fails verification, or (with a store) a user revoked or transferred, or a token a
/// later revocation superseded; 503 when the keys or the store cannot be read.
public struct AppleIdentityMiddleware<Context: AppleIdentityRequestContext>: RouterMiddleware {
    public let validator: AppleIdentityTokenValidator
    public let keys: any JWKSource
    public let states: (any CredentialStateStore)?

    public init(validator: AppleIdentityTokenValidator, keys: any JWKSource, states: (any CredentialStateStore)? = nil)
    {
        self.validator = validator
        self.keys = keys
        self.states = states
    }

    public func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard let header = request.headers[.authorization], let bearer = BearerToken.from(header: header) else {
            return jsonError(
                .unauthorized, "missing_token", "send the identity token as Authorization: Bearer <token>",
                challenge: "Bearer")
        }
        let token: AppleIdentityToken
        do {
            token = try await validator.validate(bearer, keys: keys)
        } catch let error as JOSEError {
            if error.code == .keysUnavailable {
                return jsonError(.serviceUnavailable, error.codeName, "the identity provider's keys are unavailable")
            }
            return jsonError(.unauthorized, error.codeName, error.reason, challenge: "Bearer")
        } catch {
            return jsonError(.serviceUnavailable, "keys_unavailable", "the identity provider's keys are unavailable")
        }
        var status: CredentialStatus?
        if let states {
            let record: CredentialRecord
            do { record = try await states.record(clientID: token.audience, subject: token.subject) } catch {
                return jsonError(.serviceUnavailable, "store_unavailable", "the credential store is unavailable")
            }
            // The one enforcement rule (Docs/credential-state.md, "Enforcement").
            do { try record.enforce(token) } catch let error as CredentialError {
                return jsonError(.unauthorized, error.codeName, error.reason, challenge: "Bearer")
            }
            status = record.status
        }
        var context = context
        context.appleIdentity = AuthenticatedAppleIdentity(token: token, status: status)
        return try await next(request, context)
    }
}

extension RouterMethods {
    /// `POST path`: Apple's server-to-server notifications, through `receiver` (the body is read
    /// up to 64 KiB; a larger one is 413). What a notification ends besides its state (a user's
    /// sessions) is the receiver's `afterApplying`.
    @discardableResult
    public func addAppleNotifications(
        _ path: RouterPath = "/apple/notifications", receiver: AppleNotificationReceiver,
        bodyTimeout: Duration = .seconds(10)
    ) -> Self {
        post(path) { request, _ -> Response in
            let limit = AppleNotificationVerifier.maxBodyBytes
            // A declared length over the cap is refused from the header alone, before any body
            // (or a 100-continue) is sent.
            if let declared = request.headers[.contentLength], let length = Int(declared), length > limit {
                return Self.notificationResponse(receiver.refuseOversized(), close: true)
            }
            let response: NotificationResponse
            do {
                let stream = request.body
                let body = try await withDeadline(bodyTimeout) { try await stream.collect(upTo: limit) }
                response = await receiver.receive(body.readableBytesView)
            } catch is NIOTooManyBytesError {
                return Self.notificationResponse(receiver.refuseOversized(), close: true)
            } catch is DeadlineExceeded {
                return Self.notificationResponse(receiver.refuseIncomplete(timedOut: true), close: true)
            } catch {
                // The client went away mid-body (or sent a broken one): nothing was too large.
                return Self.notificationResponse(receiver.refuseIncomplete(timedOut: false), close: true)
            }
            return Self.notificationResponse(response, close: false)
        }
    }

    /// The answer's status and JSON body; `close` ends the connection after it (a body that was
    /// refused unread, or left unfinished, must not be read as the next request).
    static func notificationResponse(_ response: NotificationResponse, close: Bool) -> Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        if close { headers[.connection] = "close" }
        return Response(
            status: response.status, headers: headers,
            body: .init(byteBuffer: ByteBuffer(bytes: response.body)))
    }
}

/// A JSON error response: `{"error":{"code":…,"message":…}}`, with a `WWW-Authenticate`
/// challenge when one is given.
func jsonError(
    _ status: HTTPResponse.Status, _ code: String, _ message: String, challenge: String? = nil,
    headers extra: HTTPFields = [:]
) -> Response {
    var headers: HTTPFields = [.contentType: "application/json"] + extra
    if let challenge { headers[.wwwAuthenticate] = challenge }
    let body = JSONValue.object(["error": .error(code: code, message: message)]).serialized()
    return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
}

/// The body of ``withDeadline(_:_:)`` did not finish in time.
struct DeadlineExceeded: Error {}

/// `body`'s result, or ``DeadlineExceeded`` once `timeout` has passed (the body is cancelled).
func withDeadline<R: Sendable>(_ timeout: Duration, _ body: @escaping @Sendable () async throws -> R) async throws -> R
{
    try await withThrowingTaskGroup(of: R.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw DeadlineExceeded()
        }
        defer { group.cancelAll() }
        guard let first = try await group.next() else { throw CancellationError() }
        return first
    }
}
