#if canImport(Darwin)
import Darwin
#else
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import NIOCore
import NIOPosix
public import ShadowCore
public import ShadowCredentials
public import ShadowVault
import ShadowStorage
import SQLiteNIO
import Synchronization

/// Credential state and server tokens in one SQLite database file: the embedded default.
///
/// WAL mode, `synchronous=FULL`; writers in any number of processes are serialised by SQLite's
/// write lock (`BEGIN IMMEDIATE`, waiting up to the lock timeout), and readers never wait for
/// them. Rows are found by a keyed hash of (client ID, subject) and sealed with AES-256-GCM; every
/// transition is appended to the audit chain in the same transaction (Docs/credential-state.md).
public final class SQLiteCredentialStore: DatabaseCredentialStore {
    public let path: String
    public let engine: StateEngine

    private init(path: String, engine: StateEngine) {
        self.path = path
        self.engine = engine
    }

    /// `$SHADOW_KEYS_STATE_DB`, else `$XDG_DATA_HOME/shadow-keys/state.sqlite`, else
    /// `$HOME/.local/share/shadow-keys/state.sqlite`.
    public static func defaultPath(environment: [String: String]? = nil) throws -> String {
        let environment = environment ?? ProcessInfo.processInfo.environment
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") { return xdg + "/shadow-keys/state.sqlite" }
        if let home = environment["HOME"], home.hasPrefix("/") {
            return home + "/.local/share/shadow-keys/state.sqlite"
        }
        throw CredentialError(
            .invalidParameter, "no state database path: give one, or set XDG_DATA_HOME or HOME to an absolute path")
    }

    /// Opens the database at `path`, creating it (mode 0600, its folder 0700) and its schema when
    /// `create` is set and it does not exist.
    /// - Throws: ``CredentialError/Code/wrongKey`` when `unlock` does not open it;
    ///   ``CredentialError/Code/corruptedState`` when the file is not a state database;
    ///   ``CredentialError/Code/noStore`` when it does not exist and `create` is off.
    public static func open(
        path: String, unlock: VaultUnlock, create: Bool = true, lockTimeout: Duration = .seconds(10),
        clock: WallClock = .system
    ) async throws -> SQLiteCredentialStore {
        guard lockTimeout >= .zero, lockTimeout <= .seconds(3600) else {
            throw CredentialError(.invalidParameter, "the lock timeout is 0 to 3600 seconds")
        }
        try prepareFile(path, create: create)
        let database = try await SQLiteStateDatabase.open(path: path, lockTimeout: lockTimeout.inSeconds)
        do {
            try await database.migrate()
            return SQLiteCredentialStore(
                path: path, engine: try await StateEngine.open(database, unlock: unlock, clock: clock))
        } catch {
            await database.close()
            throw error
        }
    }

    /// Opens an existing database for reading only: SQLite opens it read-only (`mode=ro`), so
    /// nothing is created, migrated or written, and the schema is checked by one read of its
    /// version. Any schema version this ShadowKeys migrates from is read as it is.
    /// - Throws: ``CredentialError/Code/noStore`` when there is no file at `path`;
    ///   ``CredentialError/Code/notAStore`` when it is an empty file or another application's
    ///   database; ``CredentialError/Code/corruptedState`` when its secret is missing or it is
    ///   damaged; ``CredentialError/Code/wrongKey``.
    public static func openForReading(
        path: String, unlock: VaultUnlock, lockTimeout: Duration = .seconds(10), clock: WallClock = .system
    ) async throws
        -> SQLiteCredentialStore
    {
        guard lockTimeout >= .zero, lockTimeout <= .seconds(3600) else {
            throw CredentialError(.invalidParameter, "the lock timeout is 0 to 3600 seconds")
        }
        try prepareFile(path, create: false)
        let database = try await SQLiteStateDatabase.open(
            path: path, lockTimeout: lockTimeout.inSeconds, readOnly: true)
        do {
            try await database.checkReadableSchema()
            return SQLiteCredentialStore(
                path: path, engine: try await StateEngine.open(database, unlock: unlock, create: false, clock: clock))
        } catch {
            await database.close()
            throw error
        }
    }

