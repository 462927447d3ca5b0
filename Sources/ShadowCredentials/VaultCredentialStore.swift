#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Crypto
public import ShadowCore
public import ShadowVault

/// The default store: records in the token vault's "credential-state" section (encrypted,
/// crash-safe, serialized across processes by the vault's lock), and every transition appended
/// to a hash-chained audit log beside the vault (Docs/credential-state.md).
///
/// A write appends the audit lines and syncs them, then commits the records and the log's new
/// head in one atomic vault write. A crash between the two leaves lines past the committed head;
/// the next write drops them, and they never took effect.
public final class VaultCredentialStore: AuditedCredentialStore {
    public let vault: TokenVault
    /// The audit log: by default the vault's path plus ".audit".
    public let auditPath: String
    private let clock: WallClock

    /// The vault section holding the state.
    static let sectionName = "credential-state"

    public init(vault: TokenVault, auditPath: String? = nil, clock: WallClock = .system) {
        self.vault = vault
        self.auditPath = auditPath ?? vault.path + ".audit"
        self.clock = clock
    }

    // MARK: - CredentialStateStore

    public func record(clientID: String, subject: String) async throws -> CredentialRecord {
        try await runBlocking { try self.recordSync(clientID: clientID, subject: subject) }
    }

    public func apply(_ events: [CredentialEvent]) async throws -> [CredentialChange] {
        try await runBlocking { try self.applySync(events) }
    }

    /// The audit entries about `subject` under `clientID`, oldest first (committed lines only).
    public func history(clientID: String, subject: String) async throws -> [AuditEntry] {
        try await runBlocking { try self.historySync(clientID: clientID, subject: subject) }
    }

    /// Checks the audit log's chain against the head the vault committed.
    /// - Throws: ``CredentialError/Code/auditTampered`` naming the first bad line.
    public func verifyAudit() async throws -> AuditReport {
        try await runBlocking { try self.verifyAuditSync() }
    }

    public func auditEntries() async throws -> [AuditEntry] {
        try await runBlocking { try self.auditEntriesSync() }
    }

    // MARK: - Synchronous core (the CLI's entry points)

    package func recordSync(clientID: String, subject: String) throws -> CredentialRecord {
        try StoredState(try vault.contents()).records[SubjectKey(clientID: clientID, subject: subject)]
            ?? CredentialRecord()
    }

    package func applySync(_ events: [CredentialEvent]) throws -> [CredentialChange] {
        guard !events.isEmpty else { return [] }
        let recordedAt = try CredentialEvent.milliseconds(clock.now)
        return try vault.modify { contents in
            var state = try StoredState(contents)
            let keys = AuditKeys(secret: state.secret)
            var changes: [CredentialChange] = []
            var lines: [[UInt8]] = []
            var head = state.head
            var dirty = false
            for event in events.applicationOrder {
                let key = SubjectKey(event)
                let before = state.records[key] ?? CredentialRecord()
                var record = before
                record.apply(event)
                let change = CredentialChange(event: event, old: before.status, new: record.status)
                changes.append(change)
                guard record != before else { continue }
                state.records[key] = record
                dirty = true
                guard change.isTransition else { continue }
                let entry = AuditEntry(
                    sequence: head.count + 1, recordedAtMilliseconds: recordedAt,
                    eventTimeMilliseconds: event.timeMilliseconds, clientID: event.clientID,
                    subjectHash: keys.subjectHash(clientID: event.clientID, subject: event.subject),
                    old: before.status.state, new: change.new.state, cause: event.kind,
                    eventID: event.id,
                    linkedSubjectHash: event.linkedSubject.map {
                        keys.subjectHash(clientID: event.clientID, subject: $0)
                    },
                    emailForwarding: change.new.emailForwarding)
                let line = entry.line(previous: head.chain)
                head = AuditHead(count: head.count + 1, bytes: head.bytes + line.count + 1, chain: keys.link(line[...]))
                lines.append(line)
            }
            guard dirty else { return (changes, false) }
            if !lines.isEmpty { try AuditLog.append(lines, to: auditPath, keys: keys, head: state.head) }
            state.head = head
            try contents.setSection(Self.sectionName, state.json)
            return (changes, true)
        }
    }

    package func historySync(clientID: String, subject: String) throws -> [AuditEntry] {
        let (_, entries, keys) = try checkedAudit()
        let hash = keys.subjectHash(clientID: clientID, subject: subject)
        let client = Array(clientID.utf8)
        return entries.filter {
            Array($0.clientID.utf8) == client && ($0.subjectHash == hash || $0.linkedSubjectHash == hash)
        }
    }

    package func verifyAuditSync() throws -> AuditReport { try checkedAudit().report }

    /// Every committed audit entry, after checking the chain.
    package func auditEntriesSync() throws -> [AuditEntry] { try checkedAudit().entries }

    /// Reads the log while holding the vault's lock, so no writer is between its two steps.
    func checkedAudit() throws -> (report: AuditReport, entries: [AuditEntry], keys: AuditKeys) {
        try vault.withLockedContents { contents in
            let state = try StoredState(contents)
            let keys = AuditKeys(secret: state.secret)
            let (report, entries) = try AuditLog.verify(try AuditLog.read(auditPath), keys: keys, head: state.head)
            return (report, entries, keys)
        }
    }
}

/// The "credential-state" section, decoded.
struct StoredState {
    static let version: Int64 = 1

    var secret: [UInt8]
    var head: AuditHead
    var records: [SubjectKey: CredentialRecord]

