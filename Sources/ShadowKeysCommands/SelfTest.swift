import ArgumentParser
import ShadowCore
import ShadowSelfTest

struct SelfTestCommand: AsyncParsableCommand, QuietCommand {
    static let configuration = CommandConfiguration(
        commandName: "selftest",
        abstract: "Run the known-answer tests of every module and print a table.",
        discussion: """
            RFC examples are built in; Wycheproof and NIST files are read from TestVectors/ \
            (found via --vectors, $SHADOW_KEYS_VECTORS, ./TestVectors, or the package checkout the \
            binary was built in). Exits 0 only if every suite ran and passed.
            """
    )

    @Option(help: "The TestVectors directory.")
    var vectors: String?

    @Flag(name: .customLong("builtin-only"), help: "Run only the compiled-in vectors; do not look for TestVectors/.")
    var builtinOnly = false

    @Flag(help: "Print the result as JSON.")
    var json = false

    @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

    func run() async throws {
        let directory = builtinOnly ? nil : (vectors ?? SelfTest.locateVectors(executablePath: Console.executablePath))
        let results = SelfTest.run(vectorsDirectory: directory, builtinOnly: builtinOnly)
        let allPassed = !results.contains(where: \.failed)
        if json {
            Console.json([
                "passed": .bool(allPassed),
                "vectors": directory.map(JSONValue.string) ?? .null,
                "suites": .array(results.map(Self.json)),
            ])
        } else {
            printTable(results, directory: directory)
        }
        if !allPassed { throw ExitCode(1) }
    }

    private static func json(_ result: SuiteResult) -> JSONValue {
        [
            "module": .string(result.module), "suite": .string(result.name), "run": .int(result.run),
            "passed": .int(result.passed),
            "error": result.error.map { .error(code: "suite_not_run", message: $0) } ?? .null,
            "skipped": result.skipped.map(JSONValue.string) ?? .null,
            "failures": .array(result.cases.filter { !$0.passed }.map { .string($0.detail) }),
        ]
    }

    private func printTable(_ results: [SuiteResult], directory: String?) {
        var rows: [[String]] = [["module", "suite", "vectors", "passed"]]
        for result in results {
            rows.append([
                result.module, result.name, String(result.run),
                result.skipped != nil ? "skipped" : result.error == nil ? String(result.passed) : "ERROR",
            ])
        }
        let widths = (0..<4).map { column in rows.map { $0[column].count }.max() ?? 0 }
        for (index, row) in rows.enumerated() {
            let cells = row.enumerated().map { column, cell in
                let fill = String(repeating: " ", count: widths[column] - cell.count)
                return column >= 2 ? fill + cell : cell + fill
            }
            Console.out(cells.joined(separator: "  "))
            if index == 0 { Console.out(String(repeating: "-", count: widths.reduce(6, +))) }
        }
        let run = results.reduce(0) { $0 + $1.run }
        let passed = results.reduce(0) { $0 + $1.passed }
        let source = directory.map { " (vector files: \($0))" } ?? " (built-in vectors only)"
        let skipped = results.count { $0.skipped != nil }
        let failed = results.count(where: \.failed)
        let verdict = failed == 0 ? "ok" : "FAILED (\(failed) suite\(failed == 1 ? "" : "s") failed or could not run)"
        let skippedNote = skipped == 0 ? "" : ", \(skipped) skipped (no vector folder)"
        Console.out(
            "\(verdict): \(passed)/\(run) vectors passed in \(results.count - skipped) suites\(skippedNote)\(source)")
        for result in results {
            if let error = result.error { Console.err("FAILED \(result.name): \(error)") }
            for failure in result.cases where !failure.passed {
                Console.err("FAILED \(result.name): \(failure.detail)")
            }
        }
        if skipped > 0 {
            Console.err(
                """
                note: \(skipped) suites need the Wycheproof and NIST files: run from the package checkout, or pass \
                --vectors DIR
                """
            )
        }
    }
}
