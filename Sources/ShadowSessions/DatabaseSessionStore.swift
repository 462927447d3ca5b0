import Crypto
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import ShadowCore
public import ShadowDPoP
package import ShadowStorage
package import ShadowVault

/// Sessions in a database (Docs/sessions.md, "Tables"), SQLite or PostgreSQL, every rule written
/// once over the row seam (`SQLDatabase`): the rotation's compare-and-set, the GCRA step, the
/// sweep, the first signing key, the secret, and each row's MAC, checked on every read.
public final class DatabaseSessionStore: SessionStore {
    let database: any SQLDatabase
    let secret: [UInt8]
    let keys: SessionKeys
    /// Closes the database, when the store opened it itself (a shared handle stays open).
    let closing: (@Sendable () async -> Void)?

    /// The table set's migrations (`shadow_migrations`, set `sessions`).
    static let migrations = [
        Migration(
            1, "tables",
            sqlite: [
                """
                CREATE TABLE IF NOT EXISTS shadow_session_meta (name TEXT PRIMARY KEY, value BLOB NOT NULL) \
                WITHOUT ROWID
                """,
                """
                CREATE TABLE IF NOT EXISTS shadow_session_users (apple BLOB PRIMARY KEY, user BLOB NOT NULL UNIQUE, \
                apple_refresh BLOB, inactive INTEGER NOT NULL, checked_ms INTEGER NOT NULL) WITHOUT ROWID
                """,
                """
                CREATE TABLE IF NOT EXISTS shadow_sessions (id BLOB PRIMARY KEY, user BLOB NOT NULL, generation \
                INTEGER NOT NULL, rotated_ms INTEGER NOT NULL, created_ms INTEGER NOT NULL, used_ms INTEGER NOT NULL, \
                expires_ms INTEGER NOT NULL, revoked_ms INTEGER, device TEXT NOT NULL) WITHOUT ROWID
                """,
                "CREATE INDEX IF NOT EXISTS shadow_sessions_user ON shadow_sessions (user)",
                """
                CREATE TABLE IF NOT EXISTS shadow_session_keys (kid TEXT PRIMARY KEY, alg TEXT NOT NULL, sealed BLOB \
                NOT NULL, created_ms INTEGER NOT NULL, activates_ms INTEGER NOT NULL, retired_ms INTEGER) WITHOUT ROWID
                """,
                """
                CREATE TABLE IF NOT EXISTS shadow_rate_limits (key BLOB PRIMARY KEY, tat_ms INTEGER NOT NULL) WITHOUT \
                ROWID
                """,
            ],
            postgres: [
                "CREATE TABLE IF NOT EXISTS shadow_session_meta (name text PRIMARY KEY, value bytea NOT NULL)",
                """
                CREATE TABLE IF NOT EXISTS shadow_session_users (apple bytea PRIMARY KEY, "user" bytea NOT NULL \
                UNIQUE, apple_refresh bytea, inactive boolean NOT NULL, checked_ms bigint NOT NULL)
                """,
                """
                CREATE TABLE IF NOT EXISTS shadow_sessions (id bytea PRIMARY KEY, "user" bytea NOT NULL, generation \
                bigint NOT NULL, rotated_ms bigint NOT NULL, created_ms bigint NOT NULL, used_ms bigint NOT NULL, \
                expires_ms bigint NOT NULL, revoked_ms bigint, device text NOT NULL)
                """,
                #"CREATE INDEX IF NOT EXISTS shadow_sessions_user ON shadow_sessions ("user")"#,
                """
                CREATE TABLE IF NOT EXISTS shadow_session_keys (kid text PRIMARY KEY, alg text NOT NULL, sealed bytea \
                NOT NULL, created_ms bigint NOT NULL, activates_ms bigint NOT NULL, retired_ms bigint)
                """,
                "CREATE TABLE IF NOT EXISTS shadow_rate_limits (key bytea PRIMARY KEY, tat_ms bigint NOT NULL)",
            ]),
        Migration(
            2, "row MACs",
            sqlite: [
                "ALTER TABLE shadow_sessions ADD COLUMN mac BLOB",
                "ALTER TABLE shadow_session_users ADD COLUMN mac BLOB",
            ],
            postgres: [
                "ALTER TABLE shadow_sessions ADD COLUMN mac bytea",
                "ALTER TABLE shadow_session_users ADD COLUMN mac bytea",
                """
                ALTER TABLE shadow_session_users ALTER COLUMN inactive TYPE smallint USING (CASE WHEN inactive THEN 1 \
                ELSE 0 END)
                """,
            ]),
        Migration(
            3, "DPoP",
            sqlite: [
                "ALTER TABLE shadow_sessions ADD COLUMN jkt BLOB",
                """
                CREATE TABLE IF NOT EXISTS shadow_dpop_proofs (key BLOB PRIMARY KEY, expires_ms INTEGER NOT NULL) \
                WITHOUT ROWID
                """,
            ],
            postgres: [
                "ALTER TABLE shadow_sessions ADD COLUMN jkt bytea",
                "CREATE TABLE IF NOT EXISTS shadow_dpop_proofs (key bytea PRIMARY KEY, expires_ms bigint NOT NULL)",
            ]),
        // The re-check's users due, oldest first, read from an index of the users it asks about
        // instead of a scan and sort of every user each minute (``usersDue(checkedBefore:limit:)``).
        Migration(
            4, "re-check index",
            sqlite: [DatabaseSessionStore.dueIndex],
            postgres: [DatabaseSessionStore.dueIndex]),
    ]

