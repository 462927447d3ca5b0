import Crypto
import CryptoExtras
import Foundation
import JWTKit
import ShadowKeys

/// Verification throughput: the raw swift-crypto primitive, ShadowKeys (verify + claim policy,
/// keys pre-parsed), and jwt-kit on the same token and key set.
enum JWTBenchmarks {
    static let audience = "com.example.app"
    static let issuer = "https://appleid.apple.com"

    /// An Apple-style identity token's claims.
    static func appleClaims(now: Int64) -> ShadowCore.JSONObject {
        [
            "iss": .string(issuer), "aud": .string(audience), "exp": .int(now + 86400), "iat": .int(now),
            "sub": "001234.8a2b3c4d5e6f70819a2b3c4d5e6f7081.1234", "c_hash": "eSUx1sBM1nbm0kZgnIAf6A",
            "email": "q8xj2n4k7d@privaterelay.appleid.com", "email_verified": true, "is_private_email": true,
            "auth_time": .int(now), "nonce_supported": true,
        ]
    }

    static func run() async throws -> [BenchRow] {
        let now = Int64(Date().timeIntervalSince1970)
        let rsaKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let ecKey = P256.Signing.PrivateKey()
        let rsaSigner = try JWSSigner.rs256(rsaKey, keyID: "W6WcOKB")
        let ecSigner = JWSSigner.es256(ecKey, keyID: "fh6Bs8C")
        let jwksJSON = ShadowCore.JSONValue.object([
            "keys": .array([.object(try rsaSigner.publicJWK().json), .object(try ecSigner.publicJWK().json)])
        ]).serialized()
        let keySet = try JWKSet(jsonText: jwksJSON)
        let verifier = JWTVerifier(policy: ClaimPolicy(issuer: issuer, audiences: [audience]))
        let peer = JWTKeyCollection()
        try await peer.add(jwksJSON: jwksJSON)

        var rows: [BenchRow] = []
        for signer in [rsaSigner, ecSigner] {
            let token = try signer.sign(claims: appleClaims(now: now))
            let parts = token.split(separator: ".")
            let input = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
            let signature = Array(try CompactJWS(token).signature)
            let raw: () throws -> Void
            switch signer.algorithm {
            case .rs256:
                let publicKey = rsaKey.publicKey
                let rsaSignature = _RSA.Signing.RSASignature(rawRepresentation: signature)
                raw = {
                    guard
                        publicKey.isValidSignature(
                            rsaSignature, for: SHA256.hash(data: input), padding: .insecurePKCS1v1_5)
                    else { throw BenchError("raw RSA failed") }
                }
            case .es256:
                let publicKey = ecKey.publicKey
                let ecdsa = try P256.Signing.ECDSASignature(rawRepresentation: signature)
                raw = {
                    guard publicKey.isValidSignature(ecdsa, for: SHA256.hash(data: input)) else {
                        throw BenchError("raw P-256 failed")
                    }
                }
            }
            let ours = { _ = try verifier.verify(token, keys: keySet) }
            // Sanity: every contender accepts the token before being timed.
            try raw()
            try ours()
            _ = try await peer.verify(token, as: AppleIdentityToken.self, expectedAudience: audience)

            let samples = try await Harness.sampleAsync([
                { try ours() },
                { try raw() },
                { _ = try await peer.verify(token, as: AppleIdentityToken.self, expectedAudience: audience) },
            ])
            rows.append(
                BenchRow(
                    name: "\(signer.algorithm) verify + claims", samples: samples, peerName: "jwt-kit 5.8.0",
                    note:
                        """
                        raw = swift-crypto \(signer.algorithm == .rs256 ? "RSA-2048 PKCS#1 v1.5" : "P-256 ECDSA") \
                        verify of the same signing input; ours and jwt-kit check iss, aud, exp
                        """
                ))
        }
        return rows
    }
}

