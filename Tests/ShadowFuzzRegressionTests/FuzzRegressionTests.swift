import Foundation
import ShadowFuzzTargets
import ShadowTestSupport
import Testing

/// Every seed and every input that ever made a harness fail (FuzzTesting/Corpus and
/// FuzzTesting/FailCases), replayed through the same harness code the fuzzer runs. A broken
/// invariant traps, so a regression fails the suite loudly.
@Suite struct FuzzRegressionTests {
    static let root = PackagePaths.root.appendingPathComponent("FuzzTesting")

    /// The files of `folder/<harness>/`.
    static func inputs(_ folder: String, _ harness: String) -> [URL] {
        let directory = root.appendingPathComponent(folder).appendingPathComponent(harness)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.sorted().filter { !$0.hasPrefix(".") }.map { directory.appendingPathComponent($0) }
    }

    @Test(arguments: FuzzTargets.all.map(\.name))
    func seedsAndPastFailuresRunClean(harness: String) throws {
        let seeds = Self.inputs("Corpus", harness)
        #expect(!seeds.isEmpty, "FuzzTesting/Corpus/\(harness) has no seeds; run Scripts/fuzz --seed")
        for file in seeds + Self.inputs("FailCases", harness) {
            FuzzTargets.run(harness, [UInt8](try Data(contentsOf: file)))
        }
    }

    /// Every harness has a corpus folder and every folder a harness, so a renamed one cannot
    /// leave inputs unrun; the folders of kept failures belong to harnesses (replayed above).
    @Test func everyCorpusFolderHasAHarness() throws {
        let names = Set(FuzzTargets.all.map(\.name))
        func folders(_ folder: String) throws -> Set<String> {
            let path = Self.root.appendingPathComponent(folder).path
            return Set(
                try FileManager.default.contentsOfDirectory(atPath: path).filter {
                    !$0.hasPrefix(".") && !$0.hasSuffix(".md")
                })
        }
        #expect(try folders("Corpus") == names, "FuzzTesting/Corpus and the harnesses differ")
        // Scripts/fuzz makes a folder per harness it runs; the ones holding inputs are the kept failures.
        let failures = try folders("FailCases").filter { !Self.inputs("FailCases", $0).isEmpty }
        #expect(!failures.isEmpty && failures.isSubset(of: names), "FuzzTesting/FailCases: \(failures.sorted())")
    }
}
