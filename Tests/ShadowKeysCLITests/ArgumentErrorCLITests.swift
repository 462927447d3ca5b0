import Foundation
import ShadowCore
import ShadowJOSE
import ShadowTestSupport
import Testing

/// Misspelled options and usage errors, as a new user meets them.
@Suite(.tags(.multiProcess), .ownThreads) struct ArgumentErrorCLITests {
    /// An unknown option is reported as such, with a suggestion, before any other validation (here
    /// the misspelled option's value would otherwise be taken for an argument, or a required
    /// option would be reported missing).
    @Test(
        arguments: [
            (["verify-token", "--token-file", "t.jwt", "--jwk", "jwks.json"], "--jwk", "'--jwks'"),
            (["encrypt", "--passphrase", "hunter2", "in.txt"], "--passphrase", "'--passphrase-env'"),
            (["decrypt", "in.skev", "-o", "out", "--keyfile", "k.key"], "--keyfile", "'--key-file'"),
            (["vault", "put", "name", "--vaul", "v.skv"], "--vaul", "'--vault'"),
            (["state", "show", "--client-id", "c", "--subject", "s"], "--subject", nil),
            (
                ["jwks", "fetch", "https://example.com/keys", "--allow-http-loopbak"], "--allow-http-loopbak",
                "'--allow-http-loopback'"
            ),
            (["apple", "token", "--cod", "x"], "--cod", "'--code"),
            (["hash", "--chek", "SUMS"], "--chek", "'--check'"),
            (["keygen", "k.key", "--force"], "--force", nil),
        ] as [([String], String, String?)])
    func unknownOptionsComeFirst(arguments: [String], option: String, suggestion: String?) throws {
        let folder = try TemporaryDirectory()
        let result = try CLIRunner.run(arguments, stdin: "", currentDirectory: folder.url)
        #expect(result.status == 64, "\(arguments): \(result.stderr)")
        let firstLine = result.stderr.split(separator: "\n").first.map(String.init) ?? ""
        #expect(firstLine.hasPrefix("Error: Unknown option '\(option)'."), "\(arguments): \(result.stderr)")
        if let suggestion {
            #expect(firstLine.contains("Did you mean") && firstLine.contains(suggestion), "\(firstLine)")
        }
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty, "\(arguments) left files behind")
    }

    @Test func optionValuesThatLookLikeOptionsAreNotFlagged() throws {
        // `--context` takes a value; a value starting with '-' is that value, not an option.
        let folder = try TemporaryDirectory()
        let result = try CLIRunner.run(
            ["decrypt", "absent.skev", "-o", "out", "--passphrase-env", "K", "--context", "-x=1"],
            currentDirectory: folder.url)
        #expect(!result.stderr.contains("Unknown option"), "\(result.stderr)")
    }

    /// A value that begins with "-" is the value of the option before it (Docs/cli.md, "Usage
    /// errors"), long or short, in a command the direct reader takes and in one it does not; the
    /// line is not a usage error.
    @Test func optionValuesThatBeginWithADashAreTheirValues() throws {
        let folder = try TemporaryDirectory()
        let now: Int64 = 1_700_000_000
        let signer = try JWSSigner.rs256(TestKeys.rsa, keyID: "rsa-1")
        let jwks = try folder.write("jwks.json", TestKeys.jwksJSON([signer.publicJWK()]))
        let token = try signer.sign(claims: TokenFactory.claims(now: now, extra: ["nonce": "-n0nce"]))
        let base = ["verify-token", "-", "--jwks", jwks, "--now", String(now), "--aud", "app.example"]
        // The token's nonce, given as a value that begins with "-": verified.
        let passed = try CLIRunner.run(base + ["--nonce", "-n0nce", "--json"], stdin: token)
        #expect(passed.status == 0, "\(passed.stderr)")
        #expect(try passed.json()["valid"] as? Bool == true)
        // Another such value: the nonce differs (12), and "--json" after --nonce is the nonce.
        let refused = try CLIRunner.run(base + ["--nonce", "--json"], stdin: token)
        #expect(refused.status == 12, "\(refused.stderr)")
        #expect(refused.stdout.isEmpty, "no JSON asked for: \(refused.stdout)")
        // A short option's value: encrypt -o -x writes the file named "-x".
        let key = try folder.write("k.hex", Hex.encode(Array(repeating: UInt8(7), count: 32)), mode: 0o600)
        let input = try folder.write("in.txt", "plain")
        let encrypted = try CLIRunner.run(
            ["encrypt", input, "--key-file", key, "-o", "-x"], currentDirectory: folder.url)
        #expect(encrypted.status == 0, "\(encrypted.stderr)")
        #expect(FileManager.default.fileExists(atPath: folder.url.appendingPathComponent("-x").path))
        // A missing value is still one.
        #expect(try CLIRunner.run(base + ["--nonce"], stdin: token).status == 64)
    }

    /// A short option written with its value after "=" (`-o=FILE`, as argument-parser reads it,
    /// and as a line is read again when a value begins with "-") is one option: a usage error
    /// elsewhere on the line is reported as itself, never as the unknown option "-=".
    @Test func aShortOptionsJoinedValueIsNotAnUnknownOption() throws {
        let folder = try TemporaryDirectory()
        let key = try folder.write("k.hex", Hex.encode(Array(repeating: UInt8(7), count: 32)), mode: 0o600)
        let input = try folder.write("in.txt", "plain")
        func firstLine(_ arguments: [String]) throws -> String {
            let result = try CLIRunner.run(arguments, stdin: "", currentDirectory: folder.url)
            #expect(result.status == 64, "\(arguments): \(result.stderr)")
            return result.stderr.split(separator: "\n").first.map(String.init) ?? ""
        }
        // Read again with "--chunk-size=-64" and "-o=out.skev": the chunk size is the error.
        let negative = try firstLine(["encrypt", input, "-o", "out.skev", "--key-file", key, "--chunk-size", "-64"])
        #expect(negative.contains("--chunk-size must be a power of two"), "\(negative)")
        // -o=FILE as written, beside an invalid value.
        let written = try firstLine(["encrypt", input, "-o=out.skev", "--key-file", key, "--chunk-size", "3"])
        #expect(written.contains("--chunk-size must be a power of two"), "\(written)")
        // An unknown option after -o -x (read again as -o=-x) is the one reported.
        let unknown = try firstLine(["rewrap", input, "-o", "-x", "--key-file", key])
        #expect(unknown.hasPrefix("Error: Unknown option '--key-file'."), "\(unknown)")
        // A short name the command does not have, with a value after "=", is named as written.
        let short = try firstLine(["encrypt", input, "-q", "-z=1", "--key-file", key])
        #expect(short.hasPrefix("Error: Unknown option '-z'."), "\(short)")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == ["in.txt", "k.hex"],
            "a refused line wrote nothing")
        // rewrap -o -x, with its own key options, writes the file named "-x".
        let encrypted = try CLIRunner.run(
            ["encrypt", input, "--key-file", key, "-o", "in.skev"], currentDirectory: folder.url)
        #expect(encrypted.status == 0, "\(encrypted.stderr)")
        let rewrapped = try CLIRunner.run(
            ["rewrap", "in.skev", "-o", "-x", "--from-key-file", key, "--to-key-file", key, "--to-key-id", "-k2"],
            currentDirectory: folder.url)
        #expect(rewrapped.status == 0, "\(rewrapped.stderr)")
        #expect(FileManager.default.fileExists(atPath: folder.url.appendingPathComponent("-x").path))
    }

    /// `--json` means JSON errors too, usage errors included.
    @Test(arguments: [
        ["verify-token", "--json", "--jwk", "x"],
        ["verify-token", "--json", "-", "--jwks", "k.json", "--leeway", "99999999"],
        ["selftest", "--json", "--nope"],
        ["keygen", "--json"],
    ])
    func usageErrorsAreJSONWithJSON(arguments: [String]) throws {
        let result = try CLIRunner.run(arguments, stdin: "")
        #expect(result.status == 64, "\(arguments): \(result.stderr)")
        let error = try #require(try result.json()["error"] as? [String: Any], "\(result.stdout)")
        #expect(error["code"] as? String == "usage")
        #expect((error["message"] as? String)?.isEmpty == false)
        #expect(!result.stderr.isEmpty, "the message is on stderr as well")
    }

    @Test func helpIsNotAnError() throws {
        let result = try CLIRunner.run(["verify-token", "--json", "--help"])
        #expect(result.status == 0)
        #expect(result.stdout.contains("USAGE") || result.stdout.contains("Usage"))
        #expect(!result.stdout.contains("\"error\""))
    }

    @Test(arguments: ["bash", "zsh", "fish"])
    func completionScriptsNameEverySubcommand(shell: String) throws {
        let result = try CLIRunner.run(["--generate-completion-script", shell])
        #expect(result.status == 0, "\(result.stderr)")
        for command in ["verify-token", "keygen", "sign", "from-key", "selftest"] {
            #expect(result.stdout.contains(command), "\(shell) completions lack \(command)")
        }
    }

    @Test func helpWrapsToTheTerminalWidth() throws {
        let result = try CLIRunner.run(["--help"], environment: ["COLUMNS": "80"])
        #expect(result.status == 0)
        let long = result.stdout.split(separator: "\n").filter { $0.count > 80 && !$0.contains("USAGE") }
        #expect(long.isEmpty, "lines over 80 columns: \(long)")
        #expect(result.stdout.contains("See Docs/cli.md."), "\(result.stdout)")
    }
}
