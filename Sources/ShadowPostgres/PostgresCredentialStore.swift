#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import Synchronization
import ShadowStorage
public import ShadowCore
public import ShadowCredentials
public import ShadowVault

/// Credential state and server tokens in PostgreSQL, for several server instances sharing one
/// database.
///
/// Writing transactions lock the `shadow_meta` row `writer` (`SELECT … FOR UPDATE`), so the audit
/// chain stays one chain. Applying events first locks and writes the users' own rows (`FOR
/// UPDATE`, in row-id order) and takes the `writer` row only to extend the chain, so writers on
/// other hosts overlap where their users differ; every other write takes it first. Each instance
/// coalesces concurrent ``apply(_:)`` calls into one transaction (group commit). Lost connections
/// (a restarted server) are retried until the retry budget runs out; applying an event again is
/// harmless, since duplicates change nothing and log nothing (Docs/credential-state.md).
public final class PostgresCredentialStore: DatabaseCredentialStore {
    public let engine: StateEngine
    /// Where the store connects (the password is never printed).
    public let location: PostgresLocation
    /// Whether closing the store closes the database (it connected itself).
    let ownsDatabase: Bool

    private init(location: PostgresLocation, engine: StateEngine, owned: Bool = true) {
        self.location = location
        self.engine = engine
        ownsDatabase = owned
    }

    /// Opens credential state on a database handle this process already has (shared with sessions
    /// and the operation log; it stays open when the store closes): migrates the schema when
    /// `create` is set, else only reads its version.
    static func open(
        _ database: PostgresStateDatabase, unlock: VaultUnlock, create: Bool, clock: WallClock = .system
    ) async throws -> PostgresCredentialStore {
        if create { try await database.migrate() } else { try await database.checkReadableSchema() }
        return PostgresCredentialStore(
            location: database.location,
            engine: try await StateEngine.open(database, unlock: unlock, create: create, clock: clock), owned: false)
    }

    /// Connects, applies any pending schema migration (under an advisory lock, so instances starting
    /// together do not race), and opens the store with `unlock`.
    /// - Throws: ``CredentialError/Code/storeUnavailable`` when the server cannot be reached within
    ///   `connectTimeout`; ``CredentialError/Code/wrongKey``; ``CredentialError/Code/corruptedState``.
    public static func connect(
        _ location: PostgresLocation, unlock: VaultUnlock, connectTimeout: Duration = .seconds(10),
        retryFor: Duration = .seconds(30),
        maximumConnections: Int = 8,
        logger: Logger = Logger(label: "shadow-keys.postgres", factory: { _ in SwiftLogNoOpLogHandler() }),
        clock: WallClock = .system
    ) async throws -> PostgresCredentialStore {
        let database = try PostgresStateDatabase(
            location: location, connectTimeout: connectTimeout, retryFor: retryFor,
            maximumConnections: maximumConnections, logger: logger)
        do {
            try await database.migrate()
            return PostgresCredentialStore(
                location: location, engine: try await StateEngine.open(database, unlock: unlock, clock: clock))
        } catch {
            await database.close()
            throw error
        }
    }

    /// Connects for reading only: the schema is checked by one read of its version (any version
    /// this ShadowKeys migrates from is read as it is), nothing is created, migrated or written.
    /// - Throws: ``CredentialError/Code/notAStore`` for a database without ShadowKeys' tables;
    ///   ``CredentialError/Code/corruptedState`` when the secret is missing from a store that holds
    ///   state; ``CredentialError/Code/noStore`` for a store never written; the errors of
    ///   ``connect(_:unlock:connectTimeout:retryFor:maximumConnections:logger:clock:)``.
    public static func connectForReading(
        _ location: PostgresLocation, unlock: VaultUnlock, connectTimeout: Duration = .seconds(10),
        retryFor: Duration = .seconds(30), clock: WallClock = .system
    ) async throws -> PostgresCredentialStore {
        let database = try PostgresStateDatabase(
            location: location, connectTimeout: connectTimeout, retryFor: retryFor, maximumConnections: 2,
            logger: Logger(label: "shadow-keys.postgres", factory: { _ in SwiftLogNoOpLogHandler() }))
        do {
            try await database.checkReadableSchema()
            return PostgresCredentialStore(
                location: location,
                engine: try await StateEngine.open(database, unlock: unlock, create: false, clock: clock))
        } catch {
            await database.close()
            throw error
        }
    }

    /// Applies pending schema migrations and returns the schema version (what
    /// `shadow-keys state migrate-schema` runs); needs no key.
    public static func migrateSchema(
        _ location: PostgresLocation, connectTimeout: Duration = .seconds(10)
    ) async throws -> Int {
        let database = try PostgresStateDatabase(
            location: location, connectTimeout: connectTimeout, retryFor: .zero, maximumConnections: 1,
            logger: Logger(label: "shadow-keys.postgres", factory: { _ in SwiftLogNoOpLogHandler() }))
        do {
            try await database.migrate()
            await database.close()
            return PostgresStateDatabase.migrations.count
        } catch {
            await database.close()
            throw error
        }
    }

    /// Moves `vault`'s credential state and audit log into an empty database at `location` (the
    /// audit chain moves intact).
    public static func migrate(
        from vault: VaultCredentialStore, to location: PostgresLocation, unlock: VaultUnlock,
        connectTimeout: Duration = .seconds(10)
    ) async throws -> MigrationReport {
        let export = try await runBlocking { try vault.exportSync() }
        let database = try PostgresStateDatabase(
            location: location, connectTimeout: connectTimeout, retryFor: .zero, maximumConnections: 1,
            logger: Logger(label: "shadow-keys.postgres", factory: { _ in SwiftLogNoOpLogHandler() }))
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

    /// Closes the connections, when the store connected itself.
    public func close() async {
        if ownsDatabase { await engine.database.close() }
    }
}

final class PostgresStateDatabase: StateDatabase {
    let client: PostgresClient
    /// The statements prepared on each pooled connection (``writeCount(_:_:)``).
    let prepared = PreparedStatements()
    let runner: Task<Void, Never>
    let logger: Logger
    let retryFor: Duration
    let connectTimeout: Duration
    /// How long a leased connection's work may take before the watchdog gives it up.
    let statementDeadline: Duration
    let location: PostgresLocation

