#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import ShadowCore

/// A JWT claims set (RFC 7519 §4) with typed access to the registered claims.
public struct JWTClaims: Sendable, Hashable {
    /// Every claim, in document order.
    public let json: JSONObject

    /// Claims from a JSON object.
    public init(_ json: JSONObject) { self.json = json }

    /// The claim named exactly `name`.
    public subscript(name: String) -> JSONValue? { json[name] }

    /// `iss`, when it is a string.
    public var issuer: String? { json["iss"]?.stringValue }
    /// `sub`, when it is a string.
    public var subject: String? { json["sub"]?.stringValue }
    /// `jti`, when it is a string.
    public var jwtID: String? { json["jti"]?.stringValue }
    /// `nonce`, when it is a string.
    public var nonce: String? { json["nonce"]?.stringValue }

    /// `aud` as a list: a single string becomes one element; anything else is empty.
    public var audiences: [String] {
        switch json["aud"] {
        case .string(let single): return [single]
        case .array(let values): return values.compactMap(\.stringValue)
        default: return []
        }
    }

    /// `exp`, when it is a number.
    public var expiresAt: Date? { date("exp") }
    /// `nbf`, when it is a number.
    public var notBefore: Date? { date("nbf") }
    /// `iat`, when it is a number.
    public var issuedAt: Date? { date("iat") }

    /// A NumericDate claim (seconds since the epoch, RFC 7519 §2) as a date.
    public func date(_ name: String) -> Date? {
        json[name]?.numberValue.map { Date(timeIntervalSince1970: $0.doubleValue) }
    }
}

/// A token whose signature, header and claims all passed verification.
public struct VerifiedJWT: Sendable {
    /// The protected header.
    public let header: JOSEHeader
    /// The verified claims.
    public let claims: JWTClaims
    /// The algorithm that was verified.
    public let algorithm: JWSAlgorithm
    /// The key that verified the signature.
    public let key: JWK

    package init(header: JOSEHeader, claims: JWTClaims, algorithm: JWSAlgorithm, key: JWK) {
        self.header = header
        self.claims = claims
        self.algorithm = algorithm
        self.key = key
    }
}
