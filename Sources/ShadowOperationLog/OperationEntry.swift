import Crypto
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import ShadowCore
import ShadowCrypto

/// One cloud operation, as a sync tool records it.
public struct OperationEntry: Sendable, Hashable {
    /// What was done: `upload`, `download`, `delete`, or any 1 to 64 printable ASCII characters.
    public var operation: String
    /// Where: `icloud`, `google-drive`, … (1 to 64 printable ASCII characters).
    public var provider: String
    /// What kind of thing: `file`, `record`, … (1 to 64 printable ASCII characters).
    public var entityType: String
    /// Which one (1 to 1,024 bytes of UTF-8). Sealed in the log; a keyed hash of it is kept for lookups.
    public var entityID: String
    /// When, in milliseconds since 1970-01-01T00:00:00Z, up to the end of year 9999.
    public var time: Int64
    /// Whether it succeeded.
    public var success: Bool
    /// Why it failed (up to 4,096 bytes of UTF-8; only when `success` is false). Sealed in the log.
    public var error: String?
    /// Anything else, as a JSON object (up to 16 KiB serialized). Kept in clear.
    public var details: JSONObject?

    public init(
        operation: String, provider: String, entityType: String, entityID: String, time: Int64, success: Bool,
        error: String? = nil, details: JSONObject? = nil
    ) {
        (self.operation, self.provider, self.entityType, self.entityID) = (operation, provider, entityType, entityID)
        (self.time, self.success, self.error, self.details) = (time, success, error, details)
    }

    public static let maxNameBytes = 64
    public static let maxEntityIDBytes = 1024
    public static let maxErrorBytes = 4096
    public static let maxDetailsBytes = 16 << 10
    /// 0 through 9999-12-31T23:59:59.999Z.
    public static let timeRange: ClosedRange<Int64> = 0...Timestamp.range.upperBound

    /// Checks every field against the limits the reader applies.
    public func validate() throws {
        for (label, value) in [("operation", operation), ("provider", provider), ("entity type", entityType)] {
            try EntryCodec.checkName(Array(value.utf8), label)
        }
        guard (1...Self.maxEntityIDBytes).contains(entityID.utf8.count) else {
            throw LogError(.invalidParameter, "the entity ID is 1 to \(Self.maxEntityIDBytes) bytes")
        }
        guard Self.timeRange.contains(time) else {
            throw LogError(.invalidParameter, "the time is 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z")
        }
        if let error {
            guard !success else { throw LogError(.invalidParameter, "an entry that succeeded has no error message") }
            guard error.utf8.count <= Self.maxErrorBytes else {
                throw LogError(.invalidParameter, "the error message is at most \(Self.maxErrorBytes) bytes")
            }
        }
        if let details {
            let text = JSONValue.object(details).serialized()
            guard text.utf8.count <= Self.maxDetailsBytes else {
                throw LogError(.invalidParameter, "the details are at most \(Self.maxDetailsBytes) bytes of JSON")
            }
            // What a reader refuses is not written: the details as stored, read as a reader reads them.
            guard (try? StrictJSON.parse(text, limits: EntryCodec.detailsLimits)) != nil else {
                throw LogError(.invalidParameter, "the details nest deeper than 16 or are not I-JSON")
            }
        }
    }
}

/// The keys of an operation log, all derived from its 32-byte secret with HKDF-SHA-256 (no salt):
/// the seal key (info "shadow-keys oplog v1 seal"), the lookup key ("… lookup"), the note key's
/// Ed25519 seed ("… note key") and the witness key ("… witness").
public struct LogKeys: Sendable, CustomStringConvertible {
    let seal: SymmetricKey
    /// HMAC-SHA-256 keyed with the lookup key, the key already absorbed (each use copies it).
    let lookupMAC: HMAC<SHA256>
    let witness: SymmetricKey
    let noteSeed: [UInt8]

    public init(secret: some DataProtocol) throws {
        guard secret.count == 32 else { throw LogError(.invalidParameter, "a log secret is 32 bytes") }
        let keys = Subkeys(secret: secret, prefix: "shadow-keys oplog v1")
        seal = keys.key("seal")
        lookupMAC = HMAC<SHA256>(key: keys.key("lookup"))
        witness = keys.key("witness")
        noteSeed = keys.key("note key").withUnsafeBytes { Array($0) }
    }

    public var description: String { "LogKeys(redacted)" }

    /// HMAC-SHA-256(witness key, `bytes`): a witness file's `mac` line, over the lines before it.
    package func witnessMAC(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: bytes, using: witness))
    }

    /// HMAC-SHA-256(lookup key, entity ID): how an entity is found without its ID in clear.
    public func entityHash(_ entityID: String) -> [UInt8] {
        var id = entityID
        return id.withUTF8 { Array(entityHash(UnsafeRawBufferPointer($0))) }
    }

    func entityHash(_ entityID: UnsafeRawBufferPointer) -> HashedAuthenticationCode<SHA256> {
        var mac = lookupMAC
        mac.update(data: entityID)
        return mac.finalize()
    }

    /// The log's note signer, named by the log's origin.
    public func signer(origin: String) throws -> NoteSigner { try NoteSigner(name: origin, seed: noteSeed) }
}

