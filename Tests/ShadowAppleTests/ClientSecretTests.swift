import Crypto
import CryptoExtras
import Foundation
import ShadowApple
import ShadowCore
import ShadowJOSE
import ShadowTestSupport
import Testing

@Suite struct ClientSecretTests {
    let key = P256.Signing.PrivateKey()

    private func builder(lifetime: TimeInterval = 86400) throws -> ClientSecretBuilder {
        try ClientSecretBuilder(
            key: AppleSigningKey(pem: key.pemRepresentation), teamID: "TEAM123456", keyID: "KEY1234567",
            clientID: "com.Example.Web", lifetime: lifetime)
    }

    @Test func secretHasAppleShape() throws {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        let secret = try builder().make(issuedAt: now)
        let jws = try CompactJWS(secret.token)
        #expect(jws.header.algorithm == "ES256" && jws.header.keyID == "KEY1234567")
        #expect(jws.header.json.map(\.name) == ["alg", "kid"])
        #expect(jws.signature.count == 64)
        let claims = try jws.unverifiedPayload()
        #expect(
            claims["iss"] == "TEAM123456" && claims["sub"] == "com.Example.Web"
                && claims["aud"] == "https://appleid.apple.com")
        #expect(claims["iat"] == 1_700_000_000 && claims["exp"] == 1_700_086_400)
        let verifier = JWTVerifier(
            algorithms: [.es256], policy: ClaimPolicy(issuer: "TEAM123456", audiences: ["https://appleid.apple.com"]),
            clock: .fixed(now))
        #expect(throws: Never.self) {
            try verifier.verify(secret.token, keys: JWKSet(keys: [JWK(p256: key.publicKey, keyID: "KEY1234567")]))
        }
        #expect(!"\(secret)".contains(secret.token))
    }

    @Test func lifetimeAndIdentifiersAreChecked() throws {
        #expect(throws: Never.self) { try builder(lifetime: 15_777_000) }
        #expect(throws: AppleError(.invalidParameter, "")) { try builder(lifetime: 15_777_001) }
        #expect(throws: AppleError(.invalidParameter, "")) { try builder(lifetime: 0) }
        let signing = AppleSigningKey(key)
        for (team, kid, client) in [
            ("TEAM12345", "KEY1234567", "a"), ("team123456", "KEY1234567", "a"), ("TEAM123456", "KEY-123456", "a"),
            ("TEAM123456", "KEY1234567", ""), ("TEAM123456", "KEY1234567", "has space"),
        ] {
            #expect(throws: AppleError(.invalidParameter, ""), "\(team) \(kid) \(client)") {
                try ClientSecretBuilder(key: signing, teamID: team, keyID: kid, clientID: client)
            }
        }
    }

    @Test func p8KeysAreCheckedWithClearReasons() throws {
        func reason(_ pem: String) -> String {
            do {
                _ = try AppleSigningKey(pem: pem)
                return "accepted"
            } catch let error as AppleError {
                return error.reason
            } catch {
                return "\(error)"
            }
        }
        #expect(reason(key.pemRepresentation) == "accepted")
        #expect(reason(try _RSA.Signing.PrivateKey(keySize: .bits2048).pkcs8PEMRepresentation).contains("RSA"))
        #expect(reason(P384.Signing.PrivateKey().pemRepresentation).contains("P-384"))
        #expect(reason(P521.Signing.PrivateKey().pemRepresentation).contains("P-521"))
        #expect(
            reason(
                """
                -----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIBvTBXBgkqhkiG9w0BBQ0wSjApBgkqhkiG\n-----END ENCRYPTED \
                PRIVATE KEY-----\n
                """
            ).contains("encrypted"))
        #expect(reason("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIA==\n-----END EC PRIVATE KEY-----\n").contains("SEC1"))
        #expect(reason("-----BEGIN RSA PRIVATE KEY-----\nMII=\n-----END RSA PRIVATE KEY-----\n").contains("RSA"))
        #expect(reason("not a key at all").contains("not PEM"))
        #expect(reason(key.pemRepresentation + key.pemRepresentation).contains("2 PEM blocks"))
        #expect(reason("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n").contains("P-256"))
        // PEM is ASCII: a Kelvin sign (U+212A) is a K to String comparison, not to a PEM reader.
        let kelvin = key.pemRepresentation.replacingOccurrences(of: "PRIVATE KEY", with: "PRIVATE \u{212A}EY")
        #expect(kelvin.utf8.count == key.pemRepresentation.utf8.count + 4)
        #expect(reason(kelvin).contains("ASCII"), "\(reason(kelvin))")
    }

    @Test func providerReusesASecretUntilNearExpiry() throws {
        let clock = ManualClock()
        let provider = ClientSecretProvider(builder: try builder(lifetime: 3600), clock: clock.clock)
        let first = try provider.secret()
        clock.advance(by: 3000)
        #expect(try provider.secret().token == first.token)
        clock.advance(by: 241)  // within the 360 s margin now
        let second = try provider.secret()
        #expect(second.token != first.token)
        #expect(
            second.issuedAt
                == clock.now.addingTimeInterval(-clock.now.timeIntervalSince1970.truncatingRemainder(dividingBy: 1)))
    }

    /// The cross-check needs python3 with the `cryptography` package (this machine kind has
    /// both); without them it fails and says so, rather than passing by not running.
    @Test(.tags(.multiProcess), .ownThreads) func verifiesUnderAnIndependentES256Implementation() throws {
        let probe = try CLIRunner.run(
            executable: URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-c", "import cryptography"], stdin: nil)
        try #require(
            probe.status == 0,
            "this cross-check needs python3 with the cryptography package (pip install cryptography): \(probe.stderr)")
        let directory = try TemporaryDirectory()
        let script = try directory.write(
            "verify.py",
            """
            import base64, sys
            from cryptography.hazmat.primitives import hashes
            from cryptography.hazmat.primitives.asymmetric import ec, utils
            def b64(s): return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
            header, payload, signature = sys.argv[1].split(".")
            raw = b64(signature)
            assert len(raw) == 64, "signature is not raw R||S"
            der = utils.encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
            public = ec.EllipticCurvePublicNumbers(int(sys.argv[2], 16), int(sys.argv[3], 16), \
            ec.SECP256R1()).public_key()
            public.verify(der, (header + "." + payload).encode(), ec.ECDSA(hashes.SHA256()))
            print("verified")
            """)
        let raw = Array(key.publicKey.rawRepresentation)
        for _ in 0..<5 {
            let token = try builder().make(issuedAt: Date()).token
            let result = try CLIRunner.run(
                executable: URL(fileURLWithPath: "/usr/bin/env"),
                ["python3", script, token, Hex.encode(raw[0..<32]), Hex.encode(raw[32...])], stdin: nil)
            #expect(result.status == 0 && result.stdout == "verified\n", "\(result.stderr)")
        }
    }
}
