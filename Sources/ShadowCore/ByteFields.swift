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
        let bytes = Substring(self).utf8
        func blank(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        var start = bytes.startIndex
        var end = bytes.endIndex
        while start < end, blank(bytes[start]) { start = bytes.index(after: start) }
        while end > start, blank(bytes[bytes.index(before: end)]) { end = bytes.index(before: end) }
        return Substring(bytes[start..<end])
    }

    /// Whether the text is `ascii` (lower-case ASCII) in any ASCII case, compared by bytes.
    package func equalsASCIIIgnoringCase(_ ascii: StaticString) -> Bool {
        let expected = UnsafeBufferPointer(start: ascii.utf8Start, count: ascii.utf8CodeUnitCount)
        return utf8.elementsEqual(expected) { byte, lower in
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 == lower : byte == lower
        }
    }
}
