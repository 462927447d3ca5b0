public import Hummingbird
import HTTPTypes
import NIOCore
public import ShadowApple
import ShadowCore
public import ShadowCredentials
public import ShadowJOSE

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
        // RFC 6750 §3.1: two credentials (or two headers, joined) are a malformed request.
        guard BearerToken.isToken68(bearer) else {
            return jsonError(
                .badRequest, "invalid_request",
                "the Authorization header holds one token (letters, digits, -._~+/, then any =), and only one",
                challenge: #"Bearer error="invalid_request""#)
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
