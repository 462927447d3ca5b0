import Crypto
import Foundation
import ShadowCore
import ShadowTestSupport
import ShadowVault
import Testing

/// `vault login` and `vault token` against a loopback token endpoint, as scripts and sync tools
/// run them: many processes at once, invalid_grant, SIGKILL mid-refresh, and the PKCE sign-in.
@Suite(.tags(.multiProcess), .ownThreads) struct VaultTokenCLITests {
    let directory: TemporaryDirectory
    let keyFile: String
    let secretFile: String
    let vault: String
    let fake: FakeOAuthServer

    init() throws {
        directory = try TemporaryDirectory()
        keyFile = try directory.write(
            "vault.key", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n", mode: 0o600)
        secretFile = try directory.write("client.secret", "client-secret-1\n", mode: 0o600)
        vault = directory.path + "/vault.skv"
        fake = try FakeOAuthServer()
        let created = try CLIRunner.run(["vault", "init", "--vault", vault, "--key-file", keyFile])
        guard created.status == 0 else { throw CLIRunnerError("vault init failed: \(created.stderr)") }
    }

    var vaultOptions: [String] { ["--vault", vault, "--key-file", keyFile] }

    func login(refreshToken: String = "rt-0") throws {
        let result = try CLIRunner.run(
            [
                "vault", "login", "drive", "--client-id", "client-1", "--token-endpoint", fake.url,
                "--client-secret-file", secretFile, "--scope", "drive.file", "--refresh-token-stdin",
                "--allow-http-loopback",
            ] + vaultOptions, stdin: refreshToken + "\n")
        guard result.status == 0 else { throw CLIRunnerError("vault login failed: \(result.stderr)") }
    }

    func token(_ extra: [String] = []) throws -> CLIResult {
        try CLIRunner.run(["vault", "token", "drive", "--allow-http-loopback"] + extra + vaultOptions)
    }

    func storedRefreshToken() throws -> String {
        let opened = TokenVault(path: vault, unlock: .key(SecretBytes((0..<32).map { UInt8($0) })))
        return try opened.entrySync(named: "drive").secret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    @Test func printsAValidTokenAndRefreshesOnlyWhenDue() throws {
        try login()
        let first = try token()
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout == "at-1\n")
        let again = try token(["--json"])
        #expect(again.status == 0)
        guard case .object(let object) = try StrictJSON.parse(again.stdout) else { throw CLIRunnerError("not JSON") }
        #expect(object["token"] == .string("at-1") && object["refreshed"] == .bool(false))
        #expect(object["scopes"] == .array(["drive.file"]))
        #expect(fake.withState { $0.refreshes } == 1)
        // A skew longer than the token's life forces a refresh; the rotated token was saved.
        #expect(try token(["--skew", "7200"]).stdout == "at-2\n")
        #expect(try storedRefreshToken() == "rt-2")
        // The secret never reaches argv: no command above named it.
    }

    @Test func twentyProcessesNearExpiryCauseOneRefresh() async throws {
        try login()
        fake.withState { $0.delay = 0.3 }
        let children = try (0..<20).map { _ in
            try ChildProcess(
                CLIRunner.executable.path, ["vault", "token", "drive", "--allow-http-loopback"] + vaultOptions,
                stdin: nil)
        }
        let results = try children.map { try $0.wait(timeout: 60) }
        for result in results { #expect(result.status == 0, "\(result.stderr)") }
        #expect(Set(results.map(\.stdout)) == ["at-1\n"])
        #expect(fake.withState { $0.refreshes } == 1)
    }

    @Test func invalidGrantExits43AndIsNotRetried() throws {
        try login()
        fake.withState { $0.revoked = ["rt-0"] }
        let first = try token(["--json"])
        #expect(first.status == 43)
        #expect(first.stderr.contains("invalid_grant"))
        #expect(first.stdout.contains("reauthentication_required"))
        let requests = fake.server.requestCount
        #expect(requests == 1)
        #expect(try token().status == 43)
        #expect(fake.server.requestCount == requests)
        // A new login clears it.
        fake.withState { $0.valid.insert("rt-new") }
        try login(refreshToken: "rt-new")
        #expect(try token().status == 0)
    }

    @Test func providerOutagesExit42() throws {
        try login()
        fake.withState { $0.failures = Array(repeating: (503, "0"), count: 10) }
        let result = try token()
        #expect(result.status == 42)
        #expect(fake.server.requestCount == 4, "one try and three retries")
    }

    /// A refresh killed at random points: the vault always holds a refresh token the provider
    /// still accepts, and it still opens.
    @Test func sigkillDuringRefreshKeepsAValidRefreshToken() async throws {
        try login()
        var generator = SeededGenerator(seed: 27)
        for round in 0..<24 {
            fake.withState { $0.delay = Double.random(in: 0...0.04, using: &generator) }
            let child = try ChildProcess(
                CLIRunner.executable.path,
                ["vault", "token", "drive", "--allow-http-loopback", "--skew", "7200"] + vaultOptions, stdin: nil)
            try await Task.sleep(for: .milliseconds(Int.random(in: 0...120, using: &generator)))
            child.kill()
            _ = try child.wait(timeout: 30)
            let stored = try storedRefreshToken()
            #expect(fake.accepts(stored), "round \(round): the vault holds \(stored), which the provider refuses")
        }
        #expect(fake.withState { $0.refreshes } > 0, "some kills came after the provider answered")
        let last = try token(["--skew", "7200"])
        #expect(last.status == 0, "\(last.stderr)")
    }

    @Test func loginWithPKCE() throws {
        let result = try CLIRunner.run(
            [
                "vault", "login", "drive", "--client-id", "client-1", "--token-endpoint", fake.url,
                "--authorization-endpoint", "https://auth.example/authorize", "--redirect-uri",
                "http://127.0.0.1:9/cb", "--client-secret-file", secretFile, "--scope", "drive.file", "--code-stdin",
                "--allow-http-loopback",
            ] + vaultOptions, stdin: "the-code\n")
        #expect(result.status == 0, "\(result.stderr)")
        let url = try #require(result.stderr.split(separator: "\n").first { $0.hasPrefix("https://auth.example") })
        let challenge = try #require(
            url.split(separator: "&").first { $0.hasPrefix("code_challenge=") }?.dropFirst("code_challenge=".count))
        let seen = try #require(fake.withState { $0.codes.last })
        #expect(seen.code == "the-code")
        let verifier = try #require(seen.verifier)
        #expect(Base64URL.encode(Array(SHA256.hash(data: Array(verifier.utf8)))) == challenge)
        // The exchange's access token is stored; the refresh token works.
        #expect(try token().stdout == "at-code\n")
        #expect(try storedRefreshToken() == "rt-code")
    }

    /// `vault login --dpop`: the sign-in's tokens are bound to a key made and kept in the vault,
    /// the provider's nonce is followed, `vault token` says DPoP, and `dpop proof --from-vault`
    /// signs with that same key.
    @Test func loginWithDPoP() throws {
        fake.withState {
            $0.dpop = true
            $0.dpopNonce = "nonce-1"
        }
        let login = try CLIRunner.run(
            [
                "vault", "login", "drive", "--client-id", "client-1", "--token-endpoint", fake.url,
                "--authorization-endpoint", "https://auth.example/authorize", "--redirect-uri",
                "http://127.0.0.1:9/cb", "--client-secret-file", secretFile, "--code-stdin", "--dpop",
                "--allow-http-loopback",
            ] + vaultOptions, stdin: "the-code\n")
        #expect(login.status == 0, "\(login.stderr)")
        let bound = try #require(fake.withState { $0.boundKeys["rt-code"] })
        #expect(fake.withState { $0.nonceChallenges } == 1)
        let shown = try token(["--json"])
        #expect(try StrictJSON.parse(shown.stdout).objectValue?["token_type"] == "DPoP", "\(shown.stdout)")
        let proof = try CLIRunner.run(
            ["dpop", "proof", "--from-vault", "drive", "--htm", "GET", "--htu", "https://api.example/x", "--json"]
                + vaultOptions)
        #expect(proof.status == 0, "\(proof.stderr)")
        #expect(try StrictJSON.parse(proof.stdout).objectValue?["thumbprint"]?.stringValue == bound)
        // A refresh with the vault's key goes through the nonce again and stays bound.
        fake.withState { $0.dpopNonce = "nonce-2" }
        let refreshed = try token(["--skew", "7200", "--json"])
        #expect(refreshed.status == 0, "\(refreshed.stderr)")
        #expect(fake.withState { ($0.nonceChallenges, $0.proofKeys.last) } == (2, bound))
        #expect(fake.withState { $0.refreshes } == 1)
        // --dpop binds the tokens of a sign-in, not a refresh token from elsewhere.
        let refused = try CLIRunner.run(
            [
                "vault", "login", "other", "--client-id", "client-1", "--token-endpoint", fake.url,
                "--client-secret-file", secretFile, "--refresh-token-stdin", "--dpop", "--allow-http-loopback",
            ] + vaultOptions, stdin: "rt-0\n")
        #expect(refused.status == 64)
    }

    @Test func usageErrors() throws {
        #expect(try token().status == 32, "no such entry")
        let noMode = try CLIRunner.run(
            ["vault", "login", "drive", "--client-id", "c", "--token-endpoint", fake.url] + vaultOptions)
        #expect(noMode.status == 64)
        let https = try CLIRunner.run(
            [
                "vault", "login", "drive", "--client-id", "c", "--token-endpoint", fake.url, "--refresh-token-stdin",
                "--client-secret-file", secretFile,
            ] + vaultOptions, stdin: "rt")
        #expect(https.status == 64, "plain http needs --allow-http-loopback")
        // A scope is RFC 6749's scope tokens and spaces: no line break (CR LF included), quote or
        // backslash; nothing is asked of the provider.
        for scope in ["a\r\nb", "a\nb", #"a"b"#, #"a\b"#, "", "é", String(repeating: "s", count: 4097)] {
            let refused = try CLIRunner.run(
                [
                    "vault", "login", "drive", "--client-id", "c", "--token-endpoint", fake.url,
                    "--refresh-token-stdin", "--client-secret-file", secretFile, "--allow-http-loopback",
                    "--scope=" + scope,
                ] + vaultOptions, stdin: "rt")
            #expect(refused.status == 64 && refused.stderr.contains("--scope"), "\(scope.debugDescription)")
        }
        // A name too long for its companions (here NAME.access, over the vault's 255 bytes) is
        // refused before the token is read; nothing is stored.
        let longName = String(repeating: "n", count: 249)
        let tooLong = try CLIRunner.run(
            [
                "vault", "login", longName, "--client-id", "c", "--token-endpoint", fake.url,
                "--refresh-token-stdin", "--auth", "none", "--allow-http-loopback",
            ] + vaultOptions, stdin: "rt")
        #expect(tooLong.status == 64 && tooLong.stderr.contains("1 to 248 bytes"), "\(tooLong.stderr)")
        #expect(try CLIRunner.run(["vault", "get", longName] + vaultOptions).status != 0)
        #expect(fake.withState { $0.refreshes } == 0)
        // An entry that is not a token source.
        #expect(
            try CLIRunner.run(["vault", "put", "plain"] + vaultOptions, stdin: "secret").status == 0)
        #expect(try CLIRunner.run(["vault", "token", "plain"] + vaultOptions).status == 64)
        // vault login never replaces an entry that is not part of the token source it sets up:
        // NAME of another kind, or an entry named like a new source's companion. Nothing changes.
        #expect(
            try CLIRunner.run(["vault", "put", "loose.access"] + vaultOptions, stdin: "mine").status == 0)
        for name in ["plain", "loose"] {
            let refused = try CLIRunner.run(
                [
                    "vault", "login", name, "--client-id", "c", "--token-endpoint", fake.url, "--refresh-token-stdin",
                    "--client-secret-file", secretFile, "--allow-http-loopback", "--json",
                ] + vaultOptions, stdin: "rt")
            #expect(refused.status == 73 && refused.stdout.contains(#""code":"exists""#), "\(refused.stdout)")
        }
        for (name, secret) in [("plain", "secret"), ("loose.access", "mine")] {
            let kept = try CLIRunner.run(["vault", "get", name] + vaultOptions)
            #expect(kept.status == 0 && kept.stdout == secret + "\n", "\(name): \(kept.stdout)")
        }
        #expect(try CLIRunner.run(["vault", "get", "loose"] + vaultOptions).status == 32)
    }
}