    /// Moves `vault`'s credential state and audit log into a new (or empty) database at `path`
    /// (``StateEngine``'s import: the audit chain moves intact).
    public static func migrate(
        from vault: VaultCredentialStore, toPath path: String, unlock: VaultUnlock, lockTimeout: Duration = .seconds(10)
    ) async throws -> MigrationReport {
        guard lockTimeout >= .zero, lockTimeout <= .seconds(3600) else {
            throw CredentialError(.invalidParameter, "the lock timeout is 0 to 3600 seconds")
        }
        let export = try await runBlocking { try vault.exportSync() }
        try prepareFile(path, create: true)
        let database = try await SQLiteStateDatabase.open(path: path, lockTimeout: lockTimeout.inSeconds)
        do {
            try await database.migrate()
            let report = try await StateEngine.importVault(export, into: database, unlock: unlock)
            await database.close()
            return report
        } catch {
            await database.close()
            throw error
        }
    }

    /// Creates the database (mode 0600) or brings its schema up to date; returns the schema version.
    public static func migrateSchema(path: String) async throws -> Int {
        try prepareFile(path, create: true)
        let database = try await SQLiteStateDatabase.open(path: path, lockTimeout: 10)
        do {
            try await database.migrate()
            await database.close()
            return SQLiteStateDatabase.schemaVersion
        } catch {
            await database.close()
            throw error
        }
    }

    /// Closes the database's connections.
    public func close() async { await engine.database.close() }

    /// Creates the file with mode 0600 (and its folder with 0700) before SQLite opens it, so the
    /// database and its -wal and -shm files (which SQLite gives the database's mode) are private.
    static func prepareFile(_ path: String, create: Bool) throws {
        var status = stat()
        if !path.isEmpty, lstat(path, &status) != 0, !create {
            throw CredentialError(.noStore, "no state database at \(path)")
        }
        do { try SQLiteDatabase.prepareFile(path, create: create) } catch let error as StorageError {
            throw CredentialError(storage: error)
        }
    }

    /// Opens credential state in a database this process already has open (the handle is shared
    /// with sessions and the operation log, and stays open when the store closes).
    public static func open(
        database: SQLiteDatabase, unlock: VaultUnlock, create: Bool = true, clock: WallClock = .system
    ) async throws -> SQLiteCredentialStore {
        let state = SQLiteStateDatabase(database: database, owned: false)
        if create && !database.readOnly { try await state.migrate() } else { try await state.checkReadableSchema() }
        return SQLiteCredentialStore(
            path: database.path,
            engine: try await StateEngine.open(
                state, unlock: unlock, create: create && !database.readOnly, clock: clock))
    }
}

/// The credential tables over the database's shared handle: its reader for reads, its writer
/// for write transactions.
final class SQLiteStateDatabase: StateDatabase {
    static var schemaVersion: Int { migrations.count }
    let database: SQLiteDatabase
    /// Whether closing the store closes the database (it opened it itself).
    let owned: Bool
    var path: String { database.path }
    var readOnly: Bool { database.readOnly }

    init(database: SQLiteDatabase, owned: Bool) {
        self.database = database
        self.owned = owned
    }

    static func open(path: String, lockTimeout: Double, readOnly: Bool = false) async throws -> SQLiteStateDatabase {
        do {
            return SQLiteStateDatabase(
                database: try await SQLiteDatabase.open(
                    path: path, create: false, readOnly: readOnly, lockTimeout: .seconds(lockTimeout)),
                owned: true)
        } catch let error as StorageError {
            throw CredentialError(storage: error)
        }
    }

    /// A reader's one check of the schema: its version, read from `shadow_meta`. A database
    /// without that table (an empty file, another application's database) is not a state store.
    func checkReadableSchema() async throws {
        let path = self.path
        let version: [UInt8]?
        do {
            version = try await read { try await $0.meta(MetaName.schemaVersion) }
        } catch let error as CredentialError
            where error.code == .storeUnavailable && error.reason.contains("no such table")
        {
            throw CredentialError(
                .notAStore,
                "\(path) is not a ShadowKeys state store (it has no shadow_meta table); give the store's own path")
        }
        guard let version else { throw CredentialError(.corruptedState, "the state database has no schema version") }
        try Self.checkVersion(version)
    }

