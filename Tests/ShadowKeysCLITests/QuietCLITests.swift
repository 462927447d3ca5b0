import Foundation
import ShadowTestSupport
import Testing

/// `-q/--quiet` on every command: warnings and progress bars go, errors stay.
@Suite(.tags(.multiProcess), .ownThreads) struct QuietCLITests {
    /// Every command that runs something (not the groups, not `help`) takes `-q` and `--quiet`, read from
    /// argument-parser's own description of the command tree.
    @Test func everyCommandTakesQuiet() throws {
        let dump = try CLIRunner.run(["--experimental-dump-help"])
        #expect(dump.status == 0, "\(dump.stderr)")
        let root = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
        var leaves: [(path: String, arguments: [[String: Any]])] = []
        func walk(_ command: [String: Any], _ path: String) {
            let subcommands = command["subcommands"] as? [[String: Any]] ?? []
            if subcommands.isEmpty { leaves.append((path, command["arguments"] as? [[String: Any]] ?? [])) }
            for sub in subcommands { walk(sub, path + " " + (sub["commandName"] as? String ?? "?")) }
        }
        walk(try #require(root["command"] as? [String: Any]), "shadow-keys")
        #expect(leaves.count >= 30, "\(leaves.map(\.path))")
        for leaf in leaves where !leaf.path.hasSuffix(" help") {
            let names = leaf.arguments.flatMap {
                ($0["names"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
            }
            #expect(names.contains("quiet") && names.contains("q"), "\(leaf.path) has no -q/--quiet")
        }
    }

    /// Each warning the CLI prints, then the same command with `--quiet`: same exit status and
    /// stdout, nothing on stderr.
    @Test func quietSilencesEachWarning() throws {
        let folder = try TemporaryDirectory()
        let keyFile = folder.url.appendingPathComponent("open.key")
        try (String(repeating: "ab", count: 32) + "\n").write(to: keyFile, atomically: true, encoding: .utf8)
        chmod(keyFile.path, 0o644)
        let plain = folder.url.appendingPathComponent("plain.txt")
        try "hello".write(to: plain, atomically: true, encoding: .utf8)
        let token = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"

        let cases: [(arguments: [String], warning: String)] = [
            (["decode", token], "visible to other users"),
            (["hash", "--hmac-key-file", keyFile.path, plain.path], "readable by group or others"),
            (
                ["vault", "init", "--vault", folder.path + "/v.skv", "--key-file", keyFile.path],
                "readable by group or others"
            ),
        ]
        for (arguments, warning) in cases {
            let loud = try CLIRunner.run(arguments, stdin: "", currentDirectory: folder.url)
            #expect(loud.stderr.contains("warning: ") && loud.stderr.contains(warning), "\(arguments): \(loud.stderr)")
            if arguments[0] == "vault" { try FileManager.default.removeItem(atPath: folder.path + "/v.skv") }
            let quiet = try CLIRunner.run(arguments + ["--quiet"], stdin: "", currentDirectory: folder.url)
            #expect(quiet.status == loud.status, "\(arguments): \(quiet.stderr)")
            #expect(quiet.stdout == loud.stdout)
            #expect(quiet.stderr.isEmpty, "\(arguments) --quiet still wrote: \(quiet.stderr)")
        }
    }

    /// An error is still reported with `--quiet`.
    @Test func quietKeepsErrors() throws {
        let result = try CLIRunner.run(
            ["decrypt", "-q", "/nonexistent/in.skev", "-o", "out", "--passphrase-env", "P"], environment: ["P": "x"])
        #expect(result.status == 66, "\(result.stderr)")
        #expect(result.stderr.contains("/nonexistent/in.skev"), "\(result.stderr)")
    }
}