/// An entry as the log stores it (Docs/operation-log.md, "Entries"), readable without the key up
/// to its sealed part.
public struct StoredEntry: Sendable, Hashable {
    public let operation: String
    public let provider: String
    public let entityType: String
    public let time: Int64
    public let success: Bool
    /// HMAC-SHA-256 of the entity ID under the lookup key.
    public let entityHash: [UInt8]
    public let details: JSONObject?
    /// The bytes (the leaf's data).
    public let bytes: [UInt8]
    let sealedStart: Int

    public var leafHash: TreeHash { TreeHash.leaf(bytes) }
}

/// Entry bytes, version 1:
///
///     0x01 ‖ time (8, big-endian ms) ‖ flags (1: bit 0 success) ‖
///     len (1) ‖ operation ‖ len (1) ‖ provider ‖ len (1) ‖ entity type ‖ entity hash (32) ‖
///     details length (4) ‖ details (JSON object) ‖ nonce (12) ‖ sealed length (4) ‖ sealed
///
/// sealed = AES-256-GCM(seal key, nonce, plaintext, AAD = "shadow-keys oplog v1 entry" ‖ every byte
/// before the nonce); plaintext = entity ID length (2) ‖ entity ID ‖ has error (1) ‖ [length (2) ‖ error].
public enum EntryCodec {
    static let version: UInt8 = 1
    static let aadLabel = Array("shadow-keys oplog v1 entry".utf8)
    /// The largest entry: every field at its limit.
    public static let maxBytes =
        1 + 8 + 1 + 3 * 65 + 32 + 4 + OperationEntry.maxDetailsBytes + 12 + 4 + 2
        + OperationEntry.maxEntityIDBytes + 3 + OperationEntry.maxErrorBytes + AES256GCM.tagBytes

    /// The stored bytes of `entry`, sealed with `keys` (a fresh random nonce unless one is given).
    public static func encode(_ entry: OperationEntry, keys: LogKeys, nonce: [UInt8]? = nil) throws -> [UInt8] {
        try entry.validate()
        var out: [UInt8] = [version]
        out += BigEndian.bytes(UInt64(entry.time))
        out.append(entry.success ? 1 : 0)
        for name in [entry.operation, entry.provider, entry.entityType] {
            out.append(UInt8(name.utf8.count))
            out += name.utf8
        }
        out += keys.entityHash(entry.entityID)
        let details = entry.details.map { Array(JSONValue.object($0).serialized().utf8) } ?? []
        out += BigEndian.bytes(UInt32(details.count))
        out += details
        var plaintext: [UInt8] = []
        plaintext += [UInt8(entry.entityID.utf8.count >> 8), UInt8(entry.entityID.utf8.count & 0xFF)]
        plaintext += entry.entityID.utf8
        if let error = entry.error {
            plaintext += [1, UInt8(error.utf8.count >> 8), UInt8(error.utf8.count & 0xFF)]
            plaintext += error.utf8
        } else {
            plaintext.append(0)
        }
        let nonce = nonce ?? AES256GCM.randomNonce()
        let sealed = try AES256GCM.seal(plaintext, key: keys.seal, nonce: nonce, aad: aadLabel + out)
        out += nonce
        out += BigEndian.bytes(UInt32(sealed.count))
        out += sealed
        return out
    }

    /// How `details` are read: a JSON object of at most 16,384 bytes, nested at most 16 deep.
    static let detailsLimits = StrictJSON.Limits(maxBytes: OperationEntry.maxDetailsBytes, maxDepth: 16)

    /// Where the fields of an entry's clear part lie, and its details, read once with every check.
    struct Layout {
        var time: Int64
        var success: Bool
        var operation: Range<Int>
        var provider: Range<Int>
        var entityType: Range<Int>
        var entityHash: Range<Int>
        var details: JSONObject?
        var sealedStart: Int
    }

    /// Reads the clear part of an entry's bytes; checks every field and length.
    /// - Throws: ``LogErrorCode/tampered`` naming what is wrong.
    public static func decode(_ bytes: [UInt8]) throws -> StoredEntry {
        let layout = try layout(bytes)
        func text(_ range: Range<Int>) -> String { String(decoding: bytes[range], as: UTF8.self) }
        return StoredEntry(
            operation: text(layout.operation), provider: text(layout.provider), entityType: text(layout.entityType),
            time: layout.time, success: layout.success, entityHash: Array(bytes[layout.entityHash]),
            details: layout.details, bytes: bytes, sealedStart: layout.sealedStart)
    }

