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
    /// Lines read, verified and printed together: enough to keep every core busy, few enough to
    /// bound memory. The next batch is read while this one is verified.
    static let batchSize = 2048
    /// Lines one task verifies and formats: small enough that the cores finish a batch together.
    static let chunkSize = 128

    /// Verifies every line of stdin and prints its result; returns the highest exit status among them.
    static func verifyAll(_ verify: @escaping TokenVerification, json: Bool) async throws -> ExitStatus {
        var reader = LineReader(fd: 0, name: "stdin", maxLineBytes: TokenOptions.readLimit)
        var worst = ExitStatus.success
        var number = 0
        var next = try readBatch(&reader)
        while !next.isEmpty {
            let batch = next, firstLine = number + 1
            async let verified = verifyBatch(batch, firstLine: firstLine, json: json, verify: verify)
            number += batch.count
            next = batch.count < batchSize ? [] : try readBatch(&reader)
            for chunk in try await verified {
                Console.outRaw(chunk.output)
                if chunk.worst.rawValue > worst.rawValue { worst = chunk.worst }
            }
        }
        return worst
    }

    /// Up to ``batchSize`` lines; empty at the end of the input.
    private static func readBatch(_ reader: inout LineReader) throws -> [LineReader.Line] {
        var batch: [LineReader.Line] = []
        batch.reserveCapacity(batchSize)
        while batch.count < batchSize, let line = try reader.next() { batch.append(line) }
        return batch
    }

    /// One token's outcome.
    struct Result: Sendable {
        var status: ExitStatus
        var verified: VerifiedJWT?
        var extra: [JSONObject.Member] = []
        var error: CLIError?
    }

    /// Consecutive lines' printed results, and the highest exit status among them.
    struct Chunk: Sendable {
        var output = ""
        var worst = ExitStatus.success
    }

    /// The batch in chunks of ``chunkSize`` lines, each verified and formatted by one task; the
    /// chunks in input order. `firstLine` numbers the batch's first line (for `--json`).
    static func verifyBatch(
        _ batch: [LineReader.Line], firstLine: Int, json: Bool, verify: @escaping TokenVerification
    ) async throws -> [Chunk] {
        try await withThrowingTaskGroup(of: (Int, Chunk).self) { group in
            for start in stride(from: 0, to: batch.count, by: chunkSize) {
                let lines = batch[start..<min(start + chunkSize, batch.count)]
                group.addTask {
                    var chunk = Chunk()
                    for (offset, line) in zip(lines.indices, lines) {
                        let result = await check(line, verify)
                        chunk.output += format(result, line: firstLine + offset, json: json)
                        chunk.output += "\n"
                        if result.status.rawValue > chunk.worst.rawValue { chunk.worst = result.status }
                    }
                    return (start / chunkSize, chunk)
                }
            }
            var chunks = [Chunk](repeating: Chunk(), count: (batch.count + chunkSize - 1) / chunkSize)
            for try await (index, chunk) in group { chunks[index] = chunk }
            return chunks
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
