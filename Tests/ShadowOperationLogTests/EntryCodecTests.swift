import ShadowCore
import ShadowOperationLog
import Testing

/// The entry codec's readers against each other and against its writer (Docs/operation-log.md,
/// "Entries").
@Suite struct EntryCodecTests {
    let keys: LogKeys

    init() throws { keys = try LogKeys(secret: (0..<32).map { UInt8($0) }) }

    /// Details nested `depth` deep: `{"a":{"a":…{}…}}`.
    static func nested(_ depth: Int) -> JSONObject {
        var object: JSONObject = [:]
        for _ in 1..<depth { object = ["a": .object(object)] }
        return object
    }

    static func entry(details: JSONObject? = nil, success: Bool = true) -> OperationEntry {
        OperationEntry(
            operation: "upload", provider: "icloud", entityType: "file", entityID: "Documents/é/report.pdf",
            time: 1_750_000_000_000, success: success, error: success ? nil : "HTTP 503 — retry",
            details: details)
    }

    /// `verify`, which builds nothing, refuses exactly what `decode` then `open` refuse, with the
    /// same reason: the entry, and every change of one byte of it.
    @Test(arguments: [true, false])
    func verifyRefusesWhatDecodeAndOpenRefuse(success: Bool) throws {
        let bytes = try EntryCodec.encode(
            Self.entry(details: ["bytes": .int(12)], success: success), keys: keys)
        try EntryCodec.verify(bytes, keys: keys)
        var refused = 0
        for index in bytes.indices {
            for change: UInt8 in [0x01, 0x80, 0xFF] {
                var edited = bytes
                edited[index] ^= change
                let viaOpen = Result { try EntryCodec.open(try EntryCodec.decode(edited), keys: keys) }
                let viaVerify = Result { try EntryCodec.verify(edited, keys: keys) }
                switch (viaOpen, viaVerify) {
                case (.success, .success): continue
                case (.failure(let open), .failure(let verify)):
                    #expect("\(open)" == "\(verify)", "byte \(index) ^ \(change)")
                    refused += 1
                default:
                    Issue.record("byte \(index) ^ \(change): open \(viaOpen), verify \(viaVerify)")
                }
            }
        }
        #expect(refused > bytes.count, "most changes break the entry")
        // Cut short or lengthened, the same.
        for count in [0, 1, bytes.count / 2, bytes.count - 1] {
            let cut = Array(bytes.prefix(count))
            #expect(throws: LogError.self) { try EntryCodec.verify(cut, keys: keys) }
        }
        #expect(throws: LogError.self) { try EntryCodec.verify(bytes + [0], keys: keys) }
    }

    /// Details nest at most 16 deep: the writer refuses deeper ones before anything is written,
    /// and the reader refuses an entry that carries them.
    @Test func detailsNestAtMostSixteenDeepOnBothSides() throws {
        let deepest = try EntryCodec.encode(Self.entry(details: Self.nested(16)), keys: keys)
        #expect(try EntryCodec.decode(deepest).details == Self.nested(16))
        try EntryCodec.verify(deepest, keys: keys)
        for depth in [17, 33, 40] {
            #expect(throws: LogError(.invalidParameter, "the details nest deeper than 16 or are not I-JSON")) {
                try Self.entry(details: Self.nested(depth)).validate()
            }
            #expect(throws: LogError.self) {
                try EntryCodec.encode(Self.entry(details: Self.nested(depth)), keys: keys)
            }
        }
        // An entry whose clear part carries details 17 deep, made by hand (the writer refuses
        // them), is refused by the reader.
        let text = String(repeating: "{\"a\":", count: 16) + "{}" + String(repeating: "}", count: 16)
        let bytes = Self.entryBytes(detailsText: text)
        #expect(throws: LogError(.tampered, "an entry's details are not a JSON object")) {
            try EntryCodec.decode(bytes)
        }
        #expect(throws: LogError(.tampered, "an entry's details are not a JSON object")) {
            try EntryCodec.verify(bytes, keys: keys)
        }
    }

    /// The clear part of an entry with `detailsText` as its details, and a sealed part of the
    /// right length (which is never reached: the details are read first).
    static func entryBytes(detailsText: String) -> [UInt8] {
        var out: [UInt8] = [1] + BigEndian.bytes(UInt64(1_750_000_000_000)) + [1]
        for name in ["upload", "icloud", "file"] { out += [UInt8(name.utf8.count)] + Array(name.utf8) }
        out += [UInt8](repeating: 0, count: 32)
        out += BigEndian.bytes(UInt32(detailsText.utf8.count)) + Array(detailsText.utf8)
        out += [UInt8](repeating: 0, count: 12) + BigEndian.bytes(UInt32(19)) + [UInt8](repeating: 0, count: 19)
        return out
    }
}