extension JWTBenchmarks {
    /// Runs only our verification in a loop, for a profiler.
    static func profile(iterations: Int, algorithm: String) throws {
        let now = Int64(Date().timeIntervalSince1970)
        let rsaKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let signer: JWSSigner =
            algorithm == "es256"
            ? JWSSigner.es256(P256.Signing.PrivateKey(), keyID: "fh6Bs8C")
            : try JWSSigner.rs256(rsaKey, keyID: "W6WcOKB")
        let keySet = try JWKSet(keys: [signer.publicJWK()])
        let verifier = JWTVerifier(policy: ClaimPolicy(issuer: issuer, audiences: [audience]))
        let token = try signer.sign(claims: appleClaims(now: now))
        switch ProcessInfo.processInfo.environment["STAGE"] {
        case "policy":
            let claims = JWTClaims(try CompactJWS(token).unverifiedPayload())
            let date = Date()
            for _ in 0..<iterations { _ = verifier.policy.evaluate(claims, now: date) }
        case "payload":
            let jws = try CompactJWS(token)
            for _ in 0..<iterations { _ = try jws.unverifiedPayload() }
        case "verifysig", "raw":
            let jws = try CompactJWS(token)
            let signature = Array(jws.signature)
            let input = Array(token.utf8.prefix(token.utf8.count - token.split(separator: ".")[2].utf8.count - 1))
            let key = try keySet.key(for: signer.keyID, algorithm: signer.algorithm)
            let rsa = rsaKey.publicKey
            if ProcessInfo.processInfo.environment["STAGE"] == "raw" {
                for _ in 0..<iterations {
                    _ = rsa.isValidSignature(
                        _RSA.Signing.RSASignature(rawRepresentation: signature), for: SHA256.hash(data: input),
                        padding: .insecurePKCS1v1_5)
                }
            } else {
                for _ in 0..<iterations { try key.verifySignature(signature, signingInput: input, algorithm: .rs256) }
            }
        case "split":
            for _ in 0..<iterations { _ = try CompactJWS(token) }
        default:
            for _ in 0..<iterations { _ = try verifier.verify(token, keys: keySet) }
        }
    }
}

extension JWTBenchmarks {
    /// Time per stage of our verification path, to see where the overhead over raw goes.
    static func stages() throws {
        let now = Int64(Date().timeIntervalSince1970)
        let rsaKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let signer = try JWSSigner.rs256(rsaKey, keyID: "W6WcOKB")
        let keySet = try JWKSet(keys: [signer.publicJWK()])
        let verifier = JWTVerifier(policy: ClaimPolicy(issuer: issuer, audiences: [audience]))
        let token = try signer.sign(claims: appleClaims(now: now))
        let jws = try CompactJWS(token)
        let payload = try jws.unverifiedPayload()
        let claims = JWTClaims(payload)
        let policy = verifier.policy
        let date = Date()
        let key = try keySet.key(for: "W6WcOKB", algorithm: .rs256)
        let input = Array(token.utf8.prefix(token.utf8.count - token.split(separator: ".")[2].utf8.count - 1))
        let sigBytes = Array(jws.signature)
        let sigData = Data(jws.signature)
        let publicKey = rsaKey.publicKey
        let sig0 = _RSA.Signing.RSASignature(rawRepresentation: sigBytes)
        let micro = try Harness.compare([
            { _ = _RSA.Signing.RSASignature(rawRepresentation: sigBytes) },
            { _ = _RSA.Signing.RSASignature(rawRepresentation: sigData) },
            { _ = SHA256.hash(data: input) },
            { _ = jws.withSigningInput { SHA256.hash(data: $0) } },
            { _ = _RSA.Signing.RSASignature(rawRepresentation: jws.signature) },
            { try key.verifySignature(sigBytes, signingInput: input, algorithm: .rs256) },
            {
                _ = publicKey.isValidSignature(
                    _RSA.Signing.RSASignature(rawRepresentation: sigBytes), for: SHA256.hash(data: input),
                    padding: .insecurePKCS1v1_5)
            },
            { _ = publicKey.isValidSignature(sig0, for: SHA256.hash(data: input), padding: .insecurePKCS1v1_5) },
        ])
        for (name, ops) in zip(
            [
                "RSASignature from [UInt8]", "RSASignature from Data", "SHA256 [UInt8]",
                "SHA256 URBP via withSigningInput", "RSASignature from ArraySlice", "verifySignature([UInt8], [UInt8])",
                "raw + RSASignature per call", "raw prebuilt",
            ], micro)
        {
            print(String(format: "%-50@ %8.3f µs", name, 1e6 / ops))
        }
        let names = [
            "CompactJWS.init (split, 3× base64, header JSON)", "payload JSON", "claim policy", "key lookup",
            "verifySignature", "raw verify", "full verify",
        ]
        let sig = _RSA.Signing.RSASignature(rawRepresentation: jws.signature)
        let results = try Harness.compare([
            { _ = try CompactJWS(token) },
            { _ = try jws.unverifiedPayload() },
            { _ = policy.evaluate(claims, now: date) },
            { _ = try keySet.key(for: "W6WcOKB", algorithm: .rs256) },
            {
                try jws.withSigningInput { try key.verifySignature(jws.signature, signingInput: $0, algorithm: .rs256) }
            },
            { _ = publicKey.isValidSignature(sig, for: SHA256.hash(data: input), padding: .insecurePKCS1v1_5) },
            { _ = try verifier.verify(token, keys: keySet) },
        ])
        for (name, opsPerSecond) in zip(names, results) {
            print(String(format: "%-50@ %8.3f µs", name, 1e6 / opsPerSecond))
        }
        print("token bytes: \(token.utf8.count), payload bytes: \(jws.payload.count)")
    }
}
