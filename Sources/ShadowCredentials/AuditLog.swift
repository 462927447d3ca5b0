#if canImport(Darwin)
import Darwin
import Foundation
#else
import Glibc
import FoundationEssentials
#endif
package import Crypto
import ShadowCore

/// One line of the audit log (Docs/credential-state.md): a status change, with the subject
/// replaced by a keyed hash.
public struct AuditEntry: Sendable, Equatable {
    /// 1, 2, 3… in file order.
    public let sequence: Int
    /// When the change was written, in milliseconds since 1970.
    public let recordedAtMilliseconds: Int64
    /// The event's own time, in milliseconds since 1970.
    public let eventTimeMilliseconds: Int64
    public let clientID: String
    /// HMAC-SHA-256 of `client ID ‖ 0x00 ‖ subject` under the log's subject key, in hex.
    public let subjectHash: String
    public let old: CredentialState
    public let new: CredentialState
    public let cause: CredentialEvent.Kind
    public let eventID: String
    /// The linked (new) subject of a transfer, hashed the same way.
    public let linkedSubjectHash: String?
    /// Mail forwarding after the change, once an email event has been seen.
    public let emailForwarding: Bool?

    /// The line's JSON, member order fixed, `prev` last.
    package func line(previous: [UInt8]) -> [UInt8] {
        Self.line(sequence: sequence, members: members(), previous: previous)
    }

    /// The members between `seq` and `prev`, serialized with their commas: everything a line
    /// holds that does not depend on its place in the chain, so a writer can make it before it
    /// knows that place.
    package func members() -> [UInt8] {
        // Written in place, as a JSONObject of these members would serialize.
        var out: [UInt8] = []
        out.reserveCapacity(256 + clientID.utf8.count + eventID.utf8.count)
        out += #""recorded_at_ms":"#.utf8
        out += String(recordedAtMilliseconds).utf8
        out += #","event_time_ms":"#.utf8
        out += String(eventTimeMilliseconds).utf8
        for (name, value) in [
            ("client_id", clientID), ("subject", subjectHash), ("old", old.description), ("new", new.description),
            ("cause", cause.rawValue), ("event_id", eventID),
        ] {
            out += #",""#.utf8
            out += name.utf8
            out += #"":"#.utf8
            JSONValue.appendString(value, to: &out)
        }
        out += #","linked_subject":"#.utf8
        if let linkedSubjectHash { JSONValue.appendString(linkedSubjectHash, to: &out) } else { out += "null".utf8 }
        out += #","email_forwarding":"#.utf8
        out += (emailForwarding.map { $0 ? "true" : "false" } ?? "null").utf8
        return out
    }

    /// The line at `sequence` after the chain value `previous`, around ``members()``.
    package static func line(sequence: Int, members: [UInt8], previous: [UInt8]) -> [UInt8] {
        var line: [UInt8] = []
        line.reserveCapacity(members.count + 110)
        line.append(contentsOf: #"{"seq":"#.utf8)
        line.append(contentsOf: String(sequence).utf8)
        line.append(UInt8(ascii: ","))
        line.append(contentsOf: members)
        line.append(contentsOf: #","prev":""#.utf8)
        line.append(contentsOf: Hex.encode(previous).utf8)
        line.append(contentsOf: #""}"#.utf8)
        return line
    }

    /// Reads a line, returning it with its `prev`; nil for anything that is not byte for byte
    /// what ``line(previous:)`` writes for the values it holds: member order, escapes, number
    /// forms, spacing and lower-case hex are all part of the format, so the line is re-encoded
    /// and compared.
    package static func parse(_ line: ArraySlice<UInt8>) -> (entry: AuditEntry, previous: String)? {
        guard let (entry, previous) = parseValues(line), let chain = lowerHex32(previous),
            lowerHex32(entry.subjectHash) != nil, entry.linkedSubjectHash.map({ lowerHex32($0) != nil }) ?? true,
            entry.line(previous: chain).elementsEqual(line)
        else { return nil }
        return (entry, previous)
    }

    /// 32 bytes written as exactly 64 lower-case hex digits, or nil.
    private static func lowerHex32(_ text: String) -> [UInt8]? {
        guard text.utf8.count == 64, text.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) })
        else { return nil }
        return try? Hex.decode(text)
    }

