import Crypto
import CryptoExtras
import Foundation
import ShadowCore
import ShadowJOSE
import ShadowTestSupport
import Testing

@Suite struct VerifierTests {
    let now: Int64 = 1_700_000_000
    let rsaSigner: JWSSigner
    let ecSigner: JWSSigner
    let keys: JWKSet
    let verifier: JWTVerifier

    init() throws {
        rsaSigner = try JWSSigner.rs256(TestKeys.rsa, keyID: "rsa-1")
        ecSigner = JWSSigner.es256(TestKeys.p256, keyID: "ec-1")
        keys = try JWKSet(keys: [rsaSigner.publicJWK(), ecSigner.publicJWK()])
        verifier = JWTVerifier(
            policy: ClaimPolicy(issuer: "https://issuer.example", audiences: ["app.example"]),
            clock: .fixed(Date(timeIntervalSince1970: TimeInterval(now))))
    }

    private func expectRejected(
        _ token: String, _ code: JOSEError.Code, mentioning text: String? = nil, verifier: JWTVerifier? = nil
    ) {
        do {
            let verified = try (verifier ?? self.verifier).verify(token, keys: keys)
            Issue.record("accepted; claims \(verified.claims.json.serialized())")
        } catch let error as JOSEError {
            #expect(error.code == code, "\(error)")
            if let text { #expect(error.reason.contains(text), "\(error.reason)") }
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func verifiesRS256AndES256() throws {
        for signer in [rsaSigner, ecSigner] {
            let token = try signer.sign(claims: TokenFactory.claims(now: now), header: ["typ": "JWT"])
            let verified = try verifier.verify(token, keys: keys)
            #expect(verified.claims.subject == "user-1")
            #expect(verified.algorithm == signer.algorithm)
            #expect(verified.key.keyID == signer.keyID)
            #expect(verified.header.type == "JWT")
        }
    }

    /// The signer refuses a claims set or header the verifier would refuse to read, and signs
    /// one at the limits, which verifies.
    @Test func theSignerWritesOnlyWhatTheVerifierReads() throws {
        func nested(_ depth: Int) -> JSONObject {
            var object: JSONObject = [:]
            for _ in 1..<depth { object = ["a": .object(object)] }
            return object
        }
        var claims = TokenFactory.claims(now: now)
        claims.set("deep", .object(nested(15)))
        let token = try ecSigner.sign(claims: claims)
        #expect(try verifier.verify(token, keys: keys).claims.json["deep"] == .object(nested(15)))
        claims.set("deep", .object(nested(16)))
        #expect(throws: JOSEError(.malformedToken, "")) { try ecSigner.sign(claims: claims) }
        claims.set("deep", .string(String(repeating: "a", count: 70_000)))
        #expect(throws: JOSEError(.malformedToken, "")) { try ecSigner.sign(claims: claims) }
        #expect(throws: JOSEError(.malformedToken, "")) {
            try ecSigner.sign(claims: TokenFactory.claims(now: now), header: ["x": .object(nested(16))])
        }
    }

    @Test func aChangedBitAnywhereIsRejected() throws {
        for signer in [rsaSigner, ecSigner] {
            let token = try signer.sign(claims: TokenFactory.claims(now: now))
            let parts = TokenFactory.segments(token)
            for segment in 0..<3 {
                let decoded = try Base64URL.decode(parts[segment])
                for byte in decoded.indices {
                    for bit in 0..<8 {
                        var changed = decoded
                        changed[byte] ^= UInt8(1 << bit)
                        var newParts = parts
                        newParts[segment] = Base64URL.encode(changed)
                        let tampered = newParts.joined(separator: ".")
                        #expect(
                            throws: JOSEError.self, "\(signer.algorithm) segment \(segment) byte \(byte) bit \(bit)"
                        ) {
                            try verifier.verify(tampered, keys: keys)
                        }
                    }
                }
            }
        }
    }

    @Test func aChangedCharacterAnywhereIsRejected() throws {
        let token = try rsaSigner.sign(claims: TokenFactory.claims(now: now))
        var bytes = Array(token.utf8)
        for index in bytes.indices where bytes[index] != UInt8(ascii: ".") {
            let original = bytes[index]
            bytes[index] = original == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            let tampered = String(decoding: bytes, as: UTF8.self)
            #expect(throws: JOSEError.self, "offset \(index)") { try verifier.verify(tampered, keys: keys) }
            bytes[index] = original
        }
    }

    @Test func hmacKeyedWithThePublicKeyIsRejected() throws {
        // The classic confusion: HS256 with the RSA public key bytes as the HMAC secret.
        let publicKey = TestKeys.rsa.publicKey
        for secret in [Array(publicKey.pemRepresentation.utf8), Array(publicKey.derRepresentation)] {
            for alg in ["HS256", "HS384", "HS512"] {
                let input =
                    Base64URL.encode(Array(#"{"alg":"\#(alg)","kid":"rsa-1"}"#.utf8)) + "."
                    + Base64URL.encode(Array(TokenFactory.claims(now: now).serialized().utf8))
                let mac = HMAC<SHA256>.authenticationCode(for: Array(input.utf8), using: SymmetricKey(data: secret))
                expectRejected(input + "." + Base64URL.encode(Array(mac)), .disallowedAlgorithm, mentioning: "HMAC")
            }
        }
    }

    @Test func algNoneIsRejected() throws {
        let payload = Base64URL.encode(Array(TokenFactory.claims(now: now).serialized().utf8))
        for header in [#"{"alg":"none"}"#, #"{"alg":"none","kid":"rsa-1"}"#] {
            let input = Base64URL.encode(Array(header.utf8)) + "." + payload
            // With or without a signature, the algorithm is the refusal (exit 11, 401 in serve).
            expectRejected(input + ".", .disallowedAlgorithm, mentioning: "unsecured")
            expectRejected(input + ".AAAA", .disallowedAlgorithm, mentioning: "none")
        }
        let hmac = Base64URL.encode(Array(#"{"alg":"HS256"}"#.utf8)) + "." + payload
        expectRejected(hmac + ".", .disallowedAlgorithm, mentioning: "HMAC")
        // An allowed algorithm with no signature is a malformed token.
        let unsigned = Base64URL.encode(Array(#"{"alg":"RS256","kid":"rsa-1"}"#.utf8)) + "." + payload
        expectRejected(unsigned + ".", .malformedToken, mentioning: "signature segment is empty")
        for alg in ["None", "NONE", "nOnE"] {
            let input = Base64URL.encode(Array(#"{"alg":"\#(alg)"}"#.utf8)) + "." + payload
            expectRejected(input + ".AAAA", .disallowedAlgorithm)
        }
    }

    @Test func algorithmOutsideTheAllowListIsRejected() throws {
        let token = try ecSigner.sign(claims: TokenFactory.claims(now: now))
        var rsaOnly = verifier
        rsaOnly.algorithms = [.rs256]
        expectRejected(token, .disallowedAlgorithm, mentioning: "allowed", verifier: rsaOnly)
        for alg in ["RS384", "PS256", "ES384", "EdDSA", "rs256"] {
            let forged = try TokenFactory.raw(
                header: #"{"alg":"\#(alg)","kid":"rsa-1"}"#, payload: TokenFactory.claims(now: now).serialized(),
                rsa: TestKeys.rsa)
            expectRejected(forged, .disallowedAlgorithm, mentioning: alg)
        }
    }

    @Test func headerAlgMustMatchTheKey() throws {
        // ES256 header naming the RSA key, and RS256 naming the EC key.
        let es = try TokenFactory.raw(
            header: #"{"alg":"ES256","kid":"rsa-1"}"#, payload: TokenFactory.claims(now: now).serialized(),
            p256: TestKeys.p256)
        expectRejected(es, .algorithmKeyMismatch, mentioning: "cannot verify ES256")
        let rs = try TokenFactory.raw(
            header: #"{"alg":"RS256","kid":"ec-1"}"#, payload: TokenFactory.claims(now: now).serialized(),
            rsa: TestKeys.rsa)
        expectRejected(rs, .algorithmKeyMismatch, mentioning: "cannot verify RS256")
    }

    @Test func unknownKidHasNoFallback() throws {
        // A set with a single key still refuses a kid that is not its own.
        let single = try JWKSet(keys: [rsaSigner.publicJWK()])
        let token = try JWSSigner.rs256(TestKeys.rsa, keyID: "other").sign(claims: TokenFactory.claims(now: now))
        #expect(throws: JOSEError(.unknownKey, "")) { try verifier.verify(token, keys: single) }
    }

    @Test func tokensWithoutKid() throws {
        let token = try JWSSigner.rs256(TestKeys.rsa).sign(claims: TokenFactory.claims(now: now))
        #expect(try verifier.verify(token, keys: JWKSet(keys: [rsaSigner.publicJWK()])).key.keyID == "rsa-1")
        // Two RSA keys: ambiguous, refused even though one of them would verify.
        let two = try JWKSet(keys: [rsaSigner.publicJWK(), TestKeys.jwk(TestKeys.rsa2, kid: "rsa-2")])
        #expect(throws: JOSEError(.unknownKey, "")) { try verifier.verify(token, keys: two) }
    }

    @Test func criticalHeaders() throws {
        let claims = TokenFactory.claims(now: now).serialized()
        let unknown = try TokenFactory.raw(
            header: #"{"alg":"RS256","kid":"rsa-1","crit":["exp"],"exp":1}"#, payload: claims, rsa: TestKeys.rsa)
        expectRejected(unknown, .unsupportedCriticalHeader, mentioning: "\"exp\"")
        let b64 = try TokenFactory.raw(
            header: #"{"alg":"RS256","kid":"rsa-1","crit":["b64"],"b64":false}"#, payload: claims, rsa: TestKeys.rsa)
        expectRejected(b64, .unsupportedCriticalHeader, mentioning: "\"b64\"")
        var understanding = verifier
        understanding.understoodCriticalHeaders = ["exp"]
        #expect(throws: Never.self) { try understanding.verify(unknown, keys: keys) }
        for header in [
            #"{"alg":"RS256","kid":"rsa-1","crit":[]}"#, #"{"alg":"RS256","kid":"rsa-1","crit":"exp","exp":1}"#,
            #"{"alg":"RS256","kid":"rsa-1","crit":["alg"]}"#, #"{"alg":"RS256","kid":"rsa-1","crit":["absent"]}"#,
            #"{"alg":"RS256","kid":"rsa-1","crit":[1]}"#,
        ] {
            expectRejected(
                try TokenFactory.raw(header: header, payload: claims, rsa: TestKeys.rsa), .malformedToken,
                mentioning: "crit")
        }
    }

    @Test func duplicateMembersAreRejected() throws {
        let claims = TokenFactory.claims(now: now).serialized()
        let header = try TokenFactory.raw(
            header: #"{"alg":"RS256","kid":"rsa-1","alg":"none"}"#, payload: claims, rsa: TestKeys.rsa)
        expectRejected(header, .malformedToken, mentioning: "duplicate member name \"alg\"")
        let payload = try TokenFactory.raw(
            header: #"{"alg":"RS256","kid":"rsa-1"}"#,
            payload: #"{"iss":"https://issuer.example","aud":"app.example","exp":1700003600,"sub":"a","sub":"admin"}"#,
            rsa: TestKeys.rsa)
        expectRejected(payload, .malformedToken, mentioning: "duplicate member name \"sub\"")
    }

    @Test func oversizedTokensAreRejectedBeforeDecoding() throws {
        let padding: JSONObject = ["pad": .string(String(repeating: "x", count: 20_000))]
        let big = try rsaSigner.sign(claims: TokenFactory.claims(now: now, extra: padding))
        expectRejected(big, .malformedToken, mentioning: "limit is 16384")
        var roomy = verifier
        roomy.maxTokenBytes = 64 * 1024
        #expect(throws: Never.self) { try roomy.verify(big, keys: keys) }
        var tight = verifier
        tight.maxTokenBytes = 100
        expectRejected(
            try rsaSigner.sign(claims: TokenFactory.claims(now: now)), .malformedToken, mentioning: "limit is 100",
            verifier: tight)
    }

    @Test func paddedSegmentsAreRejected() throws {
        let token = try ecSigner.sign(claims: [
            "iss": "https://issuer.example", "aud": "app.example", "exp": .int(now + 60), "x": "ab",
        ])
        let parts = TokenFactory.segments(token)
        for segment in 0..<3 where parts[segment].count % 4 != 0 {
            var padded = parts
            padded[segment] += String(repeating: "=", count: 4 - parts[segment].count % 4)
            expectRejected(padded.joined(separator: "."), .malformedToken, mentioning: "padding")
        }
        for standardOnly in ["+", "/"] {
            var changed = parts
            changed[1] = standardOnly + parts[1].dropFirst()
            expectRejected(changed.joined(separator: "."), .malformedToken, mentioning: "base64url alphabet")
        }
    }

    @Test func structureIsChecked() throws {
        let token = try rsaSigner.sign(claims: TokenFactory.claims(now: now))
        let parts = TokenFactory.segments(token)
        expectRejected(parts[0] + "." + parts[1], .malformedToken, mentioning: "2 segments")
        expectRejected(token + "." + parts[2], .malformedToken, mentioning: "4 segments")
        expectRejected(
            [parts[0], "", parts[1], parts[2], parts[2]].joined(separator: "."), .malformedToken, mentioning: "JWE")
        expectRejected("", .malformedToken, mentioning: "empty")
        expectRejected(" " + token, .malformedToken)
        let array = try TokenFactory.raw(header: #"{"alg":"RS256","kid":"rsa-1"}"#, payload: "[1,2]", rsa: TestKeys.rsa)
        expectRejected(array, .malformedToken, mentioning: "payload must be a JSON object")
        let headerArray = Base64URL.encode(Array("[]".utf8)) + "." + parts[1] + "." + parts[2]
        expectRejected(headerArray, .malformedToken, mentioning: "header must be a JSON object")
        let noAlg = try TokenFactory.raw(header: #"{"kid":"rsa-1"}"#, payload: "{}", rsa: TestKeys.rsa)
        expectRejected(noAlg, .malformedToken, mentioning: "no \"alg\"")
        let numericKid = try TokenFactory.raw(header: #"{"alg":"RS256","kid":7}"#, payload: "{}", rsa: TestKeys.rsa)
        expectRejected(numericKid, .malformedToken, mentioning: "\"kid\" must be a string")
    }

    @Test func es256RequiresRaw64ByteSignatures() throws {
        let token = try ecSigner.sign(claims: TokenFactory.claims(now: now))
        var parts = TokenFactory.segments(token)
        let raw = try Base64URL.decode(parts[2])
        let der = Array(try P256.Signing.ECDSASignature(rawRepresentation: raw).derRepresentation)
        parts[2] = Base64URL.encode(der)
        expectRejected(parts.joined(separator: "."), .invalidSignature, mentioning: "exactly 64")
        parts[2] = Base64URL.encode(raw + [0])
        expectRejected(parts.joined(separator: "."), .invalidSignature, mentioning: "65 bytes")
        parts[2] = Base64URL.encode([UInt8](repeating: 0, count: 64))
        expectRejected(parts.joined(separator: "."), .invalidSignature)
    }

    /// ECDSA is malleable: with (r, s) valid, so is (r, n - s). ShadowKeys accepts both, as RFC
    /// 7518 and Wycheproof's "valid" cases do (refusing high S would refuse about half of what
    /// honest signers produce), so an ES256 token's bytes are not unique: Docs/security.md says
    /// never to key replay detection on them. This test pins that decision.
    @Test func es256AcceptsBothSValuesOfASignature() throws {
        let order: [UInt8] = try Hex.decode("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551")
        var generator = SeededGenerator(seed: 0xEC_D5A)
        for index in 0..<16 {
            let token = try ecSigner.sign(
                claims: TokenFactory.claims(now: now, extra: ["n": .int(Int64(generator.next() >> 1))]))
            var parts = TokenFactory.segments(token)
            let signature = try Base64URL.decode(parts[2])
            // n - s, big-endian, with borrows.
            var flipped = [UInt8](repeating: 0, count: 32)
            var borrow = 0
            for i in (0..<32).reversed() {
                let difference = Int(order[i]) - Int(signature[32 + i]) - borrow
                flipped[i] = UInt8((difference + 256) % 256)
                borrow = difference < 0 ? 1 : 0
            }
            parts[2] = Base64URL.encode(Array(signature[0..<32]) + flipped)
            let malleated = parts.joined(separator: ".")
            #expect(malleated != token)
            #expect(throws: Never.self, "token \(index), seed 0xECD5A") { try verifier.verify(malleated, keys: keys) }
        }
    }

    @Test func rs256RequiresModulusLengthSignatures() throws {
        let token = try rsaSigner.sign(claims: TokenFactory.claims(now: now))
        var parts = TokenFactory.segments(token)
        let signature = try Base64URL.decode(parts[2])
        parts[2] = Base64URL.encode([0] + signature)
        expectRejected(parts.joined(separator: "."), .invalidSignature, mentioning: "257 bytes")
        parts[2] = Base64URL.encode(signature.dropFirst())
        expectRejected(parts.joined(separator: "."), .invalidSignature, mentioning: "255 bytes")
    }

    @Test func typIsCheckedWhenAsked() throws {
        var typed = verifier
        typed.expectedType = "JWT"
        for typ in ["JWT", "jwt", "application/jwt", "Application/JWT"] {
            #expect(throws: Never.self, "\(typ)") {
                try typed.verify(
                    try rsaSigner.sign(claims: TokenFactory.claims(now: now), header: ["typ": .string(typ)]), keys: keys
                )
            }
        }
        expectRejected(
            try rsaSigner.sign(claims: TokenFactory.claims(now: now), header: ["typ": "at+jwt"]), .claimsRejected,
            mentioning: "typ", verifier: typed)
        expectRejected(
            try rsaSigner.sign(claims: TokenFactory.claims(now: now)), .claimsRejected, mentioning: "typ",
            verifier: typed)
        #expect(throws: Never.self) {
            try verifier.verify(
                try rsaSigner.sign(claims: TokenFactory.claims(now: now), header: ["typ": "anything"]), keys: keys)
        }
    }

    @Test func embeddedHeaderKeysAreIgnored() throws {
        // A token carrying its own key in "jwk" must still verify only against the set.
        let attacker = P256.Signing.PrivateKey()
        let jwk = try JWK(p256: attacker.publicKey).json
        let token = try JWSSigner.es256(attacker, keyID: "ec-1").sign(
            claims: TokenFactory.claims(now: now), header: ["jwk": .object(jwk)])
        expectRejected(token, .invalidSignature)
    }

    @Test func signersRefuseToOverrideAlgOrKid() throws {
        #expect(throws: JOSEError.self) { try rsaSigner.sign(claims: [:], header: ["alg": "none"]) }
        #expect(throws: JOSEError.self) {
            try JWSSigner.rs256(_RSA.Signing.PrivateKey(unsafeKeySize: .init(bitCount: 1024)))
        }
        let signature = try Base64URL.decode(TokenFactory.segments(try ecSigner.sign(claims: [:]))[2])
        #expect(signature.count == 64)
    }
}

/// `verify(_:as:keys:)`: claims decoded into the caller's own type, after every check.
@Suite struct DecodableClaimsTests {
    struct Session: Decodable, Equatable {
        let sub: String
        let aud: String
        let exp: Int
        let role: String?
    }

    struct NeedsTenant: Decodable {
        let tenant: String
    }

    let now: Int64 = 1_700_000_000
    let signer: JWSSigner
    let keys: JWKSet
    let verifier: JWTVerifier

    init() throws {
        signer = JWSSigner.es256(TestKeys.p256, keyID: "ec-1")
        keys = try JWKSet(keys: [signer.publicJWK()])
        verifier = JWTVerifier(
            policy: ClaimPolicy(issuer: "https://issuer.example", audiences: ["app.example"]),
            clock: .fixed(Date(timeIntervalSince1970: TimeInterval(now))))
    }

    @Test func verifiedClaimsDecodeIntoTheCallersType() async throws {
        let token = try signer.sign(claims: TokenFactory.claims(now: now, extra: ["role": "admin"]))
        let session = try verifier.verify(token, as: Session.self, keys: keys)
        #expect(session == Session(sub: "user-1", aud: "app.example", exp: Int(now) + 3600, role: "admin"))
        func viaSource(_ source: some JWKSource) async throws -> Session {
            try await verifier.verify(token, as: Session.self, keys: source)
        }
        #expect(try await viaSource(keys) == session)
    }

    @Test func claimsThatDoNotFitAreRefusedByName() throws {
        let token = try signer.sign(claims: TokenFactory.claims(now: now))
        do {
            _ = try verifier.verify(token, as: NeedsTenant.self, keys: keys)
            Issue.record("decoded without a tenant")
        } catch let error as JOSEError {
            #expect(error.code == .claimsUndecodable)
            #expect(error.reason.contains("NeedsTenant") && error.reason.contains("tenant"), "\(error.reason)")
        }
    }

    @Test func nothingIsDecodedFromATokenThatFailsVerification() throws {
        let expired = try signer.sign(claims: TokenFactory.claims(now: now - 7200))
        #expect { try verifier.verify(expired, as: Session.self, keys: keys) } throws: {
            ($0 as? JOSEError)?.code == .claimsRejected
        }
        let other = try JWSSigner.es256(TestKeys.p256b, keyID: "ec-1").sign(claims: TokenFactory.claims(now: now))
        #expect { try verifier.verify(other, as: Session.self, keys: keys) } throws: {
            ($0 as? JOSEError)?.code == .invalidSignature
        }
    }
}