    /// The checks of ``decode(_:)`` without building the entry.
    public static func check(_ bytes: [UInt8]) throws { _ = try layout(bytes) }

    static func layout(_ bytes: [UInt8]) throws -> Layout {
        try bytes.withUnsafeBufferPointer { buffer in
            var reader = ByteReader(buffer)
            func name(_ label: String) throws -> Range<Int> {
                let range = try reader.take(Int(try reader.integer(1)))
                do {
                    try checkName(UnsafeBufferPointer(rebasing: buffer[range]), label)
                } catch let error as LogError {
                    throw ByteReader.bad(error.reason)
                }
                return range
            }
            guard buffer.count <= maxBytes else { throw ByteReader.bad("an entry is over \(maxBytes) bytes") }
            guard try reader.integer(1) == UInt64(version) else { throw ByteReader.bad("an entry is not version 1") }
            let time = try reader.integer(8)
            guard time <= UInt64(OperationEntry.timeRange.upperBound) else {
                throw ByteReader.bad("an entry's time is past the year 9999")
            }
            let flags = try reader.integer(1)
            guard flags <= 1 else { throw ByteReader.bad("an entry's flags are not 0 or 1") }
            let (operation, provider, entityType) = (
                try name("operation"), try name("provider"), try name("entity type")
            )
            let entityHash = try reader.take(32)
            let detailsLength = Int(try reader.integer(4))
            guard detailsLength <= OperationEntry.maxDetailsBytes else {
                throw ByteReader.bad("an entry's details are too long")
            }
            var details: JSONObject?
            if detailsLength > 0 {
                let range = try reader.take(detailsLength)
                guard
                    case .object(let object)? = try? StrictJSON.parse(
                        buffer: UnsafeBufferPointer(rebasing: buffer[range]), limits: detailsLimits)
                else { throw ByteReader.bad("an entry's details are not a JSON object") }
                details = object
            }
            let sealedStart = reader.offset
            _ = try reader.take(AES256GCM.nonceBytes)
            let sealedLength = Int(try reader.integer(4))
            guard sealedLength >= AES256GCM.tagBytes + 3 else {
                throw ByteReader.bad("an entry's sealed part is too short")
            }
            _ = try reader.take(sealedLength)
            guard reader.atEnd else { throw ByteReader.bad("an entry has bytes after its sealed part") }
            return Layout(
                time: Int64(time), success: flags == 1, operation: operation, provider: provider,
                entityType: entityType, entityHash: entityHash, details: details, sealedStart: sealedStart)
        }
    }

    /// The whole entry, its sealed part opened with `keys`.
    /// - Throws: ``LogErrorCode/tampered`` when the sealed part does not open or does not match.
    public static func open(_ stored: StoredEntry, keys: LogKeys) throws -> OperationEntry {
        let (opened, sealed) = try openSealed(
            stored.bytes, sealedStart: stored.sealedStart, success: stored.success, keys: keys
        ) {
            ConstantTime.equals($0, stored.entityHash)
        }
        let plaintext = Array(opened)
        func text(_ range: Range<Int>) -> String { String(decoding: plaintext[range], as: UTF8.self) }
        return OperationEntry(
            operation: stored.operation, provider: stored.provider, entityType: stored.entityType,
            entityID: text(sealed.entityID), time: stored.time, success: stored.success, error: sealed.error.map(text),
            details: stored.details)
    }

    /// Every check ``decode(_:)`` and ``open(_:keys:)`` make, with nothing built: what
    /// ``OperationLog/verify()`` runs on every entry.
    /// - Throws: ``LogErrorCode/tampered``, as `decode` and `open` would.
    public static func verify(_ bytes: [UInt8], keys: LogKeys) throws {
        let layout = try layout(bytes)
        _ = try openSealed(bytes, sealedStart: layout.sealedStart, success: layout.success, keys: keys) { mac in
            bytes.withUnsafeBufferPointer {
                ConstantTime.equals(mac, UnsafeBufferPointer(rebasing: $0[layout.entityHash]))
            }
        }
    }

    /// Where the entity ID and the error lie in a sealed part's plaintext.
    struct SealedFields {
        var entityID: Range<Int>
        var error: Range<Int>?
    }

