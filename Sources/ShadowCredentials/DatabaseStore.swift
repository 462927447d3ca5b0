#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
package import ShadowCore
package import ShadowVault

/// A credential row as a database holds it: the row id, the state in the clear (so counts per
/// state need no key), and the sealed record.
package struct StoredRow: Sendable {
    package var id: [UInt8]
    package var state: Int
    package var body: [UInt8]

    package init(id: [UInt8], state: Int, body: [UInt8]) {
        self.id = id
        self.state = state
        self.body = body
    }
}

/// An audit line as a database holds it, with the row ids it is about (for history lookups).
package struct StoredAuditLine: Sendable {
    package var sequence: Int
    package var subject: [UInt8]
    package var linked: [UInt8]?
    package var line: [UInt8]

    package init(sequence: Int, subject: [UInt8], linked: [UInt8]?, line: [UInt8]) {
        self.sequence = sequence
        self.subject = subject
        self.linked = linked
        self.line = line
    }
}

/// A token row: the owner's row id, the kind in the clear, the expiry in the clear (for clean-up),
/// and the sealed token.
package struct StoredTokenRow: Sendable {
    package var rowID: [UInt8]
    package var kind: String
    package var expiresAtMilliseconds: Int64?
    package var body: [UInt8]

    package init(rowID: [UInt8], kind: String, expiresAtMilliseconds: Int64?, body: [UInt8]) {
        self.rowID = rowID
        self.kind = kind
        self.expiresAtMilliseconds = expiresAtMilliseconds
        self.body = body
    }
}

/// What a database store's SQL layer provides (ShadowSQLite, ShadowPostgres); ``StateEngine``
/// does everything else, so every database keeps the same rows, rules and audit chain.
package protocol StateDatabase: Sendable {
    associatedtype Transaction: StateTransaction
    /// Runs `body` in one transaction, committed when it returns. A writing transaction holds the
    /// store's write lock from its first statement to its commit, so writers in every process and
    /// on every host are serialised. Transient failures (a lost connection, a busy database) are
    /// retried with the whole body, which must therefore only read and write through `Transaction`.
    func transaction<R: Sendable>(
        writing: Bool, _ body: @escaping @Sendable (Transaction) async throws -> R
    ) async throws -> R
    /// Runs `body`, which issues exactly one reading statement, outside an explicit transaction
    /// (one statement is atomic by itself): the lookup path, one round trip.
    func read<R: Sendable>(_ body: @escaping @Sendable (Transaction) async throws -> R) async throws -> R
}

/// The statements of one transaction.
package protocol StateTransaction: Sendable {
    func meta(_ name: String) async throws -> [UInt8]?
    func setMeta(_ name: String, _ value: [UInt8]) async throws
    /// The rows with these ids (those that exist).
    func rows(_ ids: [[UInt8]]) async throws -> [StoredRow]
    func upsert(_ rows: [StoredRow]) async throws
    /// The number of rows in each state.
    func stateCounts() async throws -> [Int: Int]
    func appendAudit(_ lines: [StoredAuditLine]) async throws
    /// Up to `limit` lines with sequence numbers after `sequence`, in order, clear columns included.
    func audit(after sequence: Int, limit: Int) async throws -> [StoredAuditLine]
    /// The lines about a row id (as subject or linked subject), in order, clear columns included.
    func audit(about rowID: [UInt8]) async throws -> [StoredAuditLine]
    func putToken(_ row: StoredTokenRow) async throws
    /// The row's tokens (of `kind`, or all), in kind order.
    func tokens(rowID: [UInt8], kind: String?) async throws -> [StoredTokenRow]
    func deleteToken(rowID: [UInt8], kind: String) async throws -> Bool
    func expiredTokens(at milliseconds: Int64, limit: Int) async throws -> [StoredTokenRow]
    /// Adds revocations; an entry already pending for the token is kept, a finished one starts over.
    func queueRevocations(_ items: [StoredRevocation]) async throws
    /// Up to `limit` unfinished entries due at `now`, earliest first, each made due again at
    /// `until` with one more attempt counted; returned as they are after that update.
    func claimRevocations(now: Int64, until: Int64, limit: Int) async throws -> [StoredRevocation]
    /// Finishes an entry (`outcome` and `at` set), or, with both nil, makes it due at `due`.
    func finishRevocation(rowID: [UInt8], kind: String, outcome: String?, at: Int64?, due: Int64) async throws
    func revocationCounts() async throws -> RevocationCounts
}

