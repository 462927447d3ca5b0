import Foundation
import ShadowCore
import Testing

@Suite struct StrictJSONTests {
    private func parse(_ text: String, limits: StrictJSON.Limits = .document) throws -> JSONValue {
        try StrictJSON.parse(text, limits: limits)
    }

    @Test func readsEveryKind() throws {
        let value = try parse(
            #" { "s": "a\"b\\c\/\n\u00e9\ud83d\ude00", "n": -12.5e2, "i": 1700000000, "#
                + #""t": true, "f": false, "z": null, "a": [1, [], {}] } "#
        )
        let object = try #require(value.objectValue)
        #expect(object["s"] == .string("a\"b\\c/\né😀"))
        #expect(object["n"]?.numberValue?.doubleValue == -1250)
        #expect(object["n"]?.numberValue?.literal == "-12.5e2")
        #expect(object["i"]?.numberValue?.int64Value == 1_700_000_000)
        #expect(object["t"] == .bool(true))
        #expect(object["f"] == .bool(false))
        #expect(object["z"] == .null)
        #expect(object["a"]?.arrayValue?.count == 3)
        #expect(object.map(\.name) == ["s", "n", "i", "t", "f", "z", "a"])
    }

    @Test(arguments: [
        (#"{"a":1,"a":2}"#, "duplicate"),
        (#"{"a":1,"\u0061":2}"#, "duplicate"),
        (#"{"alg":"RS256","b":1,"alg":"none"}"#, "duplicate"),
        (#"{"a":"\ud800"}"#, "surrogate"),
        (#"{"a":"\udc00\ud800"}"#, "surrogate"),
        (#"{"a":"\ud800\u0041"}"#, "surrogate"),
        (#"{"a":"\uFFFF"}"#, "noncharacter"),
        (#"{"a":"\uFDD0"}"#, "noncharacter"),
        ("{\"a\":\"\u{FFFE}\"}", "noncharacter"),
        (#"{"a":1e400}"#, "IEEE"),
        (#"{"a":-1e400}"#, "IEEE"),
        (#"{"a":01}"#, "expected"),
        (#"{"a":1.}"#, "malformed number"),
        (#"{"a":.5}"#, "expected a JSON value"),
        (#"{"a":+1}"#, "expected a JSON value"),
        (#"{"a":1e}"#, "malformed number"),
        (#"{"a":NaN}"#, "expected a JSON value"),
        (#"{"a":tru}"#, "'true'"),
        (#"{"a":"x"} x"#, "after the end"),
        (#"{"a":"x"}{}"#, "after the end"),
        (#"{"a":"x",}"#, "member name"),
        (#"[1,]"#, "JSON value"),
        (#"{"a" 1}"#, "':'"),
        (#"{'a':1}"#, "member name"),
        ("{\"a\":\"tab\there\"}", "control character"),
        (#"{"a":"\x"}"#, "escape"),
        (#"{"a":"\u12G4"}"#, "escape"),
        (#"{"a":"unterminated}"#, "end of document"),
        ("\u{FEFF}{}", "JSON value"),
        ("", "end of document"),
    ])
    func rejects(document: String, reason: String) {
        do {
            _ = try parse(document)
            Issue.record("accepted \(document)")
        } catch let error as JSONParseError {
            #expect(error.description.contains(reason), "\(document): \(error)")
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    @Test func rejectsInvalidUTF8() {
        for bytes: [UInt8] in [
            [0x22, 0xC3, 0x28, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22], [0x22, 0xC0, 0xAF, 0x22],
            [0x22, 0xF5, 0x80, 0x80, 0x80, 0x22],
        ] {
            #expect(throws: JSONParseError.self, "\(bytes)") { try StrictJSON.parse(bytes) }
        }
    }

    @Test func duplicatesAreFoundInLargeObjects() throws {
        // Past 15 members the reader switches from a scan to a set; both must catch repeats.
        let members = (0..<40).map { "\"m\($0)\":\($0)" }
        #expect(try parse("{" + members.joined(separator: ",") + "}").objectValue?.count == 40)
        for repeatAt in [3, 16, 39] {
            let document = "{" + (members + ["\"m\(repeatAt)\":0"]).joined(separator: ",") + "}"
            #expect(throws: JSONParseError.self) { try parse(document) }
        }
    }

    @Test func canonicallyEquivalentNamesAreDistinct() throws {
        // "K" and U+212A are different code points: not duplicates, and lookups are exact.
        let object = try #require(try parse(#"{"K":1,"\u212A":2}"#).objectValue)
        #expect(object["K"]?.numberValue?.int64Value == 1)
        #expect(object["\u{212A}"]?.numberValue?.int64Value == 2)
    }

    @Test func enforcesDepthLimit() throws {
        let limits = StrictJSON.Limits(maxBytes: 1 << 20, maxDepth: 8)
        #expect(throws: Never.self) {
            try parse(String(repeating: "[", count: 8) + String(repeating: "]", count: 8), limits: limits)
        }
        #expect(throws: JSONParseError.self) {
            try parse(String(repeating: "[", count: 9) + String(repeating: "]", count: 9), limits: limits)
        }
        // A hostile depth far past the limit fails fast instead of exhausting the stack.
        #expect(throws: JSONParseError.self) { try parse(String(repeating: "[", count: 100_000), limits: .document) }
    }

    @Test func enforcesSizeLimit() {
        let limits = StrictJSON.Limits(maxBytes: 10, maxDepth: 8)
        #expect(throws: Never.self) { try parse(#"{"a":"bc"}"#, limits: limits) }
        #expect(throws: JSONParseError(reason: .tooLarge(size: 11, limit: 10), offset: 0)) {
            try parse(#"{"a":"bcd"}"#, limits: limits)
        }
    }

    @Test func serializesCompactAndPretty() throws {
        let text = #"{"b":[1,2.50,"x\"\u0001"],"a":{"k":null},"e":{},"f":[]}"#
        let value = try parse(text)
        #expect(value.serialized() == #"{"b":[1,2.50,"x\"\u0001"],"a":{"k":null},"e":{},"f":[]}"#)
        #expect(try parse(value.serialized(pretty: true)) == value)
        #expect(value.serialized(pretty: true).contains("\n  \"a\": {\n    \"k\": null\n  }"))
    }

    @Test func escapesAsRFC8785() {
        #expect(JSONValue.string("a\u{2028}b\u{7F}é").serialized() == "\"a\u{2028}b\u{7F}é\"")
        #expect(JSONValue.string("\u{8}\u{C}\n\r\t\u{1}\u{1F}\"\\/").serialized() == #""\b\f\n\r\t\u0001\u001f\"\\/""#)
    }

    @Test func runsBetweenEscapesAreKeptWhole() throws {
        let text = "plain \"quoted\" \\ 🔑 naïve\u{0}end\u{1F}"
        #expect(JSONValue.string(text).serialized() == #""plain \"quoted\" \\ 🔑 naïve\u0000end\u001f""#)
        #expect(try parse(JSONValue.string(text).serialized()) == .string(text))
        #expect(JSONValue.object(["k\u{1}": .string("")]).serialized() == #"{"k\u0001":""}"#)
    }

    @Test func terminalFormEscapesEveryTerminalControl() throws {
        let text = "\u{1B}[31mred\u{7F}\u{9B}\u{200E}\u{2028}\u{202E}\u{2069}é🔑"
        let terminal = JSONValue.string(text).serializedForTerminal()
        #expect(terminal == #""\u001b[31mred\u007f\u009b\u200e\u2028\u202e\u2069é🔑""#)
        #expect(try parse(terminal) == .string(text))
    }

    @Test func numbersKeepTheirLiteral() throws {
        let big = try parse("123456789012345678901234567890").numberValue
        #expect(big?.literal == "123456789012345678901234567890")
        #expect(big?.int64Value == nil)
        #expect(try parse("-0").numberValue?.int64Value == 0)
        #expect(try parse("1.0").numberValue?.int64Value == nil)
    }
}

@Suite struct MemberFingerprintTests {
    @Test func namesSharingAFingerprintStayDistinct() throws {
        // "iss" and "ixs" have the same length, first and last byte; so do "exp" and "eap".
        let object = try #require(
            try StrictJSON.parse(#"{"iss":1,"ixs":2,"exp":3,"eap":4,"a":5,"ab":6,"b":7}"#).objectValue)
        #expect(object.map(\.name) == ["iss", "ixs", "exp", "eap", "a", "ab", "b"])
        #expect(object["iss"]?.numberValue?.int64Value == 1)
        #expect(object["ixs"]?.numberValue?.int64Value == 2)
        #expect(object["eap"]?.numberValue?.int64Value == 4)
        #expect(object["isx"] == nil)
        #expect(throws: JSONParseError.self) { try StrictJSON.parse(#"{"ixs":1,"iss":2,"ixs":3}"#) }
    }

    @Test func knownNamesWithEscapesAreStillKnown() throws {
        let object = try #require(try StrictJSON.parse(#"{"\u0069ss":"a"}"#).objectValue)
        #expect(object["iss"] == .string("a"))
        #expect(throws: JSONParseError.self) { try StrictJSON.parse(#"{"iss":1,"\u0069ss":2}"#) }
    }

    @Test func emptyAndNonASCIINames() throws {
        let object = try #require(try StrictJSON.parse(#"{"":1,"é":2,"e":3}"#).objectValue)
        #expect(object[""]?.numberValue?.int64Value == 1)
        #expect(object["é"]?.numberValue?.int64Value == 2)
        #expect(object["e"]?.numberValue?.int64Value == 3)
        #expect(throws: JSONParseError.self) { try StrictJSON.parse(#"{"":1,"":2}"#) }
    }

    @Test func setReplacesAndRemoves() {
        var object: JSONObject = ["a": 1, "b": 2]
        object.set("a", 3)
        object.set("c", 4)
        object.set("b", nil)
        #expect(object.map(\.name) == ["a", "c"])
        #expect(object["a"] == 3)
    }
}