    init(
        location: PostgresLocation, connectTimeout: Duration, retryFor: Duration, maximumConnections: Int,
        logger: Logger, statementDeadline: Duration = .seconds(15)
    ) throws {
        var configuration: PostgresClient.Configuration
        let tls = try location.tls()
        if let socket = location.socketPath {
            configuration = .init(
                unixSocketPath: socket, username: location.user, password: location.password,
                database: location.database)
        } else {
            configuration = .init(
                host: location.host, port: location.port, username: location.user, password: location.password,
                database: location.database, tls: tls)
        }
        configuration.options.connectTimeout = connectTimeout
        configuration.options.maximumConnections = max(1, maximumConnections)
        configuration.options.keepAliveBehavior = nil
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.client = client
        self.logger = logger
        self.retryFor = retryFor
        self.connectTimeout = connectTimeout
        self.statementDeadline = statementDeadline
        self.location = location
        runner = Task { await client.run() }
    }

    func close() async {
        runner.cancel()
        _ = await runner.value
    }

    /// Versioned migrations: the n-th brings the schema to version n.
    static let migrations: [[PostgresQuery]] = [
        [
            "CREATE TABLE shadow_meta (name text PRIMARY KEY, value bytea NOT NULL)",
            "CREATE TABLE shadow_credentials (row_id bytea PRIMARY KEY, state smallint NOT NULL, body bytea NOT NULL)",
            """
            CREATE TABLE shadow_audit (seq bigint PRIMARY KEY, subject bytea NOT NULL, linked bytea, line bytea NOT \
            NULL)
            """,
            "CREATE INDEX shadow_audit_subject ON shadow_audit (subject)",
            "CREATE INDEX shadow_audit_linked ON shadow_audit (linked) WHERE linked IS NOT NULL",
            """
            CREATE TABLE shadow_tokens (row_id bytea NOT NULL, kind text NOT NULL, expires_at_ms bigint, body bytea \
            NOT NULL, PRIMARY KEY (row_id, kind))
            """,
            "CREATE INDEX shadow_tokens_expiry ON shadow_tokens (expires_at_ms) WHERE expires_at_ms IS NOT NULL",
            "INSERT INTO shadow_meta (name, value) VALUES ('writer', ''::bytea)",
        ],
        [
            """
            CREATE TABLE shadow_revocations (row_id bytea NOT NULL, kind text NOT NULL, event_ms bigint NOT NULL, \
            due_ms bigint NOT NULL,
                attempts integer NOT NULL, done_ms bigint, outcome text, PRIMARY KEY (row_id, kind))
            """,
            "CREATE INDEX shadow_revocations_due ON shadow_revocations (due_ms) WHERE done_ms IS NULL",
        ],
    ]

    /// The advisory lock migrations run under ("shadowky" in ASCII).
    static let migrationLock: Int64 = 0x7368_6164_6f77_6b79

    func migrate() async throws {
        try await retrying {
            try await self.withConnection { connection in
                try await self.inTransaction(connection) {
                    try await connection.run("SELECT pg_advisory_xact_lock(\(Self.migrationLock))", logger: self.logger)
                    let exists =
                        try await connection.collect(
                            "SELECT to_regclass('shadow_meta') IS NOT NULL", logger: self.logger
                        )
                        .first?.decode(Bool.self) ?? false
                    var version = 0
                    if exists {
                        let rows = try await connection.collect(
                            """
                            SELECT convert_from(value, 'UTF8') FROM shadow_meta WHERE name = \(MetaName.schemaVersion)
                            """,
                            logger: self.logger)
                        guard let text = try rows.first?.decode(String.self),
                            let number = text.asciiDigitsValue(maxDigits: 9), number >= 1
                        else {
                            throw CredentialError(
                                .corruptedState, "the database has a shadow_meta table without a schema version")
                        }
                        version = number
                    }
                    guard version <= Self.migrations.count else {
                        throw CredentialError(
                            .corruptedState,
                            """
                            the database has schema version \(version); this ShadowKeys knows up to \
                            \(Self.migrations.count)
                            """
                        )
                    }
                    for migration in Self.migrations[version...] {
                        for statement in migration { try await connection.run(statement, logger: self.logger) }
                    }
                    if version < Self.migrations.count {
                        let value = ByteBuffer(string: String(Self.migrations.count))
                        try await connection.run(
                            """
                            INSERT INTO shadow_meta (name, value) VALUES (\(MetaName.schemaVersion), \(value)) ON \
                            CONFLICT (name) DO UPDATE SET value = EXCLUDED.value
                            """,
                            logger: self.logger)
                    }
                }
            }
        }
    }

    /// A reader's one check of the schema: the version in `shadow_meta`, which must exist.
    func checkReadableSchema() async throws {
        let version = try await sqlTransaction(writing: false) { transaction -> String? in
            let exists =
                try await transaction.connection.collect(
                    "SELECT to_regclass('shadow_meta') IS NOT NULL", logger: transaction.logger
                ).first?.decode(Bool.self) ?? false
            guard exists else { return nil }
            return try await transaction.meta(MetaName.schemaVersion).map { String(decoding: $0, as: UTF8.self) }
        }
        guard let version else {
            throw CredentialError(
                .notAStore, "the database \(location.database) holds no ShadowKeys state store (no shadow_meta table)")
        }
        guard let number = version.asciiDigitsValue(maxDigits: 9), (1...Self.migrations.count).contains(number) else {
            throw CredentialError(
                .corruptedState,
                """
                the database has schema version \(version.quotedForMessage); this ShadowKeys reads 1 to \
                \(Self.migrations.count)
                """
            )
        }
    }

