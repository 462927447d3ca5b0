#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
package import ShadowCore
package import ShadowVault
import ShadowStorage

/// The engine of a database store (``DatabaseCredentialStore``), opaque outside ShadowKeys: the
/// store's keys, the sealed rows, the ordering rule applied per user inside one transaction, the
/// audit chain, and group commit (concurrent ``apply(_:)`` calls in one process share a
/// transaction). Each database supplies only its SQL layer (`StateDatabase`).
public final class StateEngine: Sendable {
    package let database: any StateDatabase
    package let keys: StoreKeys
    let clock: WallClock
    private let queue: WriteQueue

    /// Opens the store: reads its sealed secret with `unlock`, or seals a new one in an empty store.
    /// Opens the store's sealed secret with `unlock`. A store without one gets one when `create`
    /// is set and it holds nothing yet; a store that already holds state or an audit head but no
    /// secret had it deleted, and is corrupted: a new secret would make every user unknown.
    package static func open(
        _ database: any StateDatabase, unlock: VaultUnlock, create: Bool = true, clock: WallClock = .system
    ) async throws -> StateEngine {
        let (existing, holdsState) = try await database.transaction(writing: false) { transaction in
            let secret = try await transaction.meta(MetaName.secret)
            guard secret == nil else { return (secret, true) }
            if try await transaction.meta(MetaName.auditHead) != nil { return (secret, true) }
            return (secret, try await !transaction.stateCounts().isEmpty)
        }
        let secret: [UInt8]
        if let existing {
            secret = try credentialStoring { try SealedStoreSecret.open(existing, unlock: unlock) }
        } else {
            if holdsState {
                throw CredentialError(
                    .corruptedState, "the store holds state but its secret row is missing: it was deleted")
            }
            guard create else { throw CredentialError(.noStore, "the store was never written: it holds no state yet") }
            let fresh = try credentialStoring { try SealedStoreSecret.create(unlock: unlock) }
            // Two processes may create the store at once: the first commit wins, the other opens it.
            let stored = try await database.transaction(writing: true) { transaction in
                if let winner = try await transaction.meta(MetaName.secret) { return winner }
                try await transaction.setMeta(MetaName.secret, fresh.stored)
                return fresh.stored
            }
            secret =
                stored == fresh.stored
                ? fresh.secret : try credentialStoring { try SealedStoreSecret.open(stored, unlock: unlock) }
        }
        return StateEngine(database: database, keys: StoreKeys(secret: secret), clock: clock)
    }

    init(database: any StateDatabase, keys: StoreKeys, clock: WallClock) {
        self.database = database
        self.keys = keys
        self.clock = clock
        queue = WriteQueue()
    }

    // MARK: Records

    package func record(clientID: String, subject: String) async throws -> CredentialRecord {
        let id = keys.rowID(clientID: clientID, subject: subject)
        let rows = try await database.read { try await $0.rows([id]) }
        guard let row = rows.first else {
            // Every transition writes its subject's row and its audit line together: a user the
            // log holds a transition of must have a row. A deleted row must never turn a refusal
            // into a pass. A line that names the user only as a transfer's new subject is the old
            // subject's transition: the new subject has no row until an event is about them.
            let lines = try await database.read { try await $0.audit(about: id) }.filter { $0.subject == id }
            guard lines.isEmpty else {
                throw CredentialError(
                    .corruptedState,
                    """
                    the user's credential row is missing, but the audit log holds \(lines.count) of their \
                    transitions: it was deleted
                    """
                )
            }
            return CredentialRecord()
        }
        return try open(row, clientID: clientID, subject: subject)
    }

    /// A row's record, after checking that it is this user's and that its clear state agrees.
    func open(_ row: StoredRow, clientID: String? = nil, subject: String? = nil) throws -> CredentialRecord {
        let decoded = try SealedRows.decode(try SealedRows.openRecord(row.body, rowID: row.id, keys: keys))
        if let clientID, let subject,
            !decoded.clientID.exactlyEquals(clientID) || !decoded.subject.exactlyEquals(subject)
        {
            throw CredentialError(.corruptedState, "a credential row holds another user's record")
        }
        guard decoded.record.status.state.rawValue == row.state else {
            throw CredentialError(.corruptedState, "a credential row's state column disagrees with its record")
        }
        return decoded.record
    }

    package func apply(_ events: [CredentialEvent]) async throws -> [CredentialChange] {
        guard !events.isEmpty else { return [] }
        return try await queue.submit(events) { batches in try await self.applyTogether(batches) }
    }