    /// The re-check's users due (the time before which they were checked, then how many), oldest
    /// first: served by `shadow_session_users_due`, whose condition its own implies.
    package static let usersDueSQL = """
        SELECT \(userColumns) FROM shadow_session_users WHERE checked_ms < ? AND apple_refresh IS NOT NULL AND \
        inactive = 0 ORDER BY checked_ms LIMIT ?
        """

    static let dueIndex = """
        CREATE INDEX IF NOT EXISTS shadow_session_users_due ON shadow_session_users (checked_ms) WHERE apple_refresh \
        IS NOT NULL AND inactive = 0
        """

    private init(database: any SQLDatabase, secret: [UInt8], closing: (@Sendable () async -> Void)?) throws {
        self.database = database
        self.secret = secret
        self.closing = closing
        keys = try SessionKeys(secret: secret)
    }

    /// Closes the database when this store opened it; a handle shared with other features stays open.
    public func close() async { await closing?() }

    /// Opens the session tables in `database`: migrates them (creating them in a new database),
    /// opens the session secret with `unlock` (making it in a new store), and gives rows an older
    /// version wrote without a MAC theirs, once.
    /// - Throws: ``SessionErrorCode/wrongKey``; ``SessionErrorCode/unavailable``;
    ///   ``SessionErrorCode/lockTimeout``; ``SessionErrorCode/corrupted``.
    package static func open(
        _ database: any SQLDatabase, unlock: VaultUnlock, closing: (@Sendable () async -> Void)? = nil
    ) async throws -> DatabaseSessionStore {
        do {
            return try await storing {
                try await Migrator.migrate(database, tableSet: "sessions", migrations)
                let store = try DatabaseSessionStore(
                    database: database, secret: try await secret(database, unlock: unlock), closing: closing)
                try await store.upgradeRows()
                return store
            }
        } catch {
            await closing?()
            throw error
        }
    }

    /// Runs `body`, reporting the database's failures as ``SessionError``s.
    static func storing<R>(_ body: () async throws -> R) async throws -> R {
        do { return try await body() } catch { throw sessionError(error) }
    }

    /// A store failure as a ``SessionError``; any other error as it is.
    static func sessionError(_ error: any Error) -> any Error {
        (error as? StorageError).map { SessionError(storeFailure: $0) } ?? error
    }

    // MARK: The secret

    /// The sealed secret (meta row `secret`), made and stored by the first opener; two processes
    /// making it at once keep the first.
    static func secret(_ database: any SQLDatabase, unlock: VaultUnlock) async throws -> [UInt8] {
        let query = "SELECT value FROM shadow_session_meta WHERE name = 'secret'"
        var stored = try await database.read(query).first?.blob("value")
        if stored == nil {
            let fresh = try SealedStoreSecret.create(unlock: unlock, purpose: .sessions)
            _ = try await database.write(
                "INSERT INTO shadow_session_meta (name, value) VALUES ('secret', ?) ON CONFLICT (name) DO NOTHING",
                .blob(fresh.stored))
            stored = try await database.read(query).first?.blob("value")
        }
        guard let stored else { throw SessionError(.corrupted, "the session secret row is missing") }
        return try SealedStoreSecret.open(stored, unlock: unlock, purpose: .sessions)
    }

    public func sessionSecret() async throws -> [UInt8] { secret }

    /// Rows written before rows had MACs get theirs, in one transaction, once (meta `row_macs`);
    /// from then on a row without a MAC is refused like an edited one.
    func upgradeRows() async throws {
        let done = "SELECT value FROM shadow_session_meta WHERE name = 'row_macs'"
        guard try await database.read(done).isEmpty else { return }
        try await database.transaction { [self] transaction in
            guard try await transaction.run(done).isEmpty else { return }
            for row in try await transaction.run("SELECT \(Self.sessionColumns) FROM shadow_sessions WHERE mac IS NULL")
            {
                let session = try sessionRow(row, verify: false)
                _ = try await transaction.run(
                    "UPDATE shadow_sessions SET mac = ? WHERE id = ? AND mac IS NULL", .blob(mac(session)),
                    .blob(session.id.bytes))
            }
            for row in try await transaction.run(
                "SELECT \(Self.userColumns) FROM shadow_session_users WHERE mac IS NULL")
            {
                let user = try userRow(row, verify: false)
                _ = try await transaction.run(
                    "UPDATE shadow_session_users SET mac = ? WHERE apple = ? AND mac IS NULL", .blob(mac(user)),
                    .blob(user.apple))
            }
            _ = try await transaction.run(
                "INSERT INTO shadow_session_meta (name, value) VALUES ('row_macs', ?) ON CONFLICT (name) DO NOTHING",
                .blob(Array("1".utf8)))
        }
    }

    // MARK: Row MACs

    static let sessionLabel = Array("shadow-keys session v1 row".utf8)
    static let userLabel = Array("shadow-keys session v1 user".utf8)

