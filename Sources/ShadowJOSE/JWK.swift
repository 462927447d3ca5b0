public import Crypto
public import CryptoExtras
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import ShadowCore

/// A public verification key read from a JWK (RFC 7517): RSA (2048 to 8192 bits) or EC P-256.
///
/// The key is checked and built once, when it is read; verification reuses it. Keys are
/// immutable and shared by reference.
public final class JWK: Sendable {
    /// The key's type and size.
    public enum KeyType: Sendable, Hashable, CustomStringConvertible {
        /// RSA with a modulus of this many bits.
        case rsa(bits: Int)
        /// EC on the NIST P-256 curve.
        case p256

        public var description: String {
            switch self {
            case .rsa(let bits): return "RSA-\(bits)"
            case .p256: return "EC P-256"
            }
        }
    }

    enum Material: Sendable {
        case rsa(_RSA.Signing.PublicKey, modulusBytes: Int)
        case p256(P256.Signing.PublicKey)
    }

    /// The `kid`, if any.
    public let keyID: String?
    /// The key's own `alg`, if it declares one.
    public let algorithm: JWSAlgorithm?
    /// The `use` value, if present (`sig` is the only one that verifies).
    public let use: String?
    /// The `key_ops` values, if present (must include `verify` to verify).
    public let keyOperations: [String]?
    /// The key's type and size.
    public let keyType: KeyType
    /// The RFC 7638 thumbprint: base64url SHA-256 of the canonical required members.
    public let thumbprint: String
    /// The public members, canonical encoding, in a fixed order.
    public let json: JSONObject
    let material: Material

    /// The smallest and largest RSA modulus accepted, in bits.
    public static let rsaModulusBits: ClosedRange<Int> = 2048...8192

    private static let privateMembers = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"]