    /// Whether `line`, which opened under the store's key at `sequence` and so was made by
    /// ``line(sequence:members:previous:)``, carries that sequence, `subject` and `linked` (hex of
    /// the row's columns; nil for `null`) and `prev` equal to `previous` (hex of the chain value
    /// before it). The members are found where that writer puts them: `seq` first, `prev` last,
    /// and `subject` and `linked_subject` at the first `,"subject":"` and `,"linked_subject":`. In
    /// that writer's output those bytes occur only there: a quote inside a value is escaped, and a
    /// value's closing quote is followed by `,` or `}`, never by a name. No parse and no
    /// re-encoding: what a write checks of the lines before it (``parse(_:)`` remains the full
    /// check of every byte).
    package static func carries(
        _ line: ArraySlice<UInt8>, sequence: Int, subject: [UInt8], linked: [UInt8]?, previous: [UInt8]
    ) -> Bool {
        let head = Field.seq + Array(String(sequence).utf8) + Field.recordedAt
        let tail = Field.prev + previous + Field.end
        guard line.count > head.count + tail.count, line.starts(with: head),
            let subjectStart = Self.end(of: Field.subject, in: line),
            line[subjectStart...].starts(with: subject + Field.afterSubject),
            let linkedStart = Self.end(of: Field.linked, in: line[subjectStart...]),
            line[linkedStart...].starts(with: linked.map { [0x22] + $0 + [0x22, 0x2C] } ?? Field.null)
        else { return false }
        return ConstantTime.equals(Array(line.suffix(tail.count)), tail)
    }