    /// Applies several callers' events in one transaction; returns each caller's changes.
    ///
    /// The transaction has two parts. First, without the store's write lock, it locks the rows
    /// of the users its events are about (in row-id order), works out their new records, and
    /// writes them: writers whose users differ do this at once. Then it takes the write lock,
    /// checks the audit chain since the checkpoint, and appends one line per transition at the
    /// chain's head. A user's rows stay locked to the commit, so two writers' transitions of one
    /// user are chained in the order they were made.
    private func applyTogether(_ batches: [[CredentialEvent]]) async throws -> [[CredentialChange]] {
        let recordedAt = try CredentialEvent.milliseconds(clock.now)
        let keys = self.keys
        return try await database.rowsFirstTransaction { transaction in
            let items = batches.enumerated().flatMap { owner, events in events.map { (owner: owner, event: $0) } }
                .sorted { CredentialEvent.appliesBefore($0.event, $1.event) }
            var rowIDs: [SubjectKey: [UInt8]] = [:]
            for item in items where rowIDs[SubjectKey(item.event)] == nil {
                rowIDs[SubjectKey(item.event)] = keys.rowID(clientID: item.event.clientID, subject: item.event.subject)
            }
            var records: [SubjectKey: CredentialRecord] = [:]
            let byID = Dictionary(uniqueKeysWithValues: rowIDs.map { ($1, $0) })
            for chunk in rowIDs.values.sorted(by: { $0.lexicographicallyPrecedes($1) }).chunked(500) {
                for row in try await transaction.lockRows(Array(chunk)) {
                    guard let key = byID[row.id] else { continue }
                    records[key] = try self.open(
                        row, clientID: String(decoding: key.clientID, as: UTF8.self),
                        subject: String(decoding: key.subject, as: UTF8.self))
                }
            }
            let existing = Set(records.keys)
            var changes = Array(repeating: [CredentialChange](), count: batches.count)
            var dirty: Set<SubjectKey> = []
            // Each transition's line but for its place in the chain (`seq` and `prev`).
            var transitions: [(subject: [UInt8], linked: [UInt8]?, members: [UInt8])] = []
            var revoking: [(rowID: [UInt8], eventMilliseconds: Int64)] = []
            for (owner, event) in items {
                let key = SubjectKey(event)
                let before = records[key] ?? CredentialRecord()
                var record = before
                record.apply(event)
                let change = CredentialChange(event: event, old: before.status, new: record.status)
                changes[owner].append(change)
                guard record != before else { continue }
                records[key] = record
                dirty.insert(key)
                if event.kind == .accountDeleted || event.kind == .consentRevoked, let rowID = rowIDs[key] {
                    revoking.append((rowID, event.timeMilliseconds))
                }
                guard change.isTransition, let subject = rowIDs[key] else { continue }
                let linked = event.linkedSubject.map { keys.rowID(clientID: event.clientID, subject: $0) }
                let entry = AuditEntry(
                    sequence: 0, recordedAtMilliseconds: recordedAt, eventTimeMilliseconds: event.timeMilliseconds,
                    clientID: event.clientID, subjectHash: Hex.encode(subject), old: change.old.state,
                    new: change.new.state, cause: event.kind, eventID: event.id,
                    linkedSubjectHash: linked.map(Hex.encode), emailForwarding: change.new.emailForwarding)
                transitions.append((subject, linked, entry.members()))
            }
            var updated: [StoredRow] = []
            var created: [StoredRow] = []
            for key in dirty.sorted() {
                guard let record = records[key], let id = rowIDs[key] else { continue }
                let plaintext = SealedRows.encode(
                    clientID: String(decoding: key.clientID, as: UTF8.self),
                    subject: String(decoding: key.subject, as: UTF8.self), record: record)
                let row = StoredRow(
                    id: id, state: record.status.state.rawValue,
                    body: try SealedRows.sealRecord(plaintext, rowID: id, keys: keys))
                if existing.contains(key) { updated.append(row) } else { created.append(row) }
            }
            for chunk in updated.chunked(300) { try await transaction.upsert(Array(chunk)) }
            created.sort { $0.id.lexicographicallyPrecedes($1.id) }
            for chunk in created.chunked(300) {
                // Another writer made one of these users' rows after this one found none: its
                // record was worked out from nothing, so the whole transaction runs again.
                guard try await transaction.insertNew(Array(chunk)) == chunk.count else { throw RowMadeConcurrently() }
            }
            let meta = try await transaction.lockWriter(reading: [MetaName.auditHead, MetaName.auditCheckpoint])
            let (count, chain) = try keys.decodeHead(meta[MetaName.auditHead])
            // The lines since the checkpoint are read now; their seals and chain are checked while
            // this write's lines are made and appended, which need neither. A failed check fails
            // the transaction, so nothing of it is committed.
            let (checkpoint, tail) = try await self.linesSinceCheckpoint(
                of: transaction, count: count, chain: chain, checkpoint: meta[MetaName.auditCheckpoint])
            async let checked: Void = Self.check(tail)
            do {
                let (revoking, transitions) = (revoking, transitions)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    // In the same transaction: a recorded deletion or revocation always has its
                    // tokens queued. The store works through it, then through each stretch of
                    // lines while the next stretch is made, then the new head: the statements
                    // are independent, and all of them commit or none.
                    if !revoking.isEmpty {
                        group.addTask { try await self.queueRevocations(revoking, now: recordedAt, in: transaction) }
                    }
                    var head = (count: count, chain: chain)
                    for stretch in transitions.chunked(250) {
                        let lines: [StoredAuditLine]
                        (lines, head) = try Self.auditLines(stretch, after: head.count, chain: head.chain, keys: keys)
                        group.addTask { try await transaction.appendAudit(lines) }
                    }
                    if head.count > count {
                        var moved = [(MetaName.auditHead, keys.encodeHead(count: head.count, chain: head.chain))]
                        // The lines up to the head this write checked are known good: the
                        // checkpoint moves there, so the next write checks this write's lines and
                        // no more.
                        if count > checkpoint.count {
                            moved.append((MetaName.auditCheckpoint, keys.encodeCheckpoint(count: count, chain: chain)))
                        }
                        group.addTask { [moved] in try await transaction.setMeta(moved) }
                    }
                    try await group.waitForAll()
                }
            } catch {
                try await checked  // a store the check refuses is the answer, whatever else failed
                throw error
            }
            try await checked
            return changes
        }
    }

    private static func check(_ tail: AuditTail) throws {
        var tail = tail
        try tail.check()
    }

    /// The sealed lines of `transitions` after line `count`, whose chain value is `chain`; and
    /// the head after them.
    private static func auditLines(
        _ transitions: ArraySlice<(subject: [UInt8], linked: [UInt8]?, members: [UInt8])>, after count: Int,
        chain: [UInt8], keys: StoreKeys
    ) throws -> (lines: [StoredAuditLine], head: (count: Int, chain: [UInt8])) {
        var (count, chain) = (count, chain)
        var lines: [StoredAuditLine] = []
        lines.reserveCapacity(transitions.count)
        for (subject, linked, members) in transitions {
            let line = AuditEntry.line(sequence: count + 1, members: members, previous: chain)
            count += 1
            chain = keys.audit.link(line[...])
            lines.append(
                StoredAuditLine(
                    sequence: count, subject: subject, linked: linked,
                    line: try SealedRows.sealAuditLine(line, sequence: count, keys: keys)))
        }
        return (lines, (count, chain))
    }

    /// How many users are in each state.
    package func counts() async throws -> [CredentialState: Int] {
        let raw = try await database.transaction(writing: false) { try await $0.stateCounts() }
        var counts: [CredentialState: Int] = [:]
        for (state, count) in raw {
            guard let known = CredentialState(rawValue: state) else {
                throw CredentialError(.corruptedState, "a credential row has state \(state)")
            }
            counts[known] = count
        }
        return counts
    }
}

