#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import NIOCore
import ShadowCore
import ShadowCredentials
public import ShadowSessions
public import ShadowVault
import SQLiteNIO
import Synchronization

/// Sessions in a SQLite database (Docs/sessions.md, "Tables"): their own tables, so they may
/// share the state store's file. Every method is one statement (or one short transaction).
public final class SQLiteSessionStore: SessionStore {
    public let path: String
    private let unlock: VaultUnlock
    private let reader: SQLiteConnection
    private let writer: SQLiteConnection
    private let readLock = AsyncLock()
    /// Writes waiting for the next commit, and whether a commit is under way.
    private let queue = Mutex<(waiting: [Write], committing: Bool)>(([], false))

    private struct Write: Sendable {
        let sql: String
        let bindings: [SQLiteData]
        let done: CheckedContinuation<[SQLiteRow], any Error>
    }

    static let schema = [
        "CREATE TABLE IF NOT EXISTS shadow_session_meta (name TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID",
        """
        CREATE TABLE IF NOT EXISTS shadow_session_users (apple BLOB PRIMARY KEY, user BLOB NOT NULL UNIQUE, \
        apple_refresh BLOB, inactive INTEGER NOT NULL, checked_ms INTEGER NOT NULL) WITHOUT ROWID
        """,
        """
        CREATE TABLE IF NOT EXISTS shadow_sessions (id BLOB PRIMARY KEY, user BLOB NOT NULL, generation INTEGER NOT \
        NULL, rotated_ms INTEGER NOT NULL, created_ms INTEGER NOT NULL, used_ms INTEGER NOT NULL, expires_ms INTEGER \
        NOT NULL, revoked_ms INTEGER, device TEXT NOT NULL) WITHOUT ROWID
        """,
        "CREATE INDEX IF NOT EXISTS shadow_sessions_user ON shadow_sessions (user)",
        """
        CREATE TABLE IF NOT EXISTS shadow_session_keys (kid TEXT PRIMARY KEY, alg TEXT NOT NULL, sealed BLOB NOT \
        NULL, created_ms INTEGER NOT NULL, activates_ms INTEGER NOT NULL, retired_ms INTEGER) WITHOUT ROWID
        """,
        "CREATE TABLE IF NOT EXISTS shadow_rate_limits (key BLOB PRIMARY KEY, tat_ms INTEGER NOT NULL) WITHOUT ROWID",
    ]

    private init(path: String, unlock: VaultUnlock, reader: SQLiteConnection, writer: SQLiteConnection) {
        self.path = path
        self.unlock = unlock
        self.reader = reader
        self.writer = writer
    }

    /// Opens (creating the file, mode 0600, and the tables) the session tables at `path`.
    public static func open(
        path: String, unlock: VaultUnlock, lockTimeout: Duration = .seconds(10)
    ) async throws
        -> SQLiteSessionStore
    {
        let seconds = lockTimeout.inSeconds
        do {
            try SQLiteCredentialStore.prepareFile(path, create: true)
        } catch let error as CredentialError {
            throw SessionError(storeFailure: error)
        }
        let reader = try await connect(path, seconds)
        let writer: SQLiteConnection
        do { writer = try await connect(path, seconds) } catch {
            try? await reader.close()
            throw error
        }
        do {
            for statement in ["PRAGMA journal_mode = WAL", "PRAGMA synchronous = FULL"] + schema {
                _ = try await mapped(path) { try await writer.query(statement, []) }
            }
            return SQLiteSessionStore(path: path, unlock: unlock, reader: reader, writer: writer)
        } catch {
            try? await reader.close()
            try? await writer.close()
            throw error
        }
    }

    static func connect(_ path: String, _ seconds: Double) async throws -> SQLiteConnection {
        do { return try await SQLiteStateDatabase.connect(path: path, lockTimeout: seconds) } catch let error
            as CredentialError
        { throw SessionError(storeFailure: error) }
    }

    static func mapped<R>(_ path: String, _ body: () async throws -> R) async throws -> R {
        do { return try await SQLiteStateDatabase.mapped(path, body) } catch let error as CredentialError {
            throw SessionError(storeFailure: error)
        }
    }

    public func close() async {
        try? await reader.close()
        try? await writer.close()
    }

    /// One statement, committed durably before it returns. Statements that arrive while a commit
    /// is under way are run together in the next transaction (group commit): each is one
    /// statement with its own effect, so running them together changes nothing but the number of
    /// fsyncs. A statement that fails fails alone; a commit that fails fails its whole group.
    private func write(_ sql: String, _ bindings: [SQLiteData]) async throws -> [SQLiteRow] {
        try await withCheckedThrowingContinuation { done in
            let start = queue.withLock { state -> Bool in
                state.waiting.append(Write(sql: sql, bindings: bindings, done: done))
                guard !state.committing else { return false }
                state.committing = true
                return true
            }
            if start { Task { await self.commitWaiting() } }
        }
    }

