import Crypto
import CryptoExtras
import Foundation
import ShadowCore
import ShadowJOSE
import ShadowTestSupport
import Testing

/// The attack suite's findings, one test each, run against the built binary as an attacker
/// would run them. Every one of these failed (exit 0 where a refusal was due, a crash, a file
/// written or followed) before its fix.
@Suite(.tags(.multiProcess), .ownThreads) struct HostileInputCLITests {
    static let client = "com.example.app"
    static let subject = "001234.8a2b3c4d5e6f70819a2b3c4d5e6f7081.1234"
    let directory: TemporaryDirectory
    let keyFile: String
    let vault: String
    let jwks: String
    let signer: JWSSigner

    init() throws {
        directory = try TemporaryDirectory()
        keyFile = try directory.write(
            "vault.key", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n", mode: 0o600)
        vault = directory.path + "/vault.skv"
        signer = try JWSSigner.rs256(TestKeys.rsa, keyID: "apple-1")
        jwks = try directory.write("apple-keys.json", TestKeys.jwksJSON([try signer.publicJWK()]))
    }

    private var environment: [String: String] { ["XDG_CACHE_HOME": directory.path + "/cache"] }

    private func run(
        _ arguments: [String], stdin: String? = nil, environment extra: [String: String] = [:],
        removing: Set<String> = []
    ) throws -> CLIResult {
        try CLIRunner.run(
            arguments, stdin: stdin, environment: environment.merging(extra) { $1 }, removing: removing,
            currentDirectory: directory.url)
    }

    private var vaultOptions: [String] { ["--vault", vault, "--key-file", keyFile] }

    private func initVault() throws {
        let created = try run(["vault", "init"] + vaultOptions)
        guard created.status == 0 else { throw CLIRunnerError("vault init failed: \(created.stderr)") }
    }

    private func appleToken(_ claims: JSONObject) throws -> String {
        var full: JSONObject = [
            "iss": "https://appleid.apple.com", "aud": .string(Self.client), "sub": .string(Self.subject),
            "iat": 1_700_000_000, "exp": 1_700_086_400,
        ]
        for member in claims { full.set(member.name, member.value) }
        return try signer.sign(claims: full)
    }

    private func notificationBody(
        aud: JSONValue = .string(client), eventTime: JSONValue = 1_700_000_500_000, jti: String = "jti-1"
    ) throws -> String {
        let events: JSONObject = ["type": "consent-revoked", "sub": .string(Self.subject), "event_time": eventTime]
        let claims: JSONObject = [
            "iss": "https://appleid.apple.com", "aud": aud, "iat": 1_700_000_500, "exp": 1_700_086_400,
            "jti": .string(jti),
            "events": .string(JSONValue.object(events).serialized()),
        ]
        return JSONValue.object(["payload": .string(try signer.sign(claims: claims))]).serialized()
    }

    private let now = ["--now", "1700001000"]

    // MARK: 1. Revocation bypass with an array aud

    @Test func anArrayAudienceCannotDodgeARevocation() throws {
        try initVault()
        let revoked = try run(
            ["state", "apply-notification", "--client-id", Self.client, "--jwks", jwks] + now + vaultOptions,
            stdin: try notificationBody())
        #expect(revoked.status == 0, "\(revoked.stderr)")
        #expect(
            try run(["state", "check", "--client-id", Self.client, "--sub", Self.subject] + vaultOptions).status == 14)

        // Issued before the revocation, to the app and to an attacker's client at once.
        let token = try appleToken(["aud": ["com.attacker", .string(Self.client)]])
        let verified = try run(
            ["verify-token", "--apple", "--state", "--aud", Self.client, "--jwks", jwks, "--token-env", "T", "--json"]
                + now + vaultOptions, environment: ["T": token])
        #expect(verified.status == 12, "\(verified.stdout) \(verified.stderr)")
        let error = try #require(try verified.json()["error"] as? [String: Any])
        #expect(error["claim"] as? String == "aud")

        // A single-string aud issued before the revocation is refused as superseded (14).
        let plain = try run(
            ["verify-token", "--apple", "--state", "--aud", Self.client, "--jwks", jwks, "--token-env", "T"] + now
                + vaultOptions,
            environment: ["T": try appleToken([:])])
        #expect(plain.status == 14, "\(plain.stderr)")
        // --client-id may only name an accepted audience.
        let foreign = try run(
            [
                "verify-token", "--apple", "--state", "--aud", Self.client, "--client-id", "com.attacker", "--jwks",
                jwks, "--token-env", "T",
            ] + now + vaultOptions,
            environment: ["T": try appleToken([:])])
        #expect(foreign.status == 64)
    }

    @Test func aNotificationWithAnArrayAudienceIsRefused() throws {
        try initVault()
        let body = try notificationBody(aud: ["com.attacker", .string(Self.client)])
        let applied = try run(
            ["state", "apply-notification", "--aud", Self.client, "--aud", "com.attacker", "--jwks", jwks] + now
                + vaultOptions, stdin: body)
        #expect(applied.status == 12, "\(applied.stderr)")
        let shown = try run(
            ["state", "show", "--json", "--client-id", "com.attacker", "--sub", Self.subject] + vaultOptions)
        #expect(try shown.json()["state"] as? String == "notFound")
    }

    // MARK: 2. Writers refuse what their readers refuse

    @Test func iterationsAboveTheReadersLimitAreRefusedAndNothingIsWritten() throws {
        let plain = try directory.write("plain.txt", "hello")
        let sealed = directory.path + "/sealed.skev"
        let tooMany = try run(
            ["encrypt", plain, "-o", sealed, "--passphrase-env", "PW", "--iterations", "10000001"],
            environment: ["PW": "pw"])
        #expect(tooMany.status == 64, "\(tooMany.stderr)")
        #expect(!FileManager.default.fileExists(atPath: sealed))

        // The largest accepted count round-trips (this also makes an input for rewrap below).
        let limit = try run(["encrypt", plain, "-o", sealed, "--key-file", keyFile, "--iterations", "10000000"])
        #expect(limit.status == 0, "\(limit.stderr)")
        let before = try Data(contentsOf: URL(fileURLWithPath: sealed))
        let rewrapped = try run(
            [
                "rewrap", sealed, "-o", sealed, "--from-key-file", keyFile, "--to-passphrase-env", "PW", "--iterations",
                "10000001",
            ], environment: ["PW": "pw"])
        #expect(rewrapped.status == 64, "\(rewrapped.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: sealed)) == before)
        for bad in ["99999", "-1", "0"] {
            #expect(
                try run(
                    ["encrypt", plain, "-o", sealed, "--passphrase-env", "PW", "--iterations", bad],
                    environment: ["PW": "pw"]
                ).status == 64)
        }
    }

    // MARK: 3. A shrinking input

    @Test func decryptingAFileThatShrinksNeverCrashesNorLeavesPlaintext() throws {
        // 128 MiB of seeded random bytes, written in pieces.
        var generator = SeededGenerator(seed: 0x5A1F)
        let plain = directory.path + "/big.bin"
        _ = FileManager.default.createFile(atPath: plain, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: plain))
        var piece = [UInt8](repeating: 0, count: 8 << 20)
        for _ in 0..<16 {
            piece.withUnsafeMutableBytes { raw in
                for offset in stride(from: 0, to: raw.count, by: 8) {
                    raw.storeBytes(of: generator.next(), toByteOffset: offset, as: UInt64.self)
                }
            }
            try handle.write(contentsOf: piece)
        }
        try handle.close()
        let digest = try run(["hash", plain]).stdout.prefix(64)
        let sealed = directory.path + "/big.skev"
        #expect(try run(["encrypt", plain, "-o", sealed, "--key-file", keyFile]).status == 0)
        try FileManager.default.removeItem(atPath: plain)
        let output = directory.path + "/out.bin"
        // Truncate while the child reads, at a few moments, so that runs hit it at different points.
        for delay in [0.0, 0.005, 0.02, 0.06] {
            let copy = directory.path + "/victim.skev"
            try? FileManager.default.removeItem(atPath: copy)
            try? FileManager.default.removeItem(atPath: output)
            try FileManager.default.copyItem(atPath: sealed, toPath: copy)
            let child = try ChildProcess(
                CLIRunner.executable.path, ["decrypt", copy, "-o", output, "--key-file", keyFile],
                environment: environment)
            Thread.sleep(forTimeInterval: delay)
            _ = truncate(copy, 1 << 20)
            let result = try child.wait()
            let left = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
                !["big.skev", "victim.skev", "vault.key", "apple-keys.json"].contains($0)
            }
            if result.status == 0 {
                // It finished before the truncation: then the output is the whole plaintext.
                #expect(try run(["hash", output]).stdout.prefix(64) == digest, "delay \(delay)")
            } else {
                // Cut mid-stream (65, input changed) or before it was opened (20, truncated envelope); never a signal.
                #expect([20, 65].contains(result.status), "delay \(delay): exit \(result.status) \(result.stderr)")
                #expect(left.isEmpty, "delay \(delay): \(left)")
            }
        }
    }

    // MARK: 4. A key server's headers

    @Test func hostileCachingHeadersNeverKillAVerification() throws {
        let body = TestKeys.jwksJSON([try signer.publicJWK()])
        let headerSets: [[(String, String)]] = [
            [("Cache-Control", "=")],
            [
                ("Expires", "Sun, 06 Nov 99999999999999 08:49:37 GMT"),
                ("Date", "Sun, 06 Nov 99999999999999 08:49:37 GMT"),
            ],
            [("Cache-Control", "max-age=99999999999999999999999999")],
        ]
        for (index, headers) in headerSets.enumerated() {
            let server = try LoopbackHTTPServer { _ in .json(body, headers: headers) }
            let token = try signer.sign(claims: TokenFactory.claims(now: Int64(Date().timeIntervalSince1970)))
            let result = try run(
                [
                    "verify-token", "--token-env", "T", "--jwks", server.url("/keys"), "--allow-http-loopback", "--iss",
                    "https://issuer.example",
                ],
                environment: ["T": token, "XDG_CACHE_HOME": directory.path + "/cache-\(index)"])
            #expect(result.status == 0, "\(headers): exit \(result.status) \(result.stderr.prefix(300))")
        }
        // A failing server with a hostile Retry-After leaves the cached set serving.
        let server = try LoopbackHTTPServer { _ in .json(body, headers: [("Cache-Control", "max-age=60")]) }
        let cache = ["XDG_CACHE_HOME": directory.path + "/cache-stale"]
        let url = server.url("/keys")
        let token = try signer.sign(claims: TokenFactory.claims(now: Int64(Date().timeIntervalSince1970)))
        let arguments = [
            "verify-token", "--token-env", "T", "--jwks", url, "--allow-http-loopback", "--iss",
            "https://issuer.example",
        ]
        #expect(try run(arguments, environment: cache.merging(["T": token]) { $1 }).status == 0)
        server.setHandler { _ in
            .respond(
                status: 503,
                headers: [("Retry-After", "Sun, 06 Nov 99999999999999 08:49:37 GMT"), ("Cache-Control", "=")], body: [])
        }
        let later = try run(
            arguments + ["--now", String(Int(Date().timeIntervalSince1970) + 120)],
            environment: cache.merging(["T": token]) { $1 })
        #expect(later.status == 0, "\(later.stderr.prefix(300))")
    }

    // MARK: 5. Out-of-range times

    @Test func timesOutOfRangeAreUsageErrorsInOptions() throws {
        try initVault()
        for arguments in [
            ["vault", "put", "a", "--expires", "99999999999999999999"] + vaultOptions,
            ["vault", "put", "a", "--expires-in", "9223372036854775807"] + vaultOptions,
            ["vault", "put", "a", "--expires", "10000-01-01T00:00:00Z"] + vaultOptions,
            [
                "state", "record-refresh", "--client-id", "c", "--sub", "s", "--result", "ok", "--at",
                "100000000000000000000",
            ] + vaultOptions,
            ["state", "record-refresh", "--client-id", "c", "--sub", "s", "--result", "ok", "--at", "1e20"]
                + vaultOptions,
            ["state", "record-refresh", "--client-id", "c", "--sub", "s", "--result", "ok", "--at", "-5"]
                + vaultOptions,
            ["verify-token", "--token-env", "T", "--jwks", jwks, "--now", "100000000000000000000"],
            ["verify-token", "--token-env", "T", "--jwks", jwks, "--leeway", "1e300"],
            ["verify-token", "--token-env", "T", "--jwks", jwks, "--max-age", "1e300"],
        ] {
            let result = try run(arguments, stdin: "secret\n", environment: ["T": "x.y.z"])
            #expect(result.status == 64, "\(arguments): exit \(result.status) \(result.stderr.prefix(200))")
        }
        let key = P256.Signing.PrivateKey()
        let p8 = try directory.write("AuthKey.p8", key.pemRepresentation, mode: 0o600)
        for time in ["1e20", "100000000000000000000", "-100000000000000000000"] {
            let result = try run([
                "client-secret", "--p8", p8, "--team-id", "TEAM123456", "--key-id", "KEY1234567", "--client-id", "c",
                "--now", time,
            ])
            #expect(result.status == 64, "\(time): exit \(result.status)")
        }
    }

    @Test func timesOutOfRangeInSignedClaimsAreClaimErrors() throws {
        try initVault()
        for claims: JSONObject in [
            ["iat": .number(JSONNumber(-1e17)!)], ["exp": .number(JSONNumber(1e300)!)],
            ["auth_time": .number(JSONNumber(1e300)!)],
        ] {
            let result = try run(
                ["verify-token", "--apple", "--aud", Self.client, "--jwks", jwks, "--token-env", "T", "--json"] + now,
                environment: ["T": try appleToken(claims)])
            #expect(result.status == 12, "\(claims): exit \(result.status) \(result.stderr.prefix(200))")
            let applied = try run(
                ["state", "apply-token", "--token-env", "T", "--client-id", Self.client, "--jwks", jwks] + now
                    + vaultOptions, environment: ["T": try appleToken(claims)])
            #expect(applied.status == 12, "\(claims): exit \(applied.status)")
        }
        for time: JSONValue in [.number(JSONNumber(1e300)!), .number(JSONNumber(-1)!)] {
            let result = try run(
                ["state", "apply-notification", "--client-id", Self.client, "--jwks", jwks] + now + vaultOptions,
                stdin: try notificationBody(eventTime: time))
            #expect(result.status == 12, "event_time \(time): exit \(result.status) \(result.stderr.prefix(200))")
        }
    }

    // MARK: 6. No HOME

    @Test func withoutHomeNothingFallsBackToTmp() throws {
        let unset: Set<String> = ["HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "SHADOW_KEYS_VAULT"]
        let token = try signer.sign(claims: TokenFactory.claims(now: Int64(Date().timeIntervalSince1970)))
        let fetched = try CLIRunner.run(
            [
                "verify-token", "--token-env", "T", "--jwks", "https://keys.example/jwks", "--iss",
                "https://issuer.example",
            ], environment: ["T": token], removing: unset)
        #expect(fetched.status == 64, "\(fetched.stderr)")
        #expect(fetched.stderr.contains("XDG_CACHE_HOME or HOME"), "\(fetched.stderr)")
        let listed = try CLIRunner.run(["vault", "list", "--key-file", keyFile], removing: unset)
        #expect(listed.status == 64, "\(listed.stderr)")
        #expect(listed.stderr.contains("--vault"))
    }

    // MARK: 7. Cache folder checks and symlinked locks

    @Test func aSymlinkedLockIsNeverFollowed() throws {
        let body = TestKeys.jwksJSON([try signer.publicJWK()])
        let server = try LoopbackHTTPServer { _ in .json(body) }
        let url = server.url("/keys")
        let folder = directory.path + "/cache/shadow-keys/jwks"
        try FileManager.default.createDirectory(
            atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let victim = directory.path + "/victim"
        let lock = folder + "/" + String(FileKeySetStoreName.of(url).dropLast(5)) + ".lock"
        try FileManager.default.createSymbolicLink(atPath: lock, withDestinationPath: victim)
        let token = try signer.sign(claims: TokenFactory.claims(now: Int64(Date().timeIntervalSince1970)))
        let result = try run(
            [
                "verify-token", "--token-env", "T", "--jwks", url, "--allow-http-loopback", "--iss",
                "https://issuer.example",
            ], environment: ["T": token])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: victim))

        // The vault's lock likewise.
        try initVault()
        try FileManager.default.removeItem(atPath: vault + ".lock")
        try FileManager.default.createSymbolicLink(atPath: vault + ".lock", withDestinationPath: victim)
        let put = try run(["vault", "put", "a"] + vaultOptions, stdin: "secret\n")
        #expect(put.status != 0)
        #expect(!FileManager.default.fileExists(atPath: victim))
    }

    @Test func aCacheFolderOthersCanWriteIsNotUsed() throws {
        let body = TestKeys.jwksJSON([try signer.publicJWK()])
        let server = try LoopbackHTTPServer { _ in .json(body) }
        let folder = directory.path + "/cache/shadow-keys/jwks"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        chmod(folder, 0o777)
        let token = try signer.sign(claims: TokenFactory.claims(now: Int64(Date().timeIntervalSince1970)))
        let arguments = [
            "verify-token", "--token-env", "T", "--jwks", server.url("/keys"), "--allow-http-loopback", "--iss",
            "https://issuer.example",
        ]
        let result = try run(arguments, environment: ["T": token])
        #expect(result.status == 0)
        #expect(
            result.stderr.contains("not using the key-set cache")
                && result.stderr.contains("writable by group or others"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).isEmpty)
        // Nor is one owned by someone else (the folder's parent made world-writable without the sticky bit).
        chmod(folder, 0o700)
        chmod(directory.path + "/cache/shadow-keys", 0o777)
        let parent = try run(arguments, environment: ["T": token])
        #expect(parent.stderr.contains("not using the key-set cache"), "\(parent.stderr)")
        chmod(directory.path + "/cache/shadow-keys", 0o700)
    }

    // MARK: 8. vault init into an open folder

    @Test func vaultInitIntoAnOpenFolderWarns() throws {
        let open = directory.path + "/open"
        try FileManager.default.createDirectory(atPath: open, withIntermediateDirectories: true)
        chmod(open, 0o777)
        let created = try run(["vault", "init", "--vault", open + "/v.skv", "--key-file", keyFile])
        #expect(created.status == 0)
        #expect(created.stderr.contains("warning") && created.stderr.contains("777"), "\(created.stderr)")
    }

    // MARK: 9. hash --check with a NUL in a name

    @Test func aManifestNameWithNulIsNotCutShort() throws {
        try directory.write("real.txt", "content")
        let digest = Hex.encode(SHA256.hash(data: Array("content".utf8)))
        let manifest = try directory.write(
            "SUMS", Data(Array("\(digest)  real.txt".utf8) + [0] + Array("missing\n".utf8)))
        let checked = try run(["hash", "--check", manifest])
        #expect(checked.status == 1, "\(checked.stdout)")
        #expect(checked.stdout.contains("FAILED open or read") && !checked.stdout.contains(": OK"))
        // Names that are not UTF-8 are used as the bytes they are.
        let latin1 = try directory.write("SUMS2", Data(Array("\(digest)  caf".utf8) + [0xE9] + [0x0A]))
        #expect(try run(["hash", "--check", latin1]).stdout.contains("FAILED open or read"))
    }

    // MARK: 10. The expected nonce stays secret

    @Test func theExpectedNonceIsNeverPrinted() throws {
        let secret = "s3ssion-n0nce-7f3a9c0e41d2"
        let hashed = Hex.encode(SHA256.hash(data: Array(secret.utf8)))
        let token = try signer.sign(
            claims: TokenFactory.claims(now: 1_700_000_000, extra: ["nonce": "some-other-nonce"]))
        let base = [
            "verify-token", "--token-env", "T", "--jwks", jwks, "--iss", "https://issuer.example", "--now",
            "1700000100", "--json",
        ]
        let nonceFile = try directory.write("nonce", secret + "\n", mode: 0o600)
        for options in [
            ["--nonce-file", nonceFile], ["--nonce-env", "N"], ["--nonce-sha256-env", "N"], ["--nonce", secret],
        ] {
            let result = try run(base + options, environment: ["T": token, "N": secret])
            #expect(result.status == 12)
            for leak in [secret, hashed, "some-other-nonce"] {
                #expect(!result.stdout.contains(leak) && !result.stderr.contains(leak), "\(options) printed \(leak)")
            }
        }
        let appleToken = try appleToken(["nonce": "some-other-nonce"])
        let apple = try run(
            [
                "verify-token", "--apple", "--aud", Self.client, "--jwks", jwks, "--token-env", "T", "--nonce-env", "N",
                "--json",
            ] + now,
            environment: ["T": appleToken, "N": secret])
        #expect(
            apple.status == 12 && !apple.stdout.contains(secret) && !apple.stdout.contains(hashed)
                && !apple.stderr.contains(hashed))
        // Matching nonces from a file or the environment pass.
        let matching = try signer.sign(
            claims: TokenFactory.claims(now: 1_700_000_000, extra: ["nonce": .string(secret)]))
        #expect(try run(base + ["--nonce-file", nonceFile], environment: ["T": matching]).status == 0)
        #expect(try run(base + ["--nonce-env", "N"], environment: ["T": matching, "N": secret]).status == 0)
    }

    // MARK: 11. Terminal controls from outside

    @Test func keyIDsAreEscapedOnTheTerminal() throws {
        let evil = "evil\u{1B}]0;pwned\u{07}\u{1B}[31m\u{202E}"
        let key = try JWK(rsa: TestKeys.rsa.publicKey, keyID: evil)
        let file = try directory.write("evil.json", TestKeys.jwksJSON([key]))
        for arguments in [["jwks", "show", file], ["jwks", "show", file, "--json"]] {
            let shown = try run(arguments)
            #expect(shown.status == 0)
            #expect(
                !shown.stdout.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 || $0.value == 0x202E },
                "\(arguments)")
        }
        let json = try run(["jwks", "show", file, "--json"]).json()
        #expect((json["keys"] as? [[String: Any]])?.first?["kid"] as? String == evil)
    }
}

/// The cache file name for a URL, as Docs/jwks-caching.md gives it.
enum FileKeySetStoreName {
    static func of(_ url: String) -> String { Hex.encode(SHA256.hash(data: Array(url.utf8))) + ".json" }
}
