import Crypto
import CryptoExtras
import Foundation
import ShadowCore
import ShadowJOSE
import ShadowTestSupport
import Testing

/// `sign` and `jwks from-key`: minted tokens verify with the key set made from the same key file.
@Suite(.tags(.multiProcess), .ownThreads) struct SignCLITests {
    let folder: TemporaryDirectory

    init() throws { folder = try TemporaryDirectory() }

    private func write(_ name: String, _ text: String, mode: Int = 0o600) throws -> String {
        let path = folder.path + "/" + name
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        return path
    }

    private func roundTrip(key: String, alg: String?) throws {
        let keys = try CLIRunner.run(["jwks", "from-key", key])
        #expect(keys.status == 0, "\(keys.stderr)")
        let jwks = try write("keys-\(UUID().uuidString).json", keys.stdout)
        let claims = try write("claims.json", #"{"iss":"https://issuer.example","aud":"app.example","sub":"user-1"}"#)
        let signed = try CLIRunner.run(
            ["sign", "--key", key, "--claims", claims, "--exp", "+10m"] + (alg.map { ["--alg", $0] } ?? []))
        #expect(signed.status == 0, "\(signed.stderr)")
        let verified = try CLIRunner.run(
            ["verify-token", "--jwks", jwks, "--iss", "https://issuer.example", "--aud", "app.example", "--json"],
            stdin: signed.stdout)
        #expect(verified.status == 0, "\(verified.stdout) \(verified.stderr)")
        let claimsOut = try #require(try verified.json()["claims"] as? [String: Any])
        #expect(claimsOut["iat"] is Int && claimsOut["exp"] is Int)
    }

    @Test func everyKeyFormatSignsWhatItsKeySetVerifies() throws {
        let p256 = P256.Signing.PrivateKey()
        try roundTrip(key: try write("ec-pkcs8.pem", p256.pemRepresentation), alg: nil)
        try roundTrip(key: try write("ec-p8.p8", P256.Signing.PrivateKey().pemRepresentation), alg: "es256")
        try roundTrip(key: try write("rsa-pkcs1.pem", TestKeys.rsa.pemRepresentation), alg: "RS256")
        try roundTrip(key: try write("rsa-pkcs8.pem", TestKeys.rsa.pkcs8PEMRepresentation), alg: nil)
        let point = p256.publicKey.rawRepresentation
        let (d, x, y) = (
            Base64URL.encode(p256.rawRepresentation), Base64URL.encode(point.prefix(32)),
            Base64URL.encode(point.suffix(32))
        )
        let jwk = #"{"kty":"EC","crv":"P-256","d":"\#(d)","x":"\#(x)","y":"\#(y)"}"#
        try roundTrip(key: try write("ec.jwk", jwk), alg: nil)
    }

    @Test func theDefaultKidIsTheThumbprintAndKidOverridesIt() throws {
        let key = try write("ec.pem", TestKeys.p256.pemRepresentation)
        let thumbprint = try JWK(p256: TestKeys.p256.publicKey).thumbprint
        let keys = try CLIRunner.run(["jwks", "from-key", key])
        #expect(keys.stdout.contains("\"kid\":\"\(thumbprint)\""), "\(keys.stdout)")
        let signed = try CLIRunner.run(["sign", "--key", key, "--json"])
        let header = try #require(try signed.json()["header"] as? [String: Any])
        #expect(header["kid"] as? String == thumbprint)
        let named = try CLIRunner.run(["sign", "--key", key, "--kid", "k-1", "--json"])
        #expect((try named.json()["header"] as? [String: Any])?["kid"] as? String == "k-1")
        // A public key gives the same set.
        let publicKey = try write("ec-public.pem", TestKeys.p256.publicKey.pemRepresentation, mode: 0o644)
        let fromPublic = try CLIRunner.run(["jwks", "from-key", publicKey])
        #expect(fromPublic.status == 0 && fromPublic.stdout == keys.stdout, "\(fromPublic.stderr)")
        #expect(fromPublic.stderr.isEmpty, "a public key drew a warning: \(fromPublic.stderr)")
    }

    @Test func unusableKeysAndClaimsAreRefusedWithoutOutput() throws {
        let ec = try write("ec.pem", TestKeys.p256.pemRepresentation)
        let point = TestKeys.p256.publicKey.rawRepresentation
        let (d, x, y) = (
            Base64URL.encode(TestKeys.p256b.rawRepresentation), Base64URL.encode(point.prefix(32)),
            Base64URL.encode(point.suffix(32))
        )
        let mismatched = #"{"kty":"EC","crv":"P-256","d":"\#(d)","x":"\#(x)","y":"\#(y)"}"#
        let cases: [([String], Int32, String)] = [
            (["sign", "--key", ec, "--alg", "RS256"], 65, "not RS256"),
            (["sign", "--key", ec, "--alg", "HS256"], 64, "HS256"),
            (
                [
                    "sign", "--key",
                    try write(
                        "enc.pem",
                        """
                        -----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n
                        """),
                ], 65, "encrypted"
            ),
            (["sign", "--key", try write("junk.pem", "hello")], 65, "not a PEM key"),
            (["sign", "--key", try write("mismatch.jwk", mismatched)], 65, "not the public key of its d"),
            (["sign", "--key", folder.path + "/absent.pem"], 66, "cannot read"),
            (["sign", "--key", ec, "--claims", try write("c1.json", "[1]")], 65, "not a JSON object"),
            (["sign", "--key", ec, "--claims", try write("c2.json", #"{"exp":"soon"}"#)], 65, "exp"),
            (["sign", "--key", ec, "--claims", try write("c3.json", #"{"exp":1.5}"#)], 65, "exp"),
            (["sign", "--key", ec, "--claims", try write("c4.json", #"{"aud":[1]}"#)], 65, "aud"),
            (["sign", "--key", ec, "--claims", try write("c5.json", #"{"a":1,"a":2}"#)], 65, "not valid JSON"),
            // Claims verify-token could never read back: nested deeper than 16, or a payload over 64 KiB.
            (
                ["sign", "--key", ec, "--claims", try write("c6.json", Self.nested(17))], 65,
                "a verifier would refuse this token: payload is not valid JSON: nesting deeper than 16"
            ),
            (
                [
                    "sign", "--key", ec, "--claims",
                    try write("c7.json", #"{"x":""# + String(repeating: "a", count: 70_000) + #""}"#),
                ],
                65, "a verifier would refuse this token: payload is not valid JSON"
            ),
            (["sign", "--key", ec, "--exp", "+99999999999d"], 64, "--exp"),
            (["sign", "--key", ec, "--exp", "tomorrow"], 64, "--exp"),
            // N is ASCII digits: Int("+5") would take a second sign.
            (["sign", "--key", ec, "--exp", "++5m"], 64, "--exp"), (["sign", "--key", ec, "--exp", "+m"], 64, "--exp"),
            (["jwks", "from-key", try write("junk2.pem", "hello")], 65, "not a PEM key"),
            // PEM is ASCII: a Kelvin sign (U+212A) equals a K as a String, so the label matched.
            (
                [
                    "sign", "--key",
                    try write(
                        "kelvin.pem",
                        TestKeys.p256.pemRepresentation.replacingOccurrences(of: "KEY", with: "\u{212A}EY"),
                        mode: 0o600),
                ], 65, "ASCII"
            ),
        ]
        for (arguments, status, message) in cases {
            let result = try CLIRunner.run(arguments)
            #expect(result.status == status, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
            #expect(result.stdout.isEmpty, "\(arguments) printed \(result.stdout)")
        }
    }

    /// A JSON object nested `depth` deep.
    static func nested(_ depth: Int) -> String {
        String(repeating: #"{"a":"#, count: depth - 1) + "{}" + String(repeating: "}", count: depth - 1)
    }

    /// Claims at the readers' limits sign, and what sign writes verify-token reads.
    @Test func claimsAtTheReadersLimitsSignAndVerify() throws {
        let key = try write("limits.pem", TestKeys.p256.pemRepresentation)
        let jwks = try write("limits.json", try CLIRunner.run(["jwks", "from-key", key]).stdout)
        let signed = try CLIRunner.run(
            ["sign", "--key", key, "--exp", "+10m", "--claims", try write("deep.json", Self.nested(16))])
        #expect(signed.status == 0, "\(signed.stderr)")
        let verified = try CLIRunner.run(["verify-token", "-", "--jwks", jwks, "--json", "-q"], stdin: signed.stdout)
        #expect(verified.status == 0, "\(verified.stdout)")
    }

    @Test func aLooseKeyFileDrawsAWarning() throws {
        let key = try write("loose.pem", TestKeys.p256.pemRepresentation, mode: 0o644)
        let result = try CLIRunner.run(["sign", "--key", key])
        #expect(result.status == 0)
        #expect(result.stderr.contains("readable by group or others"), "\(result.stderr)")
    }
}
