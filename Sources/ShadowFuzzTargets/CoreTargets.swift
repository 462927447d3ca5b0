import ShadowCore

enum CoreTargets {
    /// The strict reader; what it accepts serializes (plainly and for a terminal) and parses
    /// back to the same value.
    static let json: FuzzTargets.Harness = { data in
        guard let value = try? StrictJSON.parse(buffer: data.bindMemory(to: UInt8.self), limits: .document) else {
            return
        }
        for text in [value.serialized(), value.serialized(pretty: true), value.serializedForTerminal()] {
            guard let again = try? StrictJSON.parse(text, limits: .document) else {
                preconditionFailure("serialized JSON does not parse: \(text.prefix(200))")
            }
            precondition(again == value, "JSON changed in a round trip: \(text.prefix(200))")
        }
    }

    /// Canonical base64url: whatever decodes re-encodes to exactly the input.
    static let base64URL: FuzzTargets.Harness = { data in
        let input = data.bindMemory(to: UInt8.self)
        guard let decoded = try? Base64URL.decode(input) else { return }
        precondition(Base64URL.encode(decoded).utf8.elementsEqual(input), "base64url is not canonical")
        precondition(Base64URL.decodedCount(input.count) == decoded.count)
    }

    /// Lines (`verify-token --each-line`): the input's first byte sets the line limit and the
    /// second the size of each read; the rest comes back as its lines, each without its CR, and
    /// one over the limit only as its length.
    static let lines: FuzzTargets.Harness = { data in
        let bytes = Array(data.bindMemory(to: UInt8.self))
        guard bytes.count >= 2 else { return }
        let limit = Int(bytes[0] % 64) + 1, step = Int(bytes[1] % 17) + 1
        let input = Array(bytes[2...])
        var offset = 0
        var reader = LineReader(maxLineBytes: limit) { buffer in
            let count = min(step, buffer.count, input.count - offset)
            for index in 0..<count { buffer[index] = input[offset + index] }
            offset += count
            return count
        }
        var pieces = input.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        if input.last == UInt8(ascii: "\n") || input.isEmpty { pieces.removeLast() }
        for piece in pieces {
            var text = Array(piece)
            if text.last == UInt8(ascii: "\r") { text.removeLast() }
            let expected: LineReader.Line = text.count > limit ? .tooLong(text.count) : .text(text)
            let line = try? reader.next()
            precondition(line == expected, "line \(String(describing: line)) where \(expected) was expected")
        }
        precondition((try? reader.next()) == .some(nil), "more lines than the input has")
    }

    /// Times: every accepted one is in range, and its RFC 3339 form parses to it (whole seconds).
    static let time: FuzzTargets.Harness = { data in
        let text = String(decoding: data, as: UTF8.self)
        guard let time = try? Timestamp.parse(text) else { return }
        precondition(Timestamp.range.contains(time.milliseconds))
        let whole = Timestamp(wholeSeconds: time.wholeSeconds)
        precondition(
            whole != nil && (try? Timestamp.parse(time.rfc3339)) == whole,
            "RFC 3339 round trip failed for \(text.prefix(80))")
        _ = time.fields
        _ = time.date
    }
}