    /// HMAC-SHA-256(row key, "shadow-keys session v1 row" ‖ id (16) ‖ user (16) ‖ generation (8)
    /// ‖ rotated (8) ‖ created (8) ‖ used (8) ‖ expires (8) ‖ revoked flag (1) ‖ revoked (8, 0 when
    /// live) ‖ device length (2) ‖ device (UTF-8) [‖ 0x01 ‖ DPoP key thumbprint (32), for a bound
    /// session]); integers big-endian, times as signed 64-bit.
    func mac(_ row: SessionRow) -> [UInt8] {
        var input = Self.sessionLabel + row.id.bytes + row.user.bytes16 + BigEndian.bytes(row.generation)
        for time in [row.rotatedAt, row.createdAt, row.lastUsedAt, row.expiresAt] {
            input += BigEndian.bytes(UInt64(bitPattern: time))
        }
        input += [row.revokedAt == nil ? 0 : 1] + BigEndian.bytes(UInt64(bitPattern: row.revokedAt ?? 0))
        let device = Array(row.device.utf8)
        input += [UInt8(device.count >> 8), UInt8(device.count & 0xFF)] + device
        if let thumbprint = row.keyThumbprint.flatMap(SessionRow.thumbprintBytes) { input += [1] + thumbprint }
        return Array(HMAC<SHA256>.authenticationCode(for: input, using: keys.row))
    }

    /// A user row as stored: the Apple hash, the user, and what the MAC covers.
    struct StoredUser {
        let apple: [UInt8]
        var user: SessionUser
        var mac: [UInt8]
    }

    /// HMAC-SHA-256(row key, "shadow-keys session v1 user" ‖ Apple hash (32) ‖ user (16) ‖
    /// inactive (1) ‖ checked (8)). The sealed Apple refresh token is bound to the user by its own AAD.
    func mac(_ row: StoredUser) -> [UInt8] {
        let input =
            Self.userLabel + row.apple + row.user.id.bytes16 + [row.user.inactive ? 1 : 0]
            + BigEndian.bytes(UInt64(bitPattern: row.user.checkedAt))
        return Array(HMAC<SHA256>.authenticationCode(for: input, using: keys.row))
    }

    func verified(_ expected: [UInt8], _ stored: [UInt8]?, _ what: String) throws {
        guard let stored, ConstantTime.equals(expected, stored) else {
            throw SessionError(.corrupted, "\(what) does not match its MAC: it was edited, or written without the key")
        }
    }

    // MARK: Users

    static let userColumns = #"apple, "user", apple_refresh, inactive, checked_ms, mac"#

    func userRow(_ row: SQLRow, verify: Bool = true) throws -> StoredUser {
        guard let apple = row.blob("apple"), apple.count == 32,
            let id = row.blob("user").flatMap(UUID.init(bytes16:)), let inactive = row.integer("inactive"),
            inactive == 0 || inactive == 1, let checked = row.integer("checked_ms")
        else { throw SessionError(.corrupted, "a user row is malformed") }
        let stored = StoredUser(
            apple: apple,
            user: SessionUser(
                id: id, sealedAppleRefreshToken: row.blob("apple_refresh"), inactive: inactive != 0,
                checkedAt: checked),
            mac: row.blob("mac") ?? [])
        if verify { try verified(mac(stored), row.blob("mac"), "a user row") }
        return stored
    }

    public func user(appleHash: [UInt8]) async throws -> SessionUser? {
        try await Self.storing {
            try await database.read(
                "SELECT \(Self.userColumns) FROM shadow_session_users WHERE apple = ?", .blob(appleHash)
            )
            .first.map { try userRow($0).user }
        }
    }

    func storedUser(_ user: UUID) async throws -> StoredUser? {
        try await database.read(
            #"SELECT \#(Self.userColumns) FROM shadow_session_users WHERE "user" = ?"#, .blob(user.bytes16)
        ).first.map { try userRow($0) }
    }

    public func mapUser(
        appleHash: [UInt8], candidate: UUID, sealedAppleRefreshToken: [UInt8]?, now: Int64
    ) async throws -> UUID {
        try await Self.storing {
            let fresh = StoredUser(
                apple: appleHash,
                user: SessionUser(id: candidate, sealedAppleRefreshToken: nil, inactive: false, checkedAt: now), mac: []
            )
            let rows = try await database.write(
                """
                INSERT INTO shadow_session_users (apple, "user", apple_refresh, inactive, checked_ms, mac) VALUES \
                (?, ?, ?, 0, ?, ?) ON CONFLICT (apple) DO UPDATE SET apple_refresh = coalesce(excluded.apple_refresh, \
                shadow_session_users.apple_refresh) WHERE shadow_session_users."user" = excluded."user" RETURNING "user"
                """,
                .blob(appleHash), .blob(candidate.bytes16), .optional(sealedAppleRefreshToken), .integer(now),
                .blob(mac(fresh)))
            if let user = rows.first?.blob("user").flatMap(UUID.init(bytes16:)) { return user }
            guard let existing = try await user(appleHash: appleHash) else {
                throw SessionError(.corrupted, "a user mapping vanished while it was written")
            }
            return existing.id
        }
    }

