#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore

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
    /// Runs `body` in one transaction, committed when it returns. A writing transaction holds the
    /// store's write lock from its first statement to its commit, so writers in every process and
    /// on every host are serialised. Transient failures (a lost connection, a busy database) are
    /// retried with the whole body, which must therefore only read and write through `Transaction`.
    func transaction<R: Sendable>(
        writing: Bool, _ body: @escaping @Sendable (any StateTransaction) async throws -> R
    ) async throws -> R
    /// A writing transaction that takes the write lock only when its body asks
    /// (``StateTransaction/lockWriter()``): before that, it locks and writes only the credential
    /// rows it names (``StateTransaction/lockRows(_:)``), so writers on other hosts whose users
    /// differ do that part at once, and only the audit chain's part is serialised. Where the
    /// database has a single writer (SQLite) it is an ordinary writing transaction.
    func rowsFirstTransaction<R: Sendable>(
        _ body: @escaping @Sendable (any StateTransaction) async throws -> R
    ) async throws -> R
    /// Runs `body`, which issues exactly one reading statement, outside an explicit transaction
    /// (one statement is atomic by itself): the lookup path, one round trip.
    func read<R: Sendable>(_ body: @escaping @Sendable (any StateTransaction) async throws -> R) async throws -> R
    /// Closes the database's connections.
    func close() async
}

/// The statements of one transaction.
package protocol StateTransaction: Sendable {
    func meta(_ name: String) async throws -> [UInt8]?
    func setMeta(_ name: String, _ value: [UInt8]) async throws
    /// Sets each named value, in one statement where the engine allows.
    func setMeta(_ values: [(name: String, value: [UInt8])]) async throws
    /// The rows with these ids (those that exist).
    func rows(_ ids: [[UInt8]]) async throws -> [StoredRow]
    /// The rows with these ids (those that exist), each locked against every other writer until
    /// the commit, taken in id order so that two writers never wait for each other.
    func lockRows(_ ids: [[UInt8]]) async throws -> [StoredRow]
    /// Takes the store's write lock (the audit chain's), held to the commit; in a transaction
    /// that already holds it, nothing.
    func lockWriter() async throws
    /// ``lockWriter()``, then the named values as they stand once the lock is held (a name with
    /// no value is absent), in one round trip where the engine allows.
    func lockWriter(reading names: [String]) async throws -> [String: [UInt8]]
    func upsert(_ rows: [StoredRow]) async throws
    /// Inserts rows that did not exist when this transaction locked its rows, in id order, and
    /// returns how many it inserted: a row another writer made since is left as it is.
    func insertNew(_ rows: [StoredRow]) async throws -> Int
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
    /// Every token of these rows, in one statement, each row's in kind order.
    func tokens(rowIDs: [[UInt8]]) async throws -> [StoredTokenRow]
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
    /// How many entries are unfinished (``StateEngine/pendingRevocationsSQL``).
    func pendingRevocations() async throws -> Int
}

/// A writer made one of a transaction's new rows first: the transaction is rolled back and run
/// again, and then finds that row and locks it.
package struct RowMadeConcurrently: Error {
    package init() {}
}

/// The meta rows every database store keeps.
package enum MetaName {
    package static let schemaVersion = "schema_version"
    package static let secret = "secret"
    package static let auditHead = "audit_head"
    package static let auditCheckpoint = "audit_checkpoint"
}