    private func commitWaiting() async {
        while true {
            let group = queue.withLock { state -> [Write] in
                let group = state.waiting
                state.waiting = []
                if group.isEmpty { state.committing = false }
                return group
            }
            guard !group.isEmpty else { return }
            var results: [Result<[SQLiteRow], any Error>] = []
            do {
                try await Self.mapped(path) {
                    _ = try await writer.query("BEGIN IMMEDIATE", [])
                    for write in group {
                        do {
                            results.append(.success(try await writer.query(write.sql, write.bindings)))
                        } catch {
                            results.append(.failure(error))
                        }
                    }
                    _ = try await writer.query("COMMIT", [])
                }
                for (write, result) in zip(group, results) {
                    switch result {
                    case .success(let rows): write.done.resume(returning: rows)
                    case .failure(let error):
                        let mapped: any Error
                        do { mapped = try await Self.mapped(path) { throw error } } catch { mapped = error }
                        write.done.resume(throwing: mapped)
                    }
                }
            } catch {
                _ = try? await writer.query("ROLLBACK", [])
                for write in group { write.done.resume(throwing: error) }
            }
        }
    }

    private func read(_ sql: String, _ bindings: [SQLiteData]) async throws -> [SQLiteRow] {
        let reader = self.reader, path = self.path
        return try await readLock.withLock {
            try await Self.mapped(path) { try await reader.query(sql, bindings) }
        }
    }

    private func blob(_ bytes: [UInt8]) -> SQLiteData { .blob(ByteBuffer(bytes: bytes)) }
    private func bytes(_ row: SQLiteRow, _ column: String) -> [UInt8]? {
        row.column(column)?.blob.map { Array($0.readableBytesView) }
    }

    // MARK: SessionStore

    public func sessionSecret() async throws -> [UInt8] {
        let existing = try await read("SELECT value FROM shadow_session_meta WHERE name = 'secret'", [])
        var stored = existing.first.flatMap { bytes($0, "value") }
        if stored == nil {
            let fresh = try SealedStoreSecret.create(unlock: unlock, purpose: .sessions)
            // Two processes may create it at once: the first insert wins, the other reads it.
            _ = try await write(
                "INSERT INTO shadow_session_meta (name, value) VALUES ('secret', ?) ON CONFLICT (name) DO NOTHING",
                [blob(fresh.stored)])
            stored = try await read("SELECT value FROM shadow_session_meta WHERE name = 'secret'", []).first.flatMap {
                bytes($0, "value")
            }
        }
        guard let stored else { throw SessionError(.corrupted, "the session secret row is missing") }
        do {
            return try SealedStoreSecret.open(stored, unlock: unlock, purpose: .sessions)
        } catch let error as CredentialError {
            throw SessionError(storeFailure: error)
        }
    }

    public func user(appleHash: [UInt8]) async throws -> SessionUser? {
        try await read(
            "SELECT user, apple_refresh, inactive, checked_ms FROM shadow_session_users WHERE apple = ?",
            [blob(appleHash)]
        ).first.flatMap(sessionUser)
    }

    private func sessionUser(_ row: SQLiteRow) -> SessionUser? {
        guard let id = bytes(row, "user").flatMap(UUID.init(sessionBytes:)) else { return nil }
        return SessionUser(
            id: id, sealedAppleRefreshToken: bytes(row, "apple_refresh"),
            inactive: (row.column("inactive")?.integer ?? 0) != 0,
            checkedAt: Int64(row.column("checked_ms")?.integer ?? 0))
    }

    public func mapUser(
        appleHash: [UInt8], candidate: UUID, sealedAppleRefreshToken: [UInt8]?, now: Int64
    )
        async throws -> UUID
    {
        let rows = try await write(
            """
            INSERT INTO shadow_session_users (apple, user, apple_refresh, inactive, checked_ms) VALUES (?, ?, ?, 0, ?) \
            ON CONFLICT (apple) DO UPDATE SET apple_refresh = coalesce(excluded.apple_refresh, apple_refresh) \
            WHERE user = excluded.user RETURNING user
            """,
            [
                blob(appleHash), blob(candidate.sessionBytes), sealedAppleRefreshToken.map(blob) ?? .null,
                .integer(Int(now)),
            ])
        if let user = rows.first.flatMap({ bytes($0, "user") }).flatMap(UUID.init(sessionBytes:)) { return user }
        guard let existing = try await user(appleHash: appleHash) else {
            throw SessionError(.corrupted, "a user mapping vanished while it was written")
        }
        return existing.id
    }

