#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore

extension VerifiedJWT {
    /// The verified claims decoded as `type` (with `JSONDecoder`'s defaults: numbers as numbers,
    /// so `exp` is a `Double` or an `Int`). Decoding happens after every check has passed.
    ///
    /// - Throws: ``JOSEError/Code-swift.struct/claimsUndecodable`` naming the type and the reason.
    public func decode<Claims: Decodable>(_ type: Claims.Type) throws -> Claims {
        do {
            return try JSONDecoder().decode(Claims.self, from: Data(JSONValue.object(claims.json).serialized().utf8))
        } catch {
            throw JOSEError(.claimsUndecodable, "the claims do not decode as \(Claims.self): \(Self.reason(error))")
        }
    }

    private static func reason(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        switch error {
        case .keyNotFound(let key, _): return "\(key.stringValue.quotedForMessage) is missing"
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? context.debugDescription : "\(path.quotedForMessage): \(context.debugDescription)"
        @unknown default: return "\(error)"
        }
    }
}

extension JWTVerifier {
    /// Verifies `token` like ``verify(_:keys:)-(_,JWKSet)``, then decodes its claims as `type`.
    ///
    /// ```swift
    /// struct Session: Decodable { let sub: String; let exp: Int }
    /// let session = try verifier.verify(token, as: Session.self, keys: keys)
    /// ```
    public func verify<Claims: Decodable>(_ token: String, as type: Claims.Type, keys: JWKSet) throws -> Claims {
        try verify(token, keys: keys).decode(type)
    }

    /// Verifies `token` against any key source, then decodes its claims as `type`.
    public func verify<Claims: Decodable>(
        _ token: String, as type: Claims.Type, keys: some JWKSource
    ) async throws -> Claims {
        try await verify(token, keys: keys).decode(type)
    }
}
