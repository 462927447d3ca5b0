import ShadowCore
import HTTPTypes
import ShadowJWKS
import ShadowSessions
import ShadowTokenSource

enum SessionTargets {
    static let keys = must("the fixed session keys") { try SessionKeys(secret: [UInt8](repeating: 0x33, count: 32)) }

    /// A refresh token's text: what parses authenticates, and encodes back to the same text.
    static let refreshToken: FuzzTargets.Harness = { data in
        let text = String(decoding: data.bindMemory(to: UInt8.self), as: UTF8.self)
        guard let token = try? RefreshToken(parsing: text, keys: keys) else { return }
        precondition(token.encoded(keys: keys) == text, "a refresh token changed in a round trip")
    }

    /// The first byte picks the reader: even, a token endpoint's answer (a 200 body, then the
    /// same body as a 400's error); odd, what a user pastes after signing in. (`Retry-After` is
    /// read by HTTPCaching, fuzzed in `http-caching`.)
    static let oauth: FuzzTargets.Harness = { data in
        let input = Input(data)
        switch input.mode % 2 {
        case 0:
            if let response = try? OAuthTokenEndpoint.parse(TransportResponse(status: .ok, body: input.rest)) {
                precondition(response.expiresIn >= 1 && response.expiresIn <= 366 * 86_400)
            }
            let error = OAuthTokenEndpoint.rejection(TransportResponse(status: .badRequest, body: input.rest))
            precondition(!error.reason.unicodeScalars.contains { $0.value < 0x20 }, "a control character in a reason")
        default:
            _ = try? PKCE().code(fromPasted: String(decoding: input.rest, as: UTF8.self))
        }
    }
}
