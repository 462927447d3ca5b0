import Foundation
import ShadowTestSupport
import Testing

@Suite(.tags(.multiProcess), .ownThreads) struct SelfTestCLITests {
    @Test func runsEverySuiteFromTheCheckout() throws {
        let result = try CLIRunner.run(["selftest"], currentDirectory: PackagePaths.root)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("Wycheproof RSA-2048"))
        #expect(result.stdout.contains("vectors passed"))
    }

    @Test func jsonReport() throws {
        let result = try CLIRunner.run(["selftest", "--json", "--vectors", PackagePaths.vectors.path])
        #expect(result.status == 0)
        let json = try result.json()
        #expect(json["passed"] as? Bool == true)
        let suites = try #require(json["suites"] as? [[String: Any]])
        #expect(suites.count >= 7)
        for suite in suites {
            #expect((suite["run"] as? Int ?? 0) > 0 && suite["run"] as? Int == suite["passed"] as? Int, "\(suite)")
        }
    }

    @Test func missingVectorsFailUnlessBuiltinOnly() throws {
        let elsewhere = try TemporaryDirectory()
        let missing = try CLIRunner.run(["selftest", "--vectors", elsewhere.path])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("FAILED"))
        // In JSON, a suite that could not run reports the one error shape.
        let report = try CLIRunner.run(["selftest", "--json", "--vectors", elsewhere.path])
        #expect(report.status == 1)
        let suites = try #require(try report.json()["suites"] as? [[String: Any]])
        let failed = suites.compactMap { $0["error"] as? [String: Any] }
        #expect(!failed.isEmpty)
        for error in failed {
            #expect(error["code"] as? String == "suite_not_run" && (error["message"] as? String)?.isEmpty == false)
        }
        let builtin = try CLIRunner.run(["selftest", "--builtin-only"], currentDirectory: elsewhere.url)
        #expect(builtin.status == 0, "\(builtin.stderr)")
        #expect(builtin.stdout.contains("built-in vectors only"))
    }

    /// An installed binary (a copy in an empty folder, far from the checkout): the compiled-in
    /// vectors pass, the file suites say they were skipped, and the summary and the exit agree.
    @Test func anInstalledCopyPassesOnItsBuiltInVectors() throws {
        let folder = try TemporaryDirectory()
        let copy = folder.url.appendingPathComponent("shadow-keys")
        // Written through a close-on-exec descriptor: a copy whose write descriptor leaked into a
        // child that another test spawned meanwhile could not be executed (ETXTBSY).
        let bytes = try Data(contentsOf: CLIRunner.executable)
        let fd = open(copy.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o755)
        try #require(fd >= 0)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        try #require(written == bytes.count)
        let result = try CLIRunner.run(
            executable: copy, ["selftest"], stdin: nil, environment: [:], removing: ["SHADOW_KEYS_VECTORS"],
            currentDirectory: folder.url)
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(!result.stdout.contains("ERROR"), "\(result.stdout)")
        #expect(result.stdout.contains("skipped"), "\(result.stdout)")
        let summary = try #require(result.stdout.split(separator: "\n").last)
        #expect(summary.hasPrefix("ok: ") && summary.contains("skipped (no vector folder)"), "\(summary)")

        let json = try CLIRunner.run(
            executable: copy, ["selftest", "--json"], stdin: nil, removing: ["SHADOW_KEYS_VECTORS"],
            currentDirectory: folder.url)
        #expect(json.status == 0)
        let report = try json.json()
        #expect(report["passed"] as? Bool == true)
        let suites = try #require(report["suites"] as? [[String: Any]])
        #expect(suites.contains { $0["skipped"] as? String == "no vector folder" })
    }
}
