import ShadowCore

/// The JWS algorithms ShadowKeys verifies. Everything else, `none` and the HMAC family
/// included, is refused.
public enum JWSAlgorithm: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// RSASSA-PKCS1-v1_5 with SHA-256 (RFC 7518 §3.3), 2048 to 8192-bit keys.
    case rs256 = "RS256"
    /// ECDSA P-256 with SHA-256 (RFC 7518 §3.4), raw 64-byte R‖S signatures.
    case es256 = "ES256"

    public var description: String { rawValue }

    /// The algorithm named exactly `name` (code point for code point), if supported.
    init?(exactly name: String) {
        if name.exactlyEquals("RS256") {
            self = .rs256
        } else if name.exactlyEquals("ES256") {
            self = .es256
        } else {
            return nil
        }
    }

    /// Refuses `none` and the HMAC algorithms, which are never accepted whatever is allowed.
    package static func refuseUnsecured(_ name: String) throws {
        if name.exactlyEquals("none") {
            throw JOSEError(.disallowedAlgorithm, "alg \"none\" (unsecured JWS) is never accepted")
        }
        if name.utf8.starts(with: "HS".utf8) {
            throw JOSEError(
                .disallowedAlgorithm,
                "alg \(name.quotedForMessage) is an HMAC algorithm; shared-secret algorithms are never accepted")
        }
    }

    /// Resolves a header `alg` value, refusing anything outside `allowed`.
    package static func resolve(_ name: String, allowed: Set<JWSAlgorithm>) throws -> JWSAlgorithm {
        if let algorithm = JWSAlgorithm(exactly: name), allowed.contains(algorithm) { return algorithm }
        try refuseUnsecured(name)
        guard let algorithm = JWSAlgorithm(exactly: name) else {
            throw JOSEError(
                .disallowedAlgorithm, "alg \(name.quotedForMessage) is not supported (supported: RS256, ES256)")
        }
        guard allowed.contains(algorithm) else {
            let list = allowed.map(\.rawValue).sorted().joined(separator: ", ")
            throw JOSEError(.disallowedAlgorithm, "alg \(name) is not in the allowed list (\(list))")
        }
        return algorithm
    }
}