    /// The fixed bytes ``carries(_:sequence:subject:linked:previous:)`` looks for, made once.
    private enum Field {
        static let seq = Array(#"{"seq":"#.utf8)
        static let recordedAt = Array(#","recorded_at_ms":"#.utf8)
        static let subject = Array(#","subject":""#.utf8)
        static let afterSubject = Array(#"",""#.utf8)
        static let linked = Array(#","linked_subject":"#.utf8)
        static let null = Array("null,".utf8)
        static let prev = Array(#","prev":""#.utf8)
        static let end = Array(#""}"#.utf8)
    }

    /// The index just past the first occurrence of `pattern` in `bytes`.
    private static func end(of pattern: [UInt8], in bytes: ArraySlice<UInt8>) -> Int? {
        guard bytes.count >= pattern.count, let first = pattern.first else { return nil }
        var index = bytes.startIndex
        while index <= bytes.endIndex - pattern.count {
            if bytes[index] == first, bytes[index..<(index + pattern.count)].elementsEqual(pattern) {
                return index + pattern.count
            }
            index += 1
        }
        return nil
    }

    private static func parseValues(_ line: ArraySlice<UInt8>) -> (entry: AuditEntry, previous: String)? {
        guard let object = (try? StrictJSON.parse(line, limits: .init(maxBytes: 8192, maxDepth: 2)))?.objectValue,
            object.count == 12,
            let sequence = object["seq"]?.numberValue?.int64Value,
            let recorded = object["recorded_at_ms"]?.numberValue?.int64Value,
            let eventTime = object["event_time_ms"]?.numberValue?.int64Value,
            let clientID = object["client_id"]?.stringValue,
            let subject = object["subject"]?.stringValue,
            let old = object["old"]?.stringValue.flatMap(CredentialState.init(name:)),
            let new = object["new"]?.stringValue.flatMap(CredentialState.init(name:)),
            let cause = object["cause"]?.stringValue.flatMap(CredentialEvent.Kind.init(rawValue:)),
            let eventID = object["event_id"]?.stringValue,
            let linked = object["linked_subject"], let email = object["email_forwarding"],
            let previous = object["prev"]?.stringValue,
            linked == .null || linked.stringValue != nil, email == .null || email.boolValue != nil, sequence > 0,
            sequence <= Int64(Int.max)
        else { return nil }
        let entry = AuditEntry(
            sequence: Int(sequence), recordedAtMilliseconds: recorded, eventTimeMilliseconds: eventTime,
            clientID: clientID, subjectHash: subject, old: old,
            new: new, cause: cause, eventID: eventID, linkedSubjectHash: linked.stringValue,
            emailForwarding: email.boolValue)
        return (entry, previous)
    }
}

/// The audit log's keys, derived from the 32-byte secret kept (encrypted) in the vault: a chain
/// key that links each line to the one before, and a subject key for the subject hashes.
package struct AuditKeys: Sendable {
    package let chain: SymmetricKey
    package let subject: SymmetricKey
    /// HMAC-SHA-256 under each key, the key already absorbed (every use copies it).
    private let chainMAC: HMAC<SHA256>
    private let subjectMAC: HMAC<SHA256>

    package init(secret: [UInt8]) {
        let material = SymmetricKey(data: secret)
        chain = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: material, info: Array("shadow-keys audit v1 chain".utf8), outputByteCount: 32)
        subject = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: material, info: Array("shadow-keys audit v1 subject".utf8), outputByteCount: 32)
        chainMAC = HMAC(key: chain)
        subjectMAC = HMAC(key: subject)
    }

    /// HMAC-SHA-256(chain key, the parts in order).
    package func chainCode(_ parts: [UInt8]...) -> [UInt8] {
        var mac = chainMAC
        for part in parts { mac.update(data: part) }
        return Array(mac.finalize())
    }

    /// The chain value before the first line.
    package var start: [UInt8] { link(Array("shadow-keys audit v1 start".utf8)[...]) }

    /// The chain value after `line` (its bytes without the newline).
    package func link(_ line: ArraySlice<UInt8>) -> [UInt8] {
        var mac = chainMAC
        mac.update(data: line)
        return Array(mac.finalize())
    }

    package func subjectHash(clientID: String, subject: String) -> String {
        Hex.encode(subjectDigest(clientID: clientID, subject: subject))
    }

    /// HMAC-SHA-256(subject key, client ID ‖ 0x00 ‖ subject).
    package func subjectDigest(clientID: String, subject: String) -> [UInt8] {
        var mac = subjectMAC
        mac.update(data: Array(clientID.utf8))
        mac.update(data: [0])
        mac.update(data: Array(subject.utf8))
        return Array(mac.finalize())
    }
}

/// Where the log stands as of the last committed vault write.
package struct AuditHead: Equatable {
    /// Lines committed.
    package var count: Int
    /// Bytes committed.
    package var bytes: Int
    /// The chain value after the last committed line (``AuditKeys/start`` for none).
    package var chain: [UInt8]

    package init(count: Int, bytes: Int, chain: [UInt8]) {
        self.count = count
        self.bytes = bytes
        self.chain = chain
    }
}

/// The result of checking an audit log against its committed head.
public struct AuditReport: Sendable, Equatable {
    /// Lines the vault has committed, all intact.
    public let entries: Int
    /// Correctly chained lines past the committed end: a writer stopped between writing the log
    /// and committing the vault. The next write drops them; they never took effect.
    public let uncommitted: Int
    /// A partial line at the end, from the same kind of interruption.
    public let partialTail: Bool

    public init(entries: Int, uncommitted: Int, partialTail: Bool) {
        self.entries = entries
        self.uncommitted = uncommitted
        self.partialTail = partialTail
    }
}

package enum AuditLog {
    /// Checks `bytes` line by line: sequence numbers, `prev` links, the committed count, length and
    /// final chain value. Returns the report and the committed entries.
    package static func verify(
        _ bytes: [UInt8], keys: AuditKeys, head: AuditHead
    ) throws -> (report: AuditReport, entries: [AuditEntry]) {
        func tampered(_ reason: String) -> CredentialError { CredentialError(.auditTampered, reason) }
        guard bytes.count >= head.bytes else {
            throw tampered("the audit log is \(bytes.count) bytes but \(head.bytes) were committed: it was truncated")
        }
        var entries: [AuditEntry] = []
        var chain = keys.start
        var offset = 0
        var uncommitted = 0
        var reachedHead = head.bytes == 0
        if reachedHead, head.count != 0 || !ConstantTime.equals(head.chain, chain) {
            throw tampered("the vault's record of the log does not match an empty log")
        }
        while offset < bytes.count {
            let committed = offset < head.bytes
            guard let newline = bytes[offset...].firstIndex(of: 0x0A) else {
                if committed { throw tampered("line \(entries.count + 1) has no end") }
                guard reachedHead else {
                    throw tampered("the log's committed lines do not match the vault's record of them")
                }
                return (AuditReport(entries: entries.count, uncommitted: uncommitted, partialTail: true), entries)
            }
            let line = bytes[offset..<newline]
            let number = entries.count + uncommitted + 1
            guard let (entry, previous) = AuditEntry.parse(line) else {
                throw tampered("line \(number) is not an audit entry")
            }
            guard entry.sequence == number else {
                throw tampered("line \(number) carries sequence number \(entry.sequence)")
            }
            guard ConstantTime.equals(Array(previous.utf8), Array(Hex.encode(chain).utf8)) else {
                throw tampered(
                    "line \(number) does not link to the line before it: a line was edited, removed or reordered")
            }
            chain = keys.link(line)
            offset = newline + 1
            if committed {
                entries.append(entry)
                if offset > head.bytes { throw tampered("line \(number) runs past the committed end of the log") }
                if offset == head.bytes {
                    guard entries.count == head.count, ConstantTime.equals(chain, head.chain) else {
                        throw tampered("the log's committed lines do not match the vault's record of them")
                    }
                    reachedHead = true
                }
            } else {
                uncommitted += 1
            }
        }
        guard reachedHead else { throw tampered("the log's committed lines do not match the vault's record of them") }
        return (AuditReport(entries: entries.count, uncommitted: uncommitted, partialTail: false), entries)
    }

    /// The largest log read (about four million entries).
    static let maxBytes = 1 << 30

    /// Reads the whole log; an absent file reads as empty.
    static func read(_ path: String) throws -> [UInt8] {
        do {
            guard let bytes = try Files.read(path, limit: maxBytes) else {
                throw CredentialError(.io, "the audit log exceeds \(maxBytes) bytes")
            }
            return bytes
        } catch let error as FileError {
            if error.isNotFound { return [] }
            throw CredentialError(.io, "reading the audit log: \(error)")
        }
    }

    /// The longest line ``AuditEntry/line(previous:)`` can write (every string escaped at 6 bytes a
    /// byte), rounded up.
    static let maxLineBytes = 16 * 1024

    /// Checks, in constant time and space, that the log still ends its committed part with the
    /// line the vault's head names, so a writer never extends a log whose end was edited or
    /// replaced. (`state audit --verify` checks every line.)
    static func checkLastCommittedLine(_ fd: Int32, keys: AuditKeys, head: AuditHead) throws {
        guard head.count > 0 else { return }
        let start = max(0, head.bytes - maxLineBytes - 1)
        guard lseek(fd, off_t(start), SEEK_SET) >= 0 else {
            throw CredentialError(.io, "reading the audit log: \(String(cString: strerror(errno)))")
        }
        let window: [UInt8]
        do { window = try Files.readFull(fd, count: head.bytes - start, path: "the audit log") } catch {
            throw CredentialError(.io, "reading the audit log: \(error)")
        }
        guard window.count == head.bytes - start else {
            throw CredentialError(
                .auditTampered, "the audit log is shorter than its committed length: it was truncated")
        }
        let end = window.count - 1
        let lineStart = window[..<end].lastIndex(of: 0x0A).map { $0 + 1 } ?? (start == 0 ? 0 : -1)
        guard window[end] == 0x0A, lineStart >= 0, ConstantTime.equals(keys.link(window[lineStart..<end]), head.chain)
        else {
            throw CredentialError(
                .auditTampered,
                "the audit log's last committed line is not the one the vault recorded: the log was edited or replaced")
        }
    }

    /// Appends `lines` at the committed end, after dropping any uncommitted tail, and syncs them
    /// to disk. The caller holds the vault lock and commits the new head afterwards.
    static func append(_ lines: [[UInt8]], to path: String, keys: AuditKeys, head: AuditHead) throws {
        // Only an empty log may be created: a missing log with committed lines was deleted.
        let fd = open(path, O_RDWR | O_CLOEXEC | (head.bytes == 0 ? O_CREAT : 0), 0o600)
        guard fd >= 0 else {
            if errno == ENOENT {
                throw CredentialError(
                    .auditTampered, "the audit log \(path) is missing but \(head.count) entries were committed")
            }
            throw CredentialError(.io, "opening the audit log \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else {
            throw CredentialError(.io, "reading the audit log's size: \(String(cString: strerror(errno)))")
        }
        let size = Int(status.st_size)
        if size < head.bytes {
            throw CredentialError(
                .auditTampered, "the audit log is \(size) bytes but \(head.bytes) were committed: it was truncated")
        }
        try checkLastCommittedLine(fd, keys: keys, head: head)
        if size > head.bytes, ftruncate(fd, off_t(head.bytes)) != 0 {
            throw CredentialError(.io, "dropping the audit log's uncommitted tail: \(String(cString: strerror(errno)))")
        }
        var payload: [UInt8] = []
        payload.reserveCapacity(lines.reduce(0) { $0 + $1.count + 1 })
        for line in lines {
            payload += line
            payload.append(0x0A)
        }
        guard lseek(fd, off_t(head.bytes), SEEK_SET) >= 0 else {
            throw CredentialError(.io, "writing the audit log: \(String(cString: strerror(errno)))")
        }
        do { try Files.writeAll(fd, payload, path: path) } catch {
            throw CredentialError(.io, "writing the audit log: \(error)")
        }
        guard fsync(fd) == 0 else {
            throw CredentialError(.io, "syncing the audit log: \(String(cString: strerror(errno)))")
        }
        if size == 0 {
            // A new file: make its directory entry durable too.
            do { try Files.syncDirectory(Files.parentDirectory(path)) } catch {
                throw CredentialError(.io, "syncing the audit log's folder: \(error)")
            }
        }
    }
}
