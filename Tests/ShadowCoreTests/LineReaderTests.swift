import Testing

@testable import ShadowCore

/// Lines as `verify-token --each-line` reads them: split at each newline wherever the reads
/// break the input, CR before a newline dropped, over-long lines reported by their length only.
@Suite struct LineReaderTests {
    /// Every line of `input`, read `step` bytes at a time through a reader of lines up to `limit`.
    func lines(_ input: String, step: Int, limit: Int = 16) throws -> [LineReader.Line] {
        let bytes = Array(input.utf8)
        // The reads the source gives, in turn: `step` bytes each, the last one shorter.
        var reads = stride(from: 0, to: bytes.count, by: step).map { bytes[$0..<min($0 + step, bytes.count)] }[...]
        var reader = LineReader(maxLineBytes: limit) { buffer in
            guard let read = reads.popFirst() else { return 0 }
            precondition(read.count <= buffer.count, "a read larger than the reader's buffer")
            buffer.copyBytes(from: read)
            return read.count
        }
        var result: [LineReader.Line] = []
        while let line = try reader.next() { result.append(line) }
        return result
    }

    func text(_ string: String) -> LineReader.Line { .text(Array(string.utf8)) }

    @Test(arguments: [1, 2, 3, 7, 64 * 1024])
    func linesAreTheSameWhereverTheReadsBreak(step: Int) throws {
        #expect(
            try lines("a\r\nbc\n\nlast", step: step) == [text("a"), text("bc"), text(""), text("last")])
        #expect(try lines("one\n", step: step) == [text("one")])
        #expect(try lines("\n\n", step: step) == [text(""), text("")])
        #expect(try lines("", step: step) == [])
        // A CR that is not before the newline stays.
        #expect(try lines("a\rb\r\r\n", step: step) == [text("a\rb\r")])
    }

    @Test(arguments: [1, 5, 64 * 1024])
    func aLineOverTheLimitIsOnlyItsLength(step: Int) throws {
        let long = String(repeating: "x", count: 40)
        #expect(
            try lines("ok\n\(long)\r\nnext\n\(long)", step: step, limit: 16) == [
                text("ok"), .tooLong(40), text("next"), .tooLong(40),
            ])
        // At the limit is a line; one byte over is not (its CR not counted).
        let atLimit = String(repeating: "y", count: 16)
        #expect(try lines("\(atLimit)\r\n\(atLimit)z\n", step: step) == [text(atLimit), .tooLong(17)])
    }

    @Test func aNewlineFarIntoALargeReadIsFound() throws {
        // Lines of a token's size, many to a read: each found by its own newline, none skipped.
        let token = String(repeating: "t", count: 800)
        let input = (0..<200).map { "\(token)\($0)\n" }.joined()
        let found = try lines(input, step: 64 * 1024, limit: 1024)
        #expect(found == (0..<200).map { text("\(token)\($0)") })
    }
}
