import Foundation
import ShadowTestSupport
import Testing

/// The passphrase prompt, on a real terminal (util-linux `script` gives the command a pty).
/// Answers are typed after a pause, as a person types after the prompt appears.
@Suite(.tags(.multiProcess), .ownThreads) struct PromptCLITests {
    /// Runs `shadow-keys arguments…` on a terminal, typing `answers` one line at a time.
    private func onTerminal(_ arguments: [String], answers: [String], in folder: TemporaryDirectory) throws -> CLIResult
    {
        let typing = answers.map { "sleep 1; printf '%s\\n' '\($0)'" }.joined(separator: "; ")
        let command = ([CLIRunner.executable.path] + arguments).map { "'\($0)'" }.joined(separator: " ")
        return try CLIRunner.run(
            executable: URL(fileURLWithPath: "/bin/sh"),
            ["-c", "(\(typing); sleep 1) | script -qec \"$0\" /dev/null", command],
            stdin: nil, currentDirectory: folder.url, timeout: 60)
    }

    @Test func encryptAsksTwiceWithoutEchoAndDecryptOnce() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/script") else {
            Issue.record("util-linux script is needed for the terminal tests")
            return
        }
        let folder = try TemporaryDirectory()
        try "hello\n".write(toFile: folder.path + "/plain.txt", atomically: true, encoding: .utf8)
        let sealed = try onTerminal(
            ["encrypt", "plain.txt", "-o", "p.skev"], answers: ["correct horse", "correct horse"], in: folder)
        #expect(sealed.status == 0, "\(sealed.stdout)")
        #expect(sealed.stdout.contains("Enter passphrase:") && sealed.stdout.contains("again"), "\(sealed.stdout)")
        #expect(!sealed.stdout.contains("correct horse"), "the passphrase was echoed: \(sealed.stdout)")

        let opened = try onTerminal(["decrypt", "p.skev", "-o", "out.txt"], answers: ["correct horse"], in: folder)
        #expect(opened.status == 0, "\(opened.stdout)")
        #expect(try String(contentsOfFile: folder.path + "/out.txt", encoding: .utf8) == "hello\n")

        let wrong = try onTerminal(["decrypt", "p.skev", "-o", "wrong.txt"], answers: ["battery staple"], in: folder)
        #expect(wrong.status == 20, "\(wrong.stdout)")

        let differing = try onTerminal(["encrypt", "plain.txt", "-o", "q.skev"], answers: ["one", "two"], in: folder)
        #expect(differing.status == 64 && differing.stdout.contains("differ"), "\(differing.stdout)")
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/q.skev"))
    }

    @Test func withoutATerminalThereIsNoPromptButAUsageError() throws {
        let folder = try TemporaryDirectory()
        try "hello\n".write(toFile: folder.path + "/plain.txt", atomically: true, encoding: .utf8)
        let result = try CLIRunner.run(
            ["encrypt", "plain.txt", "-o", "p.skev"], stdin: "", currentDirectory: folder.url)
        #expect(result.status == 64, "\(result.stderr)")
        #expect(!result.stderr.contains("Enter passphrase"))
    }
}
