#if canImport(Darwin)
import Darwin
package import Foundation
#else
import Glibc
package import FoundationEssentials
#endif
package import ShadowCore
import ShadowCrypto

/// The decrypted body of a vault (Docs/vault-format.md, "Body"): the generation, the entries in
/// byte order of their names, and named sections.
///
/// Entries stay encoded until someone reads them. Opening validates every entry without building
/// it, a change re-encodes only the entries it touches, and writing copies the rest as they are,
/// so a put into a vault of 10,000 entries costs little more than its cipher and file work.
package struct VaultContents: Sendable {
    package var generation: UInt64
    /// Encoded entries (each with its length prefix), sorted by the bytes of their names.
    private var records: [ArraySlice<UInt8>] = []
    /// Section values (UTF-8 JSON text), sorted by the bytes of their names.
    private var sectionRecords: [(name: String, json: ArraySlice<UInt8>)] = []

    package init(generation: UInt64 = 0) { self.generation = generation }

    package var count: Int { records.count }

    /// Entry names in byte order.
    package var names: [String] { records.map { String(decoding: EntryCodec.name(of: $0), as: UTF8.self) } }

    /// The entry named exactly `name` (byte for byte).
    package func entry(named name: String) -> VaultEntry? {
        let (index, found) = position(of: name)
        return found ? EntryCodec.decodeValidated(records[index]) : nil
    }

    /// Every entry, in byte order of names.
    package var entries: [VaultEntry] { records.map(EntryCodec.decodeValidated) }

    /// Stores `entry` as given (its times included), replacing one with the same name.
    package mutating func insert(_ entry: VaultEntry) {
        let (index, found) = position(of: entry.name)
        var encoded: [UInt8] = []
        EntryCodec.encode(entry, into: &encoded)
        if found { records[index] = encoded[...] } else { records.insert(encoded[...], at: index) }
    }

    /// Stores `entry` stamped `updatedAt = now`, keeping the `createdAt` of an entry it replaces.
    package mutating func put(_ entry: VaultEntry, now: Date) {
        var entry = entry
        let (index, found) = position(of: entry.name)
        entry.createdAt = found ? EntryCodec.createdAt(of: records[index]) : now
        entry.updatedAt = now
        insert(entry)
    }

    /// Whether the entry named like `entry` is stored exactly as `entry` (as it was read: its
    /// secret, labels and times, byte for byte).
    package func holds(_ entry: VaultEntry) -> Bool {
        let (index, found) = position(of: entry.name)
        guard found else { return false }
        var encoded: [UInt8] = []
        EntryCodec.encode(entry, into: &encoded)
        return records[index].elementsEqual(encoded)
    }

    /// Removes the entry named `name`; false when there is none.
    package mutating func remove(named name: String) -> Bool {
        let (index, found) = position(of: name)
        if found { records.remove(at: index) }
        return found
    }

    /// What a section's JSON may be: the whole file at most, nested 64 deep at most.
    static let sectionLimits = StrictJSON.Limits(maxBytes: TokenVault.maxFileBytes, maxDepth: 64)

    /// The section `name`, parsed.
    package func section(_ name: String) throws -> JSONValue? {
        guard let record = sectionRecords.first(where: { $0.name.exactlyEquals(name) }) else { return nil }
        do { return try StrictJSON.parse(Array(record.json), limits: Self.sectionLimits) } catch {
            throw VaultError(.corrupted, "the vault section \(name.quotedForMessage) is not valid JSON")
        }
    }

    /// Sets (or with `nil` removes) the section `name`; refuses what a reader would refuse (a name
    /// outside 1 to 255 bytes, JSON nested deeper than the reader reads).
    package mutating func setSection(_ name: String, _ value: JSONValue?) throws {
        guard (1...255).contains(name.utf8.count) else {
            throw VaultError(.invalidParameter, "a section name is 1 to 255 bytes")
        }
        let json = value.map { Array($0.serialized().utf8) }
        if let json, (try? StrictJSON.parse(json, limits: Self.sectionLimits)) == nil {
            throw VaultError(
                .invalidParameter, "the section \(name.quotedForMessage) is deeper or larger than a vault can hold")
        }
        sectionRecords.removeAll { $0.name.exactlyEquals(name) }
        guard let json else { return }
        sectionRecords.append((name, json[...]))
        sectionRecords.sort { Array($0.name.utf8).lexicographicallyPrecedes(Array($1.name.utf8)) }
    }

    package var sectionNames: [String] { sectionRecords.map(\.name) }

    /// Binary search by name bytes: the index of the entry, or where it would go.
    private func position(of name: String) -> (index: Int, found: Bool) {
        var name = name
        return name.withUTF8 { target in
            var low = 0, high = records.count
            while low < high {
                let middle = (low + high) / 2
                let order = EntryCodec.compare(EntryCodec.name(of: records[middle]), target)
                if order == 0 { return (middle, true) }
                if order < 0 { low = middle + 1 } else { high = middle }
            }
            return (low, false)
        }
    }

    // MARK: - Encoding

    package func encode() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(
            16 + records.reduce(0) { $0 + $1.count }
                + sectionRecords.reduce(0) { $0 + $1.json.count + $1.name.utf8.count + 5 })
        out.appendBigEndian(generation)
        out.appendBigEndian(UInt32(records.count))
        for record in records { out += record }
        out.appendBigEndian(UInt16(sectionRecords.count))
        for section in sectionRecords {
            out.append(UInt8(section.name.utf8.count))
            out += section.name.utf8
            out.appendBigEndian(UInt32(section.json.count))
            out += section.json
        }
        return out
    }

    /// Reads and validates a body: every entry is checked field by field (without being built),
    /// names must increase strictly, and nothing may follow the sections.
    package static func decode(_ bytes: [UInt8]) throws -> VaultContents {
        var reader = ByteReader(bytes)
        var contents = VaultContents(generation: try reader.integer(UInt64.self))
        let count = Int(try reader.integer(UInt32.self))
        guard count <= bytes.count / EntryCodec.minimumRecordBytes else {
            throw reader.malformed("an entry count larger than the body")
        }
        contents.records.reserveCapacity(count)
        var previous: ArraySlice<UInt8>?
        for _ in 0..<count {
            let start = reader.offset
            let length = Int(try reader.integer(UInt32.self))
            let record = bytes[start..<(try reader.skip(length))]
            try EntryCodec.validate(record)
            let name = EntryCodec.name(of: record)
            if let previous, EntryCodec.compare(previous, name) >= 0 {
                throw reader.malformed("entry names are not in strictly increasing byte order")
            }
            previous = name
            contents.records.append(record)
        }
        let sections = Int(try reader.integer(UInt16.self))
        var previousName: [UInt8]?
        for _ in 0..<sections {
            let nameBytes = try reader.bytes(Int(try reader.integer(UInt8.self)))
            guard !nameBytes.isEmpty, let name = String(validating: nameBytes, as: UTF8.self) else {
                throw reader.malformed("a section name is empty or not UTF-8")
            }
            if let previousName, !previousName.lexicographicallyPrecedes(nameBytes) {
                throw reader.malformed("section names are not in strictly increasing byte order")
            }
            previousName = Array(nameBytes)
            let value = try reader.bytes(Int(try reader.integer(UInt32.self)))
            // A section's value must be I-JSON, whoever reads it later.
            do { _ = try StrictJSON.parse(value, limits: sectionLimits) } catch {
                throw reader.malformed("section \(name.quotedForMessage) is not valid JSON: \(error)")
            }
            contents.sectionRecords.append((name, value))
        }
        guard reader.offset == bytes.count else { throw reader.malformed("bytes follow the sections") }
        return contents
    }
}