/// Group commit: calls to ``submit(_:run:)`` that arrive while a transaction runs share the next one.
actor WriteQueue {
    typealias Job = (events: [CredentialEvent], continuation: CheckedContinuation<[CredentialChange], any Error>)
    typealias Run = @Sendable ([[CredentialEvent]]) async throws -> [[CredentialChange]]

    /// The most events one transaction takes (a single larger call still runs alone).
    static let maxEvents = 2000

    private var jobs: [Job] = []
    private var draining = false

    func submit(_ events: [CredentialEvent], run: @escaping Run) async throws -> [CredentialChange] {
        try await withCheckedThrowingContinuation { continuation in
            jobs.append((events, continuation))
            if !draining {
                draining = true
                Task { await self.drain(run) }
            }
        }
    }

    private func drain(_ run: Run) async {
        while !jobs.isEmpty {
            var batch: [Job] = [jobs.removeFirst()]
            var total = batch[0].events.count
            while let next = jobs.first, total + next.events.count <= Self.maxEvents {
                batch.append(jobs.removeFirst())
                total += next.events.count
            }
            do {
                let results = try await run(batch.map(\.events))
                for (job, changes) in zip(batch, results) { job.continuation.resume(returning: changes) }
            } catch let error as CredentialError where batch.count > 1 && error.code == .corruptedState {
                // A user's row that does not open fails that user's caller, not every caller it
                // shared the transaction with: each runs again alone. (A store that cannot be
                // reached fails them all at once, below, not one retry budget after another.)
                for job in batch {
                    do {
                        let changes = try await run([job.events])
                        job.continuation.resume(returning: changes.first ?? [])
                    } catch {
                        job.continuation.resume(throwing: error)
                    }
                }
            } catch {
                for job in batch { job.continuation.resume(throwing: error) }
            }
        }
        draining = false
    }
}
