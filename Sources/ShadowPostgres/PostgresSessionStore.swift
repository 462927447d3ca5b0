#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Logging
import NIOCore
import PostgresNIO
import ShadowCore
import ShadowCredentials
public import ShadowSessions
public import ShadowVault

/// Sessions in PostgreSQL, shared by several instances (Docs/sessions.md, "Tables"): the SQLite
/// tables with `bytea` and `bigint`. Every method is one statement; a rotation is one
/// compare-and-set `UPDATE`, so instances never both rotate one generation; a rate limit is one
/// `INSERT … ON CONFLICT DO UPDATE`, so a limit holds across instances.
public final class PostgresSessionStore: SessionStore {
    private let unlock: VaultUnlock
    let database: PostgresStateDatabase

    static let schema: [PostgresQuery] = [
        "CREATE TABLE IF NOT EXISTS shadow_session_meta (name text PRIMARY KEY, value bytea NOT NULL)",
        """
        CREATE TABLE IF NOT EXISTS shadow_session_users (apple bytea PRIMARY KEY, "user" bytea NOT NULL UNIQUE, \
        apple_refresh bytea, inactive boolean NOT NULL, checked_ms bigint NOT NULL)
        """,
        """
        CREATE TABLE IF NOT EXISTS shadow_sessions (id bytea PRIMARY KEY, "user" bytea NOT NULL, generation bigint NOT \
        NULL, rotated_ms bigint NOT NULL, created_ms bigint NOT NULL, used_ms bigint NOT NULL, expires_ms bigint NOT \
        NULL, revoked_ms bigint, device text NOT NULL)
        """,
        #"CREATE INDEX IF NOT EXISTS shadow_sessions_user ON shadow_sessions ("user")"#,
        """
        CREATE TABLE IF NOT EXISTS shadow_session_keys (kid text PRIMARY KEY, alg text NOT NULL, sealed bytea NOT \
        NULL, created_ms bigint NOT NULL, activates_ms bigint NOT NULL, retired_ms bigint)
        """,
        "CREATE TABLE IF NOT EXISTS shadow_rate_limits (key bytea PRIMARY KEY, tat_ms bigint NOT NULL)",
    ]

    private init(unlock: VaultUnlock, database: PostgresStateDatabase) {
        self.unlock = unlock
        self.database = database
    }

    /// Connects and creates the tables (under an advisory lock) when missing.
    public static func connect(
        _ location: PostgresLocation, unlock: VaultUnlock, connectTimeout: Duration = .seconds(10),
        retryFor: Duration = .seconds(30), maximumConnections: Int = 16
    ) async throws -> PostgresSessionStore {
        let database = try PostgresStateDatabase(
            location: location, connectTimeout: connectTimeout, retryFor: retryFor,
            maximumConnections: maximumConnections,
            logger: Logger(label: "shadow-keys.postgres", factory: { _ in SwiftLogNoOpLogHandler() }))
        let store = PostgresSessionStore(unlock: unlock, database: database)
        do {
            try await store.run { connection, logger in
                try await connection.run("BEGIN", logger: logger)
                do {
                    try await connection.run("SELECT pg_advisory_xact_lock(7395012, 3)", logger: logger)
                    for statement in schema { try await connection.run(statement, logger: logger) }
                    try await connection.run("COMMIT", logger: logger)
                } catch {
                    try? await connection.run("ROLLBACK", logger: logger)
                    throw error
                }
            }
            return store
        } catch {
            await database.close()
            throw error
        }
    }

    public func close() async { await database.close() }

