import Foundation
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
