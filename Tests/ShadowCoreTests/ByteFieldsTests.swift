import Testing

import ShadowCore

/// Delimiters found by their bytes, as every byte-level reader finds them: a `Character` split
/// misses one that shares a grapheme with its neighbour (Docs/server.md, "Behind a proxy";
/// Docs/sessions.md, the revoke and introspect forms).
@Suite struct ByteFieldsTests {
    @Test func aDelimiterJoinedToItsNeighbourStillSplits() {
        // U+0600 is a prepended mark: it joins the comma after it into one Character.
        #expect("6.6.6.6\u{600}, 1.2.3.4".split(byte: UInt8(ascii: ",")) == ["6.6.6.6\u{600}", " 1.2.3.4"])
        // U+0301 is a combining mark: it joins the `=` before it.
        #expect("k=\u{301}v".split(byte: UInt8(ascii: "="), maxSplits: 1) == ["k", "\u{301}v"])
        #expect("a,,b".split(byte: UInt8(ascii: ","), omittingEmptySubsequences: false) == ["a", "", "b"])
        #expect(" \t x y\t ".trimmingSpacesAndTabs() == "x y")
        #expect("\u{301} x".trimmingSpacesAndTabs() == "\u{301} x")
    }

    @Test func asciiCaseIsIgnoredAndNothingElse() {
        #expect("For".equalsASCIIIgnoringCase("for") && "FOR".equalsASCIIIgnoringCase("for"))
        // U+212A KELVIN SIGN is canonically equal to "K", and so `==` to it as a String.
        #expect(!"\u{212A}id".equalsASCIIIgnoringCase("kid") && !"fo".equalsASCIIIgnoringCase("for"))
    }

    /// A port, a prefix length or a count: ASCII digits only, where `Int` also takes a sign.
    @Test func digitsAreASCIIDigitsOnly() {
        #expect("0".asciiDigitsValue(maxDigits: 5) == 0 && "65535".asciiDigitsValue(maxDigits: 5) == 65535)
        #expect("007".asciiDigitsValue(maxDigits: 3) == 7)
        for text in ["", "+8", "-0", " 8", "8 ", "123456", "\u{FF18}", "8\u{301}", "1e3"] {
            #expect(text.asciiDigitsValue(maxDigits: 5) == nil, "\(text.debugDescription)")
        }
        #expect(Array("PEM\n".utf8).firstNonASCIIOffset == nil)
        #expect(Array("PRIVATE \u{212A}EY".utf8).firstNonASCIIOffset == 8)
    }

    @Test func trimmingCaseAndEndsAreByBytes() {
        #expect(" \t\r\nHost\u{0B}\u{0C}".trimmingASCIIWhitespace() == "Host")
        #expect("\u{A0}x\u{2028}".trimmingASCIIWhitespace().utf8.count == 6)  // not ASCII whitespace
        #expect("ÉX\u{212A}".asciiLowercased().utf8.elementsEqual("Éx\u{212A}".utf8))
        #expect("[\u{301}::1]".unwrapping(UInt8(ascii: "["), UInt8(ascii: "]")).utf8.elementsEqual("\u{301}::1".utf8))
        #expect("[x".unwrapping(UInt8(ascii: "["), UInt8(ascii: "]")) == "[x")
        #expect("[".unwrapping(UInt8(ascii: "["), UInt8(ascii: "[")) == "[")
        #expect("...a.b..".dropping(UInt8(ascii: "."), leading: .max, trailing: 1) == "a.b.")
        #expect(".\u{301}x.".dropping(UInt8(ascii: "."), leading: 1).utf8.elementsEqual("\u{301}x.".utf8))
    }

    @Test func formsAreReadAsTheURLStandardReadsThem() {
        let pairs = FormDecoding.pairs(in: "token=a&token=\u{301}b&&flag&x=1=2&%74oken=c")
        #expect(pairs.map(\.name) == ["token", "token", "flag", "x", "token"])
        #expect(pairs.map(\.value) == ["a", "\u{301}b", "", "1=2", "c"])
        #expect(FormDecoding.fields("token", in: "token=a&token=\u{301}b") == ["a", "\u{301}b"])
        // `%` with two ASCII hex digits is a byte; a sign is not a digit.
        #expect(FormDecoding.value("%41%2b%+1%-0%4%zz+%C3%A9") == "A+% 1%-0%4%zz é")
    }
}