    func read<R: Sendable>(_ body: @escaping @Sendable (any StateTransaction) async throws -> R) async throws -> R {
        try await retrying {
            try await self.withConnection { connection in
                try await body(PostgresStateTransaction(connection: connection, logger: self.logger))
            }
        }
    }

    func transaction<R: Sendable>(
        writing: Bool, _ body: @escaping @Sendable (any StateTransaction) async throws -> R
    ) async throws -> R {
        try await sqlTransaction(writing: writing, body)
    }

    func rowsFirstTransaction<R: Sendable>(
        _ body: @escaping @Sendable (any StateTransaction) async throws -> R
    ) async throws -> R {
        try await sqlTransaction(writing: true, lockWriterFirst: false, body)
    }

    /// A transaction whose body may also issue its own SQL (the schema's checks). A writing one
    /// locks the `writer` row first, unless `lockWriterFirst` is false (its body locks it).
    func sqlTransaction<R: Sendable>(
        writing: Bool, lockWriterFirst: Bool = true,
        _ body: @escaping @Sendable (PostgresStateTransaction) async throws -> R
    ) async throws -> R {
        try await retrying {
            try await self.withConnection { connection in
                try await self.inTransaction(connection) { () -> R in
                    let transaction = PostgresStateTransaction(connection: connection, logger: self.logger)
                    if writing && lockWriterFirst { try await transaction.lockWriter() }
                    return try await body(transaction)
                }
            }
        }
    }

    /// BEGIN, `body`, COMMIT; ROLLBACK when `body` fails, unless the connection itself failed (a
    /// ROLLBACK on a connection the server has dropped is never answered, and the pool discards
    /// the connection anyway).
    func inTransaction<R>(_ connection: PostgresConnection, _ body: () async throws -> R) async throws -> R {
        try await connection.run("BEGIN", logger: logger)
        do {
            let result = try await body()
            try await connection.run("COMMIT", logger: logger)
            return result
        } catch {
            if !Self.lostConnection(error) { try? await connection.run("ROLLBACK", logger: logger) }
            throw error
        }
    }

    /// Whether `error` ended the connection it came from: it failed or was closed, or the server
    /// is ending it (SQLSTATE classes 57P, operator intervention, and 08, connection exception).
    static func lostConnection(_ error: any Error) -> Bool {
        // The older API's errors (a prepared statement's, ``writeCount(_:_:)``): it reports an
        // unclean shutdown and a message it cannot read as protocol errors, after which the
        // connection is no use either.
        switch error as? PostgresError {
        case .connectionClosed, .protocol: return true
        case .server(let failure):
            let state = failure.fields[.sqlState] ?? ""
            return state.hasPrefix("57P") || state.hasPrefix("08")
        default: break
        }
        guard let failure = error as? PSQLError else { return false }
        if [.connectionError, .serverClosedConnection, .uncleanShutdown, .clientClosedConnection].contains(failure.code)
        {
            return true
        }
        guard failure.code == .server, let state = failure.serverInfo?[.sqlState] else { return false }
        return state.hasPrefix("57P") || state.hasPrefix("08")
    }

    /// When the current ``retrying(_:)`` gives up: a connection is waited for no longer than that.
    @TaskLocal static var retryDeadline: ContinuousClock.Instant?

    /// Runs `work`, retrying what a restarted or briefly unreachable server causes (and the
    /// serialisation failures PostgreSQL asks clients to retry) until `retryFor` has passed. The
    /// whole call, a connection's wait included, ends within `retryFor` (at least 0.1 s) of its
    /// start when the server cannot be reached.
    func retrying<R>(_ work: () async throws -> R) async throws -> R {
        let deadline = ContinuousClock.now + max(retryFor, .milliseconds(100))
        var pause = Duration.milliseconds(20)
        while true {
            do {
                return try await Self.$retryDeadline.withValue(deadline) { try await work() }
            } catch {
                let mapped = map(error)
                guard mapped.retry, ContinuousClock.now + pause < deadline, !Task.isCancelled else {
                    throw mapped.error
                }
                try await Task.sleep(for: pause)
                pause = min(pause * 2, .seconds(1))
            }
        }
    }

    /// How long an attempt waits for a connection: the connect timeout, or what is left of the
    /// retry budget when that is less.
    var leaseTimeout: Duration {
        guard let deadline = Self.retryDeadline else { return connectTimeout }
        return max(.milliseconds(50), min(connectTimeout, deadline - ContinuousClock.now))
    }

    /// Runs `body` on a pooled connection. The attempt is abandoned (and retried by the caller)
    /// when no connection can be had within the connect timeout, or when `body` has not finished
    /// within the statement deadline (15 s): a connection whose server vanished mid-statement is not always reported
    /// closed, and waiting on it would hang the store. An abandoned write that still commits later
    /// is harmless: applying events again changes nothing and logs nothing.
    func withConnection<R: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> R
    ) async throws -> R {
        let attempt = Attempt<R>()
        let client = self.client, connectTimeout = self.leaseTimeout, deadline = statementDeadline
        return try await withCheckedThrowingContinuation { continuation in
            attempt.start(continuation)
            let work = Task {
                do {
                    let result = try await client.withConnection { connection in
                        guard attempt.markLeased(connection) else { throw LeaseTimeout() }
                        do {
                            return try await LostConnection.$observer.withValue(attempt) { try await body(connection) }
                        } catch {
                            // Closed before the pool has it back: the pool can hand out a
                            // connection the server is ending, and a statement queued on it
                            // then waits for the watchdog.
                            if Self.lostConnection(error) { try? await connection.close() }
                            throw error
                        }
                    }
                    attempt.finish(.success(result))
                } catch {
                    attempt.finish(.failure(error))
                }
            }
            let watchdog = Task {
                try await Task.sleep(for: connectTimeout)
                if !attempt.isLeased {
                    attempt.finish(.failure(LeaseTimeout()))
                    work.cancel()
                    return
                }
                try await Task.sleep(for: deadline)
                // The connection is closed before the caller hears: that fails whatever it still
                // waits for, and the pool drops it instead of keeping it leased or handing the
                // caller's next statement a connection still busy with this one.
                await attempt.finish(.failure(StatementTimeout())) { try? await $0?.close() }
                work.cancel()
            }
            attempt.onFinish { watchdog.cancel() }
        }
    }