    /// One statement on a pooled connection, retried while the server is out of reach. Every
    /// statement here is safe to repeat except a rotation or a rate count, which the callers
    /// read back (a lost answer of a rotation that committed reads as a lost race).
    private func run<R: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection, Logger) async throws -> R
    )
        async throws -> R
    {
        let database = self.database
        do {
            return try await database.retrying {
                try await database.withConnection { connection in try await body(connection, database.logger) }
            }
        } catch let error as SessionError {
            throw error
        } catch {
            throw SessionError(storeFailure: database.map(error).error)
        }
    }

    // MARK: SessionStore

    public func sessionSecret() async throws -> [UInt8] {
        let unlock = self.unlock
        let fresh = try SealedStoreSecret.create(unlock: unlock, purpose: .sessions).stored
        let stored = try await run { connection, logger -> [UInt8]? in
            let value = ByteBuffer(bytes: fresh)
            try await connection.run(
                """
                INSERT INTO shadow_session_meta (name, value) VALUES ('secret', \(value)) ON CONFLICT (name) DO \
                NOTHING
                """,
                logger: logger)
            return try await connection.query(
                "SELECT value FROM shadow_session_meta WHERE name = 'secret'", logger: logger
            ).collect().first.map { Array(try $0.decode(ByteBuffer.self).readableBytesView) }
        }
        guard let stored else { throw SessionError(.corrupted, "the session secret row is missing") }
        do {
            return try SealedStoreSecret.open(stored, unlock: unlock, purpose: .sessions)
        } catch let error as CredentialError {
            throw SessionError(storeFailure: error)
        }
    }

    static func user(_ row: PostgresRow) throws -> SessionUser {
        let (user, refresh, inactive, checked) = try row.decode((ByteBuffer, ByteBuffer?, Bool, Int64).self)
        guard let id = UUID(postgresBytes: Array(user.readableBytesView)) else {
            throw SessionError(.corrupted, "a user row is malformed")
        }
        return SessionUser(
            id: id, sealedAppleRefreshToken: refresh.map { Array($0.readableBytesView) }, inactive: inactive,
            checkedAt: checked)
    }

    public func user(appleHash: [UInt8]) async throws -> SessionUser? {
        let hash = ByteBuffer(bytes: appleHash)
        return try await run { connection, logger in
            try await connection.query(
                """
                SELECT "user", apple_refresh, inactive, checked_ms FROM shadow_session_users WHERE apple = \(hash)
                """, logger: logger
            ).collect().first.map(Self.user)
        }
    }

    public func mapUser(
        appleHash: [UInt8], candidate: UUID, sealedAppleRefreshToken: [UInt8]?, now: Int64
    )
        async throws -> UUID
    {
        let hash = ByteBuffer(bytes: appleHash), user = ByteBuffer(bytes: candidate.postgresBytes)
        let sealed = sealedAppleRefreshToken.map { ByteBuffer(bytes: $0) }
        let mapped = try await run { connection, logger -> [UInt8]? in
            try await connection.query(
                """
                INSERT INTO shadow_session_users (apple, "user", apple_refresh, inactive, checked_ms) VALUES (\(hash), \
                \(user), \(sealed), false, \(now)) ON CONFLICT (apple) DO UPDATE SET apple_refresh = \
                coalesce(EXCLUDED.apple_refresh, shadow_session_users.apple_refresh) WHERE shadow_session_users."user" \
                = EXCLUDED."user" RETURNING "user"
                """, logger: logger
            ).collect().first.map { Array(try $0.decode(ByteBuffer.self).readableBytesView) }
        }
        if let mapped, let id = UUID(postgresBytes: mapped) { return id }
        guard let existing = try await self.user(appleHash: appleHash) else {
            throw SessionError(.corrupted, "a user mapping vanished while it was written")
        }
        return existing.id
    }

    public func usersDue(checkedBefore before: Int64, limit: Int) async throws -> [SessionUser] {
        let count = Int64(limit)
        return try await run { connection, logger in
            try await connection.query(
                """
                SELECT "user", apple_refresh, inactive, checked_ms FROM shadow_session_users WHERE checked_ms < \
                \(before) AND apple_refresh IS NOT NULL AND NOT inactive ORDER BY checked_ms LIMIT \(count)
                """, logger: logger
            ).collect().map(Self.user)
        }
    }

    public func markChecked(user: UUID, at: Int64, inactive: Bool) async throws {
        let id = ByteBuffer(bytes: user.postgresBytes)
        try await run { connection, logger in
            try await connection.run(
                #"UPDATE shadow_session_users SET checked_ms = \#(at), inactive = \#(inactive) WHERE "user" = \#(id)"#,
                logger: logger)
        }
    }

    public func isInactive(user: UUID) async throws -> Bool {
        let id = ByteBuffer(bytes: user.postgresBytes)
        return try await run { connection, logger in
            try await connection.query(
                #"SELECT inactive FROM shadow_session_users WHERE "user" = \#(id)"#, logger: logger
            ).collect().first.map { try $0.decode(Bool.self) } ?? false
        }
    }

    public func insertSession(_ row: SessionRow) async throws {
        let id = ByteBuffer(bytes: row.id.bytes), user = ByteBuffer(bytes: row.user.postgresBytes)
        let generation = Int64(row.generation), device = row.device
        try await run { connection, logger in
            try await connection.run(
                """
                INSERT INTO shadow_sessions (id, "user", generation, rotated_ms, created_ms, used_ms, expires_ms, \
                revoked_ms, device) VALUES (\(id), \(user), \(generation), \(row.rotatedAt), \(row.createdAt), \
                \(row.lastUsedAt), \(row.expiresAt), \(row.revokedAt), \(device)) ON CONFLICT (id) DO NOTHING
                """, logger: logger)
        }
    }

    static let columns = #"id, "user", generation, rotated_ms, created_ms, used_ms, expires_ms, revoked_ms, device"#

    static func session(_ row: PostgresRow) throws -> SessionRow {
        let (id, user, generation, rotated, created, used, expires, revoked, device) = try row.decode(
            (ByteBuffer, ByteBuffer, Int64, Int64, Int64, Int64, Int64, Int64?, String).self)
        guard let sessionID = SessionID(bytes: Array(id.readableBytesView)),
            let userID = UUID(postgresBytes: Array(user.readableBytesView)), generation >= 1
        else { throw SessionError(.corrupted, "a session row is malformed") }
        return SessionRow(
            id: sessionID, user: userID, generation: UInt64(generation), rotatedAt: rotated, createdAt: created,
            lastUsedAt: used, expiresAt: expires, revokedAt: revoked, device: device)
    }

    public func session(_ id: SessionID) async throws -> SessionRow? {
        let key = ByteBuffer(bytes: id.bytes)
        return try await run { connection, logger in
            try await connection.query(
                "SELECT \(unescaped: Self.columns) FROM shadow_sessions WHERE id = \(key)", logger: logger
            ).collect().first.map(Self.session)
        }
    }

    public func rotate(_ id: SessionID, from generation: UInt64, now: Int64) async throws -> Bool {
        let key = ByteBuffer(bytes: id.bytes), from = Int64(generation)
        return try await run { connection, logger in
            try await !connection.query(
                """
                UPDATE shadow_sessions SET generation = generation + 1, rotated_ms = \(now), used_ms = \(now) WHERE \
                id = \(key) AND generation = \(from) AND revoked_ms IS NULL RETURNING id
                """, logger: logger
            ).collect().isEmpty
        }
    }

    public func touch(_ id: SessionID, now: Int64) async throws {
        let key = ByteBuffer(bytes: id.bytes)
        try await run { connection, logger in
            try await connection.run(
                "UPDATE shadow_sessions SET used_ms = greatest(used_ms, \(now)) WHERE id = \(key)", logger: logger)
        }
    }

    public func revoke(_ id: SessionID, now: Int64) async throws -> Bool {
        let key = ByteBuffer(bytes: id.bytes)
        return try await run { connection, logger in
            try await !connection.query(
                "UPDATE shadow_sessions SET revoked_ms = \(now) WHERE id = \(key) AND revoked_ms IS NULL RETURNING id",
                logger: logger
            ).collect().isEmpty
        }
    }

    public func revokeAll(user: UUID, now: Int64) async throws -> Int {
        let id = ByteBuffer(bytes: user.postgresBytes)
        return try await run { connection, logger in
            try await connection.query(
                #"""
                UPDATE shadow_sessions SET revoked_ms = \#(now) WHERE "user" = \#(id) AND revoked_ms IS NULL
                RETURNING id
                """#,
                logger: logger
            ).collect().count
        }
    }

    public func sessions(user: UUID) async throws -> [SessionRow] {
        let id = ByteBuffer(bytes: user.postgresBytes)
        return try await run { connection, logger in
            try await connection.query(
                """
                SELECT \(unescaped: Self.columns) FROM shadow_sessions WHERE "user" = \(id) ORDER BY created_ms DESC \
                LIMIT 1000
                """, logger: logger
            ).collect().map(Self.session)
        }
    }

    public func deleteDead(expiredBefore: Int64, idleBefore: Int64, limit: Int) async throws -> Int {
        let count = Int64(limit)
        return try await run { connection, logger in
            let deleted = try await connection.query(
                """
                DELETE FROM shadow_sessions WHERE id IN (SELECT id FROM shadow_sessions WHERE revoked_ms IS NOT NULL \
                OR expires_ms < \(expiredBefore) OR used_ms < \(idleBefore) LIMIT \(count) FOR UPDATE SKIP LOCKED) \
                RETURNING id
                """, logger: logger
            ).collect().count
            try await connection.run(
                """
                DELETE FROM shadow_rate_limits WHERE key IN (SELECT key FROM shadow_rate_limits WHERE tat_ms < \
                \(expiredBefore) LIMIT \(count) FOR UPDATE SKIP LOCKED)
                """, logger: logger)
            return deleted
        }
    }

    public func signingKeys() async throws -> [StoredSigningKey] {
        try await run { connection, logger in
            try await connection.query(
                """
                SELECT kid, alg, sealed, created_ms, activates_ms, retired_ms FROM shadow_session_keys ORDER BY \
                created_ms
                """, logger: logger
            ).collect().map { row in
                let (kid, alg, sealed, created, activates, retired) = try row.decode(
                    (String, String, ByteBuffer, Int64, Int64, Int64?).self)
                return StoredSigningKey(
                    keyID: kid, algorithm: alg, sealedPrivateKey: Array(sealed.readableBytesView), createdAt: created,
                    activatesAt: activates, retiredAt: retired)
            }
        }
    }

    public func insertSigningKey(_ key: StoredSigningKey) async throws {
        let sealed = ByteBuffer(bytes: key.sealedPrivateKey), kid = key.keyID, alg = key.algorithm
        try await run { connection, logger in
            try await connection.run(
                """
                INSERT INTO shadow_session_keys (kid, alg, sealed, created_ms, activates_ms, retired_ms) VALUES \
                (\(kid), \(alg), \(sealed), \(key.createdAt), \(key.activatesAt), \(key.retiredAt)) ON CONFLICT (kid) \
                DO NOTHING
                """, logger: logger)
        }
    }

    public func insertFirstSigningKey(_ key: StoredSigningKey) async throws -> Bool {
        let sealed = ByteBuffer(bytes: key.sealedPrivateKey), kid = key.keyID, alg = key.algorithm
        return try await run { connection, logger in
            // The ring's table locked against every other writer of it (and every other instance
            // making its first key) for this transaction: the check and the insert are one step.
            try await connection.run("BEGIN", logger: logger)
            do {
                try await connection.run(
                    "LOCK TABLE shadow_session_keys IN SHARE ROW EXCLUSIVE MODE", logger: logger)
                let inserted = try await connection.query(
                    """
                    INSERT INTO shadow_session_keys (kid, alg, sealed, created_ms, activates_ms, retired_ms) SELECT \
                    \(kid), \(alg), \(sealed), \(key.createdAt), \(key.activatesAt), \(key.retiredAt) WHERE NOT EXISTS \
                    (SELECT 1 FROM shadow_session_keys) RETURNING kid
                    """, logger: logger
                ).collect()
                try await connection.run("COMMIT", logger: logger)
                return !inserted.isEmpty
            } catch {
                try? await connection.run("ROLLBACK", logger: logger)
                throw error
            }
        }
    }

    public func retireSigningKey(_ keyID: String, at: Int64) async throws {
        try await run { connection, logger in
            try await connection.run(
                """
                UPDATE shadow_session_keys SET retired_ms = \(at) WHERE kid = \(keyID) AND retired_ms IS NULL
                """, logger: logger)
        }
    }

    public func deleteSigningKey(_ keyID: String) async throws {
        try await run { connection, logger in
            try await connection.run("DELETE FROM shadow_session_keys WHERE kid = \(keyID)", logger: logger)
        }
    }

    public func rateLimit(key: [UInt8], now: Int64, interval: Int64, tolerance: Int64) async throws -> Int64? {
        let hashed = ByteBuffer(bytes: key)
        return try await run { connection, logger in
            let allowed = try await connection.query(
                """
                INSERT INTO shadow_rate_limits (key, tat_ms) VALUES (\(hashed), \(now) + \(interval)) ON CONFLICT \
                (key) DO UPDATE SET tat_ms = greatest(shadow_rate_limits.tat_ms, \(now)) + \(interval) WHERE \
                greatest(shadow_rate_limits.tat_ms, \(now)) - \(now) <= \(tolerance) RETURNING tat_ms
                """, logger: logger
            ).collect()
            guard allowed.isEmpty else { return nil }
            let tat = try await connection.query(
                "SELECT tat_ms FROM shadow_rate_limits WHERE key = \(hashed)", logger: logger
            ).collect().first.map { try $0.decode(Int64.self) }
            return (tat ?? now) - tolerance
        }
    }
}

extension UUID {
    var postgresBytes: [UInt8] { withUnsafeBytes(of: uuid) { Array($0) } }

    init?(postgresBytes bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        self.init(uuid: bytes.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) })
    }
}