    /// Reads a public JWK.
    ///
    /// - Throws: ``JOSEError/Code/invalidKey`` naming the problem: an unsupported `kty`, `crv`
    ///   or `alg`, private members, a modulus outside 2048...8192 bits, an unusual exponent, or
    ///   a point that is not on the curve.
    public init(json: JSONObject) throws {
        func string(_ name: String, required: Bool) throws -> String? {
            guard let value = json[name] else {
                if required { throw JOSEError(.invalidKey, "JWK has no \"\(name)\" member") }
                return nil
            }
            guard let string = value.stringValue else {
                throw JOSEError(.invalidKey, "JWK \"\(name)\" must be a string, found \(value.typeName)")
            }
            return string
        }
        func bytes(_ name: String) throws -> [UInt8] {
            let text = try string(name, required: true) ?? ""
            do { return try Base64URL.decode(text) } catch {
                throw JOSEError(.invalidKey, "JWK \"\(name)\" is not base64url: \(error)")
            }
        }

        let kty = try string("kty", required: true) ?? ""
        for name in Self.privateMembers where json[name] != nil {
            throw JOSEError(
                .invalidKey,
                "JWK contains the private member \"\(name)\"; only public keys are accepted for verification")
        }
        keyID = try string("kid", required: false)
        use = try string("use", required: false)
        if let ops = json["key_ops"] {
            let names = ops.arrayValue?.compactMap(\.stringValue) ?? []
            guard let list = ops.arrayValue, names.count == list.count else {
                throw JOSEError(.invalidKey, "JWK \"key_ops\" must be an array of strings")
            }
            guard Set(names.map(ExactName.init)).count == names.count else {
                throw JOSEError(.invalidKey, "JWK \"key_ops\" repeats a value (RFC 7517 §4.3)")
            }
            keyOperations = names
        } else {
            keyOperations = nil
        }
        let declaredAlgorithm = try string("alg", required: false)
        if let declaredAlgorithm {
            guard let algorithm = JWSAlgorithm(exactly: declaredAlgorithm) else {
                throw JOSEError(
                    .invalidKey,
                    "JWK alg \(declaredAlgorithm.quotedForMessage) is not supported (supported: RS256, ES256)")
            }
            self.algorithm = algorithm
        } else {
            algorithm = nil
        }

        switch kty {
        case _ where kty.exactlyEquals("RSA"):
            if let algorithm, algorithm != .rs256 {
                throw JOSEError(.invalidKey, "JWK is an RSA key but declares alg \(algorithm)")
            }
            let modulus = Self.stripLeadingZeros(try bytes("n"))
            let exponent = Self.stripLeadingZeros(try bytes("e"))
            let rsa = try Self.makeRSAKey(modulus: modulus, exponent: exponent)
            material = .rsa(rsa, modulusBytes: modulus.count)
            keyType = .rsa(bits: Self.bitLength(modulus))
            let n = Base64URL.encode(modulus), e = Base64URL.encode(exponent)
            thumbprint = Self.thumbprint(#"{"e":"\#(e)","kty":"RSA","n":"\#(n)"}"#)
            self.json = Self.publicJSON(
                ["kty": "RSA", "n": .string(n), "e": .string(e)], keyID, declaredAlgorithm, use, keyOperations)
        case _ where kty.exactlyEquals("EC"):
            let curve = try string("crv", required: true) ?? ""
            guard curve.exactlyEquals("P-256") else {
                throw JOSEError(.invalidKey, "JWK curve \(curve.quotedForMessage) is not supported (supported: P-256)")
            }
            if let algorithm, algorithm != .es256 {
                throw JOSEError(.invalidKey, "JWK is an EC P-256 key but declares alg \(algorithm)")
            }
            let x = try bytes("x"), y = try bytes("y")
            guard x.count == 32, y.count == 32 else {
                throw JOSEError(
                    .invalidKey,
                    """
                    JWK P-256 coordinates must be exactly 32 bytes each (RFC 7518 §6.2.1.2), found x \(x.count) and y \
                    \(y.count)
                    """
                )
            }
            do {
                material = .p256(try P256.Signing.PublicKey(rawRepresentation: x + y))
            } catch {
                throw JOSEError(.invalidKey, "JWK P-256 point is not on the curve")
            }
            keyType = .p256
            let xs = Base64URL.encode(x), ys = Base64URL.encode(y)
            thumbprint = Self.thumbprint(#"{"crv":"P-256","kty":"EC","x":"\#(xs)","y":"\#(ys)"}"#)
            self.json = Self.publicJSON(
                ["kty": "EC", "crv": "P-256", "x": .string(xs), "y": .string(ys)], keyID, declaredAlgorithm, use,
                keyOperations)
        default:
            throw JOSEError(.invalidKey, "JWK kty \(kty.quotedForMessage) is not supported (supported: RSA, EC)")
        }
    }

    /// A JWK for an RSA public key.
    public convenience init(
        rsa key: _RSA.Signing.PublicKey, keyID: String? = nil, algorithm: JWSAlgorithm? = .rs256, use: String? = "sig"
    ) throws {
        let primitives = try key.getKeyPrimitives()
        var object: JSONObject = [
            "kty": "RSA", "n": .string(Base64URL.encode(primitives.modulus)),
            "e": .string(Base64URL.encode(primitives.publicExponent)),
        ]
        Self.addOptional(&object, keyID, algorithm?.rawValue, use, nil)
        try self.init(json: object)
    }

    /// A JWK for a P-256 public key.
    public convenience init(
        p256 key: P256.Signing.PublicKey, keyID: String? = nil, algorithm: JWSAlgorithm? = .es256, use: String? = "sig"
    ) throws {
        let raw = [UInt8](key.rawRepresentation)
        var object: JSONObject = [
            "kty": "EC", "crv": "P-256", "x": .string(Base64URL.encode(raw[0..<32])),
            "y": .string(Base64URL.encode(raw[32..<64])),
        ]
        Self.addOptional(&object, keyID, algorithm?.rawValue, use, nil)
        try self.init(json: object)
    }

    /// Reads a public JWK from JSON text.
    public convenience init(jsonText: String) throws {
        let value: JSONValue
        do { value = try StrictJSON.parse(jsonText, limits: .jose) } catch {
            throw JOSEError(.invalidKey, "JWK is not valid JSON: \(error)")
        }
        guard let object = value.objectValue else {
            throw JOSEError(.invalidKey, "JWK must be a JSON object, found \(value.typeName)")
        }
        try self.init(json: object)
    }

    /// Why this key may not verify `algorithm`, or `nil` when it may.
    public func refusal(for algorithm: JWSAlgorithm) -> String? {
        if canVerify(algorithm) { return nil }
        let name = keyID.map { "key \($0.quotedForMessage)" } ?? "key \(thumbprint)"
        if !materialMatches(algorithm) { return "\(name) is \(keyType) and cannot verify \(algorithm)" }
        if let declared = self.algorithm, declared != algorithm {
            return "\(name) declares alg \(declared), but the token uses \(algorithm)"
        }
        if let use, !use.exactlyEquals("sig") { return "\(name) has use \(use.quotedForMessage), not \"sig\"" }
        return "\(name) has key_ops without \"verify\""
    }

    /// True when this key may verify `algorithm`: its type fits, and its `alg`, `use` and
    /// `key_ops` (when present) allow it.
    public func canVerify(_ algorithm: JWSAlgorithm) -> Bool {
        guard materialMatches(algorithm) else { return false }
        if let declared = self.algorithm, declared != algorithm { return false }
        if let use, !use.exactlyEquals("sig") { return false }
        if let keyOperations, !keyOperations.contains(where: { $0.exactlyEquals("verify") }) { return false }
        return true
    }

    private func materialMatches(_ algorithm: JWSAlgorithm) -> Bool {
        switch (material, algorithm) {
        case (.rsa, .rs256), (.p256, .es256): return true
        default: return false
        }
    }

    /// Verifies a JWS signature over `signingInput` (the ASCII `header.payload`).
    ///
    /// The key must be able to verify `algorithm`. ES256 signatures must be exactly 64 bytes
    /// (raw R‖S; DER is refused) and RS256 signatures exactly the modulus length.
    ///
    /// - Throws: ``JOSEError/Code/algorithmKeyMismatch`` or ``JOSEError/Code/invalidSignature``.
    public func verifySignature(
        _ signature: some DataProtocol, signingInput: some DataProtocol, algorithm: JWSAlgorithm
    ) throws {
        if let refusal = refusal(for: algorithm) { throw JOSEError(.algorithmKeyMismatch, refusal) }
        let valid: Bool
        switch material {
        case .rsa(let key, let modulusBytes):
            guard signature.count == modulusBytes else {
                throw JOSEError(
                    .invalidSignature,
                    """
                    RS256 signature is \(signature.count) bytes; this \(modulusBytes * 8)-bit key needs exactly \
                    \(modulusBytes)
                    """
                )
            }
            let digest = Self.digest(signingInput)
            valid = key.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature), for: digest, padding: .insecurePKCS1v1_5)
        case .p256(let key):
            guard signature.count == 64 else {
                throw JOSEError(
                    .invalidSignature,
                    """
                    ES256 signature is \(signature.count) bytes; JWS requires exactly 64 (raw R‖S, RFC 7518 §3.4), \
                    DER is not accepted
                    """
                )
            }
            let digest = Self.digest(signingInput)
            guard let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature) else {
                throw JOSEError(.invalidSignature, "ES256 signature is not a valid R‖S pair")
            }
            valid = key.isValidSignature(ecdsa, for: digest)
        }
        guard valid else { throw JOSEError(.invalidSignature, "signature does not verify under \(keyDisplayName)") }
    }

    /// SHA-256 of a signing input, through its contiguous storage when it has one.
    private static func digest(_ input: some DataProtocol) -> SHA256Digest {
        input.withContiguousStorageIfAvailable { SHA256.hash(contiguous: UnsafeRawBufferPointer($0)) }
            ?? SHA256.hash(data: input)
    }

    var keyDisplayName: String {
        keyID.map { "key \($0.quotedForMessage)" } ?? "key with thumbprint \(thumbprint)"
    }

    // MARK: - Helpers

    private static func makeRSAKey(modulus: [UInt8], exponent: [UInt8]) throws -> _RSA.Signing.PublicKey {
        let bits = bitLength(modulus)
        guard rsaModulusBits.contains(bits) else {
            throw JOSEError(.invalidKey, "RSA modulus is \(bits) bits; accepted sizes are 2048 to 8192 bits")
        }
        guard let last = modulus.last, last & 1 == 1 else { throw JOSEError(.invalidKey, "RSA modulus is even") }
        guard exponent.count <= 4, let low = exponent.last, low & 1 == 1,
            exponent.reduce(UInt64(0), { $0 << 8 | UInt64($1) }) >= 3
        else {
            throw JOSEError(.invalidKey, "RSA exponent must be odd and between 3 and 2^32-1 (65537 is usual)")
        }
        do { return try _RSA.Signing.PublicKey(n: modulus, e: exponent) } catch {
            throw JOSEError(.invalidKey, "RSA key was refused by the crypto library: \(error)")
        }
    }

    static func stripLeadingZeros(_ bytes: [UInt8]) -> [UInt8] {
        guard let first = bytes.firstIndex(where: { $0 != 0 }) else { return [] }
        return Array(bytes[first...])
    }

    static func bitLength(_ bytes: [UInt8]) -> Int {
        guard let first = bytes.first else { return 0 }
        return (bytes.count - 1) * 8 + (8 - first.leadingZeroBitCount)
    }

    private static func thumbprint(_ canonical: String) -> String {
        Base64URL.encode(SHA256.hash(data: Array(canonical.utf8)))
    }

    private static func publicJSON(
        _ base: JSONObject, _ kid: String?, _ alg: String?, _ use: String?, _ ops: [String]?
    ) -> JSONObject {
        var object = base
        addOptional(&object, kid, alg, use, ops)
        return object
    }

    private static func addOptional(
        _ object: inout JSONObject, _ kid: String?, _ alg: String?, _ use: String?, _ ops: [String]?
    ) {
        if let kid { object.set("kid", .string(kid)) }
        if let alg { object.set("alg", .string(alg)) }
        if let use { object.set("use", .string(use)) }
        if let ops { object.set("key_ops", .array(ops.map(JSONValue.string))) }
    }
}