    public func moveUser(from oldHash: [UInt8], to newHash: [UInt8]) async throws -> Bool {
        try await Self.storing {
            for _ in 0..<5 {
                guard
                    let row = try await database.read(
                        "SELECT \(Self.userColumns) FROM shadow_session_users WHERE apple = ?", .blob(oldHash)
                    ).first.map({ try userRow($0) }),
                    try await user(appleHash: newHash) == nil
                else { return false }
                let moved = StoredUser(apple: newHash, user: row.user, mac: [])
                // One statement: the row still as read, and the new hash still free.
                let changed = try await database.write(
                    """
                    UPDATE shadow_session_users SET apple = ?, mac = ? WHERE apple = ? AND mac = ? AND NOT EXISTS \
                    (SELECT 1 FROM shadow_session_users WHERE apple = ?) RETURNING apple
                    """, .blob(newHash), .blob(mac(moved)), .blob(oldHash), .blob(row.mac), .blob(newHash))
                if !changed.isEmpty { return true }
            }
            throw SessionError(.invalidGrant, "the user's row kept changing; try again")
        }
    }

    public func usersDue(
        checkedBefore before: Int64, limit: Int
    ) async throws -> (due: [SessionUser], edited: [UUID]) {
        try await Self.storing {
            var due: [SessionUser] = [], edited: [UUID] = []
            for record in try await database.read(Self.usersDueSQL, .integer(before), .integer(limit)) {
                if let row = try? userRow(record) {
                    due.append(row.user)
                    continue
                }
                guard let apple = record.blob("apple") else { throw SessionError(.corrupted, "a user row has no key") }
                _ = try await database.write(
                    "UPDATE shadow_session_users SET inactive = 1 WHERE apple = ? AND inactive = 0", .blob(apple))
                if let user = record.blob("user").flatMap(UUID.init(bytes16:)) { edited.append(user) }
            }
            return (due, edited)
        }
    }

    public func moveCheckedTime(user: UUID, from: Int64, to: Int64) async throws -> Bool {
        try await Self.storing {
            guard var row = try await storedUser(user), row.user.checkedAt == from, !row.user.inactive else {
                return false
            }
            let old = row.mac
            row.user = SessionUser(
                id: user, sealedAppleRefreshToken: row.user.sealedAppleRefreshToken, inactive: false, checkedAt: to)
            return try await !database.write(
                """
                UPDATE shadow_session_users SET checked_ms = ?, mac = ? WHERE apple = ? AND mac = ? AND checked_ms = ? \
                RETURNING apple
                """, .integer(to), .blob(mac(row)), .blob(row.apple), .blob(old), .integer(from)
            ).isEmpty
        }
    }

    @discardableResult
    public func markChecked(
        user: UUID, at: Int64, inactive: Bool, ifAppleRefreshToken checked: [UInt8]?
    )
        async throws -> Bool
    {
        try await Self.storing {
            for _ in 0..<5 {
                guard var row = try await storedUser(user) else { return false }
                // A sign-in stores its Apple refresh token without touching the MAC, so the
                // token is compared in the statement too.
                if let checked, row.user.sealedAppleRefreshToken != checked { return false }
                let old = row.mac
                row.user = SessionUser(
                    id: user, sealedAppleRefreshToken: row.user.sealedAppleRefreshToken, inactive: inactive,
                    checkedAt: at)
                var arguments: [SQLValue] = [
                    .integer(at), .integer(inactive ? 1 : 0), .blob(mac(row)), .blob(row.apple), .blob(old),
                ]
                if let checked { arguments.append(.blob(checked)) }
                let changed = try await database.write(
                    """
                    UPDATE shadow_session_users SET checked_ms = ?, inactive = ?, mac = ? WHERE apple = ? AND mac = ?\
                    \(checked == nil ? "" : " AND apple_refresh = ?") RETURNING apple
                    """, arguments)
                if !changed.isEmpty { return true }
            }
            throw SessionError(.invalidGrant, "the user's row kept changing; try again")
        }
    }

    public func isInactive(user: UUID) async throws -> Bool {
        try await Self.storing { try await storedUser(user)?.user.inactive ?? false }
    }

    // MARK: Sessions

    static let sessionColumns =
        #"id, "user", generation, rotated_ms, created_ms, used_ms, expires_ms, revoked_ms, device, mac, jkt"#

    func sessionRow(_ row: SQLRow, verify: Bool = true) throws -> SessionRow {
        guard let id = row.blob("id").flatMap(SessionID.init(bytes:)),
            let user = row.blob("user").flatMap(UUID.init(bytes16:)), let generation = row.integer("generation"),
            generation >= 1, let rotated = row.integer("rotated_ms"), let created = row.integer("created_ms"),
            let used = row.integer("used_ms"), let expires = row.integer("expires_ms"), let device = row.text("device")
        else { throw SessionError(.corrupted, "a session row is malformed") }
        var thumbprint: String?
        if let bytes = row.blob("jkt") {
            guard bytes.count == 32 else {
                throw SessionError(.corrupted, "session \(id)'s key thumbprint is malformed")
            }
            thumbprint = Base64URL.encode(bytes)
        }
        var session = SessionRow(
            id: id, user: user, generation: UInt64(generation), rotatedAt: rotated, createdAt: created,
            lastUsedAt: used, expiresAt: expires, revokedAt: row.integer("revoked_ms"), device: device,
            keyThumbprint: thumbprint)
        if verify { try verified(mac(session), row.blob("mac"), "session \(id)'s row") }
        session.mac = row.blob("mac") ?? []
        return session
    }