    func map(_ error: any Error) -> (error: CredentialError, retry: Bool) {
        let location = self.location.description
        let budget = "\(max(retryFor, .milliseconds(100)).inSeconds) s"
        if let error = error as? CredentialError { return (error, false) }
        if let error = error as? PostgresTransactionError {
            // The first of the errors the transaction met.
            if let cause = error.beginError ?? error.closureError ?? error.commitError ?? error.rollbackError {
                return map(cause)
            }
        }
        if error is RowMadeConcurrently {
            return (
                CredentialError(.storeUnavailable, "\(location): other writers kept making the same users' rows"), true
            )
        }
        if error is LeaseTimeout {
            return (
                CredentialError(
                    .storeUnavailable,
                    """
                    no connection to \(location) within \(budget): the server did not accept one, or every \
                    pooled connection stayed busy
                    """), true
            )
        }
        if error is StatementTimeout {
            return (CredentialError(.storeUnavailable, "\(location) did not answer a transaction in time"), true)
        }
        /// A server's error, by its SQLSTATE.
        func server(_ state: String, _ message: String) -> (error: CredentialError, retry: Bool) {
            switch state {
            case "40001", "40P01", "57P01", "57P02", "57P03", "53300":
                return (CredentialError(.storeUnavailable, "\(location): \(message) (SQLSTATE \(state))"), true)
            case "28000", "28P01", "3D000":
                return (
                    CredentialError(
                        .storeUnavailable, "\(location) refused the connection: \(message) (SQLSTATE \(state))"),
                    false
                )
            default:
                return (CredentialError(.storeUnavailable, "\(location): \(message) (SQLSTATE \(state))"), false)
            }
        }
        switch error as? PostgresError {
        case .server(let failure):
            return server(failure.fields[.sqlState] ?? "", failure.fields[.message] ?? "an error")
        case .connectionClosed:
            return (CredentialError(.storeUnavailable, "cannot reach \(location): the connection was closed"), true)
        default: break
        }
        if let error = error as? PSQLError {
            switch error.code {
            case .server:
                return server(error.serverInfo?[.sqlState] ?? "", error.serverInfo?[.message] ?? "an error")
            case .connectionError, .serverClosedConnection, .uncleanShutdown, .clientClosedConnection, .poolClosed:
                return (
                    CredentialError(.storeUnavailable, "cannot reach \(location): the connection failed or was closed"),
                    true
                )
            default:
                return (CredentialError(.storeUnavailable, "\(location): \(String(describing: error.code))"), false)
            }
        }
        if let error = error as? NIOSSLError {
            return (CredentialError(.storeUnavailable, "TLS to \(location) failed: \(error)"), false)
        }
        return (CredentialError(.storeUnavailable, "cannot reach \(location): \(type(of: error))"), true)
    }
}

struct PostgresStateTransaction: StateTransaction {
    let connection: PostgresConnection
    let logger: Logger

    func meta(_ name: String) async throws -> [UInt8]? {
        try await connection.collect("SELECT value FROM shadow_meta WHERE name = \(name)", logger: logger).first
            .map { Array(try $0.decode(ByteBuffer.self).readableBytesView) }
    }

    func setMeta(_ name: String, _ value: [UInt8]) async throws {
        let bytes = ByteBuffer(bytes: value)
        try await connection.run(
            """
            INSERT INTO shadow_meta (name, value) VALUES (\(name), \(bytes)) ON CONFLICT (name) DO UPDATE SET value = \
            EXCLUDED.value
            """,
            logger: logger)
    }

    func setMeta(_ values: [(name: String, value: [UInt8])]) async throws {
        guard !values.isEmpty else { return }
        let names = values.map(\.name), bytes = values.map { ByteBuffer(bytes: $0.value) }
        try await connection.run(
            """
            INSERT INTO shadow_meta (name, value) SELECT * FROM unnest(\(names)::text[], \(bytes)::bytea[]) \
            ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value
            """,
            logger: logger)
    }

    func rows(_ ids: [[UInt8]]) async throws -> [StoredRow] {
        guard !ids.isEmpty else { return [] }
        let list = ids.map { ByteBuffer(bytes: $0) }
        return try storedRows(
            try await connection.collect(
                "SELECT row_id, state, body FROM shadow_credentials WHERE row_id = ANY(\(list))", logger: logger))
    }

    func lockRows(_ ids: [[UInt8]]) async throws -> [StoredRow] {
        guard !ids.isEmpty else { return [] }
        let list = ids.map { ByteBuffer(bytes: $0) }
        // The rows are locked above the sort, so in row-id order.
        return try storedRows(
            try await connection.collect(
                """
                SELECT row_id, state, body FROM shadow_credentials WHERE row_id = ANY(\(list)) ORDER BY row_id \
                FOR UPDATE
                """, logger: logger))
    }

    func lockWriter() async throws {
        try await connection.run("SELECT 1 FROM shadow_meta WHERE name = 'writer' FOR UPDATE", logger: logger)
    }