    init(_ contents: VaultContents) throws {
        // No section yet: the first write creates it, with a fresh audit secret.
        guard let value = try contents.section(VaultCredentialStore.sectionName) else {
            secret = Array(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) })
            head = AuditHead(count: 0, bytes: 0, chain: AuditKeys(secret: secret).start)
            records = [:]
            return
        }
        func corrupted(_ reason: String) -> CredentialError {
            CredentialError(.corruptedState, "the vault's credential state: \(reason)")
        }
        guard let object = value.objectValue, object["version"]?.numberValue?.int64Value == Self.version else {
            throw corrupted("not a version \(Self.version) credential-state section")
        }
        guard let audit = object["audit"]?.objectValue,
            let secret = audit["secret"]?.stringValue.flatMap({ try? Hex.decode($0) }), secret.count == 32,
            let count = audit["count"]?.numberValue?.int64Value, let bytes = audit["bytes"]?.numberValue?.int64Value,
            count >= 0, bytes >= 0,
            let chain = audit["head"]?.stringValue.flatMap({ try? Hex.decode($0) }), chain.count == 32
        else { throw corrupted("the audit head is malformed") }
        guard let list = object["records"]?.arrayValue else { throw corrupted("records missing") }
        var records: [SubjectKey: CredentialRecord] = [:]
        records.reserveCapacity(list.count)
        for item in list {
            guard let record = item.objectValue, let clientID = record["client_id"]?.stringValue,
                let subject = record["subject"]?.stringValue
            else {
                throw corrupted("a record lacks client_id or subject")
            }
            var decoded = CredentialRecord()
            decoded.authorization = try Self.mark(record["authorization"], corrupted)
            decoded.revocation = try Self.mark(record["revocation"], corrupted)
            decoded.transfer = try Self.mark(record["transfer"], corrupted)
            decoded.email = try Self.mark(record["email"], corrupted)
            guard records.updateValue(decoded, forKey: SubjectKey(clientID: clientID, subject: subject)) == nil else {
                throw corrupted("a subject appears twice")
            }
        }
        self.secret = secret
        self.head = AuditHead(count: Int(count), bytes: Int(bytes), chain: chain)
        self.records = records
    }

    private static func mark(
        _ value: JSONValue?, _ corrupted: (String) -> CredentialError
    ) throws -> CredentialRecord.Mark? {
        guard let value, value != .null else { return nil }
        guard let object = value.objectValue, let time = object["time_ms"]?.numberValue?.int64Value,
            let id = object["id"]?.stringValue,
            let kind = object["kind"]?.stringValue.flatMap(CredentialEvent.Kind.init(rawValue:)),
            let linked = object["linked_subject"],
            linked == .null || linked.stringValue != nil
        else { throw corrupted("a record's event is malformed") }
        return CredentialRecord.Mark(timeMilliseconds: time, id: id, kind: kind, linkedSubject: linked.stringValue)
    }

    var json: JSONValue {
        func mark(_ mark: CredentialRecord.Mark?) -> JSONValue {
            guard let mark else { return .null }
            return .object([
                "time_ms": .int(mark.timeMilliseconds), "id": .string(mark.id), "kind": .string(mark.kind.rawValue),
                "linked_subject": mark.linkedSubject.map(JSONValue.string) ?? .null,
            ])
        }
        let list: [JSONValue] = records.sorted { $0.key < $1.key }.map { key, record in
            .object([
                "client_id": .string(String(decoding: key.clientID, as: UTF8.self)),
                "subject": .string(String(decoding: key.subject, as: UTF8.self)),
                "authorization": mark(record.authorization), "revocation": mark(record.revocation),
                "transfer": mark(record.transfer),
                "email": mark(record.email),
            ])
        }
        return .object([
            "version": .int(Self.version),
            "audit": .object([
                "secret": .string(Hex.encode(secret)), "count": .int(head.count), "bytes": .int(head.bytes),
                "head": .string(Hex.encode(head.chain)),
            ]),
            "records": .array(list),
        ])
    }
}

/// Everything a vault store holds, for moving it into a database store.
package struct VaultStateExport: Sendable {
    package let secret: [UInt8]
    package let records: [(clientID: String, subject: String, record: CredentialRecord)]
    /// The committed audit lines, without their newlines, and the entries they hold.
    package let auditLines: [[UInt8]]
    package let auditEntries: [AuditEntry]
    package let auditChain: [UInt8]
}

extension VaultCredentialStore {
    /// The state and the committed audit log, read under the vault's lock after checking the chain.
    package func exportSync() throws -> VaultStateExport {
        try vault.withLockedContents { contents in
            let state = try StoredState(contents)
            let keys = AuditKeys(secret: state.secret)
            let bytes = try AuditLog.read(auditPath)
            let (_, entries) = try AuditLog.verify(bytes, keys: keys, head: state.head)
            let lines = bytes[..<state.head.bytes].split(separator: 0x0A, omittingEmptySubsequences: false).dropLast()
                .map(Array.init)
            guard lines.count == entries.count else {
                throw CredentialError(.auditTampered, "the audit log's committed lines do not match its entries")
            }
            let records = state.records.sorted { $0.key < $1.key }.map { key, record in
                (String(decoding: key.clientID, as: UTF8.self), String(decoding: key.subject, as: UTF8.self), record)
            }
            return VaultStateExport(
                secret: state.secret, records: records, auditLines: lines, auditEntries: entries,
                auditChain: state.head.chain)
        }
    }
}
