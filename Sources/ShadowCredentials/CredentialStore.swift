import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import ShadowApple
public import ShadowJOSE
import ShadowCore
import Synchronization

/// What applying one event did.
public struct CredentialChange: Sendable, Equatable {
    public let event: CredentialEvent
    /// The subject's status before and after.
    public let old: CredentialStatus
    public let new: CredentialStatus

    /// False for a duplicate, an event older than what the store holds, or one the state ignores
    /// (a sign-in at or before a revocation, anything but email after a transfer). A change of
    /// the deciding event's id alone is not a change: two events of one kind at one time are
    /// duplicates, whatever their ids.
    public var changed: Bool {
        isTransition || old.since != new.since
    }

    /// A change the audit log records: of state, of the kind of revocation, of linked subject or of
    /// mail forwarding. A later sign-in or refresh of an authorized user only moves
    /// ``CredentialStatus/since``, and is not logged.
    public var isTransition: Bool {
        old.state != new.state || (new.state != .authorized && old.cause != new.cause)
            || old.linkedSubject.map(Array.init(_:)) != new.linkedSubject.map(Array.init(_:))
            || old.emailForwarding != new.emailForwarding
    }

    public init(event: CredentialEvent, old: CredentialStatus, new: CredentialStatus) {
        self.event = event
        self.old = old
        self.new = new
    }
}

/// Where credential state lives. Implementations must apply events atomically and keep the
/// result independent of arrival order (``CredentialRecord`` does the folding).
public protocol CredentialStateStore: Sendable {
    /// What the store knows about `subject` under `clientID` (empty for a user never seen).
    func record(clientID: String, subject: String) async throws -> CredentialRecord
    /// Applies `events` together, returning one change per event in the order they were applied
    /// (event-time order).
    func apply(_ events: [CredentialEvent]) async throws -> [CredentialChange]
}

/// A store that also keeps the audit chain of Docs/credential-state.md (the vault store and the
/// database stores).
public protocol AuditedCredentialStore: CredentialStateStore {
    /// The audit entries about `subject` under `clientID` (as subject or linked subject), oldest first.
    func history(clientID: String, subject: String) async throws -> [AuditEntry]
    /// Checks the whole chain. - Throws: ``CredentialError/Code/auditTampered`` naming the first bad line.
    func verifyAudit() async throws -> AuditReport
    /// Every committed entry, after checking the whole chain.
    func auditEntries() async throws -> [AuditEntry]
}

extension AuditedCredentialStore {
    /// The audit head as a witness keeps it (Docs/operation-log.md, "The witness"): how many
    /// transitions the log holds (verified on the way), the digest of the last (32 zero bytes for
    /// none), and the digest of transition `at` (1-based) when asked. A digest is SHA-256 of the
    /// entry's sequence, recorded time, event time, event ID, subject hash and client ID, one a line.
    public func auditMark(entry at: Int? = nil) async throws -> (count: Int, last: [UInt8], entryDigest: [UInt8]?) {
        let entries = try await auditEntries()
        func digest(_ entry: AuditEntry) -> [UInt8] {
            let text = [
                String(entry.sequence), String(entry.recordedAtMilliseconds), String(entry.eventTimeMilliseconds),
                entry.eventID, entry.subjectHash, entry.clientID,
            ].joined(separator: "\n")
            return Array(SHA256.hash(data: Array(text.utf8)))
        }
        let last = entries.last.map(digest) ?? [UInt8](repeating: 0, count: 32)
        return (entries.count, last, at.flatMap { $0 >= 1 && $0 <= entries.count ? digest(entries[$0 - 1]) : nil })
    }
}

extension CredentialStateStore {
    /// The subject's status: `notFound` for a user never seen.
    public func status(clientID: String, subject: String) async throws -> CredentialStatus {
        try await record(clientID: clientID, subject: subject).status
    }

    /// Throws ``CredentialError/Code/superseded`` when a revocation or transfer of the token's
    /// subject happened at or after the token's `iat`.
    public func enforce(_ token: AppleIdentityToken, clientID: String? = nil) async throws {
        try await record(clientID: clientID ?? token.audience, subject: token.subject).enforce(token)
    }
}

extension CredentialRecord {
    /// Throws ``CredentialError/Code/superseded`` when this record holds a revocation or transfer
    /// at or after the token's `iat`.
    public func enforce(_ token: AppleIdentityToken) throws {
        if let mark = superseding(issuedAt: token.issuedAt) {
            throw CredentialError.superseded(by: mark, issuedAt: token.issuedAt)
        }
    }
}

extension CredentialError {
    static func superseded(by mark: CredentialRecord.Mark, issuedAt: Date) -> CredentialError {
        let what = mark.kind.effect == .transfer ? "transferred" : "revoked (\(mark.kind.rawValue))"
        return CredentialError(
            .superseded,
            """
            the token was issued at \(Timestamp.rfc3339(issuedAt)); its subject was \(what) at \
            \(Timestamp.rfc3339(mark.time))
            """
        )
    }
}

extension AppleIdentityTokenValidator {
    /// Verifies `token`, then refuses it if its subject's credential was revoked or transferred at
    /// or after its `iat`. The state is looked up under `clientID`, or the token's `aud` (which
    /// Apple's rules require to be one string, an accepted client ID).
    public func validate(
        _ token: String, keys: some JWKSource, states: some CredentialStateStore, clientID: String? = nil
    ) async throws -> AppleIdentityToken {
        let identity = try await validate(token, keys: keys)
        try await states.enforce(identity, clientID: clientID)
        return identity
    }
}

/// The identity of a (client ID, subject) pair, compared byte for byte.
struct SubjectKey: Hashable, Sendable, Comparable {
    let clientID: [UInt8]
    let subject: [UInt8]

    init(clientID: String, subject: String) {
        self.clientID = Array(clientID.utf8)
        self.subject = Array(subject.utf8)
    }

    init(_ event: CredentialEvent) { self.init(clientID: event.clientID, subject: event.subject) }

    /// The bytes at once (the synthesized hash feeds them one at a time); the client ID's length
    /// keeps ("ab", "c") apart from ("a", "bc").
    func hash(into hasher: inout Hasher) {
        hasher.combine(clientID.count)
        clientID.withUnsafeBytes { hasher.combine(bytes: $0) }
        subject.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    static func < (a: SubjectKey, b: SubjectKey) -> Bool {
        a.clientID != b.clientID
            ? a.clientID.lexicographicallyPrecedes(b.clientID) : a.subject.lexicographicallyPrecedes(b.subject)
    }
}

extension [CredentialEvent] {
    /// The events in the order they are applied.
    var applicationOrder: [CredentialEvent] { sorted(by: CredentialEvent.appliesBefore) }
}

/// A store in memory, for tests and for servers that keep state elsewhere and replay it.
public final class InMemoryCredentialStore: CredentialStateStore {
    private let records = Mutex<[SubjectKey: CredentialRecord]>([:])

    public init() {}

    public func record(clientID: String, subject: String) async throws -> CredentialRecord {
        records.withLock { $0[SubjectKey(clientID: clientID, subject: subject)] ?? CredentialRecord() }
    }

    public func apply(_ events: [CredentialEvent]) async throws -> [CredentialChange] {
        records.withLock { records in
            events.applicationOrder.map { event in
                let key = SubjectKey(event)
                var record = records[key] ?? CredentialRecord()
                let old = record.status
                record.apply(event)
                records[key] = record
                return CredentialChange(event: event, old: old, new: record.status)
            }
        }
    }
}