    /// One statement: the `writer` row is locked first (the rows are locked above the sort), then
    /// the named rows. A row locked after a wait is returned as the writer that held it committed
    /// it, but a row that writer inserted is not in this statement's snapshot at all: when a name
    /// is missing, it is read again now that the lock is held.
    func lockWriter(reading names: [String]) async throws -> [String: [UInt8]] {
        var values: [String: [UInt8]] = [:]
        for row in try await connection.collect(
            """
            SELECT name, value FROM shadow_meta WHERE name = 'writer' OR name = ANY(\(names)) \
            ORDER BY name <> 'writer', name FOR UPDATE
            """, logger: logger)
        {
            let (name, value) = try row.decode((String, ByteBuffer).self)
            if name != "writer" { values[name] = Array(value.readableBytesView) }
        }
        if names.contains(where: { values[$0] == nil }) {
            for name in names { values[name] = try await meta(name) }
        }
        return values
    }

    func insertNew(_ rows: [StoredRow]) async throws -> Int {
        guard !rows.isEmpty else { return 0 }
        return try await insert(rows, onConflict: "DO NOTHING RETURNING 1").count
    }

    /// One `INSERT` of `rows`, then `onConflict` (SQL of ours, never a value) after `ON CONFLICT (row_id)`.
    private func insert(_ rows: [StoredRow], onConflict: String) async throws -> PostgresQueryResult {
        let ids = rows.map { ByteBuffer(bytes: $0.id) }, states = rows.map { Int16($0.state) },
            bodies = rows.map { ByteBuffer(bytes: $0.body) }
        return try await connection.collect(
            """
            INSERT INTO shadow_credentials (row_id, state, body) SELECT * FROM unnest(\(ids)::bytea[], \
            \(states)::smallint[], \(bodies)::bytea[])
            ON CONFLICT (row_id) \(unescaped: onConflict)
            """, logger: logger)
    }

    func storedRows(_ result: PostgresQueryResult) throws -> [StoredRow] {
        try result.map { row in
            let (id, state, body) = try row.decode((ByteBuffer, Int16, ByteBuffer).self)
            return StoredRow(id: Array(id.readableBytesView), state: Int(state), body: Array(body.readableBytesView))
        }
    }

    func upsert(_ rows: [StoredRow]) async throws {
        guard !rows.isEmpty else { return }
        _ = try await insert(rows, onConflict: "DO UPDATE SET state = EXCLUDED.state, body = EXCLUDED.body")
    }

    func stateCounts() async throws -> [Int: Int] {
        var counts: [Int: Int] = [:]
        for row in try await connection.collect(
            "SELECT state, count(*) FROM shadow_credentials GROUP BY state", logger: logger)
        {
            let (state, count) = try row.decode((Int16, Int64).self)
            counts[Int(state)] = Int(count)
        }
        return counts
    }

    func appendAudit(_ lines: [StoredAuditLine]) async throws {
        guard !lines.isEmpty else { return }
        let sequences = lines.map { Int64($0.sequence) }, subjects = lines.map { ByteBuffer(bytes: $0.subject) }
        let linked = lines.map { ByteBuffer(bytes: $0.linked ?? []) }, texts = lines.map { ByteBuffer(bytes: $0.line) }
        try await connection.run(
            """
            INSERT INTO shadow_audit (seq, subject, linked, line)
            SELECT s, subj, NULLIF(l, ''::bytea), t FROM unnest(\(sequences)::bigint[], \(subjects)::bytea[], \
            \(linked)::bytea[], \(texts)::bytea[]) AS x(s, subj, l, t)
            """, logger: logger)
    }

    func audit(after sequence: Int, limit: Int) async throws -> [StoredAuditLine] {
        try auditLines(
            try await connection.collect(
                """
                SELECT seq, subject, linked, line FROM shadow_audit WHERE seq > \(Int64(sequence)) ORDER BY seq \
                LIMIT \(limit)
                """,
                logger: logger))
    }

    func audit(about rowID: [UInt8]) async throws -> [StoredAuditLine] {
        let id = ByteBuffer(bytes: rowID)
        return try auditLines(
            try await connection.collect(
                """
                SELECT seq, subject, linked, line FROM shadow_audit WHERE subject = \(id) OR linked = \(id) \
                ORDER BY seq
                """,
                logger: logger))
    }

    func auditLines(_ result: PostgresQueryResult) throws -> [StoredAuditLine] {
        try result.map { row in
            let (seq, subject, linked, line) = try row.decode((Int64, ByteBuffer, ByteBuffer?, ByteBuffer).self)
            return StoredAuditLine(
                sequence: Int(seq), subject: Array(subject.readableBytesView),
                linked: linked.map { Array($0.readableBytesView) }, line: Array(line.readableBytesView))
        }
    }

    func putToken(_ row: StoredTokenRow) async throws {
        let id = ByteBuffer(bytes: row.rowID), body = ByteBuffer(bytes: row.body)
        try await connection.run(
            """
            INSERT INTO shadow_tokens (row_id, kind, expires_at_ms, body) VALUES (\(id), \(row.kind), \
            \(row.expiresAtMilliseconds), \(body))
            ON CONFLICT (row_id, kind) DO UPDATE SET expires_at_ms = EXCLUDED.expires_at_ms, body = EXCLUDED.body
            """, logger: logger)
    }

    func tokens(rowID: [UInt8], kind: String?) async throws -> [StoredTokenRow] {
        let id = ByteBuffer(bytes: rowID)
        let query: PostgresQuery =
            if let kind {
                "SELECT row_id, kind, expires_at_ms, body FROM shadow_tokens WHERE row_id = \(id) AND kind = \(kind)"
            } else {
                "SELECT row_id, kind, expires_at_ms, body FROM shadow_tokens WHERE row_id = \(id) ORDER BY kind"
            }
        return try tokenRows(
            try await connection.collect(query, logger: logger))
    }

