import Crypto
import CryptoExtras
import Foundation
import ShadowCore
import ShadowJOSE
import ShadowTestSupport
import Testing

/// `client-secret` and `apple …`, run as scripts run them, against the loopback fake of Apple.
@Suite(.tags(.multiProcess), .ownThreads) struct AppleCLITests {
    let directory: TemporaryDirectory
    let key = P256.Signing.PrivateKey()
    let fake: FakeAppleServer
    let p8: String
    let environment: [String: String]

    init() throws {
        directory = try TemporaryDirectory()
        fake = try FakeAppleServer(clientKey: key.publicKey)
        p8 = try directory.write("AuthKey_KEY1234567.p8", key.pemRepresentation, mode: 0o600)
        environment = ["XDG_CACHE_HOME": directory.path + "/cache"]
    }

    private var credentials: [String] {
        ["--p8", p8, "--team-id", fake.teamID, "--key-id", fake.keyID, "--client-id", "com.example.app"]
    }
    private var endpoint: [String] { ["--base-url", fake.baseURL, "--allow-http-loopback"] }

    private func run(
        _ arguments: [String], stdin: String? = nil, extraEnvironment: [String: String] = [:]
    ) throws -> CLIResult {
        try CLIRunner.run(arguments, stdin: stdin, environment: environment.merging(extraEnvironment) { $1 })
    }

    @Test func clientSecret() throws {
        let plain = try run(["client-secret"] + credentials + ["--now", "1700000000"])
        #expect(plain.status == 0, "\(plain.stderr)")
        let jws = try CompactJWS(plain.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(jws.header.keyID == fake.keyID && jws.signature.count == 64)
        let verifier = JWTVerifier(
            algorithms: [.es256], policy: ClaimPolicy(issuer: fake.teamID, audiences: ["https://appleid.apple.com"]),
            clock: .fixed(Date(timeIntervalSince1970: 1_700_000_100)))
        #expect(throws: Never.self) {
            try verifier.verify(jws.token, keys: JWKSet(keys: [JWK(p256: key.publicKey, keyID: fake.keyID)]))
        }
        let json = try run(
            ["client-secret"] + credentials + ["--now", "2023-11-14T22:13:20Z", "--ttl", "3600", "--json"]
        ).json()
        #expect((json["claims"] as? [String: Any])?["exp"] as? Int == 1_700_003_600)
        #expect(json["expires_at"] as? String == "2023-11-14T23:13:20Z")
        #expect(!plain.stdout.contains("PRIVATE") && !plain.stderr.contains("PRIVATE"))
        // A past --now makes an expired secret, which Apple refuses: said on stderr, still printed.
        #expect(plain.stderr.contains("expired") && plain.stderr.contains("Apple refuses it"), "\(plain.stderr)")
        // A --now that makes a secret Apple refuses outright is a usage error: iat ahead of the
        // clock, or exp beyond six months of it. Each case here holds however long the process
        // takes to start (the edges, against a fixed clock, are in ClientSecretCheckTests).
        let now = Int(Date().timeIntervalSince1970)
        for (arguments, reason) in [
            (["--now", String(now + 3600)], "in the future"),
            (["--now", String(now + 86_400 * 30), "--ttl", "3600"], "in the future"),
        ] {
            let refused = try run(["client-secret"] + credentials + arguments)
            #expect(refused.status == 64 && refused.stderr.contains(reason), "\(arguments): \(refused.stderr)")
            #expect(refused.stdout.isEmpty)
        }
        let current = try run(["client-secret"] + credentials + ["--now", String(now), "--ttl", "86400"])
        #expect(current.status == 0 && current.stderr.isEmpty, "\(current.stderr)")
        // Usage errors (64) and key errors (65).
        for bad in [
            ["--team-id", "SHORT"], ["--key-id", "key1234567"], ["--ttl", "15777001"], ["--ttl", "0"],
            ["--client-id", "has space"],
        ] {
            var arguments = credentials
            if let index = arguments.firstIndex(of: bad[0]) { arguments[index + 1] = bad[1] } else { arguments += bad }
            #expect(try run(["client-secret"] + arguments).status == 64, "\(bad)")
        }
        let rsa = try directory.write(
            "rsa.p8", try _RSA.Signing.PrivateKey(keySize: .bits2048).pkcs8PEMRepresentation, mode: 0o600)
        let wrong = try run([
            "client-secret", "--p8", rsa, "--team-id", fake.teamID, "--key-id", fake.keyID, "--client-id", "x",
        ])
        #expect(wrong.status == 65 && wrong.stderr.contains("RSA"))
        #expect(
            try run([
                "client-secret", "--p8", directory.path + "/none.p8", "--team-id", fake.teamID, "--key-id", fake.keyID,
                "--client-id", "x",
            ]).status == 65)
        let loose = try directory.write("loose.p8", key.pemRepresentation, mode: 0o644)
        let warned = try run([
            "client-secret", "--p8", loose, "--team-id", fake.teamID, "--key-id", fake.keyID, "--client-id", "x",
        ])
        #expect(warned.status == 0 && warned.stderr.contains("readable by group or others"))
    }

    @Test func tokenRefreshRevoke() throws {
        let code = fake.issueCode(for: "001234.abc.1234", nonce: "n1")
        let exchanged = try run(
            ["apple", "token", "--code-stdin", "--nonce", "n1", "--json"] + credentials + endpoint, stdin: code + "\n")
        #expect(exchanged.status == 0, "\(exchanged.stderr)")
        let tokens = try exchanged.json()
        let refresh = try #require(tokens["refresh_token"] as? String)
        #expect((tokens["identity"] as? [String: Any])?["sub"] as? String == "001234.abc.1234")
        // The same code again: invalid_grant, exit 40.
        let reused = try run(
            ["apple", "token", "--code-env", "CODE"] + credentials + endpoint, extraEnvironment: ["CODE": code])
        #expect(reused.status == 40 && reused.stderr.contains("invalid_grant"))
        let tokenFile = try directory.write("refresh.txt", refresh + "\n", mode: 0o600)
        let refreshed = try run(["apple", "refresh", "--token-file", tokenFile, "--json"] + credentials + endpoint)
        #expect(refreshed.status == 0, "\(refreshed.stderr)")
        #expect(try refreshed.json()["refresh_token"] is NSNull)
        let revoked = try run(
            ["apple", "revoke", "--token-file", tokenFile, "--kind", "refresh", "--json"] + credentials + endpoint)
        #expect(revoked.status == 0 && revoked.stdout.contains("\"revoked\":true"))
        #expect(fake.isRevoked(refresh))
        #expect(try run(["apple", "refresh", "--token-file", tokenFile] + credentials + endpoint).status == 40)
    }

    @Test func migration() throws {
        let sending = try run(
            ["apple", "migrate", "--sub", "001234.abc.1234", "--target", "RECV123456", "--json"] + credentials
                + endpoint)
        #expect(sending.status == 0, "\(sending.stderr)")
        let transfer = try #require(try sending.json()["transfer_sub"] as? String)
        let receiving = try run(["apple", "migrate", "--transfer-sub", transfer, "--json"] + credentials + endpoint)
        #expect(receiving.status == 0)
        let user = try receiving.json()
        #expect((user["sub"] as? String)?.hasSuffix(".moved") == true && user["is_private_email"] as? Bool == true)
        #expect(try run(["apple", "migrate", "--sub", "x"] + credentials + endpoint).status == 64)
    }

    @Test func exitCodesForAppleFailures() throws {
        fake.inject("/auth/token", [FakeAppleServer.error("invalid_client")])
        #expect(
            try run(["apple", "refresh", "--token-env", "T"] + credentials + endpoint, extraEnvironment: ["T": "r"])
                .status == 41)
        fake.inject("/auth/token", [.json("{}", status: 503), .json("{}", status: 503), .json("{}", status: 503)])
        let unavailable = try run(
            ["apple", "refresh", "--token-env", "T"] + credentials + endpoint, extraEnvironment: ["T": "r"])
        #expect(unavailable.status == 42 && unavailable.stderr.contains("503"))
        // Usage: tokens never on the command line, plain http only with the opt-in.
        #expect(try run(["apple", "refresh"] + credentials + endpoint).status == 64)
        #expect(try run(["apple", "refresh", "--token", "r"] + credentials + endpoint).status == 64)
        #expect(
            try run(
                ["apple", "refresh", "--token-env", "T", "--base-url", fake.baseURL] + credentials,
                extraEnvironment: ["T": "r"]
            ).status == 64)
        #expect(
            try run(
                ["apple", "revoke", "--token-env", "T", "--kind", "id"] + credentials + endpoint,
                extraEnvironment: ["T": "r"]
            ).status == 64)
    }

    @Test func notification() throws {
        let signer = try JWSSigner.rs256(TestKeys.rsa, keyID: "apple-n")
        let jwks = try directory.write("apple-keys.json", TestKeys.jwksJSON([try signer.publicJWK()]))
        func body(_ events: String, aud: String = "com.example.app", exp: Int64 = 1_700_086_400) throws -> String {
            let claims: JSONObject = [
                "iss": "https://appleid.apple.com", "aud": .string(aud), "iat": 1_700_000_000, "exp": .int(exp),
                "jti": "n-1", "events": .string(events),
            ]
            return JSONValue.object(["payload": .string(try signer.sign(claims: claims))]).serialized()
        }
        let base = [
            "apple", "notification", "--aud", "com.example.app", "--jwks", jwks, "--now", "1700000100", "--json",
        ]
        let ok = try run(
            base,
            stdin: try body(
                #"{"type":"email-disabled","sub":"001.abc.1","event_time":1699999999000,"#
                    + #""email":"x@privaterelay.appleid.com","is_private_email":"true"}"#
            ))
        #expect(ok.status == 0, "\(ok.stderr)")
        let event = try ok.json()
        #expect(
            event["type"] as? String == "email-disabled" && event["jti"] as? String == "n-1"
                && event["isPrivateEmail"] as? Bool == true)
        #expect(event["eventTime"] as? String == "2023-11-14T22:13:19Z")
        let unknown = try run(base, stdin: try body(#"{"type":"brand-new","sub":"s","event_time":1}"#))
        #expect(unknown.status == 0 && unknown.stderr.contains("unknown notification type"))
        #expect(try run(base, stdin: "not json").status == 10)
        #expect(try run(base, stdin: #"{"payload":"a.b"}"#).status == 10)
        #expect(
            try run(base, stdin: try body(#"{"type":"x","sub":"s","event_time":1}"#, aud: "com.other")).status == 12)
        #expect(try run(base, stdin: try body("not json")).status == 12)
        let forged = try JWSSigner.rs256(TestKeys.rsa2, keyID: "apple-n").sign(claims: [
            "iss": "https://appleid.apple.com", "aud": "com.example.app", "exp": 1_700_086_400, "iat": 1_700_000_000,
            "jti": "x", "events": "{}",
        ])
        #expect(try run(base, stdin: JSONValue.object(["payload": .string(forged)]).serialized()).status == 11)
        #expect(try run(["apple", "notification", "--jwks", jwks], stdin: "{}").status == 64)
    }
}