    /// The schema version a `schema_version` value names, when this ShadowKeys reads it.
    @discardableResult
    static func checkVersion(_ version: [UInt8]) throws -> Int {
        // ASCII digits only, as written: `Int("+1")` is 1.
        let text = String(decoding: version, as: UTF8.self)
        guard let number = text.asciiDigitsValue(maxDigits: 9), number >= 1, number <= schemaVersion else {
            throw CredentialError(
                .corruptedState,
                """
                the state database has schema version \(text.quotedForMessage); this ShadowKeys reads 1 to \
                \(schemaVersion)
                """
            )
        }
        return number
    }

    func close() async {
        if owned { await database.close() }
    }

    /// Creates the schema in an empty database or brings an older one up to date; refuses one a
    /// newer version wrote. A database already at this version is only read.
    func migrate() async throws {
        let version = try await sqlRead { transaction -> [UInt8]? in
            guard
                try await !transaction.connection.rows(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'shadow_meta'", []
                ).isEmpty
            else { return nil }
            return try await transaction.meta(MetaName.schemaVersion)
        }
        if let version, String(decoding: version, as: UTF8.self) == String(Self.schemaVersion) { return }
        try await sqlTransaction(writing: true) { transaction in
            var current = 0
            let tables = try await transaction.connection.rows(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'shadow_meta'", [])
            if !tables.isEmpty {
                guard let version = try await transaction.meta(MetaName.schemaVersion) else {
                    throw CredentialError(.corruptedState, "the state database has no schema version")
                }
                current = try Self.checkVersion(version)
            }
            for migration in Self.migrations[current...] {
                for statement in migration { _ = try await transaction.connection.rows(statement, []) }
            }
            try await transaction.setMeta(MetaName.schemaVersion, Array(String(Self.schemaVersion).utf8))
        }
    }

    /// The schema's versions (Docs/credential-state.md, "Schema"): the n-th brings it to version n.
    static let migrations: [[String]] = [
        [
            "CREATE TABLE shadow_meta (name TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID",
            """
            CREATE TABLE shadow_credentials (row_id BLOB PRIMARY KEY, state INTEGER NOT NULL, body BLOB NOT NULL) \
            WITHOUT ROWID
            """,
            """
            CREATE TABLE shadow_audit (seq INTEGER PRIMARY KEY, subject BLOB NOT NULL, linked BLOB, line BLOB NOT \
            NULL)
            """,
            "CREATE INDEX shadow_audit_subject ON shadow_audit (subject)",
            "CREATE INDEX shadow_audit_linked ON shadow_audit (linked) WHERE linked IS NOT NULL",
            """
            CREATE TABLE shadow_tokens (row_id BLOB NOT NULL, kind TEXT NOT NULL, expires_at_ms INTEGER, body BLOB \
            NOT NULL, PRIMARY KEY (row_id, kind)) WITHOUT ROWID
            """,
            "CREATE INDEX shadow_tokens_expiry ON shadow_tokens (expires_at_ms) WHERE expires_at_ms IS NOT NULL",
        ],
        [
            """
            CREATE TABLE shadow_revocations (row_id BLOB NOT NULL, kind TEXT NOT NULL, event_ms INTEGER NOT NULL, \
            due_ms INTEGER NOT NULL,
                attempts INTEGER NOT NULL, done_ms INTEGER, outcome TEXT, PRIMARY KEY (row_id, kind)) WITHOUT ROWID
            """,
            "CREATE INDEX shadow_revocations_due ON shadow_revocations (due_ms) WHERE done_ms IS NULL",
        ],
    ]

    func read<R: Sendable>(_ body: @escaping @Sendable (any StateTransaction) async throws -> R) async throws -> R {
        try await sqlRead(body)
    }

    func sqlRead<R: Sendable>(_ body: @escaping @Sendable (SQLiteStateTransaction) async throws -> R) async throws -> R
    {
        try await Self.mapped(path) {
            try await database.withReader { try await body(SQLiteStateTransaction(connection: $0)) }
        }
    }

    func transaction<R: Sendable>(
        writing: Bool, _ body: @escaping @Sendable (any StateTransaction) async throws -> R
    ) async throws -> R {
        try await sqlTransaction(writing: writing, body)
    }

    /// One writer: `BEGIN IMMEDIATE` already holds the write lock.
    func rowsFirstTransaction<R: Sendable>(
        _ body: @escaping @Sendable (any StateTransaction) async throws -> R
    ) async throws -> R {
        try await sqlTransaction(writing: true, body)
    }

    /// A transaction whose body may also issue its own SQL (the schema's checks and migrations).
    func sqlTransaction<R: Sendable>(
        writing: Bool, _ body: @escaping @Sendable (SQLiteStateTransaction) async throws -> R
    ) async throws -> R {
        if writing && readOnly {
            throw CredentialError(.invalidParameter, "the state database was opened for reading only")
        }
        let run: @Sendable (any SQLiteStatements) async throws -> R = { connection in
            _ = try await connection.rows(writing ? "BEGIN IMMEDIATE" : "BEGIN", [])
            do {
                let result = try await body(SQLiteStateTransaction(connection: connection))
                _ = try await connection.rows("COMMIT", [])
                return result
            } catch {
                _ = try? await connection.rows("ROLLBACK", [])
                throw error
            }
        }
        return try await Self.mapped(path) {
            writing ? try await database.withWriter(run) : try await database.withReader(run)
        }
    }

    /// SQLite's errors, and the shared handle's, as ``CredentialError``s.
    static func mapped<R>(_ path: String, _ body: () async throws -> R) async throws -> R {
        do {
            return try await SQLiteDatabase.mapped(path, body)
        } catch let error as StorageError {
            throw CredentialError(storage: error)
        }
    }
}

struct SQLiteStateTransaction: StateTransaction {
    let connection: any SQLiteStatements