    func tokens(rowIDs: [[UInt8]]) async throws -> [StoredTokenRow] {
        guard !rowIDs.isEmpty else { return [] }
        let ids = rowIDs.map { ByteBuffer(bytes: $0) }
        return try tokenRows(
            try await connection.collect(
                """
                SELECT row_id, kind, expires_at_ms, body FROM shadow_tokens WHERE row_id = ANY(\(ids)) \
                ORDER BY row_id, kind
                """, logger: logger))
    }

    func deleteToken(rowID: [UInt8], kind: String) async throws -> Bool {
        let id = ByteBuffer(bytes: rowID)
        return try await !connection.collect(
            "DELETE FROM shadow_tokens WHERE row_id = \(id) AND kind = \(kind) RETURNING kind", logger: logger
        ).isEmpty
    }

    func expiredTokens(at milliseconds: Int64, limit: Int) async throws -> [StoredTokenRow] {
        try tokenRows(
            try await connection.collect(
                """
                SELECT row_id, kind, expires_at_ms, body FROM shadow_tokens WHERE expires_at_ms <= \(milliseconds) \
                ORDER BY expires_at_ms, row_id, kind LIMIT \(limit)
                """, logger: logger))
    }

    func queueRevocations(_ items: [StoredRevocation]) async throws {
        for item in items {
            let id = ByteBuffer(bytes: item.rowID)
            try await connection.run(
                """
                INSERT INTO shadow_revocations (row_id, kind, event_ms, due_ms, attempts) VALUES (\(id), \
                \(item.kind), \(item.eventMilliseconds), \(item.dueMilliseconds), 0)
                ON CONFLICT (row_id, kind) DO UPDATE SET event_ms = EXCLUDED.event_ms, due_ms = EXCLUDED.due_ms, \
                attempts = 0, done_ms = NULL, outcome = NULL
                WHERE shadow_revocations.done_ms IS NOT NULL
                """, logger: logger)
        }
    }

    func claimRevocations(now: Int64, until: Int64, limit: Int) async throws -> [StoredRevocation] {
        let rows = try await connection.collect(
            """
            UPDATE shadow_revocations SET due_ms = \(until), attempts = attempts + 1
            WHERE (row_id, kind) IN (SELECT row_id, kind FROM shadow_revocations WHERE done_ms IS NULL AND due_ms <= \
            \(now) ORDER BY due_ms LIMIT \(limit))
            RETURNING row_id, kind, event_ms, due_ms, attempts
            """, logger: logger)
        return try rows.map { row in
            let (id, kind, event, due, attempts) = try row.decode((ByteBuffer, String, Int64, Int64, Int32).self)
            return StoredRevocation(
                rowID: Array(id.readableBytesView), kind: kind, eventMilliseconds: event, dueMilliseconds: due,
                attempts: Int(attempts))
        }
    }

    func finishRevocation(rowID: [UInt8], kind: String, outcome: String?, at: Int64?, due: Int64) async throws {
        let id = ByteBuffer(bytes: rowID)
        try await connection.run(
            """
            UPDATE shadow_revocations SET outcome = \(outcome), done_ms = \(at), due_ms = \(due) WHERE row_id = \(id) \
            AND kind = \(kind)
            """,
            logger: logger)
    }

    func pendingRevocations() async throws -> Int {
        let rows = try await connection.collect(
            PostgresQuery(unsafeSQL: StateEngine.pendingRevocationsSQL), logger: logger)
        return Int(try rows.first?.decode(Int64.self) ?? 0)
    }

    func revocationCounts() async throws -> RevocationCounts {
        let rows = try await connection.collect(
            """
            SELECT count(*) FILTER (WHERE done_ms IS NULL), count(*) FILTER (WHERE done_ms IS NOT NULL AND outcome \
            <> 'failed'),
                   count(*) FILTER (WHERE outcome = 'failed') FROM shadow_revocations
            """, logger: logger)
        var counts = RevocationCounts(pending: 0, done: 0, failed: 0)
        for row in rows {
            let (pending, done, failed) = try row.decode((Int64, Int64, Int64).self)
            counts = RevocationCounts(pending: Int(pending), done: Int(done), failed: Int(failed))
        }
        return counts
    }

    func tokenRows(_ result: PostgresQueryResult) throws -> [StoredTokenRow] {
        try result.map { row in
            let (id, kind, expiry, body) = try row.decode((ByteBuffer, String, Int64?, ByteBuffer).self)
            return StoredTokenRow(
                rowID: Array(id.readableBytesView), kind: kind, expiresAtMilliseconds: expiry,
                body: Array(body.readableBytesView))
        }
    }
}

/// The rows of one statement, counted on the event loop that reads them.
private final class RowCount: Sendable {
    let count = Mutex(0)
}

/// The statements prepared on each connection of a pool, by their SQL. A connection's entry
/// holds the connection itself, so no other connection takes its address (and its statements'
/// names) before the entry goes, when the connection closes.
final class PreparedStatements: Sendable {
    private struct Prepared: Sendable {
        let connection: PostgresConnection
        var statements: [String: PreparedQuery]
    }

    private let byConnection = Mutex<[ObjectIdentifier: Prepared]>([:])
    private let off = Mutex(false)

    /// Whether statements are still prepared (``turnOff()`` has not been called).
    var isOn: Bool { !off.withLock { $0 } }

    /// Prepares nothing more, and forgets what was prepared.
    func turnOff() {
        off.withLock { $0 = true }
        byConnection.withLock { $0 = [:] }
    }

