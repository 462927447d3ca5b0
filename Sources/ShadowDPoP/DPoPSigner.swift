public import Crypto
public import CryptoExtras
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import ShadowCore
public import ShadowJOSE

/// Makes DPoP proofs (RFC 9449 §4.2): a `dpop+jwt` JWS whose header carries the public key, for
/// one request. Any P-256 signing key works, one held in Apple's Secure Enclave included
/// (``p256(publicKey:signature:)``); RS256 keys too.
public struct DPoPSigner: Sendable {
    /// The algorithm the proofs are signed with.
    public let algorithm: JWSAlgorithm
    /// The public key every proof carries in its `jwk` header.
    public let publicKey: JWK
    /// The header, base64url-encoded once: it is the same for every proof of this key.
    private let encodedHeader: String
    private let signature: @Sendable ([UInt8]) throws -> [UInt8]

    private init(
        algorithm: JWSAlgorithm, publicKey: JWK, signature: @escaping @Sendable ([UInt8]) throws -> [UInt8]
    ) {
        self.algorithm = algorithm
        self.publicKey = publicKey
        self.signature = signature
        let header: JSONObject = [
            "typ": "dpop+jwt", "alg": .string(algorithm.rawValue), "jwk": .object(publicKey.json),
        ]
        encodedHeader = Base64URL.encode(JSONValue.object(header).serialized().utf8)
    }

    /// The key's RFC 7638 thumbprint (`jkt`): what a server binds tokens to.
    public var thumbprint: String { publicKey.thumbprint }

    /// An ES256 signer whose private key is held here.
    public static func es256(_ key: P256.Signing.PrivateKey) throws -> DPoPSigner {
        try p256(publicKey: key.publicKey) { try key.signature(for: $0) }
    }

    /// An ES256 signer for any P-256 key: `signature` signs a SHA-256 digest. For a key in the
    /// Secure Enclave: `.p256(publicKey: key.publicKey) { try key.signature(for: $0) }`.
    public static func p256(
        publicKey: P256.Signing.PublicKey,
        signature: @escaping @Sendable (SHA256Digest) throws -> P256.Signing.ECDSASignature
    ) throws -> DPoPSigner {
        DPoPSigner(algorithm: .es256, publicKey: try JWK(p256: publicKey)) { input in
            Array(try signature(SHA256.hash(data: input)).rawRepresentation)
        }
    }

    /// An RS256 signer; the key must be 2048 to 8192 bits.
    public static func rs256(_ key: _RSA.Signing.PrivateKey) throws -> DPoPSigner {
        guard JWK.rsaModulusBits.contains(key.keySizeInBits) else {
            throw DPoPError(
                .invalidParameter, "RSA key is \(key.keySizeInBits) bits; accepted sizes are 2048 to 8192 bits")
        }
        return DPoPSigner(algorithm: .rs256, publicKey: try JWK(rsa: key.publicKey)) { input in
            Array(
                try key.signature(for: SHA256.hash(data: input), padding: .insecurePKCS1v1_5).rawRepresentation)
        }
    }

    /// A signer for the private key in a key file: PEM (PKCS#8, `EC PRIVATE KEY`, `RSA PRIVATE
    /// KEY`, a `.p8`) or a private JWK, as `KeyFiles` reads them.
    public static func keyFile(_ bytes: [UInt8]) throws -> DPoPSigner {
        switch try KeyFiles.privateKey(bytes) {
        case .p256(let key): return try es256(key)
        case .rsa(let key): return try rs256(key)
        }
    }

    /// A proof for one request.
    /// - Parameters:
    ///   - method: the request's method (`htm`), as sent: `POST`, `GET`.
    ///   - url: the request's URL; `htu` is its normalized form, without query and fragment.
    ///   - accessToken: the access token sent with the request, whose hash becomes `ath`.
    ///   - nonce: the server's latest `DPoP-Nonce`, when it gave one.
    ///   - issuedAt: `iat` (whole seconds).
    /// - Throws: ``DPoPErrorCode/invalidParameter`` for anything a verifier would refuse.
    public func proof(
        method: String, url: String, accessToken: String? = nil, nonce: String? = nil, issuedAt: Date = Date()
    ) throws -> String {
        guard DPoPClaims.isMethod(method) else {
            throw DPoPError(.invalidParameter, "an HTTP method is 1 to 32 token characters, such as POST")
        }
        let target: String
        switch HTTPTargetURI.normalize(url) {
        case .success(let normal): target = normal
        case .failure(let refusal): throw DPoPError(.invalidParameter, "htu is not an absolute http(s) URL: \(refusal)")
        }
        if let nonce, !DPoPClaims.isNonce(nonce) {
            throw DPoPError(.invalidParameter, "a nonce is 1 to 512 printable ASCII characters, without \" or \\")
        }
        if let accessToken, accessToken.isEmpty || accessToken.utf8.count > DPoPClaims.maxAccessTokenBytes {
            throw DPoPError(.invalidParameter, "an access token is 1 to \(DPoPClaims.maxAccessTokenBytes) bytes")
        }
        let seconds = issuedAt.timeIntervalSince1970.rounded(.down)
        guard (0...DPoPClaims.maxTime).contains(seconds) else {
            throw DPoPError(.invalidParameter, "iat must lie between 1970 and 9999")
        }
        var claims: JSONObject = [
            "jti": .string(Base64URL.encode(SecretBytes.random(count: 16).withUnsafeBytes { Array($0) })),
            "htm": .string(method), "htu": .string(target), "iat": .int(Int64(seconds)),
        ]
        if let accessToken { claims.set("ath", .string(DPoPClaims.accessTokenHash(accessToken))) }
        if let nonce { claims.set("nonce", .string(nonce)) }
        let input = encodedHeader + "." + Base64URL.encode(JSONValue.object(claims).serialized().utf8)
        return input + "." + Base64URL.encode(try signature(Array(input.utf8)))
    }
}

/// The claim rules a signer and a verifier share.
enum DPoPClaims {
    static let maxAccessTokenBytes = 16 * 1024
    static let maxNonceBytes = 512
    static let maxIDBytes = 256
    /// 9999-12-31T23:59:59Z.
    static let maxTime: Double = 253_402_300_799

    /// `ath`: base64url(SHA-256(the access token's ASCII)) (§4.2).
    static func accessTokenHash(_ token: String) -> String {
        Base64URL.encode(SHA256.hash(utf8: token))
    }

    /// A method token (RFC 9110 §9.1, §5.6.2), 1 to 32 characters.
    static func isMethod(_ method: String) -> Bool {
        let bytes = method.utf8
        return (1...32).contains(bytes.count) && bytes.allSatisfy(isTokenCharacter)
    }

    static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        default: return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    /// NQCHAR (RFC 9449 §8.1): %x21 / %x23-5B / %x5D-7E, 1 to 512 of them.
    static func isNonce(_ nonce: String) -> Bool {
        let bytes = nonce.utf8
        return (1...maxNonceBytes).contains(bytes.count)
            && bytes.allSatisfy { $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0) }
    }
}