/// The meta rows every database store keeps.
package enum MetaName {
    package static let schemaVersion = "schema_version"
    package static let secret = "secret"
    package static let auditHead = "audit_head"
}

/// The shared core of the database stores: the store's keys, the sealed rows, the ordering rule
/// applied per user inside one transaction, the audit chain, and group commit (concurrent
/// ``apply(_:)`` calls in one process share a transaction).
package final class StateEngine<Database: StateDatabase>: Sendable {
    package let database: Database
    package let keys: StoreKeys
    let clock: WallClock
    private let queue: WriteQueue

    /// Opens the store: reads its sealed secret with `unlock`, or seals a new one in an empty store.
    /// Opens the store's sealed secret with `unlock`. A store without one gets one when `create`
    /// is set and it holds nothing yet; a store that already holds state or an audit head but no
    /// secret had it deleted, and is corrupted: a new secret would make every user unknown.
    package static func open(
        _ database: Database, unlock: VaultUnlock, create: Bool = true, clock: WallClock = .system
    ) async throws -> StateEngine {
        let (existing, holdsState) = try await database.transaction(writing: false) { transaction in
            let secret = try await transaction.meta(MetaName.secret)
            guard secret == nil else { return (secret, true) }
            if try await transaction.meta(MetaName.auditHead) != nil { return (secret, true) }
            return (secret, try await !transaction.stateCounts().isEmpty)
        }
        let secret: [UInt8]
        if let existing {
            secret = try SealedStoreSecret.open(existing, unlock: unlock)
        } else {
            if holdsState {
                throw CredentialError(
                    .corruptedState, "the store holds state but its secret row is missing: it was deleted")
            }
            guard create else { throw CredentialError(.noStore, "the store was never written: it holds no state yet") }
            let fresh = try SealedStoreSecret.create(unlock: unlock)
            // Two processes may create the store at once: the first commit wins, the other opens it.
            let stored = try await database.transaction(writing: true) { transaction in
                if let winner = try await transaction.meta(MetaName.secret) { return winner }
                try await transaction.setMeta(MetaName.secret, fresh.stored)
                return fresh.stored
            }
            secret = stored == fresh.stored ? fresh.secret : try SealedStoreSecret.open(stored, unlock: unlock)
        }
        return StateEngine(database: database, keys: StoreKeys(secret: secret), clock: clock)
    }

    init(database: Database, keys: StoreKeys, clock: WallClock) {
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
            // Every transition writes the user's row and its audit line together: a user the log
            // knows must have a row. A deleted row must never turn a refusal into a pass.
            let lines = try await database.read { try await $0.audit(about: id) }
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
        if let clientID, let subject, decoded.clientID != clientID || decoded.subject != subject {
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
    private func applyTogether(_ batches: [[CredentialEvent]]) async throws -> [[CredentialChange]] {
        let recordedAt = try CredentialEvent.milliseconds(clock.now)
        let keys = self.keys
        return try await database.transaction(writing: true) { transaction in
            var (count, chain) = try keys.decodeHead(try await transaction.meta(MetaName.auditHead))
            try await self.checkTail(of: transaction, count: count, chain: chain)
            let items = batches.enumerated().flatMap { owner, events in events.map { (owner: owner, event: $0) } }
                .sorted { CredentialEvent.appliesBefore($0.event, $1.event) }
            var rowIDs: [SubjectKey: [UInt8]] = [:]
            for item in items where rowIDs[SubjectKey(item.event)] == nil {
                rowIDs[SubjectKey(item.event)] = keys.rowID(clientID: item.event.clientID, subject: item.event.subject)
            }
            var records: [SubjectKey: CredentialRecord] = [:]
            let byID = Dictionary(uniqueKeysWithValues: rowIDs.map { ($1, $0) })
            for chunk in Array(rowIDs.values).chunked(500) {
                for row in try await transaction.rows(Array(chunk)) {
                    guard let key = byID[row.id] else { continue }
                    records[key] = try self.open(
                        row, clientID: String(decoding: key.clientID, as: UTF8.self),
                        subject: String(decoding: key.subject, as: UTF8.self))
                }
            }
            var changes = Array(repeating: [CredentialChange](), count: batches.count)
            var dirty: Set<SubjectKey> = []
            var lines: [StoredAuditLine] = []
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
                if event.kind == .accountDeleted || event.kind == .consentRevoked {
                    revoking.append((rowIDs[key]!, event.timeMilliseconds))
                }
                guard change.isTransition else { continue }
                let subject = rowIDs[key]!
                let linked = event.linkedSubject.map { keys.rowID(clientID: event.clientID, subject: $0) }
                let entry = AuditEntry(
                    sequence: count + 1, recordedAtMilliseconds: recordedAt,
                    eventTimeMilliseconds: event.timeMilliseconds, clientID: event.clientID,
                    subjectHash: Hex.encode(subject), old: before.status.state, new: change.new.state,
                    cause: event.kind, eventID: event.id,
                    linkedSubjectHash: linked.map(Hex.encode), emailForwarding: change.new.emailForwarding)
                let line = entry.line(previous: chain)
                count += 1
                chain = keys.audit.link(line[...])
                lines.append(
                    StoredAuditLine(
                        sequence: count, subject: subject, linked: linked,
                        line: try SealedRows.sealAuditLine(line, sequence: count, keys: keys)))
            }
            guard !dirty.isEmpty else { return changes }
            var rows: [StoredRow] = []
            rows.reserveCapacity(dirty.count)
            for key in dirty.sorted() {
                let record = records[key]!, id = rowIDs[key]!
                let plaintext = SealedRows.encode(
                    clientID: String(decoding: key.clientID, as: UTF8.self),
                    subject: String(decoding: key.subject, as: UTF8.self), record: record)
                rows.append(
                    StoredRow(
                        id: id, state: record.status.state.rawValue,
                        body: try SealedRows.sealRecord(plaintext, rowID: id, keys: keys)))
            }
            for chunk in rows.chunked(300) { try await transaction.upsert(Array(chunk)) }
            if !lines.isEmpty {
                for chunk in lines.chunked(200) { try await transaction.appendAudit(Array(chunk)) }
                try await transaction.setMeta(MetaName.auditHead, keys.encodeHead(count: count, chain: chain))
            }
            // In the same transaction: a recorded deletion or revocation always has its tokens queued.
            if !revoking.isEmpty { try await self.queueRevocations(revoking, now: recordedAt, in: transaction) }
            return changes
        }
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

    // MARK: Audit

    /// The audit entries about the user, oldest first.
    package func history(clientID: String, subject: String) async throws -> [AuditEntry] {
        let id = keys.rowID(clientID: clientID, subject: subject)
        let lines = try await database.read { try await $0.audit(about: id) }
        return try lines.map { try openAudit($0).entry }
    }

    /// A stored audit line opened at its sequence number, after checking that its clear columns
    /// (the row ids it is about) are the ones its sealed text names: a column moved to another
    /// user, or a linked subject dropped, is tampering.
    func openAudit(_ stored: StoredAuditLine) throws -> (entry: AuditEntry, previous: String, line: [UInt8]) {
        let line = try SealedRows.openAuditLine(stored.line, sequence: stored.sequence, keys: keys)
        guard let (entry, previous) = AuditEntry.parse(line[...]) else {
            throw CredentialError(.auditTampered, "line \(stored.sequence) is not an audit entry")
        }
        guard entry.sequence == stored.sequence else {
            throw CredentialError(.auditTampered, "line \(stored.sequence) carries sequence number \(entry.sequence)")
        }
        guard Hex.encode(stored.subject) == entry.subjectHash, stored.linked.map(Hex.encode) == entry.linkedSubjectHash
        else {
            throw CredentialError(
                .auditTampered,
                "audit line \(stored.sequence)'s subject columns disagree with its sealed text: they were edited")
        }
        return (entry, previous, line)
    }

    /// Before a write extends the chain: the last line is there, opens, and ends at the head's
    /// chain value, and no line lies past the head. A write never appends to a log whose end was
    /// removed, edited or extended; what lies further back is `verifyAudit()`'s to check.
    func checkTail(of transaction: Database.Transaction, count: Int, chain: [UInt8]) async throws {
        let tail = try await transaction.audit(after: max(0, count - 1), limit: 2)
        if count == 0 {
            guard tail.isEmpty else {
                throw CredentialError(.auditTampered, "the audit log holds lines past its authenticated head (0 lines)")
            }
            return
        }
        guard let last = tail.first, last.sequence == count else {
            throw CredentialError(
                .auditTampered, "audit line \(count), the last the store's head counts, is missing: it was removed")
        }
        guard tail.count == 1 else {
            throw CredentialError(
                .auditTampered,
                """
                the audit log holds line \(tail[1].sequence) past its authenticated head (\(count) lines): it was \
                inserted
                """
            )
        }
        let opened = try openAudit(last)
        guard ConstantTime.equals(keys.audit.link(opened.line[...]), chain) else {
            throw CredentialError(
                .auditTampered, "audit line \(count) does not end at the store's authenticated head: it was edited")
        }
    }

    /// Checks the whole chain against the authenticated head, reading it a page at a time in one
    /// read transaction (a consistent snapshot); returns the entries too when `collect` is set.
    package func verifyAudit(collect: Bool = false) async throws -> (report: AuditReport, entries: [AuditEntry]) {
        let keys = self.keys
        return try await database.transaction(writing: false) { transaction in
            let head = try keys.decodeHead(try await transaction.meta(MetaName.auditHead))
            var chain = keys.audit.start
            var entries: [AuditEntry] = []
            var number = 0
            while true {
                let page = try await transaction.audit(after: number, limit: 5000)
                for stored in page {
                    number += 1
                    guard stored.sequence == number else {
                        throw CredentialError(.auditTampered, "audit line \(number) is missing: lines were removed")
                    }
                    let (entry, previous, line) = try self.openAudit(stored)
                    guard ConstantTime.equals(Array(previous.utf8), Array(Hex.encode(chain).utf8)) else {
                        throw CredentialError(
                            .auditTampered,
                            """
                            line \(number) does not link to the line before it: a line was edited, removed or \
                            reordered
                            """
                        )
                    }
                    chain = keys.audit.link(line[...])
                    if collect { entries.append(entry) }
                }
                if page.count < 5000 { break }
            }
            guard number == head.count, ConstantTime.equals(chain, head.chain) else {
                throw CredentialError(
                    .auditTampered,
                    """
                    the log's \(number) lines do not end at the store's authenticated head (\(head.count) lines): \
                    lines were added, removed or edited
                    """
                )
            }
            return (AuditReport(entries: number, uncommitted: 0, partialTail: false), entries)
        }
    }

    // MARK: Tokens

    package func put(_ token: ServerToken) async throws {
        let id = keys.rowID(clientID: token.clientID, subject: token.subject)
        let row = StoredTokenRow(
            rowID: id, kind: token.kind.rawValue, expiresAtMilliseconds: token.expiresAtMilliseconds,
            body: try SealedRows.sealToken(SealedRows.encode(token), rowID: id, kind: token.kind, keys: keys))
        try await database.transaction(writing: true) { try await $0.putToken(row) }
    }

    package func tokens(clientID: String, subject: String, kind: ServerToken.Kind?) async throws -> [ServerToken] {
        let id = keys.rowID(clientID: clientID, subject: subject)
        let rows = try await database.read { try await $0.tokens(rowID: id, kind: kind?.rawValue) }
        return try rows.map { row in
            let token = try openToken(row)
            guard token.clientID == clientID, token.subject == subject else {
                throw CredentialError(.corruptedState, "a token row holds another user's token")
            }
            return token
        }
    }

    package func deleteToken(clientID: String, subject: String, kind: ServerToken.Kind) async throws -> Bool {
        let id = keys.rowID(clientID: clientID, subject: subject)
        return try await database.transaction(writing: true) {
            try await $0.deleteToken(rowID: id, kind: kind.rawValue)
        }
    }

    package func expiredTokens(at time: Date, limit: Int) async throws -> [ServerToken] {
        let milliseconds = try CredentialEvent.milliseconds(time)
        let rows = try await database.transaction(writing: false) {
            try await $0.expiredTokens(at: milliseconds, limit: max(0, limit))
        }
        return try rows.map(openToken)
    }

    func openToken(_ row: StoredTokenRow) throws -> ServerToken {
        let token = try SealedRows.decodeToken(
            try SealedRows.openToken(row.body, rowID: row.rowID, kind: row.kind, keys: keys))
        guard token.kind.rawValue == row.kind, token.expiresAtMilliseconds == row.expiresAtMilliseconds else {
            throw CredentialError(.corruptedState, "a token row's clear columns disagree with its sealed token")
        }
        return token
    }
}

/// What every database store does, whatever its database: the engine's operations.
package protocol StateEngineAPI: Sendable {
    func record(clientID: String, subject: String) async throws -> CredentialRecord
    func apply(_ events: [CredentialEvent]) async throws -> [CredentialChange]
    func history(clientID: String, subject: String) async throws -> [AuditEntry]
    func verifyAudit(collect: Bool) async throws -> (report: AuditReport, entries: [AuditEntry])
    func counts() async throws -> [CredentialState: Int]
    func put(_ token: ServerToken) async throws
    func tokens(clientID: String, subject: String, kind: ServerToken.Kind?) async throws -> [ServerToken]
    func deleteToken(clientID: String, subject: String, kind: ServerToken.Kind) async throws -> Bool
    func expiredTokens(at time: Date, limit: Int) async throws -> [ServerToken]
    func dueRevocations(limit: Int, lease: Duration) async throws -> [PendingRevocation]
    func completeRevocation(_ revocation: PendingRevocation, _ result: RevocationResult) async throws
    func revocationCounts() async throws -> RevocationCounts
}

extension StateEngine: StateEngineAPI {}

/// A database store's engine, opaque outside ShadowKeys.
public struct StoreEngine: Sendable {
    package let api: any StateEngineAPI
    package init(_ api: any StateEngineAPI) { self.api = api }
}

/// A store over a database (``SQLiteCredentialStore``, ``PostgresCredentialStore``): credential
/// state with its audit chain, and server tokens, all through one engine.
public protocol DatabaseCredentialStore: AuditedCredentialStore, ServerTokenStore, RevocationQueue {
    /// The store's engine.
    var engine: StoreEngine { get }
    /// Closes the database connections.
    func close() async
}

extension DatabaseCredentialStore {
    public func record(clientID: String, subject: String) async throws -> CredentialRecord {
        try await engine.api.record(clientID: clientID, subject: subject)
    }
    public func apply(_ events: [CredentialEvent]) async throws -> [CredentialChange] {
        try await engine.api.apply(events)
    }
    public func history(clientID: String, subject: String) async throws -> [AuditEntry] {
        try await engine.api.history(clientID: clientID, subject: subject)
    }
    public func verifyAudit() async throws -> AuditReport { try await engine.api.verifyAudit(collect: false).report }
    public func auditEntries() async throws -> [AuditEntry] { try await engine.api.verifyAudit(collect: true).entries }
    /// How many users are in each state (readable without the key: the state is a clear column).
    public func counts() async throws -> [CredentialState: Int] { try await engine.api.counts() }

    public func put(_ token: ServerToken) async throws { try await engine.api.put(token) }
    public func token(clientID: String, subject: String, kind: ServerToken.Kind) async throws -> ServerToken? {
        try await engine.api.tokens(clientID: clientID, subject: subject, kind: kind).first
    }
    public func tokens(clientID: String, subject: String) async throws -> [ServerToken] {
        try await engine.api.tokens(clientID: clientID, subject: subject, kind: nil)
    }
    @discardableResult
    public func deleteToken(clientID: String, subject: String, kind: ServerToken.Kind) async throws -> Bool {
        try await engine.api.deleteToken(clientID: clientID, subject: subject, kind: kind)
    }
    public func expiredTokens(at time: Date, limit: Int) async throws -> [ServerToken] {
        try await engine.api.expiredTokens(at: time, limit: limit)
    }

    public func dueRevocations(limit: Int, lease: Duration) async throws -> [PendingRevocation] {
        try await engine.api.dueRevocations(limit: limit, lease: lease)
    }
    public func completeRevocation(_ revocation: PendingRevocation, _ result: RevocationResult) async throws {
        try await engine.api.completeRevocation(revocation, result)
    }
    public func revocationCounts() async throws -> RevocationCounts { try await engine.api.revocationCounts() }
}

/// What moving a vault store into a database store moved.
public struct MigrationReport: Sendable, Equatable {
    /// Users (records) moved.
    public let users: Int
    /// Audit entries moved, their chain intact.
    public let auditEntries: Int
}

extension StateEngine {
    /// Moves a vault store into an empty database in one transaction. The database adopts the
    /// vault's audit secret (sealed under `unlock`), so its row ids are the vault log's subject
    /// hashes and the log moves line for line with its chain and head unchanged: `state audit`
    /// prints the same entries before and after.
    package static func importVault(
        _ export: VaultStateExport, into database: Database, unlock: VaultUnlock
    ) async throws -> MigrationReport {
        let keys = StoreKeys(secret: export.secret)
        let sealedSecret = try SealedStoreSecret.create(unlock: unlock, secret: export.secret).stored
        var rows: [StoredRow] = []
        for (clientID, subject, record) in export.records {
            let id = keys.rowID(clientID: clientID, subject: subject)
            let body = try SealedRows.sealRecord(
                SealedRows.encode(clientID: clientID, subject: subject, record: record), rowID: id, keys: keys)
            rows.append(StoredRow(id: id, state: record.status.state.rawValue, body: body))
        }
        var lines: [StoredAuditLine] = []
        for (line, entry) in zip(export.auditLines, export.auditEntries) {
            let subject = try Hex.decode(entry.subjectHash), linked = try entry.linkedSubjectHash.map(Hex.decode)
            lines.append(
                StoredAuditLine(
                    sequence: entry.sequence, subject: subject, linked: linked,
                    line: try SealedRows.sealAuditLine(line, sequence: entry.sequence, keys: keys)))
        }
        let head = keys.encodeHead(count: lines.count, chain: export.auditChain)
        let (moved, logged) = (rows.count, lines.count)
        let (finalRows, finalLines) = (rows, lines)
        try await database.transaction(writing: true) { transaction in
            guard try await transaction.stateCounts().isEmpty, try await transaction.audit(after: 0, limit: 1).isEmpty
            else {
                throw CredentialError(
                    .invalidParameter, "the target store already holds credential state: migrate into a new one")
            }
            try await transaction.setMeta(MetaName.secret, sealedSecret)
            for chunk in finalRows.chunked(300) { try await transaction.upsert(Array(chunk)) }
            for chunk in finalLines.chunked(200) { try await transaction.appendAudit(Array(chunk)) }
            try await transaction.setMeta(MetaName.auditHead, head)
        }
        return MigrationReport(users: moved, auditEntries: logged)
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
            } catch {
                for job in batch { job.continuation.resume(throwing: error) }
            }
        }
        draining = false
    }
}

extension Array {
    /// The array in consecutive pieces of at most `size` elements.
    package func chunked(_ size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
