import Foundation
import ShadowCore
import ShadowJOSE
import ShadowTestSupport
import Testing

/// `verify-token --jwks URL`, `--apple` and `jwks …`, run as scripts run them, against a loopback server.
@Suite(.tags(.multiProcess), .ownThreads) struct JWKSCLITests {
    let cache: TemporaryDirectory
    let signer: JWSSigner
    let now: Int64 = 1_700_000_000
    let environment: [String: String]

    init() throws {
        cache = try TemporaryDirectory()
        signer = try JWSSigner.rs256(TestKeys.rsa, keyID: "W6WcOKB")
        environment = ["XDG_CACHE_HOME": cache.path]
    }

    private func keysJSON() throws -> String { TestKeys.jwksJSON([try signer.publicJWK()]) }

    private func run(_ arguments: [String], stdin: String? = nil) throws -> CLIResult {
        try CLIRunner.run(arguments, stdin: stdin, environment: environment)
    }

    private func verify(_ server: LoopbackHTTPServer, _ token: String, _ extra: [String] = []) throws -> CLIResult {
        try run(
            [
                "verify-token", "-", "--jwks", server.url("/keys"), "--allow-http-loopback", "--now", String(now),
                "--aud", "app.example",
            ] + extra, stdin: token)
    }

    @Test func fetchesOnceThenServesFromTheDiskCache() throws {
        let body = try keysJSON()
        let server = try LoopbackHTTPServer { _ in .json(body, headers: [("Cache-Control", "max-age=3600")]) }
        let token = try signer.sign(claims: TokenFactory.claims(now: now))
        for _ in 0..<5 {
            let result = try verify(server, token)
            #expect(result.status == 0, "\(result.stderr)")
        }
        #expect(server.requestCount == 1)
        let files = try FileManager.default.contentsOfDirectory(atPath: cache.path + "/shadow-keys/jwks").filter {
            $0.hasSuffix(".json")
        }
        #expect(files.count == 1)
        #expect(try Files.ownerAndMode(cache.path + "/shadow-keys/jwks/" + files[0])?.mode == 0o600)
        // With the server gone, the fresh cache still answers, and --offline never tries.
        server.stop()
        #expect(try verify(server, token).status == 0)
        #expect(try verify(server, token, ["--offline"]).status == 0)
    }

    @Test func randomKidsWithinACooldownCostAtMostOneFetch() throws {
        let body = try keysJSON()
        let server = try LoopbackHTTPServer { _ in .json(body) }
        #expect(try verify(server, try signer.sign(claims: TokenFactory.claims(now: now))).status == 0)
        for index in 0..<20 {
            let forged = try JWSSigner.rs256(TestKeys.rsa, keyID: "random-\(index)").sign(
                claims: TokenFactory.claims(now: now))
            let result = try verify(server, forged, ["--json"])
            #expect(result.status == 11, "\(result.stderr)")
            #expect((try result.json()["error"] as? [String: Any])?["code"] as? String == "unknown_key")
        }
        #expect(server.requestCount <= 2)
    }

    @Test func keysUnavailableAndUsageErrors() throws {
        let server = try LoopbackHTTPServer { _ in .json("{}", status: 503) }
        let token = try signer.sign(claims: TokenFactory.claims(now: now))
        let failed = try verify(server, token)
        #expect(failed.status == 13, "\(failed.stderr)")
        #expect(failed.stderr.contains("503"))
        let offline = try run(
            ["verify-token", "-", "--jwks", "https://keys.example/none", "--offline", "--aud", "x"], stdin: token)
        #expect(offline.status == 13)
        // Plain http needs the opt-in, and only to loopback.
        #expect(try run(["verify-token", "-", "--jwks", server.url("/keys"), "--aud", "x"], stdin: token).status == 64)
        #expect(
            try run(
                ["verify-token", "-", "--jwks", "http://example.com/keys", "--allow-http-loopback", "--aud", "x"],
                stdin: token
            ).status == 64)
        #expect(
            try run(["verify-token", "-", "--jwks", "ftp://example.com/keys", "--aud", "x"], stdin: token).status == 64)
    }

    @Test func jwksFetchShowClear() throws {
        let body = TestKeys.jwksJSON([try signer.publicJWK()]).replacingOccurrences(
            of: "{\"keys\":[", with: "{\"keys\":[{\"kty\":\"oct\",\"kid\":\"hmac\",\"k\":\"c2VjcmV0\"},")
        let server = try LoopbackHTTPServer { _ in
            .json(body, headers: [("Cache-Control", "max-age=900"), ("ETag", "\"e1\"")])
        }
        let url = server.url("/keys")
        #expect(try run(["jwks", "show", url]).status == 13)
        let fetched = try run(["jwks", "fetch", url, "--allow-http-loopback"])
        #expect(fetched.status == 0, "\(fetched.stderr)")
        #expect(fetched.stdout.contains("W6WcOKB"))
        let shown = try run(["jwks", "show", url, "--json"])
        #expect(shown.status == 0)
        let json = try shown.json()
        let keys = try #require(json["keys"] as? [[String: Any]])
        #expect(keys.first?["kid"] as? String == "W6WcOKB")
        #expect(keys.first?["thumbprint"] as? String == (try signer.publicJWK().thumbprint))
        #expect(keys.first?["bits"] as? Int == 2048)
        #expect((json["ttlSeconds"] as? Int ?? 0) > 800)
        #expect(json["etag"] as? String == "\"e1\"")
        #expect((json["skipped"] as? [[String: Any]])?.first?["kid"] as? String == "hmac")
        #expect(server.requestCount == 1)
        let file = try cache.write("set.json", body)
        #expect(try run(["jwks", "show", file]).stdout.contains("thumbprint"))
        #expect(try run(["jwks", "clear", url]).status == 0)
        #expect(try run(["jwks", "show", url]).status == 13)
        _ = try run(["jwks", "fetch", url, "--allow-http-loopback"])
        let cleared = try run(["jwks", "clear"])
        #expect(cleared.stdout.contains("cleared 1"))
        #expect(try run(["jwks", "fetch", "http://example.com/keys"]).status == 64)
    }

    @Test(arguments: [true, false])
    func appleIdentityTokens(stringForm: Bool) throws {
        let body = try keysJSON()
        let server = try LoopbackHTTPServer { _ in .json(body) }
        func flag(_ value: Bool) -> JSONValue { stringForm ? .string(value ? "true" : "false") : .bool(value) }
        let nonce = "raw-nonce"
        let hashed = Hex.encode(Array(SHA256Hex.digest(nonce)))
        let claims: JSONObject = [
            "iss": "https://appleid.apple.com", "aud": "com.example.app", "exp": .int(now + 86400), "iat": .int(now),
            "sub": "001234.abcdef.1234", "email": "x@privaterelay.appleid.com", "email_verified": flag(true),
            "is_private_email": flag(true),
            "nonce_supported": flag(true), "nonce": .string(hashed), "real_user_status": 7,
            "transfer_sub": "000999.old.0001",
        ]
        let token = try signer.sign(claims: claims)
        let base = [
            "verify-token", "-", "--apple", "--jwks", server.url("/auth/keys"), "--allow-http-loopback", "--now",
            String(now + 5),
        ]
        let result = try run(base + ["--aud", "com.example.app", "--nonce", nonce, "--json"], stdin: token)
        #expect(result.status == 0, "\(result.stderr)")
        let apple = try #require(try result.json()["apple"] as? [String: Any])
        #expect(apple["emailVerified"] as? Bool == true)
        #expect(apple["isPrivateEmail"] as? Bool == true)
        #expect(apple["realUserStatus"] as? String == "unknown")
        #expect(apple["transferSub"] as? String == "000999.old.0001")
        #expect(apple["lifetimeSeconds"] as? Int == 86400)
        #expect(try run(base + ["--aud", "com.other.app"], stdin: token).status == 12)
        #expect(try run(base + ["--aud", "com.example.app", "--nonce", "wrong"], stdin: token).status == 12)
        #expect(try run(base, stdin: token).status == 64)
        #expect(try run(base + ["--aud", "com.example.app", "--alg", "ES256"], stdin: token).status == 64)
        #expect(
            try run(base + ["--aud", "com.example.app", "--iss", "https://evil.example"], stdin: token).status == 64)
    }
}
