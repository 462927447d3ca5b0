public import Crypto
public import CryptoExtras
public import ShadowCore

/// Signs compact JWS tokens with ES256 (raw 64-byte R‖S) or RS256.
public struct JWSSigner: Sendable {
    private enum Key: Sendable {
        case es256(P256.Signing.PrivateKey)
        case rs256(_RSA.Signing.PrivateKey)
    }

    private let key: Key
    /// The `kid` put in every header, if any.
    public let keyID: String?

    /// The algorithm this signer uses.
    public var algorithm: JWSAlgorithm {
        switch key {
        case .es256: return .es256
        case .rs256: return .rs256
        }
    }

    /// An ES256 signer.
    public static func es256(_ key: P256.Signing.PrivateKey, keyID: String? = nil) -> JWSSigner {
        JWSSigner(key: .es256(key), keyID: keyID)
    }

    /// An RS256 signer; the key must be 2048 to 8192 bits.
    public static func rs256(_ key: _RSA.Signing.PrivateKey, keyID: String? = nil) throws -> JWSSigner {
        guard JWK.rsaModulusBits.contains(key.keySizeInBits) else {
            throw JOSEError(
                .invalidKey, "RSA signing key is \(key.keySizeInBits) bits; accepted sizes are 2048 to 8192 bits")
        }
        return JWSSigner(key: .rs256(key), keyID: keyID)
    }

    /// The public JWK matching this signer's key.
    public func publicJWK() throws -> JWK {
        switch key {
        case .es256(let key): return try JWK(p256: key.publicKey, keyID: keyID)
        case .rs256(let key): return try JWK(rsa: key.publicKey, keyID: keyID)
        }
    }

    /// Signs a claims set. The header is `alg`, then `kid` when set, then `header`'s members.
    /// - Throws: ``JOSEError/Code/malformedToken`` for claims a verifier here would refuse to read
    ///   (nested deeper than 16, or over 64 KiB: `StrictJSON`'s JOSE limits), which are not signed.
    public func sign(claims: JSONObject, header: JSONObject = [:]) throws -> String {
        let payload = Array(JSONValue.object(claims).serialized().utf8)
        try Self.checkReadable(payload, part: "payload")
        return try sign(payload: payload, header: header)
    }

    /// What ``CompactJWS`` refuses in a header or payload is not written.
    static func checkReadable(_ json: [UInt8], part: String) throws {
        do {
            _ = try json.withUnsafeBufferPointer { try CompactJWS.parseObject($0, part: part) }
        } catch let error as JOSEError {
            throw JOSEError(.malformedToken, "a verifier would refuse this token: \(error.reason)")
        }
    }

    /// Signs arbitrary payload bytes.
    public func sign(payload: [UInt8], header extra: JSONObject = [:]) throws -> String {
        var header: JSONObject = ["alg": .string(algorithm.rawValue)]
        if let keyID { header.set("kid", .string(keyID)) }
        for member in extra {
            guard !member.name.exactlyEquals("alg"), !member.name.exactlyEquals("kid") else {
                throw JOSEError(
                    .invalidKey, "header member \(member.name.quotedForMessage) is set by the signer, not by the caller"
                )
            }
            header.set(member.name, member.value)
        }
        let headerBytes = Array(header.serialized().utf8)
        try Self.checkReadable(headerBytes, part: "header")
        let signingInput = Base64URL.encode(headerBytes) + "." + Base64URL.encode(payload)
        let bytes = Array(signingInput.utf8)
        let signature: [UInt8]
        switch key {
        case .es256(let key):
            signature = Array(try key.signature(for: SHA256.hash(data: bytes)).rawRepresentation)
        case .rs256(let key):
            signature = Array(
                try key.signature(for: SHA256.hash(data: bytes), padding: .insecurePKCS1v1_5).rawRepresentation)
        }
        return signingInput + "." + Base64URL.encode(signature)
    }
}
