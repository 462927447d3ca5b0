extension StringProtocol {
    /// The parts of the text between its `delimiter` bytes (an ASCII byte), found by bytes. A
    /// split by `Character` misses a delimiter that shares a grapheme with its neighbour (a
    /// combining mark after it, a prepended mark such as U+0600 before it), so a text that any
    /// byte-level reader sees as two fields would be one here.
    package func split(
        byte delimiter: UInt8, maxSplits: Int = .max, omittingEmptySubsequences: Bool = true
    ) -> [Substring] {
        Substring(self).utf8.split(
            separator: delimiter, maxSplits: maxSplits, omittingEmptySubsequences: omittingEmptySubsequences
        ).map { Substring($0) }
    }

    /// The text without leading and trailing spaces and tabs (HTTP's optional whitespace), by bytes.
    package func trimmingSpacesAndTabs() -> Substring {
        trimmingBytes { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
    }

    /// The text without leading and trailing ASCII whitespace (space, tab, LF, VT, FF, CR), by bytes.
    package func trimmingASCIIWhitespace() -> Substring {
        trimmingBytes { $0 == UInt8(ascii: " ") || (0x09...0x0D).contains($0) }
    }

    /// The text inside `open` and `close` (ASCII bytes) when it begins with the one and ends with
    /// the other, by bytes (`dropFirst()` drops a Character: a bracket with the marks after it);
    /// otherwise the whole text.
    package func unwrapping(_ open: UInt8, _ close: UInt8) -> Substring {
        let bytes = Substring(self).utf8
        guard bytes.count >= 2, bytes.first == open, bytes.last == close else { return Substring(self) }
        return Substring(bytes.dropFirst().dropLast())
    }

    /// The text without the ASCII `byte` repeated at its start (at most `leading` of them) and at its
    /// end (at most `trailing`), by bytes.
    package func dropping(_ byte: UInt8, leading: Int = 0, trailing: Int = 0) -> Substring {
        var bytes = Substring(self).utf8[...]
        var count = 0
        while count < leading, bytes.first == byte {
            bytes = bytes.dropFirst()
            count += 1
        }
        count = 0
        while count < trailing, bytes.last == byte {
            bytes = bytes.dropLast()
            count += 1
        }
        return Substring(bytes)
    }

    private func trimmingBytes(_ blank: (UInt8) -> Bool) -> Substring {
        let bytes = Substring(self).utf8
        var start = bytes.startIndex
        var end = bytes.endIndex
        while start < end, blank(bytes[start]) { start = bytes.index(after: start) }
        while end > start, blank(bytes[bytes.index(before: end)]) { end = bytes.index(before: end) }
        return Substring(bytes[start..<end])
    }

    /// The text with its ASCII capitals made small, byte by byte; every other byte as it is
    /// (`lowercased()` maps by Unicode: the Kelvin sign, U+212A, becomes `k`).
    package func asciiLowercased() -> String {
        String(decoding: utf8.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    /// The value of the text when it is 1 to `maxDigits` ASCII digits and nothing else (no sign,
    /// no space: `Int("+8")` is 8); nil otherwise. `maxDigits` is at most 18, so no value overflows.
    package func asciiDigitsValue(maxDigits: Int) -> Int? {
        precondition((1...18).contains(maxDigits), "at most 18 digits fit any Int")
        guard (1...maxDigits).contains(utf8.count) else { return nil }
        var value = 0
        for byte in utf8 {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value
    }

    /// Whether the text is `ascii` (lower-case ASCII) in any ASCII case, compared by bytes.
    package func equalsASCIIIgnoringCase(_ ascii: StaticString) -> Bool {
        let expected = UnsafeBufferPointer(start: ascii.utf8Start, count: ascii.utf8CodeUnitCount)
        return utf8.elementsEqual(expected) { byte, lower in
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 == lower : byte == lower
        }
    }
}

extension Collection<UInt8> {
    /// The offset of the first byte that is not ASCII, if any (PEM, RFC 7468, is ASCII only).
    package var firstNonASCIIOffset: Int? { firstIndex { $0 >= 0x80 }.map { distance(from: startIndex, to: $0) } }
}