    public func usersDue(checkedBefore before: Int64, limit: Int) async throws -> [SessionUser] {
        try await read(
            """
            SELECT user, apple_refresh, inactive, checked_ms FROM shadow_session_users WHERE checked_ms < ? AND \
            apple_refresh IS NOT NULL AND inactive = 0 ORDER BY checked_ms LIMIT ?
            """,
            [.integer(Int(before)), .integer(limit)]
        ).compactMap(sessionUser)
    }

    public func markChecked(user: UUID, at: Int64, inactive: Bool) async throws {
        _ = try await write(
            "UPDATE shadow_session_users SET checked_ms = ?, inactive = ? WHERE user = ?",
            [.integer(Int(at)), .integer(inactive ? 1 : 0), blob(user.sessionBytes)])
    }

    public func isInactive(user: UUID) async throws -> Bool {
        try await read("SELECT inactive FROM shadow_session_users WHERE user = ?", [blob(user.sessionBytes)]).first?
            .column("inactive")?.integer == 1
    }

    public func insertSession(_ row: SessionRow) async throws {
        _ = try await write(
            """
            INSERT INTO shadow_sessions
            (id, user, generation, rotated_ms, created_ms, used_ms, expires_ms, revoked_ms, device)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                blob(row.id.bytes), blob(row.user.sessionBytes), .integer(Int(row.generation)),
                .integer(Int(row.rotatedAt)), .integer(Int(row.createdAt)), .integer(Int(row.lastUsedAt)),
                .integer(Int(row.expiresAt)), row.revokedAt.map { .integer(Int($0)) } ?? .null, .text(row.device),
            ])
    }

    static let sessionColumns = "id, user, generation, rotated_ms, created_ms, used_ms, expires_ms, revoked_ms, device"

    private func sessionRow(_ row: SQLiteRow) throws -> SessionRow {
        guard let id = bytes(row, "id").flatMap(SessionID.init(bytes:)),
            let user = bytes(row, "user").flatMap(UUID.init(sessionBytes:)),
            let generation = row.column("generation")?.integer, generation >= 1,
            let rotated = row.column("rotated_ms")?.integer, let created = row.column("created_ms")?.integer,
            let used = row.column("used_ms")?.integer, let expires = row.column("expires_ms")?.integer,
            let device = row.column("device")?.string
        else { throw SessionError(.corrupted, "a session row is malformed") }
        return SessionRow(
            id: id, user: user, generation: UInt64(generation), rotatedAt: Int64(rotated), createdAt: Int64(created),
            lastUsedAt: Int64(used), expiresAt: Int64(expires),
            revokedAt: row.column("revoked_ms")?.integer.map(Int64.init), device: device)
    }

    public func session(_ id: SessionID) async throws -> SessionRow? {
        try await read("SELECT \(Self.sessionColumns) FROM shadow_sessions WHERE id = ?", [blob(id.bytes)]).first.map(
            sessionRow)
    }

    public func rotate(_ id: SessionID, from generation: UInt64, now: Int64) async throws -> Bool {
        try await !write(
            """
            UPDATE shadow_sessions SET generation = generation + 1, rotated_ms = ?, used_ms = ? WHERE id = ? AND \
            generation = ? AND revoked_ms IS NULL RETURNING id
            """,
            [.integer(Int(now)), .integer(Int(now)), blob(id.bytes), .integer(Int(generation))]
        ).isEmpty
    }

    public func touch(_ id: SessionID, now: Int64) async throws {
        _ = try await write(
            "UPDATE shadow_sessions SET used_ms = max(used_ms, ?) WHERE id = ?", [.integer(Int(now)), blob(id.bytes)])
    }

    public func revoke(_ id: SessionID, now: Int64) async throws -> Bool {
        try await !write(
            "UPDATE shadow_sessions SET revoked_ms = ? WHERE id = ? AND revoked_ms IS NULL RETURNING id",
            [.integer(Int(now)), blob(id.bytes)]
        ).isEmpty
    }

    public func revokeAll(user: UUID, now: Int64) async throws -> Int {
        try await write(
            "UPDATE shadow_sessions SET revoked_ms = ? WHERE user = ? AND revoked_ms IS NULL RETURNING id",
            [.integer(Int(now)), blob(user.sessionBytes)]
        ).count
    }

    public func sessions(user: UUID) async throws -> [SessionRow] {
        try await read(
            "SELECT \(Self.sessionColumns) FROM shadow_sessions WHERE user = ? ORDER BY created_ms DESC LIMIT 1000",
            [blob(user.sessionBytes)]
        ).map(sessionRow)
    }

    public func deleteDead(expiredBefore: Int64, idleBefore: Int64, limit: Int) async throws -> Int {
        let deleted = try await write(
            """
            DELETE FROM shadow_sessions WHERE id IN (SELECT id FROM shadow_sessions WHERE revoked_ms IS NOT NULL OR \
            expires_ms < ? OR used_ms < ? LIMIT ?) RETURNING id
            """,
            [.integer(Int(expiredBefore)), .integer(Int(idleBefore)), .integer(limit)]
        ).count
        _ = try await write(
            "DELETE FROM shadow_rate_limits WHERE key IN (SELECT key FROM shadow_rate_limits WHERE tat_ms < ? LIMIT ?)",
            [.integer(Int(expiredBefore)), .integer(limit)])
        return deleted
    }

    public func signingKeys() async throws -> [StoredSigningKey] {
        try await read(
            """
            SELECT kid, alg, sealed, created_ms, activates_ms, retired_ms FROM shadow_session_keys ORDER BY \
            created_ms
            """,
            []
        ).map { row in
            guard let kid = row.column("kid")?.string, let alg = row.column("alg")?.string,
                let sealed = bytes(row, "sealed"), let created = row.column("created_ms")?.integer,
                let activates = row.column("activates_ms")?.integer
            else { throw SessionError(.corrupted, "a signing-key row is malformed") }
            return StoredSigningKey(
                keyID: kid, algorithm: alg, sealedPrivateKey: sealed, createdAt: Int64(created),
                activatesAt: Int64(activates), retiredAt: row.column("retired_ms")?.integer.map(Int64.init))
        }
    }

    public func insertSigningKey(_ key: StoredSigningKey) async throws {
        _ = try await write(
            """
            INSERT INTO shadow_session_keys (kid, alg, sealed, created_ms, activates_ms, retired_ms)
            VALUES (?, ?, ?, ?, ?, ?)
            """,
            [
                .text(key.keyID), .text(key.algorithm), blob(key.sealedPrivateKey), .integer(Int(key.createdAt)),
                .integer(Int(key.activatesAt)), key.retiredAt.map { .integer(Int($0)) } ?? .null,
            ])
    }

    public func insertFirstSigningKey(_ key: StoredSigningKey) async throws -> Bool {
        // One statement in the writer's transaction: SQLite's one writer is the lock.
        try await !write(
            """
            INSERT INTO shadow_session_keys (kid, alg, sealed, created_ms, activates_ms, retired_ms)
            SELECT ?, ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM shadow_session_keys) RETURNING kid
            """,
            [
                .text(key.keyID), .text(key.algorithm), blob(key.sealedPrivateKey), .integer(Int(key.createdAt)),
                .integer(Int(key.activatesAt)), key.retiredAt.map { .integer(Int($0)) } ?? .null,
            ]
        ).isEmpty
    }

    public func retireSigningKey(_ keyID: String, at: Int64) async throws {
        _ = try await write(
            "UPDATE shadow_session_keys SET retired_ms = ? WHERE kid = ? AND retired_ms IS NULL",
            [.integer(Int(at)), .text(keyID)])
    }

    public func deleteSigningKey(_ keyID: String) async throws {
        _ = try await write("DELETE FROM shadow_session_keys WHERE kid = ?", [.text(keyID)])
    }

    public func rateLimit(key: [UInt8], now: Int64, interval: Int64, tolerance: Int64) async throws -> Int64? {
        let allowed = try await write(
            """
            INSERT INTO shadow_rate_limits (key, tat_ms) VALUES (?, ? + ?) ON CONFLICT (key) DO UPDATE SET tat_ms = \
            max(tat_ms, ?) + ? WHERE max(tat_ms, ?) - ? <= ? RETURNING tat_ms
            """,
            [
                blob(key), .integer(Int(now)), .integer(Int(interval)), .integer(Int(now)), .integer(Int(interval)),
                .integer(Int(now)), .integer(Int(now)), .integer(Int(tolerance)),
            ])
        guard allowed.isEmpty else { return nil }
        let tat = try await read("SELECT tat_ms FROM shadow_rate_limits WHERE key = ?", [blob(key)]).first?.column(
            "tat_ms")?.integer
        return Int64(tat ?? Int(now)) - tolerance
    }
}

extension UUID {
    var sessionBytes: [UInt8] { withUnsafeBytes(of: uuid) { Array($0) } }

    init?(sessionBytes bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        self.init(uuid: bytes.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) })
    }
}