    func meta(_ name: String) async throws -> [UInt8]? {
        try await connection.rows("SELECT value FROM shadow_meta WHERE name = ?", [.text(name)]).first.map {
            try blob($0, "value")
        }
    }

    func setMeta(_ name: String, _ value: [UInt8]) async throws {
        _ = try await connection.rows(
            """
            INSERT INTO shadow_meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = \
            excluded.value
            """,
            [.text(name), .blob(value)])
    }

    func setMeta(_ values: [(name: String, value: [UInt8])]) async throws {
        for (name, value) in values { try await setMeta(name, value) }
    }

    func rows(_ ids: [[UInt8]]) async throws -> [StoredRow] {
        guard !ids.isEmpty else { return [] }
        let marks = Array(repeating: "?", count: ids.count).joined(separator: ",")
        return try await connection.rows(
            "SELECT row_id, state, body FROM shadow_credentials WHERE row_id IN (\(marks))",
            ids.map { .blob($0) }
        )
        .map(storedRow)
    }

    /// The writing transaction (`BEGIN IMMEDIATE`) already locks the whole database.
    func lockRows(_ ids: [[UInt8]]) async throws -> [StoredRow] { try await rows(ids) }

    func lockWriter() async throws {}

    func lockWriter(reading names: [String]) async throws -> [String: [UInt8]] {
        var values: [String: [UInt8]] = [:]
        for name in names { values[name] = try await meta(name) }
        return values
    }

    func insertNew(_ rows: [StoredRow]) async throws -> Int {
        guard !rows.isEmpty else { return 0 }
        return try await insert(rows, onConflict: "DO NOTHING RETURNING 1").count
    }

    /// One `INSERT` of `rows`, then `onConflict` (SQL of ours, never a value) after `ON CONFLICT (row_id)`.
    private func insert(_ rows: [StoredRow], onConflict: String) async throws -> [SQLRow] {
        let values = Array(repeating: "(?,?,?)", count: rows.count).joined(separator: ",")
        let binds: [SQLValue] = rows.flatMap {
            [.blob($0.id), .integer(Int64($0.state)), .blob($0.body)]
        }
        return try await connection.rows(
            "INSERT INTO shadow_credentials (row_id, state, body) VALUES \(values) ON CONFLICT (row_id) \(onConflict)",
            binds)
    }

    func storedRow(_ row: SQLRow) throws -> StoredRow {
        guard let state = row.integer("state") else {
            throw CredentialError(.corruptedState, "a credential row's state is not an integer")
        }
        return StoredRow(id: try blob(row, "row_id"), state: Int(state), body: try blob(row, "body"))
    }

    func upsert(_ rows: [StoredRow]) async throws {
        guard !rows.isEmpty else { return }
        _ = try await insert(rows, onConflict: "DO UPDATE SET state = excluded.state, body = excluded.body")
    }

    func stateCounts() async throws -> [Int: Int] {
        var counts: [Int: Int] = [:]
        for row in try await connection.rows("SELECT state, count(*) AS n FROM shadow_credentials GROUP BY state", []) {
            counts[Int(row.integer("state") ?? -1)] = Int(row.integer("n") ?? 0)
        }
        return counts
    }