    public func insertSession(_ row: SessionRow) async throws {
        // A bound row whose thumbprint cannot be stored is refused, never stored unbound.
        if let thumbprint = row.keyThumbprint, SessionRow.thumbprintBytes(thumbprint) == nil {
            throw SessionError(.invalidParameter, "a key thumbprint is 32 bytes, base64url")
        }
        try await Self.storing {
            _ = try await database.write(
                """
                INSERT INTO shadow_sessions (\(Self.sessionColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON \
                CONFLICT (id) DO NOTHING
                """,
                .blob(row.id.bytes), .blob(row.user.bytes16), .integer(Int64(row.generation)),
                .integer(row.rotatedAt), .integer(row.createdAt), .integer(row.lastUsedAt), .integer(row.expiresAt),
                .optional(row.revokedAt), .text(row.device), .blob(mac(row)),
                .optional(row.keyThumbprint.flatMap(SessionRow.thumbprintBytes)))
        }
    }

    public func session(_ id: SessionID) async throws -> SessionRow? {
        let read = Self.sessionRead(id)
        return try await Self.storing {
            try await database.read(read.sql, read.values).first.map { try sessionRow($0) }
        }
    }

    /// The one session's read (``session(_:)``, and the admission's with it).
    static func sessionRead(_ id: SessionID) -> SQLStatement {
        SQLStatement("SELECT \(sessionColumns) FROM shadow_sessions WHERE id = ?", [.blob(id.bytes)])
    }

    /// Replaces `old` (as read) with `new` in one statement, only if the row is still as read:
    /// its stored MAC is the one read. True when this call changed it. Every rotation runs it,
    /// so PostgreSQL has it prepared (``SQLDatabase/writeCount(_:_:)``).
    func replace(_ old: SessionRow, with new: SessionRow, onlyLive: Bool) async throws -> Bool {
        try await database.writeCount(
            """
            UPDATE shadow_sessions SET generation = ?, rotated_ms = ?, used_ms = ?, revoked_ms = ?, mac = ? WHERE id \
            = ? AND mac = ?\(onlyLive ? " AND revoked_ms IS NULL" : "") RETURNING id
            """,
            [
                .integer(Int64(new.generation)), .integer(new.rotatedAt), .integer(new.lastUsedAt),
                .optional(new.revokedAt), .blob(mac(new)), .blob(old.id.bytes), .blob(old.mac),
            ]) > 0
    }

    /// The rotation's compare-and-set: the generation as read becomes the next, issued and used
    /// at `now`, only when the row is unchanged and live (Docs/sessions.md, "Refresh tokens").
    public func rotate(_ row: SessionRow, now: Int64) async throws -> Bool {
        try await Self.storing {
            guard row.revokedAt == nil, !row.mac.isEmpty else { return false }
            var next = row
            next.generation += 1
            next.rotatedAt = now
            next.lastUsedAt = now
            return try await replace(row, with: next, onlyLive: true)
        }
    }

    public func touch(_ row: SessionRow, now: Int64) async throws -> Bool {
        try await Self.storing {
            guard row.revokedAt == nil, !row.mac.isEmpty else { return false }
            var used = row
            used.lastUsedAt = max(now, row.lastUsedAt)
            return try await replace(row, with: used, onlyLive: true)
        }
    }

    /// Revokes a row as read, re-reading it when another writer changed it first. True when this
    /// call revoked it.
    func revoke(_ read: SessionRow, now: Int64) async throws -> Bool {
        var row = read
        for _ in 0..<5 {
            guard row.revokedAt == nil else { return false }
            var revoked = row
            revoked.revokedAt = now
            if try await replace(row, with: revoked, onlyLive: true) { return true }
            guard let again = try await session(row.id) else { return false }
            row = again
        }
        throw SessionError(.invalidGrant, "the session kept changing; try again")
    }

    public func revoke(_ id: SessionID, now: Int64) async throws -> Bool {
        try await Self.storing {
            guard let row = try await session(id) else { return false }
            return try await revoke(row, now: now)
        }
    }

