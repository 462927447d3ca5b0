import Foundation
import ShadowCore
import ShadowJOSE
import ShadowTestSupport
import Testing

/// `verify-token --each-line`: a log of tokens on stdin, one result a line, in order.
@Suite(.tags(.multiProcess), .ownThreads) struct EachLineCLITests {
    let directory: TemporaryDirectory
    let jwks: String
    let rsa: JWSSigner
    let now: Int64 = 1_700_000_000

    init() throws {
        directory = try TemporaryDirectory()
        rsa = try JWSSigner.rs256(TestKeys.rsa, keyID: "rsa-1")
        jwks = try directory.write("jwks.json", TestKeys.jwksJSON([rsa.publicJWK()]))
    }

    func run(_ input: String, _ arguments: [String] = []) throws -> CLIResult {
        try CLIRunner.run(
            ["verify-token", "--each-line", "--jwks", jwks, "--now", String(now), "--aud", "app.example"] + arguments,
            stdin: input)
    }

    /// Tokens of every outcome, in a known order: (token, expected exit code).
    func mixedLog(count: Int) throws -> [(String, Int)] {
        let good = try rsa.sign(claims: TokenFactory.claims(now: now))
        let expired = try rsa.sign(claims: TokenFactory.claims(now: now - 86_400 * 2))
        let otherKey = try JWSSigner.rs256(TestKeys.rsa2, keyID: "rsa-1").sign(claims: TokenFactory.claims(now: now))
        let kinds: [(String, Int)] = [(good, 0), ("not-a-token", 10), (expired, 12), (otherKey, 11), ("", 10)]
        return (0..<count).map { kinds[($0 * 7 + $0 / 5) % kinds.count] }
    }

    /// Over two batches of 2,048 lines, each read while the one before is verified, in chunks.
    @Test func oneResultALineInInputOrderWithTheHighestCode() throws {
        let log = try mixedLog(count: 2 * 2048 + 5)
        let result = try run(log.map(\.0).joined(separator: "\n") + "\n", ["--json"])
        #expect(result.status == 12, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        try #require(lines.count == log.count, "\(lines.count) results for \(log.count) lines")
        for (index, line) in lines.enumerated() {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            #expect(object["line"] as? Int == index + 1)
            let expected = log[index].1
            #expect(object["valid"] as? Bool == (expected == 0), "line \(index + 1): \(line)")
            if expected == 0 {
                #expect((object["claims"] as? [String: Any])?["sub"] as? String == "user-1")
            } else {
                #expect(object["exit"] as? Int == expected, "line \(index + 1): \(line)")
            }
        }
    }

    /// A log of exactly one batch ends at the batch's end, with no empty batch after it.
    @Test func exactlyOneBatch() throws {
        let good = try rsa.sign(claims: TokenFactory.claims(now: now))
        var log = Array(repeating: good, count: 2048)
        log[2047] = "last"
        let result = try run(log.joined(separator: "\n") + "\n")
        #expect(result.status == 10, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.count == 2048)
        #expect(lines.dropLast().allSatisfy { $0 == "ok" })
        #expect(lines.last?.hasPrefix("10 malformed_token: ") == true)
    }

    @Test func plainOutputAndTheExitCodeOfAllValid() throws {
        let good = try rsa.sign(claims: TokenFactory.claims(now: now))
        let allGood = try run([good, good, " \(good) \r"].joined(separator: "\n"))
        #expect(allGood.status == 0, "\(allGood.stderr)")
        #expect(allGood.stdout == "ok\nok\nok\n")
        let mixed = try run([good, "a.b"].joined(separator: "\n") + "\n")
        #expect(mixed.status == 10)
        #expect(mixed.stdout.hasPrefix("ok\n10 malformed_token: "))
        let empty = try run("")
        #expect(empty.status == 0 && empty.stdout.isEmpty)
    }

    /// A line over the token limit is a malformed token (10) on its own line, and the next line
    /// is still read.
    @Test func anOverlongLineIsOneMalformedResult() throws {
        let good = try rsa.sign(claims: TokenFactory.claims(now: now))
        let long = String(repeating: "A", count: 3 << 20)
        let result = try run([good, long, good].joined(separator: "\n"))
        #expect(result.status == 10)
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 3 && lines[0] == "ok" && lines[2] == "ok", "\(result.stdout.prefix(300))")
        #expect(lines.count > 1 && lines[1].contains("over the"))
    }

    @Test(arguments: [
        ["TOKEN"], ["--token-file", "/dev/null"], ["--token-env", "HOME"], ["-"],
    ])
    func stdinHoldsTheTokensSoNoOtherTokenIsTaken(extra: [String]) throws {
        let result = try run("", extra)
        #expect(result.status == 64 && result.stderr.contains("--each-line"), "\(extra): \(result.stderr)")
    }

    @Test func theKeySetCannotComeFromStdinToo() throws {
        let result = try CLIRunner.run(["verify-token", "--each-line", "--jwks", "-", "--aud", "a"], stdin: "")
        #expect(result.status == 64 && result.stderr.contains("--each-line"), "\(result.stderr)")
    }
}