    /// `sql` prepared on `connection`: the first time, one round trip to prepare it.
    func statement(_ sql: String, on connection: PostgresConnection) async throws -> PreparedQuery {
        let id = ObjectIdentifier(connection)
        if let found = byConnection.withLock({ $0[id]?.statements[sql] }) { return found }
        let statement = try await connection.prepare(query: sql).get()
        let first = byConnection.withLock { entries -> Bool in
            guard entries[id] != nil else {
                entries[id] = Prepared(connection: connection, statements: [sql: statement])
                return true
            }
            entries[id]?.statements[sql] = statement
            return false
        }
        if first {
            connection.closeFuture.whenComplete { [self] _ in
                _ = byConnection.withLock { $0.removeValue(forKey: id) }
            }
        }
        return statement
    }
}

/// No pooled connection within the connect timeout.
struct LeaseTimeout: Error {}

/// A transaction that did not finish within its deadline.
struct StatementTimeout: Error {}

/// Who hears, on the connection's event loop, that a statement failed because its connection
/// ended: the attempt that runs it, so its caller is answered at once, not after the statement's
/// own task has had its turns on Swift's pool (which, when every thread of that pool is busy,
/// can take longer than the watchdog's deadline).
enum LostConnection {
    @TaskLocal static var observer: (any LostConnectionObserver)?
}

protocol LostConnectionObserver: Sendable {
    func connectionLost(_ error: any Error)
}

/// One attempt at a transaction: resumed exactly once, by its result, its watchdog or the report
/// that its connection ended.
final class Attempt<R: Sendable>: Sendable, LostConnectionObserver {
    private struct State {
        var continuation: CheckedContinuation<R, any Error>?
        var leased = false
        var connection: PostgresConnection?
        var finished = false
        var onFinish: (@Sendable () -> Void)?
    }
    private let state = Mutex(State())

    func start(_ continuation: CheckedContinuation<R, any Error>) { state.withLock { $0.continuation = continuation } }

    /// False when the attempt was already given up: the body must not run.
    func markLeased(_ connection: PostgresConnection) -> Bool {
        state.withLock { state in
            guard !state.finished else { return false }
            state.leased = true
            state.connection = connection
            return true
        }
    }

    var isLeased: Bool { state.withLock { $0.leased } }
    var connection: PostgresConnection? { state.withLock { $0.connection } }

    func onFinish(_ action: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { state -> Bool in
            guard !state.finished else { return true }
            state.onFinish = action
            return false
        }
        if runNow { action() }
    }

    /// The statement's connection ended: the caller hears now. The statement's own task still
    /// closes the connection before the pool has it back, so the caller's next statement cannot
    /// get it (the lease is held until then).
    func connectionLost(_ error: any Error) { finish(.failure(error)) }

    func finish(_ result: Result<R, any Error>) {
        guard let (continuation, action, _) = claim() else { return }
        continuation?.resume(with: result)
        action?()
    }

    /// Ends the attempt with `result` once `cleanup` has run on its connection (if it had one);
    /// nothing else can end it meanwhile.
    func finish(_ result: Result<R, any Error>, after cleanup: (PostgresConnection?) async -> Void) async {
        guard let (continuation, action, connection) = claim() else { return }
        await cleanup(connection)
        continuation?.resume(with: result)
        action?()
    }

    /// Marks the attempt finished and hands over what ending it needs; nil when it had ended.
    private func claim()
        -> (CheckedContinuation<R, any Error>?, (@Sendable () -> Void)?, PostgresConnection?)?
    {
        state.withLock { state in
            guard !state.finished else { return nil }
            state.finished = true
            defer {
                state.continuation = nil
                state.onFinish = nil
            }
            return (state.continuation, state.onFinish, state.connection)
        }
    }
}

extension PostgresConnection {
    /// Runs `query` to its end and returns all its rows, gathered on the connection's event loop
    /// as they arrive. Every statement of the package goes through here, never through the
    /// row-by-row sequence: with that sequence, a server that goes away between one batch of rows
    /// and the consumer's call for the next stops the process in postgres-nio 1.33 (a
    /// precondition in its row stream), where this path fails the statement with the lost
    /// connection, as any other outage.
    func collect(_ query: PostgresQuery, logger: Logger) async throws -> PostgresQueryResult {
        let result: EventLoopFuture<PostgresQueryResult> = self.query(query, logger: logger)
        if let observer = LostConnection.observer {
            result.whenFailure { error in
                if PostgresStateDatabase.lostConnection(error) { observer.connectionLost(error) }
            }
        }
        return try await result.get()
    }

    /// Runs `statement` with `binds` to its end on this connection and returns how many rows
    /// came back, gathered on the event loop as ``collect(_:logger:)`` gathers them.
    func counted(_ statement: PreparedQuery, _ binds: [PostgresData]) async throws -> Int {
        let rows = RowCount()
        let result = statement.execute(binds) { _ in rows.count.withLock { $0 += 1 } }
        if let observer = LostConnection.observer {
            result.whenFailure { error in
                if PostgresStateDatabase.lostConnection(error) { observer.connectionLost(error) }
            }
        }
        try await result.get()
        return rows.count.withLock { $0 }
    }

    /// Runs `query` to its end, dropping any rows. (A statement whose rows are never read is not
    /// finished as far as the client knows: if the server then goes away, the next statement on
    /// the connection is never answered.)
    func run(_ query: PostgresQuery, logger: Logger) async throws {
        _ = try await collect(query, logger: logger)
    }
}

// MARK: The row seam

extension PostgresStateDatabase: SQLDatabase {
    var dialect: SQLDialect { .postgres }
    var locationDescription: String { location.description }

    func read(_ sql: String, _ values: [SQLValue]) async throws -> [SQLRow] { try await statement(sql, values) }

    func write(_ sql: String, _ values: [SQLValue]) async throws -> [SQLRow] { try await statement(sql, values) }

