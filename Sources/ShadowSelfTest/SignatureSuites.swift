import Crypto
import ShadowCore
import ShadowJOSE

/// Wycheproof signature vectors driven through ShadowKeys' JWS layer: the key is read by the
/// JWK reader (with its size and curve checks) and each signature goes through
/// `JWK.verifySignature`, which binds the algorithm to the key and enforces the JWS signature
/// encodings (64-byte raw R‖S for ES256, modulus-length for RS256).
package enum SignatureSuites {
    /// Decisions on Wycheproof "acceptable" cases, by flag. Documented in TestVectors/README.md.
    package static let acceptableDecisions: [String: Bool] = [
        // RS256 is EMSA-PKCS1-v1_5 with the DigestInfo NULL parameter (RFC 8017 §9.2); refuse the variant without it.
        "MissingNull": false
    ]

    /// `ecdsa_secp256r1_sha256_p1363_test.json`: raw R‖S signatures, graded as Wycheproof says.
    package static func ecdsaP1363(_ file: WycheproofFile) -> [VectorCase] {
        file.grade(acceptableDecisions: acceptableDecisions) { group, test in
            let key = try p256Key(group)
            return accepts(key, try test.bytes("sig"), try test.bytes("msg"), .es256)
        }
    }

    /// `ecdsa_secp256r1_sha256_test.json`: DER signatures, every one of which the ES256 path must refuse.
    package static func ecdsaDERAllRejected(_ file: WycheproofFile) -> [VectorCase] {
        file.groups.flatMap { group in
            group.tests.map { test in
                do {
                    let key = try p256Key(group)
                    let accepted = accepts(key, try test.bytes("sig"), try test.bytes("msg"), .es256)
                    return VectorCase(
                        id: "tcId \(test.tcId)", passed: !accepted,
                        detail:
                            """
                            tcId \(test.tcId) DER signature (\(test.comment)): expected reject, got \
                            \(accepted ? "accept" : "reject")
                            """
                    )
                } catch {
                    return VectorCase(
                        id: "tcId \(test.tcId)", passed: false, detail: "tcId \(test.tcId): could not run: \(error)")
                }
            }
        }
    }

    /// `rsa_signature_2048_sha256_test.json`: RSASSA-PKCS1-v1_5 SHA-256, graded as Wycheproof says.
    package static func rsaPKCS1(_ file: WycheproofFile) -> [VectorCase] {
        file.grade(acceptableDecisions: acceptableDecisions) { group, test in
            guard let jwk = group.fields["keyJwk"]?.objectValue else { throw VectorFormatError("group without keyJwk") }
            let key = try JWK(json: jwk)
            return accepts(key, try test.bytes("sig"), try test.bytes("msg"), .rs256)
        }
    }

    private static func accepts(_ key: JWK, _ signature: [UInt8], _ message: [UInt8], _ algorithm: JWSAlgorithm) -> Bool
    {
        (try? key.verifySignature(signature, signingInput: message, algorithm: algorithm)) != nil
    }

    /// The group's key as a JWK: its `publicKeyJwk` when present, else one built from `wx`/`wy`.
    private static func p256Key(_ group: WycheproofFile.Group) throws -> JWK {
        if let jwk = group.fields["publicKeyJwk"]?.objectValue { return try JWK(json: jwk) }
        guard let key = group.fields["publicKey"]?.objectValue, let wx = key["wx"]?.stringValue,
            let wy = key["wy"]?.stringValue
        else {
            throw VectorFormatError("group without a P-256 public key")
        }
        func coordinate(_ hex: String) throws -> String {
            let bytes = Array(try Hex.decode(hex).drop { $0 == 0 })
            guard bytes.count <= 32 else { throw VectorFormatError("coordinate longer than 32 bytes") }
            return Base64URL.encode([UInt8](repeating: 0, count: 32 - bytes.count) + bytes)
        }
        return try JWK(json: [
            "kty": "EC", "crv": "P-256", "x": .string(try coordinate(wx)), "y": .string(try coordinate(wy)),
        ])
    }
}