    /// Revokes in pages of 1,000, oldest first, until no live session opened before the bound is
    /// left: each page's rows are revoked (or found revoked) before the next is read, so every
    /// page makes progress. The bound is at most `now` + 1 ms, so sign-ins after the call do not
    /// keep it going. A malformed row, or one whose MAC does not match, is revoked too (revoking
    /// grants nothing), and the call then throws ``SessionErrorCode/corrupted`` saying how many.
    public func revokeAll(user: UUID, openedBefore: Int64, now: Int64) async throws -> Int {
        try await Self.storing {
            let bound = min(openedBefore, now == .max ? now : now + 1)
            var count = 0, tampered = 0
            while true {
                let page = try await database.read(
                    #"""
                    SELECT \#(Self.sessionColumns) FROM shadow_sessions WHERE "user" = ? AND revoked_ms IS NULL AND \#
                    created_ms < ? ORDER BY created_ms LIMIT 1000
                    """#, .blob(user.bytes16), .integer(bound)
                )
                if page.isEmpty { break }
                for record in page {
                    if let row = try? sessionRow(record) {
                        if try await revoke(row, now: now) { count += 1 }
                    } else {
                        tampered += 1
                        if try await revokeAsItStands(record, now: now) { count += 1 }
                    }
                }
            }
            if tampered > 0 {
                throw SessionError(
                    .corrupted,
                    "\(tampered) of user \(user)'s session rows were malformed or did not match their MAC "
                        + "(they are revoked with the rest)")
            }
            return count
        }
    }

    /// Marks a row that does not read (malformed, or not matching its MAC) revoked as it stands:
    /// its MAC left unmatched, so the edit stays visible and the row stays dead. True when it was
    /// live.
    func revokeAsItStands(_ record: SQLRow, now: Int64) async throws -> Bool {
        guard let id = record.blob("id") else { throw SessionError(.corrupted, "a session row has no ID") }
        return try await !database.write(
            "UPDATE shadow_sessions SET revoked_ms = ? WHERE id = ? AND revoked_ms IS NULL RETURNING id",
            .integer(now), .blob(id)
        ).isEmpty
    }

    public func sessions(user: UUID) async throws -> [SessionRow] {
        try await Self.storing {
            try await database.read(
                #"""
                SELECT \#(Self.sessionColumns) FROM shadow_sessions WHERE "user" = ? ORDER BY created_ms DESC LIMIT 1000
                """#, .blob(user.bytes16)
            ).map { try sessionRow($0) }
        }
    }

    /// One batch of the sweep: in each table not at its end, the next `limit` rows in key order
    /// examined, and the dead among them deleted. Two short statements per table, however large
    /// the table: the key `limit` rows on (a read of the primary key's index), then a delete in
    /// the key range up to it. A delete that found its victims by their times alone would scan
    /// every live row of a table with few dead ones, holding SQLite's write lock for as long.
    /// Instances sweeping at once on PostgreSQL take different rows (`SKIP LOCKED`).
    public func deleteDead(
        expiredBefore: Int64, idleBefore: Int64, examining limit: Int, from position: SweepPosition
    ) async throws -> (deleted: SweptRows, next: SweepPosition) {
        guard limit > 0 else { throw SessionError(.invalidParameter, "a sweep batch examines at least one row") }
        return try await Self.storing {
            var next = position
            let sessions = try await sweep(
                "shadow_sessions", key: "id", dead: "(revoked_ms IS NOT NULL OR expires_ms < ? OR used_ms < ?)",
                [.integer(expiredBefore), .integer(idleBefore)], limit: limit, cursor: &next.sessions)
            let rateLimits = try await sweep(
                "shadow_rate_limits", key: "key", dead: "tat_ms < ?", [.integer(expiredBefore)], limit: limit,
                cursor: &next.rateLimits)
            let proofs = try await sweep(
                "shadow_dpop_proofs", key: "key", dead: "expires_ms < ?", [.integer(expiredBefore)], limit: limit,
                cursor: &next.proofs)
            return (SweptRows(sessions: sessions, rateLimits: rateLimits, proofs: proofs), next)
        }
    }

    /// One table's part of a sweep batch (`table`, `key` and `dead` are SQL of ours, never a
    /// value): the rows from `cursor` up to `limit` on examined, the dead deleted; `cursor` moves
    /// past them, to the end when fewer than `limit` were left. Returns how many it deleted.
    private func sweep(
        _ table: String, key: String, dead: String, _ values: [SQLValue], limit: Int, cursor: inout SweepCursor
    ) async throws -> Int {
        let after: [UInt8]?
        switch cursor {
        case .end: return 0
        case .start: after = nil
        case .after(let key): after = key
        }
        let from = after.map { [SQLValue.blob($0)] } ?? []
        let start = after == nil ? "" : " WHERE \(key) > ?"
        let last = try await database.read(
            "SELECT \(key) AS k FROM \(table)\(start) ORDER BY \(key) LIMIT 1 OFFSET ?",
            from + [.integer(Int64(limit - 1))]
        ).first.map { row -> [UInt8] in
            guard let value = row.blob("k") else {
                throw SessionError(.corrupted, "\(table) holds a row whose key is not a blob")
            }
            return value
        }
        var range: [String] = []
        if after != nil { range.append("\(key) > ?") }
        if last != nil { range.append("\(key) <= ?") }
        let bounds = from + (last.map { [SQLValue.blob($0)] } ?? [])
        let condition = (range + [dead]).joined(separator: " AND ")
        let victims =
            database.dialect == .postgres
            ? "\(key) IN (SELECT \(key) FROM \(table) WHERE \(condition) FOR UPDATE SKIP LOCKED)" : condition
        let sql = "DELETE FROM \(table) WHERE \(victims) RETURNING \(key)"
        let deleted = try await database.write(sql, bounds + values).count
        cursor = last.map { .after($0) } ?? .end
        return deleted
    }

    // MARK: Signing keys

    static let keyColumns = "kid, alg, sealed, created_ms, activates_ms, retired_ms"

    public func signingKeys() async throws -> [StoredSigningKey] {
        try await Self.storing {
            try await database.read("SELECT \(Self.keyColumns) FROM shadow_session_keys ORDER BY created_ms").map {
                row in
                guard let kid = row.text("kid"), let alg = row.text("alg"), let sealed = row.blob("sealed"),
                    let created = row.integer("created_ms"), let activates = row.integer("activates_ms")
                else { throw SessionError(.corrupted, "a signing-key row is malformed") }
                return StoredSigningKey(
                    keyID: kid, algorithm: alg, sealedPrivateKey: sealed, createdAt: created, activatesAt: activates,
                    retiredAt: row.integer("retired_ms"))
            }
        }
    }

    static func keyValues(_ key: StoredSigningKey) -> [SQLValue] {
        [
            .text(key.keyID), .text(key.algorithm), .blob(key.sealedPrivateKey), .integer(key.createdAt),
            .integer(key.activatesAt), .optional(key.retiredAt),
        ]
    }

    public func insertSigningKey(_ key: StoredSigningKey) async throws {
        try await Self.storing {
            _ = try await database.write(
                """
                INSERT INTO shadow_session_keys (\(Self.keyColumns)) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (kid) DO \
                NOTHING
                """,
                Self.keyValues(key))
        }
    }

    /// The first key, inserted only into an empty ring, in one transaction that holds the ring
    /// (PostgreSQL locks the table; SQLite's transaction is its one writer).
    public func insertFirstSigningKey(_ key: StoredSigningKey) async throws -> Bool {
        let postgres = database.dialect == .postgres
        return try await Self.storing {
            try await database.transaction { transaction in
                if postgres {
                    _ = try await transaction.run("LOCK TABLE shadow_session_keys IN SHARE ROW EXCLUSIVE MODE")
                }
                return try await !transaction.run(
                    """
                    INSERT INTO shadow_session_keys (\(Self.keyColumns)) SELECT ?, ?, ?, ?, ?, ? WHERE NOT EXISTS \
                    (SELECT 1 FROM shadow_session_keys) RETURNING kid
                    """, Self.keyValues(key)
                ).isEmpty
            }
        }
    }

    public func retireSigningKey(_ keyID: String, at: Int64) async throws {
        try await Self.storing {
            _ = try await database.write(
                "UPDATE shadow_session_keys SET retired_ms = ? WHERE kid = ? AND retired_ms IS NULL", .integer(at),
                .text(keyID))
        }
    }

    public func deleteSigningKey(_ keyID: String) async throws {
        try await Self.storing {
            _ = try await database.write("DELETE FROM shadow_session_keys WHERE kid = ?", .text(keyID))
        }
    }

    // MARK: DPoP proofs

    /// The replay check of a DPoP proof in one statement (Docs/dpop.md, "Replay"): the key is
    /// inserted, or an expired row of it renewed; no row back means it was seen and is still live.
    public func firstUse(of key: [UInt8], until expiresAt: Int64, now: Int64) async throws -> Bool {
        try await Self.storing {
            try await !database.write(Self.firstUseStatement(DPoPReplayEntry(key: key, expiresAt: expiresAt, now: now)))
                .isEmpty
        }
    }

    static func firstUseStatement(_ step: DPoPReplayEntry) -> SQLStatement {
        SQLStatement(
            """
            INSERT INTO shadow_dpop_proofs (key, expires_ms) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET \
            expires_ms = excluded.expires_ms WHERE shadow_dpop_proofs.expires_ms < ? RETURNING key
            """, [.blob(step.key), .integer(step.expiresAt), .integer(step.now)])
    }

    // MARK: Rate limits

    /// GCRA in one statement (Docs/sessions.md, "Rate limits"): the key's theoretical arrival
    /// time moves to max(tat, now) + T when max(tat, now) − now ≤ τ; no row back means refused.
    /// Written as ``admit(_:replay:)`` writes its steps, so its commit waits for no flush either.
    public func rateLimit(key: [UInt8], now: Int64, interval: Int64, tolerance: Int64) async throws -> Int64? {
        let step = RateLimitStep(key: key, now: now, interval: interval, tolerance: tolerance)
        // One step, one answer; none would be the store's fault, and is never an admission.
        guard let answer = await admit([step], replay: nil).limits.first else {
            throw SessionError(.unavailable, "the store gave no answer to a rate-limit step")
        }
        return try answer.get()
    }

    /// The GCRA step's statement. max(tat, now) − now ≤ τ is tat ≤ now + τ, since τ ≥ 0 (a step
    /// is checked before its statement is made): one comparison for the engine to compile and run
    /// instead of two `CASE` expressions. SQLite's driver compiles each statement anew: through it,
    /// the step takes 51.5 µs against 56.9 µs, and the plainest upsert of the row 51.3 µs
    /// (`Scripts/bench sessions`).
    static func rateLimitStatement(_ step: RateLimitStep, dialect: SQLDialect) -> SQLStatement {
        let greater = dialect == .postgres ? "GREATEST" : "max"
        return SQLStatement(
            """
            INSERT INTO shadow_rate_limits (key, tat_ms) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET tat_ms = \
            \(greater)(shadow_rate_limits.tat_ms, ?) + ? WHERE shadow_rate_limits.tat_ms <= ? RETURNING tat_ms
            """,
            [
                .blob(step.key), .integer(step.now + step.interval), .integer(step.now), .integer(step.interval),
                .integer(step.now + step.tolerance),
            ])
    }

    /// Nil for an allowed step; for a refused one, the time (ms) at which a request would be.
    private func refusal(_ step: RateLimitStep, allowed: Bool) async throws -> Int64? {
        guard !allowed else { return nil }
        let tat = try await database.read("SELECT tat_ms FROM shadow_rate_limits WHERE key = ?", .blob(step.key))
            .first?.integer("tat_ms")
        return (tat ?? step.now) - step.tolerance
    }

    /// The limits' statements and the proof's in one hand-over to the store (one group commit
    /// in SQLite), each answered as on its own.
    public func admit(
        _ limits: [RateLimitStep], replay: DPoPReplayEntry?
    ) async -> (limits: [Result<Int64?, any Error>], replay: Result<Bool, any Error>?) {
        let answers = await admit(limits, replay: replay, reading: nil)
        return (answers.limits, answers.replay)
    }

    /// ``admit(_:replay:)`` with the session's read in the same hand-over: on PostgreSQL a part
    /// of the steps' one statement, on SQLite a statement of their group commit. The row is read
    /// as it stood before the steps, which never touch it.
    public func admit(
        _ limits: [RateLimitStep], replay: DPoPReplayEntry?, reading session: SessionID
    ) async -> (
        limits: [Result<Int64?, any Error>], replay: Result<Bool, any Error>?, session: Result<SessionRow?, any Error>
    ) {
        let answers = await admit(limits, replay: replay, reading: Optional(session))
        return (answers.limits, answers.replay, answers.session ?? .success(nil))
    }

    private func admit(
        _ limits: [RateLimitStep], replay: DPoPReplayEntry?, reading session: SessionID?
    ) async -> (
        limits: [Result<Int64?, any Error>], replay: Result<Bool, any Error>?, session: Result<SessionRow?, any Error>?
    ) {
        if let wrong = limits.first(where: { !$0.isInRange }) {
            let error = SessionError(
                .invalidParameter,
                "a rate-limit step has a time of 0 to \(RateLimitStep.latest) ms, an interval of 1 to "
                    + "\(RateLimitStep.longestInterval) ms and a tolerance of 0 to "
                    + "\(RateLimitStep.longestTolerance) ms (this one: \(wrong.now), \(wrong.interval), "
                    + "\(wrong.tolerance))")
            return (
                limits.map { _ in .failure(error) }, replay.map { _ in .failure(error) },
                session.map { _ in .failure(error) }
            )
        }
        var statements = limits.map { Self.rateLimitStatement($0, dialect: database.dialect) }
        if let replay { statements.append(Self.firstUseStatement(replay)) }
        let read = session.map(Self.sessionRead)
        let results = await took(statements, reading: read, together: Set(limits.map(\.key)).count == limits.count)
        var answers: [Result<Int64?, any Error>] = []
        for (step, result) in zip(limits, results.writes) {
            do {
                answers.append(.success(try await Self.storing { try await refusal(step, allowed: result.get()) }))
            } catch {
                answers.append(.failure(error))
            }
        }
        let spent = replay == nil ? nil : results.writes.last.map { $0.mapError(Self.sessionError) }
        let row = results.read.map { read in
            Result { try read.get().first.map { try sessionRow($0) } }.mapError(Self.sessionError)
        }
        return (answers, spent, row)
    }

    /// Whether each statement took effect (returned a row), and the rows of `reading`. SQLite
    /// queues them all for one group commit. On PostgreSQL, when they write different keys
    /// (`together`), they are one statement, each a data-modifying `WITH` part and the read a
    /// plain one: one round trip and one commit, and they succeed or fail together. (The parts
    /// of one statement do not see each other's effects, so steps that share a key are
    /// statements of their own.)
    ///
    /// That commit does not wait for its flush to disk (`synchronous_commit` off for its
    /// transaction alone, Docs/sessions.md, "Rate limits"): the rows become durable with the next
    /// durable commit on the server, such as the refresh's rotation that follows them in the
    /// log, or within three WAL-writer delays. A crash of the database server can lose the counts
    /// and replay rows of its last moments, and never a session's change; a request no longer
    /// waits for a disk flush of its rate limits before its own.
    private func took(
        _ statements: [SQLStatement], reading: SQLStatement?, together: Bool
    ) async -> (writes: [Result<Bool, any Error>], read: Result<[SQLRow], any Error>?) {
        guard database.dialect == .postgres else {
            var results = await database.writeEach(statements + (reading.map { [$0] } ?? []))
            let read = reading == nil ? nil : results.popLast()
            return (results.map { $0.map { !$0.isEmpty } }, read)
        }
        guard together, !statements.isEmpty else {
            let writes = await database.writeEach(statements).map { $0.map { !$0.isEmpty } }
            guard let reading else { return (writes, nil) }
            do {
                return (writes, .success(try await database.read(reading.sql, reading.values)))
            } catch {
                return (writes, .failure(error))
            }
        }
        var parts = statements.indices.map { "w\($0) AS (\(statements[$0].sql))" }
        let counts = statements.indices.map { "(SELECT count(*) FROM w\($0)) AS n\($0)" }
        var from = ""
        if let reading {
            // The read's columns beside the counts: none (all NULL) when it finds no row.
            parts.append("r AS (\(reading.sql))")
            from = " FROM (VALUES (0)) AS one (x) LEFT JOIN r ON true"
        }
        let deferred = "flush AS (SELECT set_config('synchronous_commit', 'off', true) AS setting)"
        do {
            let row = try await database.write(
                "WITH " + ([deferred] + parts).joined(separator: ", ") + " SELECT "
                    + (["(SELECT count(*) FROM flush) AS deferred"] + counts + (reading == nil ? [] : ["r.*"]))
                    .joined(separator: ", ") + from,
                statements.flatMap(\.values) + (reading?.values ?? [])
            ).first
            let writes = statements.indices.map { Result<Bool, any Error>.success((row?.integer("n\($0)") ?? 0) > 0) }
            guard reading != nil else { return (writes, nil) }
            return (writes, .success(row.flatMap { $0.blob("id") == nil ? nil : [$0] } ?? []))
        } catch {
            return (Array(repeating: .failure(error), count: statements.count), reading.map { _ in .failure(error) })
        }
    }
}
