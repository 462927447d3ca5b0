package import Crypto
package import CryptoExtras
public import ShadowCore

/// Keys read from the files people have: PEM (PKCS#8, SEC1 `EC PRIVATE KEY`, PKCS#1
/// `RSA PRIVATE KEY`, `PUBLIC KEY`; a Sign in with Apple `.p8` is PKCS#8 P-256) or a JWK.
public enum KeyFiles {
    /// A signer for the private key in `bytes`. `algorithm`, when given, must be the key's
    /// (ES256 for P-256, RS256 for RSA 2048 to 8192 bits). Without `keyID`, the `kid` is the key's
    /// RFC 7638 thumbprint, the same that ``publicKeySet(_:keyID:)`` gives it.
    public static func signer(
        _ bytes: [UInt8], algorithm: JWSAlgorithm? = nil, keyID: String? = nil
    ) throws -> JWSSigner {
        let unnamed: JWSSigner
        switch try privateKey(bytes) {
        case .p256(let key):
            unnamed = .es256(key)
        case .rsa(let key):
            unnamed = try .rs256(key)
        }
        if let algorithm, algorithm != unnamed.algorithm {
            throw JOSEError(.invalidKey, "the key is for \(unnamed.algorithm.rawValue), not \(algorithm.rawValue)")
        }
        let kid = try keyID ?? unnamed.publicJWK().thumbprint
        switch try privateKey(bytes) {
        case .p256(let key): return .es256(key, keyID: kid)
        case .rsa(let key): return try .rs256(key, keyID: kid)
        }
    }

    /// The public JWK Set (one key) of the private or public key in `bytes`; its `kid` is
    /// `keyID`, else the RFC 7638 thumbprint.
    public static func publicKeySet(_ bytes: [UInt8], keyID: String? = nil) throws -> JSONObject {
        let jwk: JWK
        switch try publicKey(bytes) {
        case .p256(let key): jwk = try JWK(p256: key, keyID: keyID ?? JWK(p256: key).thumbprint)
        case .rsa(let key): jwk = try JWK(rsa: key, keyID: keyID ?? JWK(rsa: key).thumbprint)
        }
        return ["keys": .array([.object(jwk.json)])]
    }

    /// A private key read from a key file.
    package enum Private {
        case p256(P256.Signing.PrivateKey)
        case rsa(_RSA.Signing.PrivateKey)
    }

    private enum Public {
        case p256(P256.Signing.PublicKey)
        case rsa(_RSA.Signing.PublicKey)
    }

    /// The private key in a PEM (PKCS#8, SEC1, PKCS#1) or private JWK file.
    package static func privateKey(_ bytes: [UInt8]) throws -> Private {
        let text = try Self.text(bytes)
        if text.hasPrefix("{") { return try privateJWK(text) }
        guard text.hasPrefix("-----BEGIN ") else { throw JOSEError(.invalidKey, "not a PEM key or a JWK") }
        try requireASCII(bytes)
        if text.hasPrefix("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
            throw JOSEError(.invalidKey, "the key is encrypted; decrypt it first (openssl pkcs8)")
        }
        if !text.hasPrefix("-----BEGIN RSA PRIVATE KEY-----"),
            let key = try? P256.Signing.PrivateKey(pemRepresentation: text)
        {
            return .p256(key)
        }
        if !text.hasPrefix("-----BEGIN EC PRIVATE KEY-----"),
            let key = try? _RSA.Signing.PrivateKey(pemRepresentation: text)
        {
            return .rsa(key)
        }
        throw JOSEError(.invalidKey, "not a P-256 or RSA private key in PEM")
    }

    private static func publicKey(_ bytes: [UInt8]) throws -> Public {
        let text = try Self.text(bytes)
        if text.hasPrefix("-----BEGIN PUBLIC KEY-----") || text.hasPrefix("-----BEGIN RSA PUBLIC KEY-----") {
            try requireASCII(bytes)
            if let key = try? P256.Signing.PublicKey(pemRepresentation: text) { return .p256(key) }
            if let key = try? _RSA.Signing.PublicKey(pemRepresentation: text) { return .rsa(key) }
            throw JOSEError(.invalidKey, "not a P-256 or RSA public key in PEM")
        }
        if text.hasPrefix("{"), let object = try? StrictJSON.parse(text).objectValue, object["d"] == nil {
            switch try JWK(json: object).material {
            case .rsa(let key, _): return .rsa(key)
            case .p256(let key): return .p256(key)
            }
        }
        switch try privateKey(bytes) {
        case .p256(let key): return .p256(key.publicKey)
        case .rsa(let key): return .rsa(key.publicKey)
        }
    }

    /// PEM is ASCII (RFC 7468, section 2). Its labels are compared as Strings, which are equal
    /// for a Kelvin sign (U+212A) and a K: `PRIVATE \u{212A}EY` passed as `PRIVATE KEY`.
    private static func requireASCII(_ bytes: [UInt8]) throws {
        if let offset = bytes.firstNonASCIIOffset {
            throw JOSEError(.invalidKey, "a PEM key file is ASCII (RFC 7468); byte \(offset) is not")
        }
    }

    private static func text(_ bytes: [UInt8]) throws -> String {
        guard bytes.count <= 64 * 1024, let text = String(validating: bytes, as: UTF8.self) else {
            throw JOSEError(.invalidKey, "a key file is UTF-8 text of at most 64 KiB")
        }
        return String(text.drop { $0.isWhitespace })
    }

    /// A private JWK: EC P-256 with `d` (its `x`, `y` must be d's public key) or RSA with `d`, `p`, `q`.
    private static func privateJWK(_ text: String) throws -> Private {
        guard let object = try? StrictJSON.parse(text).objectValue else {
            throw JOSEError(.invalidKey, "the JWK is not a JSON object")
        }
        func member(_ name: String) throws -> [UInt8] {
            guard let value = object[name]?.stringValue, let bytes = try? Base64URL.decode(value) else {
                throw JOSEError(.invalidKey, "the private JWK has no valid \(name.quotedForMessage)")
            }
            return bytes
        }
        switch object["kty"]?.stringValue {
        case "EC":
            guard object["crv"]?.stringValue == "P-256" else {
                throw JOSEError(.invalidKey, "only P-256 EC keys are supported")
            }
            let key: P256.Signing.PrivateKey
            do { key = try P256.Signing.PrivateKey(rawRepresentation: try member("d")) } catch let error as JOSEError {
                throw error
            } catch {
                throw JOSEError(.invalidKey, "the JWK's d is not a P-256 private key")
            }
            let point = key.publicKey.rawRepresentation
            guard try member("x") == Array(point.prefix(32)), try member("y") == Array(point.suffix(32)) else {
                throw JOSEError(.invalidKey, "the JWK's x and y are not the public key of its d")
            }
            return .p256(key)
        case "RSA":
            do {
                return .rsa(
                    try _RSA.Signing.PrivateKey(
                        n: try member("n"), e: try member("e"), d: try member("d"), p: try member("p"),
                        q: try member("q")))
            } catch let error as JOSEError { throw error } catch {
                throw JOSEError(.invalidKey, "the JWK's n, e, d, p, q are not a consistent RSA key")
            }
        default:
            throw JOSEError(.invalidKey, "the JWK's kty must be EC or RSA")
        }
    }
}
