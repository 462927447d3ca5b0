import Foundation
import ShadowCore
import ShadowJOSE
import ShadowTestSupport
import Testing

/// `shadow-keys verify-token` and `decode`, run as a script runs them.
@Suite(.tags(.multiProcess), .ownThreads) struct VerifyTokenCLITests {
    let directory: TemporaryDirectory
    let jwks: String
    let rsa: JWSSigner
    let ec: JWSSigner
    let now: Int64 = 1_700_000_000

    init() throws {
        directory = try TemporaryDirectory()
        rsa = try JWSSigner.rs256(TestKeys.rsa, keyID: "rsa-1")
        ec = JWSSigner.es256(TestKeys.p256, keyID: "ec-1")
        jwks = try directory.write("jwks.json", TestKeys.jwksJSON([rsa.publicJWK(), ec.publicJWK()]))
    }

    private func token(_ signer: JWSSigner? = nil, extra: JSONObject = [:]) throws -> String {
        try (signer ?? rsa).sign(claims: TokenFactory.claims(now: now, extra: extra))
    }

    private func verify(_ token: String, _ arguments: [String] = [], jwks: String? = nil) throws -> CLIResult {
        try CLIRunner.run(
            ["verify-token", "-", "--jwks", jwks ?? self.jwks, "--now", String(now)] + arguments, stdin: token + "\n")
    }

    @Test func printsVerifiedClaims() throws {
        let result = try verify(try token(), ["--iss", "https://issuer.example", "--aud", "app.example"])
        #expect(result.status == 0, "\(result.stderr)")
        let claims = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(claims["sub"] as? String == "user-1")
        #expect(result.stderr.isEmpty)
    }

    @Test func jsonSuccessShape() throws {
        let result = try verify(try token(ec), ["--aud", "app.example", "--json"])
        #expect(result.status == 0)
        let json = try result.json()
        #expect(json["valid"] as? Bool == true)
        #expect((json["header"] as? [String: Any])?["alg"] as? String == "ES256")
        #expect((json["claims"] as? [String: Any])?["iss"] as? String == "https://issuer.example")
        #expect((json["key"] as? [String: Any])?["kid"] as? String == "ec-1")
    }

    @Test func tokenFromArgumentFileAndEnvironment() throws {
        let token = try token()
        let file = try directory.write("token.txt", token + "\n")
        for arguments in [[token], ["--token-file", file], ["--token-env", "SK_TEST_TOKEN"]] {
            let result = try CLIRunner.run(
                ["verify-token"] + arguments + ["--jwks", jwks, "--now", String(now), "--aud", "app.example"],
                environment: ["SK_TEST_TOKEN": token])
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
        }
    }

    @Test func algorithmNamesAreCaseInsensitiveOnTheCommandLine() throws {
        for name in ["rs256", "Rs256", "RS256"] {
            let result = try verify(try token(), ["--alg", name])
            #expect(result.status == 0, "\(name): \(result.stderr)")
        }
    }

    @Test func exitCodesFollowTheContract() throws {
        let good = try token()
        var parts = TokenFactory.segments(good)
        var signature = Array(parts[2].utf8)
        signature[10] = signature[10] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        parts[2] = String(decoding: signature, as: UTF8.self)
        let cases: [(String, [String], Int32, String)] = [
            ("not-a-token", [], 10, "malformed_token"),
            ("a.b", [], 10, "malformed_token"),
            (parts.joined(separator: "."), [], 11, "invalid_signature"),
            (
                try JWSSigner.rs256(TestKeys.rsa, keyID: "nope").sign(claims: TokenFactory.claims(now: now)), [], 11,
                "unknown_key"
            ),
            (good, ["--alg", "ES256"], 11, "disallowed_algorithm"),
            (good, ["--alg", "es256"], 11, "disallowed_algorithm"),
            (good, ["--iss", "https://other.example"], 12, "claims_rejected"),
            (good, ["--aud", "other"], 12, "claims_rejected"),
            (try token(extra: ["exp": .int(now - 120)]), [], 12, "claims_rejected"),
        ]
        for (token, arguments, status, code) in cases {
            let result = try verify(token, arguments + ["--json"])
            #expect(result.status == status, "\(arguments) \(result.stderr)")
            let json = try result.json()
            #expect(json["valid"] as? Bool == false)
            #expect((json["error"] as? [String: Any])?["code"] as? String == code, "\(result.stdout)")
            #expect(!result.stdout.contains("user-1"), "claims must not be printed on failure")
            #expect(!result.stderr.isEmpty)
        }
    }

    @Test func claimFailuresNameTheClaimExpectedAndActual() throws {
        let result = try verify(
            try token(extra: ["exp": .int(now - 312)]), ["--iss", "https://other.example", "--json"])
        #expect(result.status == 12)
        let error = try #require(try result.json()["error"] as? [String: Any])
        #expect(error["claim"] as? String == "iss")
        #expect(error["expected"] as? String == "\"https://other.example\"")
        #expect(error["actual"] as? String == "\"https://issuer.example\"")
        let failures = try #require(error["failures"] as? [[String: Any]])
        #expect(failures.map { $0["claim"] as? String } == ["iss", "exp"])
        #expect((failures[1]["message"] as? String)?.contains("312 s before now 1700000000, leeway 60 s") == true)
        let human = try verify(try token(extra: ["exp": .int(now - 312)]), ["--iss", "https://other.example"])
        #expect(human.stdout.isEmpty)
        #expect(human.stderr.contains("claims rejected"))
        #expect(human.stderr.contains("expected \"https://other.example\""))
    }

    @Test func keysUnavailable() throws {
        let token = try token()
        let empty = try directory.write("empty.json", #"{"keys":[{"kty":"oct","k":"AA"}]}"#)
        let broken = try directory.write("broken.json", "{\"keys\":")
        let duplicate = try directory.write(
            "dup.json",
            TestKeys.jwksJSON([try TestKeys.jwk(TestKeys.rsa, kid: "x"), try TestKeys.jwk(TestKeys.p256, kid: "x")]))
        for (path, text) in [(empty, "no usable keys"), (broken, "not valid JSON"), (duplicate, "more than one key")] {
            let result = try verify(token, [], jwks: path)
            #expect(result.status == 13, "\(path): \(result.stderr)")
            #expect(result.stderr.contains(text), "\(result.stderr)")
        }
        // A key set that cannot be opened is an input that cannot be opened (66), as everywhere.
        let missing = try verify(token, [], jwks: directory.path + "/missing.json")
        #expect(missing.status == 66 && missing.stderr.contains("cannot read"), "\(missing.stderr)")
    }

    @Test func usageErrors() throws {
        let token = try token()
        for arguments in [
            ["verify-token", token],
            ["verify-token", "-", "--jwks", "-"],
            ["verify-token", token, "--jwks", jwks, "--alg", "HS256"],
            ["verify-token", token, "--jwks", jwks, "--alg", "none"],
            ["verify-token", token, "--jwks", jwks, "--alg", "hs256"],
            ["verify-token", token, "--jwks", jwks, "--alg", "NONE"],
            ["verify-token", token, "--jwks", jwks, "--now", "tomorrow"],
            ["verify-token", token, "--token-env", "X", "--jwks", jwks],
            ["verify-token", token, "--jwks", jwks, "--leeway", "-1"],
            ["verify-token", token, "--jwks", jwks, "--nonce", "a", "--nonce-sha256", "b"],
            ["no-such-command"],
        ] {
            let result = try CLIRunner.run(arguments, stdin: "")
            #expect(result.status == 64, "\(arguments): \(result.stderr)")
        }
    }

    /// A nonce on argv draws its warning once, with --apple too (which builds Apple's validator
    /// only, not the generic verifier beside it).
    @Test func aNonceOnTheCommandLineIsWarnedAboutOnce() throws {
        let apple = try JWSSigner.rs256(TestKeys.rsa, keyID: "apple-1")
        let appleKeys = try directory.write("apple.json", TestKeys.jwksJSON([try apple.publicJWK()]))
        let claims = TokenFactory.claims(
            now: now, extra: ["iss": "https://appleid.apple.com", "aud": "app.example", "nonce": "n-1"])
        let token = try apple.sign(claims: claims)
        for arguments in [["--apple", "--aud", "app.example"], ["--aud", "app.example"]] {
            let result = try verify(token, arguments + ["--nonce", "n-1"], jwks: appleKeys)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            let warnings = result.stderr.components(separatedBy: "visible to other users").count - 1
            #expect(warnings == 1, "\(arguments): \(result.stderr)")
        }
    }

    @Test func optionsReachThePolicy() throws {
        let nonce = "raw-nonce"
        let hashed = try token(extra: ["nonce": .string(Hex.encode(Array(SHA256Hex.digest(nonce))))])
        #expect(try verify(hashed, ["--nonce-sha256", nonce]).status == 0)
        #expect(try verify(hashed, ["--nonce", nonce]).status == 12)
        #expect(try verify(try token(), ["--require", "email"]).status == 12)
        #expect(try verify(try token(), ["--require", "sub"]).status == 0)
        #expect(try verify(try token(), ["--max-age", "10"]).status == 0)
        let old = try rsa.sign(claims: TokenFactory.claims(now: now - 100))
        #expect(try verify(old, ["--max-age", "10", "--leeway", "0"]).status == 12)
        #expect(try verify(old, ["--max-age", "10", "--leeway", "90"]).status == 0)
        let multi = try token(extra: ["aud": ["app.example", "evil"]])
        #expect(try verify(multi, ["--aud", "app.example"]).status == 0)
        #expect(try verify(multi, ["--aud", "app.example", "--all-aud-accepted"]).status == 12)
        #expect(
            try verify(try rsa.sign(claims: TokenFactory.claims(now: now), header: ["typ": "JWT"]), ["--typ", "JWT"])
                .status == 0)
        #expect(try verify(try token(), ["--typ", "JWT"]).status == 12)
        let noExp = try rsa.sign(claims: ["iss": "i"])
        #expect(try verify(noExp).status == 12)
        #expect(try verify(noExp, ["--allow-missing-exp"]).status == 0)
    }

    @Test func nowAcceptsRFC3339() throws {
        let result = try CLIRunner.run(
            ["verify-token", "-", "--jwks", jwks, "--now", "2023-11-14T22:13:20Z"], stdin: try token())
        #expect(result.status == 0, "\(result.stderr)")
        let late = try CLIRunner.run(
            ["verify-token", "-", "--jwks", jwks, "--now", "2023-11-15T22:13:20Z"], stdin: try token())
        #expect(late.status == 12)
    }

    @Test func oversizedStdinIsMalformed() throws {
        let result = try verify(String(repeating: "a", count: 20_000))
        #expect(result.status == 10)
        #expect(result.stderr.contains("limit"))
    }

    @Test func decodePrintsWithAWarning() throws {
        let result = try CLIRunner.run(["decode", "-"], stdin: try token())
        #expect(result.status == 0)
        let json = try result.json()
        #expect((json["header"] as? [String: Any])?["kid"] as? String == "rsa-1")
        #expect((json["payload"] as? [String: Any])?["sub"] as? String == "user-1")
        #expect(result.stderr.contains("NOT verified"))
        let bad = try CLIRunner.run(["decode", "x.y.z"])
        #expect(bad.status == 10)
        #expect(bad.stdout.isEmpty)
    }
}

/// SHA-256 via the test's own dependency, to build hashed nonces.
import Crypto
enum SHA256Hex {
    static func digest(_ text: String) -> [UInt8] { Array(SHA256.hash(data: Array(text.utf8))) }
}
