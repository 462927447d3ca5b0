import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowApple
import ShadowCore
import ShadowJOSE

/// Sign in with Apple client secrets: made from a PKCS#8 key, verified through the JWS layer.
package enum AppleSuites {
    /// Signs client secrets with the RFC 7515 A.3 P-256 key read back from PKCS#8 PEM, and checks
    /// that they verify, carry Apple's claims, and that a changed byte or an over-long lifetime
    /// is refused.
    package static func clientSecret(_ rfc7515A3: [UInt8]) -> [VectorCase] {
        var cases: [VectorCase] = []
        func add(_ id: String, _ passed: Bool, _ detail: String) {
            cases.append(VectorCase(id: id, passed: passed, detail: detail))
        }
        do {
            guard let file = try StrictJSON.parse(rfc7515A3).objectValue,
                let scalar = file["privateScalar"]?.stringValue,
                let publicJWK = file["publicJwk"]?.objectValue
            else { throw VectorFormatError("no key in the RFC 7515 A.3 file") }
            let key = try P256.Signing.PrivateKey(rawRepresentation: try Base64URL.decode(scalar))
            let signingKey = try AppleSigningKey(pem: key.pemRepresentation)
            add("p8", true, "the key reads back from PKCS#8 PEM")
            let builder = try ClientSecretBuilder(
                key: signingKey, teamID: "TEAM123456", keyID: "KEY1234567", clientID: "com.example.app")
            let issued = Date(timeIntervalSince1970: 1_700_000_000)
            let secret = try builder.make(issuedAt: issued)
            var jwk = publicJWK
            jwk.set("kid", "KEY1234567")
            let keys = try JWKSet(keys: [JWK(json: jwk)])
            let verifier = JWTVerifier(
                algorithms: [.es256],
                policy: ClaimPolicy(issuer: "TEAM123456", audiences: [Apple.issuer], requiredClaims: ["sub", "iat"]),
                clock: .fixed(issued))
            let verified = try verifier.verify(secret.token, keys: keys)
            add(
                "verify", verified.claims.subject == "com.example.app" && verified.header.keyID == "KEY1234567",
                "the secret verifies with Apple's claims")
            add(
                "raw signature", try CompactJWS(secret.token).signature.count == 64,
                "the signature is 64 raw bytes, not DER")
            add(
                "lifetime", verified.claims.expiresAt == issued.addingTimeInterval(86400),
                "exp is iat + 1 day by default")
            var bytes = Array(secret.token.utf8)
            bytes[bytes.count - 3] = bytes[bytes.count - 3] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            add(
                "tampered", (try? verifier.verify(String(decoding: bytes, as: UTF8.self), keys: keys)) == nil,
                "a changed signature byte is refused")
            add(
                "limit",
                (try? ClientSecretBuilder(
                    key: signingKey, teamID: "TEAM123456", keyID: "KEY1234567", clientID: "c", lifetime: 15_777_001))
                    == nil,
                "a lifetime over 15,777,000 s is refused")
        } catch {
            add("run", false, "could not run: \(error)")
        }
        return cases
    }
}