    /// One statement on a pooled connection, retried while the server is out of reach. Callers
    /// keep every statement safe to repeat, or read back what a lost answer did.
    func statement(_ sql: String, _ values: [SQLValue]) async throws -> [SQLRow] {
        let query = Self.query(sql, values)
        return try await storing {
            try await retrying {
                try await withConnection { connection in
                    try Self.rows(try await connection.collect(query, logger: self.logger))
                }
            }
        }
    }

    func readAside(_ sql: String, _ values: [SQLValue]) async throws -> [SQLRow] { try await statement(sql, values) }

    /// One statement prepared on the pooled connection it runs on (once per connection, named by
    /// postgres-nio), retried as ``statement(_:_:)`` is; its rows are counted, never decoded. (A
    /// statement prepared this way describes its columns as text while its rows come in binary:
    /// postgres-nio 1.33 asks for binary rows at every run, and its columns' format is the
    /// description's. Counting needs neither.) A server that has lost a statement prepared on the
    /// connection (SQLSTATE 26000: a pooler such as PgBouncer in transaction mode hands the
    /// connection's statements to other server connections) turns preparing off for good, and
    /// the statement runs unprepared; it had not run.
    func writeCount(_ sql: String, _ values: [SQLValue]) async throws -> Int {
        let binds = values.map(Self.data)
        let text = Self.numbered(sql)
        return try await storing {
            try await retrying {
                try await withConnection { connection in
                    if self.prepared.isOn {
                        do {
                            let statement = try await self.prepared.statement(text, on: connection)
                            return try await connection.counted(statement, binds)
                        } catch PostgresError.server(let failure) where failure.fields[.sqlState] == "26000" {
                            self.prepared.turnOff()
                        }
                    }
                    return try await connection.collect(Self.query(sql, values), logger: self.logger).count
                }
            }
        }
    }

    /// A value as postgres-nio's older binding type, each with the type the server gives its
    /// column (`bigint`, `bytea`, `text`).
    static func data(_ value: SQLValue) -> PostgresData {
        switch value {
        case .integer(let number): PostgresData(int64: number)
        case .blob(let bytes): PostgresData(bytes: bytes)
        case .text(let string): PostgresData(string: string)
        case .null: PostgresData.null
        }
    }

    func transaction<R: Sendable>(
        retrying: Bool, _ body: @escaping @Sendable (any SQLTransaction) async throws -> R
    ) async throws -> R {
        let once = {
            try await self.withConnection { connection in
                try await self.inTransaction(connection) {
                    try await body(PostgresSQLTransaction(connection: connection, logger: self.logger))
                }
            }
        }
        return try await storing { retrying ? try await self.retrying(once) : try await once() }
    }

    /// The database's failures as ``StorageError``s (an outage is `store_unavailable`, never corruption).
    func storing<R>(_ body: () async throws -> R) async throws -> R {
        do {
            return try await body()
        } catch let error as StorageError {
            throw error
        } catch {
            let mapped = map(error).error
            let code: StorageErrorCode =
                switch mapped.code {
                case .corruptedState, .auditTampered, .notAStore: .corrupted
                case .wrongKey: .wrongKey
                case .lockTimeout: .lockTimeout
                case .invalidParameter: .invalidParameter
                default: .unavailable
                }
            throw StorageError(code, mapped.reason)
        }
    }

    /// `sql` with its `?` placeholders numbered (`$1`, `$2`, …) and `values` bound.
    static func query(_ sql: String, _ values: [SQLValue]) -> PostgresQuery {
        var bindings = PostgresBindings(capacity: values.count)
        for value in values {
            switch value {
            case .integer(let number): bindings.append(number)
            case .blob(let bytes): bindings.append(ByteBuffer(bytes: bytes))
            case .text(let string): bindings.append(string)
            case .null: bindings.appendNull()
            }
        }
        return PostgresQuery(unsafeSQL: numbered(sql), binds: bindings)
    }

    /// `sql` with its `?` placeholders numbered `$1`, `$2`, …, made byte by byte (a `?` is one
    /// byte in UTF-8, never part of another character's bytes; a walk by `Character` took 3.6 %
    /// of a PostgreSQL refresh's CPU).
    static func numbered(_ sql: String) -> String {
        var text: [UInt8] = []
        text.reserveCapacity(sql.utf8.count + 8)
        var number = 0
        for byte in sql.utf8 {
            guard byte == UInt8(ascii: "?") else {
                text.append(byte)
                continue
            }
            number += 1
            text.append(UInt8(ascii: "$"))
            text.append(contentsOf: String(number).utf8)
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The rows, each column by its type: integers (and booleans, as 0 or 1), `bytea`, text.
    static func rows(_ result: PostgresQueryResult) throws -> [SQLRow] {
        var rows: [SQLRow] = []
        for row in result {
            var names: [String] = []
            var values: [SQLValue] = []
            for cell in row {
                names.append(cell.columnName)
                guard cell.bytes != nil else {
                    values.append(.null)
                    continue
                }
                switch cell.dataType {
                case .int2, .int4, .int8: values.append(.integer(try cell.decode(Int64.self)))
                case .bool: values.append(.integer(try cell.decode(Bool.self) ? 1 : 0))
                case .bytea: values.append(.blob(Array(try cell.decode(ByteBuffer.self).readableBytesView)))
                default: values.append(.text(try cell.decode(String.self)))
                }
            }
            rows.append(SQLRow(names: names, values: values))
        }
        return rows
    }
}

/// The statements of one PostgreSQL transaction.
struct PostgresSQLTransaction: SQLTransaction {
    let connection: PostgresConnection
    let logger: Logger

    func run(_ sql: String, _ values: [SQLValue]) async throws -> [SQLRow] {
        try PostgresStateDatabase.rows(
            try await connection.collect(PostgresStateDatabase.query(sql, values), logger: logger))
    }
}
