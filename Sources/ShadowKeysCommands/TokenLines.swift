import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowJOSE

/// `verify-token --each-line`: every line of stdin is a token, verified on all cores with the
/// keys and policy loaded once; one result is printed a line, in input order (Docs/cli.md).
enum TokenLines {
    /// Lines verified together: enough to keep every core busy, few enough to bound memory.
    static let batchSize = 2048

    /// Verifies every line of stdin and prints its result; returns the highest exit status among them.
    static func verifyAll(_ verify: @escaping TokenVerification, json: Bool) async throws -> ExitStatus {
        var reader = LineReader(fd: 0, name: "stdin", maxLineBytes: TokenOptions.readLimit)
        let workers = max(1, ProcessInfo.processInfo.activeProcessorCount)
        var worst = ExitStatus.success
        var number = 0
        while true {
            var batch: [LineReader.Line] = []
            while batch.count < batchSize, let line = try reader.next() { batch.append(line) }
            if batch.isEmpty { break }
            let results = try await verifyBatch(batch, workers: workers, verify: verify)
            var output = ""
            for result in results {
                number += 1
                output += format(result, line: number, json: json)
                output += "\n"
                if result.status.rawValue > worst.rawValue { worst = result.status }
            }
            Console.outRaw(output)
            if batch.count < batchSize { break }
        }
        return worst
    }

    /// One token's outcome.
    struct Result: Sendable {
        var status: ExitStatus
        var verified: VerifiedJWT?
        var extra: [JSONObject.Member] = []
        var error: CLIError?
    }

    /// The batch, split into one contiguous slice per worker; results in input order.
    static func verifyBatch(
        _ batch: [LineReader.Line], workers: Int, verify: @escaping TokenVerification
    ) async throws -> [Result] {
        let slice = (batch.count + workers - 1) / workers
        return try await withThrowingTaskGroup(of: (Int, [Result]).self) { group in
            for start in stride(from: 0, to: batch.count, by: slice) {
                let lines = Array(batch[start..<min(start + slice, batch.count)])
                group.addTask { (start, await lines.asyncMap { await check($0, verify) }) }
            }
            var results = [Result?](repeating: nil, count: batch.count)
            for try await (start, part) in group {
                for (offset, result) in part.enumerated() { results[start + offset] = result }
            }
            return results.compactMap { $0 }
        }
    }

    /// Verifies one line; every failure becomes its result, never an error of the run.
    static func check(_ line: LineReader.Line, _ verify: TokenVerification) async -> Result {
        let text: String
        switch line {
        case .tooLong(let count):
            let error = CLIError(
                .malformedToken, code: "malformed_token",
                "the line is \(count) bytes, over the \(TokenOptions.readLimit)-byte limit")
            return Result(status: .malformedToken, error: error)
        case .text(let bytes):
            text = String(decoding: trimWhitespace(bytes), as: UTF8.self)
        }
        do {
            let (verified, extra) = try await verify(text)
            return Result(status: .success, verified: verified, extra: extra)
        } catch {
            let report = CLIError(reporting: error)
            return Result(status: report.status, error: report)
        }
    }

    /// A result as one line: `ok` or `<exit> <code>: <message>`; with `--json`, an object with
    /// `line`, `valid`, and the claims or the error.
    static func format(_ result: Result, line: Int, json: Bool) -> String {
        guard json else {
            guard let error = result.error else { return "ok" }
            return "\(result.status.rawValue) \(error.code): \(error.message)".terminalSafe
        }
        var object: JSONObject = ["line": .int(line), "valid": .bool(result.error == nil)]
        if let verified = result.verified {
            for member in verifiedJSON(verified, extra: result.extra) { object.set(member.name, member.value) }
        }
        if let error = result.error {
            object.set("exit", .int(Int(result.status.rawValue)))
            object.set("error", error.json)
        }
        return JSONValue.object(object).serializedForTerminal()
    }
}

extension Array where Element: Sendable {
    /// The elements mapped in order, one after another.
    func asyncMap<T>(_ transform: (Element) async -> T) async -> [T] {
        var results: [T] = []
        results.reserveCapacity(count)
        for element in self { results.append(await transform(element)) }
        return results
    }
}