    func appendAudit(_ lines: [StoredAuditLine]) async throws {
        guard !lines.isEmpty else { return }
        let values = Array(repeating: "(?,?,?,?)", count: lines.count).joined(separator: ",")
        let binds: [SQLValue] = lines.flatMap {
            [
                .integer(Int64($0.sequence)), .blob($0.subject),
                $0.linked.map { .blob($0) } ?? .null, .blob($0.line),
            ]
        }
        _ = try await connection.rows("INSERT INTO shadow_audit (seq, subject, linked, line) VALUES \(values)", binds)
    }

    func audit(after sequence: Int, limit: Int) async throws -> [StoredAuditLine] {
        try await connection.rows(
            "SELECT seq, subject, linked, line FROM shadow_audit WHERE seq > ? ORDER BY seq LIMIT ?",
            [.integer(Int64(sequence)), .integer(Int64(limit))]
        ).map(auditLine)
    }

    func audit(about rowID: [UInt8]) async throws -> [StoredAuditLine] {
        let id = SQLValue.blob(rowID)
        return try await connection.rows(
            """
            SELECT seq, subject, linked, line FROM shadow_audit WHERE subject = ? UNION \
            SELECT seq, subject, linked, line FROM shadow_audit WHERE linked = ? ORDER BY seq
            """,
            [id, id]
        )
        .map(auditLine)
    }

    func auditLine(_ row: SQLRow) throws -> StoredAuditLine {
        guard let sequence = row.integer("seq"), let subject = row.blob("subject"),
            let line = row.blob("line")
        else {
            throw CredentialError(.auditTampered, "an audit row's columns have the wrong type: it was edited")
        }
        let linkedBytes: [UInt8]?
        switch row["linked"] {
        case .null: linkedBytes = nil
        case .blob(let bytes): linkedBytes = bytes
        default: throw CredentialError(.auditTampered, "an audit row's linked column has the wrong type: it was edited")
        }
        return StoredAuditLine(
            sequence: Int(sequence), subject: subject, linked: linkedBytes, line: line)
    }

    func putToken(_ row: StoredTokenRow) async throws {
        _ = try await connection.rows(
            """
            INSERT INTO shadow_tokens (row_id, kind, expires_at_ms, body) VALUES (?, ?, ?, ?) ON CONFLICT (row_id, \
            kind) DO UPDATE SET expires_at_ms = excluded.expires_at_ms, body = excluded.body
            """,
            [
                .blob(row.rowID), .text(row.kind),
                row.expiresAtMilliseconds.map { .integer(Int64($0)) } ?? .null,
                .blob(row.body),
            ])
    }

    func tokens(rowID: [UInt8], kind: String?) async throws -> [StoredTokenRow] {
        let id = SQLValue.blob(rowID)
        let rows =
            if let kind {
                try await connection.rows(
                    "SELECT row_id, kind, expires_at_ms, body FROM shadow_tokens WHERE row_id = ? AND kind = ?",
                    [id, .text(kind)])
            } else {
                try await connection.rows(
                    "SELECT row_id, kind, expires_at_ms, body FROM shadow_tokens WHERE row_id = ? ORDER BY kind", [id])
            }
        return try rows.map(tokenRow)
    }

    func tokens(rowIDs: [[UInt8]]) async throws -> [StoredTokenRow] {
        guard !rowIDs.isEmpty else { return [] }
        let marks = Array(repeating: "?", count: rowIDs.count).joined(separator: ",")
        return try await connection.rows(
            "SELECT row_id, kind, expires_at_ms, body FROM shadow_tokens WHERE row_id IN (\(marks)) "
                + "ORDER BY row_id, kind",
            rowIDs.map { .blob($0) }
        ).map(tokenRow)
    }

    func deleteToken(rowID: [UInt8], kind: String) async throws -> Bool {
        try await !connection.rows(
            "DELETE FROM shadow_tokens WHERE row_id = ? AND kind = ? RETURNING kind",
            [.blob(rowID), .text(kind)]
        ).isEmpty
    }

    func expiredTokens(at milliseconds: Int64, limit: Int) async throws -> [StoredTokenRow] {
        try await connection.rows(
            """
            SELECT row_id, kind, expires_at_ms, body FROM shadow_tokens WHERE expires_at_ms IS NOT NULL AND \
            expires_at_ms <= ? ORDER BY expires_at_ms, row_id, kind LIMIT ?
            """,
            [.integer(Int64(milliseconds)), .integer(Int64(limit))]
        ).map(tokenRow)
    }