    /// Opens the sealed part and checks its plaintext's rules, then that `matchesEntityHash` takes
    /// the HMAC of the entity ID; returns the plaintext and where its fields lie.
    static func openSealed(
        _ bytes: [UInt8], sealedStart: Int, success: Bool, keys: LogKeys,
        matchesEntityHash: (UnsafeBufferPointer<UInt8>) -> Bool
    ) throws -> (Data, SealedFields) {
        let plaintext: Data
        do {
            // The associated data, label ‖ the entry up to its sealed part, on the stack (or in
            // one allocation for an entry with long details).
            plaintext = try withUnsafeTemporaryAllocation(byteCount: aadLabel.count + sealedStart, alignment: 1) {
                aad in
                try bytes.withUnsafeBytes { entry in
                    aadLabel.withUnsafeBytes {
                        UnsafeMutableRawBufferPointer(rebasing: aad[..<$0.count]).copyMemory(from: $0)
                    }
                    UnsafeMutableRawBufferPointer(rebasing: aad[aadLabel.count...]).copyMemory(
                        from: UnsafeRawBufferPointer(rebasing: entry[..<sealedStart]))
                    let sealedAt = sealedStart + AES256GCM.nonceBytes + 4
                    return try AES256GCM.open(
                        UnsafeRawBufferPointer(rebasing: entry[sealedAt...]), key: keys.seal,
                        nonce: UnsafeRawBufferPointer(
                            rebasing: entry[sealedStart..<(sealedStart + AES256GCM.nonceBytes)]),
                        aad: UnsafeRawBufferPointer(aad))
                }
            }
        } catch {
            throw ByteReader.bad("an entry's sealed part does not open with this log's key")
        }
        let fields = try plaintext.withUnsafeBytes { raw -> SealedFields in
            let buffer = raw.assumingMemoryBound(to: UInt8.self)
            var reader = ByteReader(buffer)
            let idLength = Int(try reader.integer(2))
            guard (1...OperationEntry.maxEntityIDBytes).contains(idLength) else {
                throw ByteReader.bad("an entry's entity ID length is out of range")
            }
            let entityID = try reader.take(idLength)
            guard isUTF8(UnsafeBufferPointer(rebasing: buffer[entityID])) else {
                throw ByteReader.bad("an entry's entity ID is not UTF-8")
            }
            var error: Range<Int>?
            switch buffer[try reader.take(1).lowerBound] {
            case 0: break
            case 1:
                let length = Int(try reader.integer(2))
                guard length <= OperationEntry.maxErrorBytes, !success else {
                    throw ByteReader.bad("an entry's error message is malformed")
                }
                let range = try reader.take(length)
                guard isUTF8(UnsafeBufferPointer(rebasing: buffer[range])) else {
                    throw ByteReader.bad("an entry's error message is malformed")
                }
                error = range
            default: throw ByteReader.bad("an entry's error flag is not 0 or 1")
            }
            guard reader.atEnd else { throw ByteReader.bad("an entry's sealed part has trailing bytes") }
            let mac = keys.entityHash(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(buffer)[entityID]))
            guard mac.withUnsafeBytes({ matchesEntityHash($0.assumingMemoryBound(to: UInt8.self)) }) else {
                throw ByteReader.bad("an entry's entity hash does not match its sealed entity ID")
            }
            return SealedFields(entityID: entityID, error: error)
        }
        return (plaintext, fields)
    }

    /// Whether `bytes` are UTF-8 as `String(validating:as:)` takes it, without building a string.
    static func isUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        if bytes.allSatisfy({ $0 < 0x80 }) { return true }
        return !transcode(bytes.makeIterator(), from: UTF8.self, to: UTF32.self, stoppingOnError: true) { _ in }
    }

    /// 1 to 64 bytes of printable ASCII (0x21 to 0x7E).
    static func checkName(_ bytes: some Collection<UInt8>, _ label: String) throws {
        guard (1...OperationEntry.maxNameBytes).contains(bytes.count), bytes.allSatisfy({ (0x21...0x7E).contains($0) })
        else {
            throw LogError(
                .invalidParameter, "the \(label) is 1 to \(OperationEntry.maxNameBytes) printable ASCII characters")
        }
    }
}

/// Reads big-endian fields of a buffer by position; every overrun is ``LogErrorCode/tampered``.
struct ByteReader {
    let buffer: UnsafeBufferPointer<UInt8>
    private(set) var offset = 0

    init(_ buffer: UnsafeBufferPointer<UInt8>) { self.buffer = buffer }

    var atEnd: Bool { offset == buffer.count }

    static func bad(_ reason: String) -> LogError { LogError(.tampered, reason) }

    /// The next `count` bytes' positions.
    mutating func take(_ count: Int) throws -> Range<Int> {
        guard count >= 0, count <= buffer.count - offset else { throw Self.bad("the bytes end inside a field") }
        defer { offset += count }
        return offset..<(offset + count)
    }

    /// The next `width` bytes as a big-endian number.
    mutating func integer(_ width: Int) throws -> UInt64 {
        var value: UInt64 = 0
        for index in try take(width) { value = value << 8 | UInt64(buffer[index]) }
        return value
    }
}

enum SHA256Bytes {
    static func of(_ bytes: some DataProtocol) -> [UInt8] { Array(SHA256.hash(data: bytes)) }
}