/// The binary form of one entry (Docs/vault-format.md, "Body").
enum EntryCodec {
    /// Length prefix, name length and a one-byte name, provider, kind, two times, flags, secret
    /// length, label count.
    static let minimumRecordBytes = 4 + 1 + 1 + 1 + 1 + 16 + 1 + 4 + 2
    static let maxSecretBytes = 1 << 20

    static func providerCode(_ provider: VaultEntry.Provider) -> UInt8 {
        switch provider {
        case .apple: return 1
        case .google: return 2
        case .other: return 3
        }
    }

    static func kindCode(_ kind: VaultEntry.Kind) -> UInt8 {
        switch kind {
        case .refreshToken: return 1
        case .accessToken: return 2
        case .idToken: return 3
        case .key: return 4
        case .other: return 5
        }
    }

    static let providers: [UInt8: VaultEntry.Provider] = [1: .apple, 2: .google, 3: .other]
    static let kinds: [UInt8: VaultEntry.Kind] = [1: .refreshToken, 2: .accessToken, 3: .idToken, 4: .key, 5: .other]

    /// A time as stored: milliseconds, clamped into the supported range (callers validate times
    /// first, so the clamp only keeps a broken clock from trapping).
    static func milliseconds(_ date: Date) -> Int64 {
        Timestamp(date)?.milliseconds
            ?? (date.timeIntervalSince1970 < 0 ? Timestamp.minimum.milliseconds : Timestamp.maximum.milliseconds)
    }
    static func date(_ milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    static func encode(_ entry: VaultEntry, into out: inout [UInt8]) {
        let start = out.count
        out.appendBigEndian(UInt32(0))
        out.append(UInt8(entry.name.utf8.count))
        out += entry.name.utf8
        out.append(providerCode(entry.provider))
        out.append(kindCode(entry.kind))
        out.appendBigEndian(milliseconds(entry.createdAt))
        out.appendBigEndian(milliseconds(entry.updatedAt))
        out.append((entry.expiresAt == nil ? 0 : 1) | (entry.subject == nil ? 0 : 2))
        if let expiresAt = entry.expiresAt { out.appendBigEndian(milliseconds(expiresAt)) }
        if let subject = entry.subject {
            out.appendBigEndian(UInt16(subject.utf8.count))
            out += subject.utf8
        }
        out.appendBigEndian(UInt32(entry.secret.count))
        entry.secret.withUnsafeBytes { out += $0 }
        out.appendBigEndian(UInt16(entry.labels.count))
        for (key, value) in entry.labels {
            out.append(UInt8(key.utf8.count))
            out += key.utf8
            out.appendBigEndian(UInt16(value.utf8.count))
            out += value.utf8
        }
        let length = UInt32(out.count - start - 4)
        withUnsafeBytes(of: length.bigEndian) { out.replaceSubrange(start..<start + 4, with: $0) }
    }

    /// The name bytes of a record.
    static func name(of record: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        let start = record.startIndex + 5
        return record[start..<start + Int(record[record.startIndex + 4])]
    }

    static func createdAt(of record: ArraySlice<UInt8>) -> Date {
        let offset = record.startIndex + 5 + Int(record[record.startIndex + 4]) + 2
        return date(record[offset..<offset + 8].reduce(Int64(0)) { $0 << 8 | Int64($1) })
    }

    /// memcmp-style order of two byte strings.
    static func compare(_ a: ArraySlice<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Int {
        a.withUnsafeBufferPointer { a in compare(a, b) }
    }

    static func compare(_ a: ArraySlice<UInt8>, _ b: ArraySlice<UInt8>) -> Int {
        a.withUnsafeBufferPointer { a in b.withUnsafeBufferPointer { b in compare(a, b) } }
    }

    static func compare(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Int {
        let common = min(a.count, b.count)
        if common > 0 {
            guard let left = a.baseAddress, let right = b.baseAddress else { return a.count - b.count }
            let order = memcmp(left, right, common)
            if order != 0 { return Int(order) }
        }
        return a.count - b.count
    }

    /// Checks every field of a record whose length prefix has been read.
    static func validate(_ record: ArraySlice<UInt8>) throws {
        var reader = ByteReader(record)
        _ = try reader.integer(UInt32.self)
        let name = try reader.bytes(Int(try reader.integer(UInt8.self)))
        // Printable ASCII needs no further check; anything else goes through the full rule.
        let printableASCII = !name.isEmpty && name.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
        guard printableASCII || (String(validating: name, as: UTF8.self).map(VaultEntry.isValidName) ?? false) else {
            throw reader.malformed("an entry name is empty, not UTF-8, or has control characters")
        }
        guard providers[try reader.integer(UInt8.self)] != nil, kinds[try reader.integer(UInt8.self)] != nil else {
            throw reader.malformed("an entry has an unknown provider or kind")
        }
        try reader.time()
        try reader.time()
        let flags = try reader.integer(UInt8.self)
        guard flags & ~3 == 0 else { throw reader.malformed("an entry has unknown flags") }
        if flags & 1 != 0 { try reader.time() }
        if flags & 2 != 0 { try reader.text(Int(try reader.integer(UInt16.self)), what: "subject") }
        let secretLength = Int(try reader.integer(UInt32.self))
        guard secretLength <= maxSecretBytes else { throw reader.malformed("a secret exceeds \(maxSecretBytes) bytes") }
        _ = try reader.skip(secretLength)
        var previous: ArraySlice<UInt8>?
        for _ in 0..<Int(try reader.integer(UInt16.self)) {
            let key = try reader.bytes(Int(try reader.integer(UInt8.self)))
            guard !key.isEmpty, String(validating: key, as: UTF8.self) != nil else {
                throw reader.malformed("a label key is empty or not UTF-8")
            }
            if let previous, compare(previous, key) >= 0 {
                throw reader.malformed("label keys are not in strictly increasing byte order")
            }
            previous = key
            try reader.text(Int(try reader.integer(UInt16.self)), what: "label value")
        }
        guard reader.offset == record.endIndex else {
            throw reader.malformed("an entry's length does not match its fields")
        }
    }

    /// Builds the entry of a record that ``validate(_:)`` accepted.
    static func decodeValidated(_ record: ArraySlice<UInt8>) -> VaultEntry {
        var reader = ByteReader(record)
        func text(_ count: Int) -> String { String(decoding: (try? reader.bytes(count)) ?? [], as: UTF8.self) }
        func integer<T: FixedWidthInteger>(_ type: T.Type) -> T { (try? reader.integer(type)) ?? 0 }
        _ = integer(UInt32.self)
        let name = text(Int(integer(UInt8.self)))
        let provider = providers[integer(UInt8.self)] ?? .other
        let kind = kinds[integer(UInt8.self)] ?? .other
        let created = date(integer(Int64.self)), updated = date(integer(Int64.self))
        let flags = integer(UInt8.self)
        let expires = flags & 1 != 0 ? date(integer(Int64.self)) : nil
        let subject = flags & 2 != 0 ? text(Int(integer(UInt16.self))) : nil
        let secret = SecretBytes((try? reader.bytes(Int(integer(UInt32.self)))) ?? [])
        var labels = VaultLabels()
        for _ in 0..<Int(integer(UInt16.self)) {
            let key = text(Int(integer(UInt8.self)))
            labels[key] = text(Int(integer(UInt16.self)))
        }
        return VaultEntry(
            name: name, secret: secret, provider: provider, kind: kind, subject: subject, createdAt: created,
            updatedAt: updated, expiresAt: expires,
            labels: labels)
    }
}

/// Reads big-endian fields from a byte buffer; running past the end is corruption.
struct ByteReader {
    let bytes: ArraySlice<UInt8>
    private(set) var offset: Int

    init(_ bytes: [UInt8]) { self.init(bytes[...]) }

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        offset = bytes.startIndex
    }

    func malformed(_ why: String) -> VaultError { VaultError(.corrupted, "the vault body is malformed: \(why)") }

    /// Moves past `count` bytes and returns the new offset.
    mutating func skip(_ count: Int) throws -> Int {
        guard count <= bytes.endIndex - offset else { throw malformed("a field runs past the end") }
        offset += count
        return offset
    }

    mutating func bytes(_ count: Int) throws -> ArraySlice<UInt8> {
        let start = offset
        return bytes[start..<(try skip(count))]
    }

    mutating func integer<T: FixedWidthInteger>(_: T.Type) throws -> T {
        let start = offset
        _ = try skip(MemoryLayout<T>.size)
        var value = T.Magnitude(0)
        for byte in bytes[start..<offset] { value = value << 8 | T.Magnitude(byte) }
        return T(truncatingIfNeeded: value)
    }

    /// Skips an i64 time in milliseconds, which must lie within the supported range.
    mutating func time() throws {
        guard Timestamp(milliseconds: try integer(Int64.self)) != nil else {
            throw malformed("a time lies outside \(Timestamp.rangeDescription)")
        }
    }

    /// Skips `count` bytes that must be UTF-8.
    mutating func text(_ count: Int, what: String) throws {
        let field = try bytes(count)
        guard field.allSatisfy({ $0 < 0x80 }) || String(validating: field, as: UTF8.self) != nil else {
            throw malformed("a \(what) is not UTF-8")
        }
    }
}
