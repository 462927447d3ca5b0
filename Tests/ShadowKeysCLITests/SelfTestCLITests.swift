import Foundation
import ShadowTestSupport
import Testing

@Suite(.tags(.multiProcess)) struct SelfTestCLITests {
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
        for suite in suites { #expect((suite["run"] as? Int ?? 0) > 0 && suite["run"] as? Int == suite["passed"] as? Int, "\(suite)") }
    }

    @Test func missingVectorsFailUnlessBuiltinOnly() throws {
        let elsewhere = try TemporaryDirectory()
        let missing = try CLIRunner.run(["selftest", "--vectors", elsewhere.path])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("FAILED"))
        let builtin = try CLIRunner.run(["selftest", "--builtin-only"], currentDirectory: elsewhere.url)
        #expect(builtin.status == 0, "\(builtin.stderr)")
        #expect(builtin.stdout.contains("built-in vectors only"))
    }
}
