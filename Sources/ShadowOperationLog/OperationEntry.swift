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
            guard JSONValue.object(details).serialized().utf8.count <= Self.maxDetailsBytes else {
                throw LogError(.invalidParameter, "the details are at most \(Self.maxDetailsBytes) bytes of JSON")
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

    /// HMAC-SHA-256(lookup key, entity ID): how an entity is found without its ID in clear.
    public func entityHash(_ entityID: String) -> [UInt8] {
        var mac = lookupMAC
        var id = entityID
        id.withUTF8 { mac.update(data: UnsafeRawBufferPointer($0)) }
        return Array(mac.finalize())
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
        let nonce = nonce ?? SecretBytes.random(count: AES256GCM.nonceBytes).withUnsafeBytes { Array($0) }
        let sealed = try AES256GCM.seal(plaintext, key: keys.seal, nonce: nonce, aad: aadLabel + out)
        out += nonce
        out += BigEndian.bytes(UInt32(sealed.count))
        out += sealed
        return out
    }

    /// Reads the clear part of an entry's bytes; checks every field and length.
    /// - Throws: ``LogErrorCode/tampered`` naming what is wrong.
    public static func decode(_ bytes: [UInt8]) throws -> StoredEntry {
        var reader = ByteReader(bytes: bytes)
        guard bytes.count <= maxBytes else { throw ByteReader.bad("an entry is over \(maxBytes) bytes") }
        guard try reader.byte() == version else { throw ByteReader.bad("an entry is not version 1") }
        let time = try reader.uint64()
        guard time <= UInt64(OperationEntry.timeRange.upperBound) else {
            throw ByteReader.bad("an entry's time is past the year 9999")
        }
        let flags = try reader.byte()
        guard flags <= 1 else { throw ByteReader.bad("an entry's flags are not 0 or 1") }
        var names: [String] = []
        for label in ["operation", "provider", "entity type"] {
            let name = try reader.take(Int(try reader.byte()))
            do { try checkName(name, label) } catch let error as LogError { throw ByteReader.bad(error.reason) }
            names.append(String(decoding: name, as: UTF8.self))
        }
        let entityHash = Array(try reader.take(32))
        let detailsLength = Int(try reader.uint32())
        guard detailsLength <= OperationEntry.maxDetailsBytes else {
            throw ByteReader.bad("an entry's details are too long")
        }
        var details: JSONObject?
        if detailsLength > 0 {
            guard case .object(let object)? = try? StrictJSON.parse(try reader.take(detailsLength)) else {
                throw ByteReader.bad("an entry's details are not a JSON object")
            }
            details = object
        }
        let sealedStart = reader.offset
        _ = try reader.take(AES256GCM.nonceBytes)
        let sealedLength = Int(try reader.uint32())
        guard sealedLength >= AES256GCM.tagBytes + 3 else {
            throw ByteReader.bad("an entry's sealed part is too short")
        }
        _ = try reader.take(sealedLength)
        guard reader.atEnd else { throw ByteReader.bad("an entry has bytes after its sealed part") }
        return StoredEntry(
            operation: names[0], provider: names[1], entityType: names[2], time: Int64(time), success: flags == 1,
            entityHash: entityHash, details: details, bytes: bytes, sealedStart: sealedStart)
    }

    /// The checks of ``decode(_:)`` without building the entry: what `verify` runs on every entry.
    public static func check(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBufferPointer { buffer in
            func bad(_ reason: String) -> LogError { LogError(.tampered, reason) }
            var offset = 0
            func need(_ count: Int) throws {
                guard count >= 0, count <= buffer.count - offset else { throw bad("the bytes end inside a field") }
            }
            func integer(_ width: Int) throws -> UInt64 {
                try need(width)
                var value: UInt64 = 0
                for index in offset..<(offset + width) { value = value << 8 | UInt64(buffer[index]) }
                offset += width
                return value
            }
            guard buffer.count <= maxBytes else { throw bad("an entry is over \(maxBytes) bytes") }
            guard try integer(1) == UInt64(version) else { throw bad("an entry is not version 1") }
            guard try integer(8) <= UInt64(OperationEntry.timeRange.upperBound) else {
                throw bad("an entry's time is past the year 9999")
            }
            guard try integer(1) <= 1 else { throw bad("an entry's flags are not 0 or 1") }
            for _ in 0..<3 {
                let length = Int(try integer(1))
                try need(length)
                guard (1...OperationEntry.maxNameBytes).contains(length),
                    buffer[offset..<(offset + length)].allSatisfy({ (0x21...0x7E).contains($0) })
                else { throw bad("an entry's operation, provider or entity type is not 1 to 64 printable ASCII") }
                offset += length
            }
            try need(32)
            offset += 32
            let detailsLength = Int(try integer(4))
            guard detailsLength <= OperationEntry.maxDetailsBytes else { throw bad("an entry's details are too long") }
            if detailsLength > 0 {
                try need(detailsLength)
                let details = UnsafeBufferPointer(rebasing: buffer[offset..<(offset + detailsLength)])
                guard case .object? = try? StrictJSON.parse(buffer: details, limits: .jose) else {
                    throw bad("an entry's details are not a JSON object")
                }
                offset += detailsLength
            }
            try need(AES256GCM.nonceBytes)
            offset += AES256GCM.nonceBytes
            let sealedLength = Int(try integer(4))
            guard sealedLength >= AES256GCM.tagBytes + 3 else { throw bad("an entry's sealed part is too short") }
            guard sealedLength == buffer.count - offset else {
                throw bad(
                    sealedLength > buffer.count - offset
                        ? "the bytes end inside a field" : "an entry has bytes after its sealed part")
            }
        }
    }

    /// The whole entry, its sealed part opened with `keys`.
    /// - Throws: ``LogErrorCode/tampered`` when the sealed part does not open or does not match.
    public static func open(_ stored: StoredEntry, keys: LogKeys) throws -> OperationEntry {
        let bytes = stored.bytes
        let nonce = bytes[stored.sealedStart..<(stored.sealedStart + AES256GCM.nonceBytes)]
        let sealed = bytes[(stored.sealedStart + AES256GCM.nonceBytes + 4)...]
        let plaintext: [UInt8]
        do {
            plaintext = try AES256GCM.open(
                sealed, key: keys.seal, nonce: nonce, aad: aadLabel + bytes[..<stored.sealedStart])
        } catch {
            throw ByteReader.bad("an entry's sealed part does not open with this log's key")
        }
        var reader = ByteReader(bytes: plaintext)
        let idLength = Int(try reader.uint16())
        guard (1...OperationEntry.maxEntityIDBytes).contains(idLength) else {
            throw ByteReader.bad("an entry's entity ID length is out of range")
        }
        guard let entityID = String(validating: try reader.take(idLength), as: UTF8.self) else {
            throw ByteReader.bad("an entry's entity ID is not UTF-8")
        }
        var error: String?
        switch try reader.byte() {
        case 0: break
        case 1:
            let length = Int(try reader.uint16())
            guard length <= OperationEntry.maxErrorBytes, !stored.success,
                let text = String(validating: try reader.take(length), as: UTF8.self)
            else { throw ByteReader.bad("an entry's error message is malformed") }
            error = text
        default: throw ByteReader.bad("an entry's error flag is not 0 or 1")
        }
        guard reader.atEnd else { throw ByteReader.bad("an entry's sealed part has trailing bytes") }
        guard ConstantTime.equals(keys.entityHash(entityID), stored.entityHash) else {
            throw ByteReader.bad("an entry's entity hash does not match its sealed entity ID")
        }
        return OperationEntry(
            operation: stored.operation, provider: stored.provider, entityType: stored.entityType, entityID: entityID,
            time: stored.time, success: stored.success, error: error, details: stored.details)
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

/// Reads big-endian fields; every overrun is ``LogErrorCode/tampered``.
struct ByteReader {
    let bytes: [UInt8]
    var offset = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { offset == bytes.count }

    static func bad(_ reason: String) -> LogError { LogError(.tampered, reason) }

    mutating func take(_ count: Int) throws -> ArraySlice<UInt8> {
        guard count >= 0, count <= bytes.count - offset else { throw Self.bad("the bytes end inside a field") }
        defer { offset += count }
        return bytes[offset..<(offset + count)]
    }
    mutating func byte() throws -> UInt8 { try take(1).reduce(0) { _, byte in byte } }
    mutating func uint16() throws -> UInt16 { BigEndian.uint16(try take(2)) }
    mutating func uint32() throws -> UInt32 { BigEndian.uint32(try take(4)) }
    mutating func uint64() throws -> UInt64 { BigEndian.uint64(try take(8)) }
}

enum SHA256Bytes {
    static func of(_ bytes: some DataProtocol) -> [UInt8] { Array(SHA256.hash(data: bytes)) }
}