    func queueRevocations(_ items: [StoredRevocation]) async throws {
        for chunk in items.chunked(150) {
            let values = Array(repeating: "(?,?,?,?,0)", count: chunk.count).joined(separator: ",")
            let binds: [SQLValue] = chunk.flatMap {
                [
                    .blob($0.rowID), .text($0.kind), .integer(Int64($0.eventMilliseconds)),
                    .integer(Int64($0.dueMilliseconds)),
                ]
            }
            _ = try await connection.rows(
                """
                INSERT INTO shadow_revocations (row_id, kind, event_ms, due_ms, attempts) VALUES \(values)
                ON CONFLICT (row_id, kind) DO UPDATE SET event_ms = excluded.event_ms, due_ms = excluded.due_ms, \
                attempts = 0, done_ms = NULL, outcome = NULL
                WHERE shadow_revocations.done_ms IS NOT NULL
                """, binds)
        }
    }

    func claimRevocations(now: Int64, until: Int64, limit: Int) async throws -> [StoredRevocation] {
        try await connection.rows(
            """
            UPDATE shadow_revocations SET due_ms = ?, attempts = attempts + 1
            WHERE (row_id, kind) IN (SELECT row_id, kind FROM shadow_revocations WHERE done_ms IS NULL AND due_ms <= \
            ? ORDER BY due_ms LIMIT ?)
            RETURNING row_id, kind, event_ms, due_ms, attempts
            """, [.integer(Int64(until)), .integer(Int64(now)), .integer(Int64(limit))]
        ).map { row in
            guard let kind = row.text("kind"), let event = row.integer("event_ms"),
                let due = row.integer("due_ms"),
                let attempts = row.integer("attempts")
            else { throw CredentialError(.corruptedState, "a revocation row is malformed") }
            return StoredRevocation(
                rowID: try blob(row, "row_id"), kind: kind, eventMilliseconds: Int64(event),
                dueMilliseconds: Int64(due), attempts: Int(attempts))
        }
    }

    func finishRevocation(rowID: [UInt8], kind: String, outcome: String?, at: Int64?, due: Int64) async throws {
        _ = try await connection.rows(
            "UPDATE shadow_revocations SET outcome = ?, done_ms = ?, due_ms = ? WHERE row_id = ? AND kind = ?",
            [
                outcome.map { .text($0) } ?? .null, at.map { .integer(Int64($0)) } ?? .null,
                .integer(Int64(due)), .blob(rowID), .text(kind),
            ])
    }

    func revocationCounts() async throws -> RevocationCounts {
        let row = try await connection.rows(
            """
            SELECT count(*) FILTER (WHERE done_ms IS NULL) AS pending, count(*) FILTER (WHERE done_ms IS NOT NULL \
            AND outcome <> 'failed') AS done,
                   count(*) FILTER (WHERE outcome = 'failed') AS failed FROM shadow_revocations
            """, []
        ).first
        return RevocationCounts(
            pending: Int(row?.integer("pending") ?? 0), done: Int(row?.integer("done") ?? 0),
            failed: Int(row?.integer("failed") ?? 0))
    }

    func pendingRevocations() async throws -> Int {
        Int(try await connection.rows(StateEngine.pendingRevocationsSQL, []).first?.integer("n") ?? 0)
    }

    func tokenRow(_ row: SQLRow) throws -> StoredTokenRow {
        let expiry: Int64?
        switch row["expires_at_ms"] {
        case .null: expiry = nil
        case .integer(let milliseconds): expiry = milliseconds
        default: throw CredentialError(.corruptedState, "a token row is malformed")
        }
        guard let kind = row.text("kind") else { throw CredentialError(.corruptedState, "a token row is malformed") }
        return StoredTokenRow(
            rowID: try blob(row, "row_id"), kind: kind, expiresAtMilliseconds: expiry, body: try blob(row, "body"))
    }

    func blob(_ row: SQLRow, _ column: String) throws -> [UInt8] {
        guard let bytes = row.blob(column) else {
            throw CredentialError(.corruptedState, "a state database row's \(column) is not a blob")
        }
        return bytes
    }
}
