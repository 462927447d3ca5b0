import ShadowCore
package import ShadowStorage
package import ShadowVault
import Synchronization

/// An operation log in a database, SQLite or PostgreSQL (Docs/operation-log.md, "SQLite and
/// PostgreSQL"), its rules written once over the row seam (`SQLDatabase`): set-up and the
/// default origin, the append with its frontier and signed checkpoint, the pruned boundary, the
/// reads. Writers in every process append one after another: SQLite's write transaction is its
/// one writer; PostgreSQL's first locks the meta row `writer`. An append is tried once (one whose
/// COMMIT answer was lost may have committed, and could otherwise be appended twice).
public final class DatabaseLogStorage: LogStorage {
    public let origin: String
    public let keys: LogKeys
    let database: any SQLDatabase
    let signer: NoteSigner
    let verifier: NoteVerifier
    /// Closes the database, when the log opened it itself (a shared handle stays open).
    let closing: (@Sendable () async -> Void)?
    /// The checkpoint row this process last wrote or checked, and the tree's right edge under it:
    /// while the row is byte for byte the same, the next batch skips re-reading both.
    private let lastWrite = Mutex<(note: [UInt8], frontier: TreeFrontier, pruned: UInt64)?>(nil)

    /// The most entries a log holds: node IDs keep the level in their top 8 bits.
    public static let maxSize: UInt64 = 1 << 48

    static let entityIndex = """
        CREATE INDEX IF NOT EXISTS shadow_oplog_entity ON shadow_oplog_entries (entity) WHERE entity IS NOT NULL
        """

    /// The table set's migrations (`shadow_migrations`, set `oplog`).
    static let migrations = [
        Migration(
            1, "tables",
            sqlite: [
                """
                CREATE TABLE IF NOT EXISTS shadow_oplog_meta (name TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT \
                ROWID
                """,
                """
                CREATE TABLE IF NOT EXISTS shadow_oplog_entries (idx INTEGER PRIMARY KEY, leaf BLOB NOT NULL, entity \
                BLOB, body BLOB)
                """,
                entityIndex,
                "CREATE TABLE IF NOT EXISTS shadow_oplog_nodes (id INTEGER PRIMARY KEY, hash BLOB NOT NULL)",
            ],
            postgres: [
                "CREATE TABLE IF NOT EXISTS shadow_oplog_meta (name text PRIMARY KEY, value bytea NOT NULL)",
                """
                CREATE TABLE IF NOT EXISTS shadow_oplog_entries (idx bigint PRIMARY KEY, leaf bytea NOT NULL, entity \
                bytea, body bytea)
                """,
                entityIndex,
                "CREATE TABLE IF NOT EXISTS shadow_oplog_nodes (id bigint PRIMARY KEY, hash bytea NOT NULL)",
                """
                INSERT INTO shadow_oplog_meta (name, value) VALUES ('writer', ''::bytea) ON CONFLICT (name) DO \
                NOTHING
                """,
            ])
    ]

    private init(
        database: any SQLDatabase, origin: String, keys: LogKeys, closing: (@Sendable () async -> Void)?
    ) throws {
        self.database = database
        self.origin = origin
        self.keys = keys
        signer = try keys.signer(origin: origin)
        verifier = signer.verifier
        self.closing = closing
    }

    /// Closes the database when the log opened it; a handle shared with other features stays open.
    public func close() async { await closing?() }

    /// Opens the log in `database`: with `create`, migrates its tables and makes its secret and
    /// origin (`origin`, or `oplog.shadow-keys.invalid/` and 16 random hex digits) when it has none.
    /// - Throws: ``LogErrorCode/notFound`` (no log, and `create` off); ``LogErrorCode/wrongKey``;
    ///   ``LogErrorCode/notALog`` (another version's tables, or a file that is no database);
    ///   ``LogErrorCode/tampered``; ``LogErrorCode/unavailable``; ``LogErrorCode/lockTimeout``.
    package static func open(
        _ database: any SQLDatabase, unlock: VaultUnlock, create: Bool, origin given: String?,
        closing: (@Sendable () async -> Void)? = nil
    ) async throws -> DatabaseLogStorage {
        do {
            let (secret, origin) = try await setUp(database, unlock: unlock, create: create, origin: given)
            return try DatabaseLogStorage(
                database: database, origin: origin, keys: try LogKeys(secret: secret), closing: closing)
        } catch {
            await closing?()
            throw error
        }
    }

    /// Runs `body`, reporting the database's failures as ``LogError``s.
    static func storing<R>(opening: Bool = false, _ body: () async throws -> R) async throws -> R {
        do { return try await body() } catch let error as StorageError {
            throw LogError(storeFailure: error, opening: opening)
        }
    }

    static func setUp(
        _ database: any SQLDatabase, unlock: VaultUnlock, create: Bool, origin given: String?
    ) async throws -> (secret: [UInt8], origin: String) {
        let meta = try await storing(opening: true) { () -> [String: [UInt8]] in
            let exists = try await database.read(
                database.dialect == .sqlite
                    ? "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'shadow_oplog_meta'"
                    : "SELECT 1 WHERE to_regclass('shadow_oplog_meta') IS NOT NULL")
            guard create || !exists.isEmpty else {
                throw LogError(.notFound, "\(database.locationDescription) holds no operation log")
            }
            if create { try await Migrator.migrate(database, tableSet: "oplog", migrations) }
            var meta = try await readMeta(database)
            guard meta["secret"] == nil else { return meta }
            guard create else { throw LogError(.notFound, "\(database.locationDescription) holds no operation log") }
            let origin =
                given ?? "oplog.shadow-keys.invalid/"
                + Hex.encode(SecretBytes.random(count: 8).withUnsafeBytes { Array($0) })
            _ = try Checkpoint(origin: origin, size: 0, root: .empty)
            _ = try NoteSigner(name: origin, seed: [UInt8](repeating: 0, count: 32))
            let sealed = try SealedStoreSecret.create(unlock: unlock, purpose: .operationLog).stored
            // Two processes may create it at once: the first commit wins, the other reads it.
            meta = try await database.transaction { transaction in
                if database.dialect == .postgres {
                    _ = try await transaction.run("SELECT 1 FROM shadow_oplog_meta WHERE name = 'writer' FOR UPDATE")
                }
                var current = try await readMeta(transaction)
                guard current["secret"] == nil else { return current }
                guard try await transaction.run("SELECT 1 FROM shadow_oplog_entries LIMIT 1").isEmpty else {
                    throw LogError(.tampered, "the log holds entries but its secret row is missing: it was deleted")
                }
                for (name, value) in [("version", Array("1".utf8)), ("origin", Array(origin.utf8)), ("secret", sealed)]
                {
                    _ = try await transaction.run(
                        "INSERT INTO shadow_oplog_meta (name, value) VALUES (?, ?)", .text(name), .blob(value))
                    current[name] = value
                }
                return current
            }
            return meta
        }
        guard meta["version"] == Array("1".utf8) else { throw LogError(.notALog, "the log's tables are not version 1") }
        guard let originBytes = meta["origin"], let origin = String(validating: originBytes, as: UTF8.self),
            let sealed = meta["secret"]
        else { throw LogError(.tampered, "the log's origin or secret row is missing") }
        if let given, given != origin {
            throw LogError(.invalidParameter, "the log's origin is \(origin), not \(given)")
        }
        let secret: [UInt8]
        do { secret = try SealedStoreSecret.open(sealed, unlock: unlock, purpose: .operationLog) } catch let error
            as StorageError
        { throw LogError(storeFailure: error) }
        return (secret, origin)
    }

    static func readMeta(_ database: any SQLDatabase) async throws -> [String: [UInt8]] {
        meta(try await database.read("SELECT name, value FROM shadow_oplog_meta"))
    }

    static func readMeta(_ transaction: any SQLTransaction) async throws -> [String: [UInt8]] {
        meta(try await transaction.run("SELECT name, value FROM shadow_oplog_meta"))
    }

    static func meta(_ rows: [SQLRow]) -> [String: [UInt8]] {
        var meta: [String: [UInt8]] = [:]
        for row in rows {
            if let name = row.text("name"), let value = row.blob("value") { meta[name] = value }
        }
        return meta
    }

    static func nodeID(_ level: Int, _ index: UInt64) -> SQLValue { .integer(Int64(UInt64(level) << 56 | index)) }

    // MARK: Reading

    /// The checkpoint row's note, opened: its signature, its origin.
    func checkpoint(_ note: [UInt8]?) throws -> SignedCheckpoint? {
        guard let note else { return nil }
        do {
            let signed = try SignedCheckpoint(note: String(decoding: note, as: UTF8.self), verifier: verifier)
            guard signed.checkpoint.origin == origin else { throw LogError(.tampered, "it names another log") }
            return signed
        } catch let error as LogError {
            throw LogError(.tampered, "the log's checkpoint row: \(error.reason)")
        }
    }

    static let checkpointQuery = "SELECT value FROM shadow_oplog_meta WHERE name = 'checkpoint'"

    public func latest() async throws -> SignedCheckpoint? {
        try checkpoint(try await Self.storing { try await database.read(Self.checkpointQuery).first?.blob("value") })
    }

    public func checkpoints() async throws -> [SignedCheckpoint] { try await latest().map { [$0] } ?? [] }

    public func records(from index: UInt64, count: Int) async throws -> [LogRecord] {
        guard count > 0, index < Self.maxSize else { return [] }
        return try await Self.storing {
            // Appended here, not through the generic read(decode:): verify reads every entry, and
            // an unspecialized append looks up the array's type at run time for each row.
            let records = DecodedRows<LogRecord>()
            records.values.reserveCapacity(min(count, 8192))
            try await database.read(
                "SELECT idx, leaf, body FROM shadow_oplog_entries WHERE idx >= ? ORDER BY idx LIMIT ?",
                [.integer(Int64(index)), .integer(count)], aside: false
            ) { records.values.append(try Self.record($0)) }
            return records.values
        }
    }

    /// An entry row (`idx, leaf, body`, in that order) as a record.
    @Sendable static func record(_ row: any SQLColumns) throws -> LogRecord {
        guard let idx = row.integer(0), idx >= 0, let leaf = row.withBlob(1, { TreeHash(bytes: $0) }) ?? nil else {
            throw LogError(.tampered, "an entry row's index or leaf hash is malformed")
        }
        return LogRecord(index: UInt64(idx), leaf: leaf, bytes: row.blob(2))
    }

    /// Read beside the entries (SQLite's second reader), so `verify` compares the stored nodes of
    /// one stretch while the next stretch's entries are read: a node never changes once written.
    public func nodes(level: Int, in range: Range<UInt64>) async throws -> [UInt64: TreeHash] {
        guard level >= 1, level < 56, !range.isEmpty else { return [:] }
        return try await Self.storing {
            let nodes = DecodedRows<(UInt64, TreeHash)>()
            try await database.read(
                "SELECT id, hash FROM shadow_oplog_nodes WHERE id >= ? AND id < ?",
                [Self.nodeID(level, range.lowerBound), Self.nodeID(level, range.upperBound)], aside: true
            ) { nodes.values.append(try Self.node($0)) }
            return Dictionary(nodes.values, uniquingKeysWith: { _, last in last })
        }
    }

    /// A node row (`id, hash`) as its index within its level and its hash.
    @Sendable static func node(_ row: any SQLColumns) throws -> (UInt64, TreeHash) {
        guard let id = row.integer(0), let hash = row.withBlob(1, { TreeHash(bytes: $0) }) ?? nil else {
            throw LogError(.tampered, "a tree node row is malformed")
        }
        return (UInt64(bitPattern: id) & ((1 << 56) - 1), hash)
    }

    public func find(entityHash: [UInt8], from index: UInt64, limit: Int) async throws -> [UInt64] {
        guard limit > 0, index < Self.maxSize else { return [] }
        return try await Self.storing {
            try await database.read(
                "SELECT idx FROM shadow_oplog_entries WHERE entity = ? AND idx >= ? ORDER BY idx LIMIT ?",
                .blob(entityHash), .integer(Int64(index)), .integer(limit)
            ).compactMap { $0.integer("idx").map(UInt64.init) }
        }
    }

    // MARK: Writing

    /// Locks the log for this transaction (PostgreSQL's `writer` row; SQLite's transaction is its
    /// one writer already) and reads its checkpoint.
    func lockAndReadCheckpoint(_ transaction: any SQLTransaction) async throws -> [UInt8]? {
        if database.dialect == .postgres {
            _ = try await transaction.run("SELECT 1 FROM shadow_oplog_meta WHERE name = 'writer' FOR UPDATE")
        }
        return try await transaction.run(Self.checkpointQuery).first?.blob("value")
    }

    /// The tree's right edge and pruned boundary as the last writer left them: from the cache
    /// while the checkpoint row is byte for byte the one this process last wrote or checked,
    /// else read and checked against the signed checkpoint (its signature verified).
    func loadFrontier(_ transaction: any SQLTransaction, note: [UInt8]?) async throws -> (TreeFrontier, pruned: UInt64)
    {
        if let note, let cached = lastWrite.withLock({ $0 }), cached.note == note {
            return (cached.frontier, cached.pruned)
        }
        let signed = try checkpoint(note)
        let size = signed?.checkpoint.size ?? 0
        var edge: [NodeID: TreeHash] = [:]
        for id in TreeFrontier.ids(size: size) {
            if id.level == 0 {
                edge[id] = try await transaction.run(
                    "SELECT idx, leaf, body FROM shadow_oplog_entries WHERE idx = ?", .integer(Int64(id.index))
                ).first.map(Self.record)?.leaf
            } else {
                edge[id] = try await transaction.run(
                    "SELECT id, hash FROM shadow_oplog_nodes WHERE id = ?", Self.nodeID(id.level, id.index)
                ).first.map(Self.node)?.1
            }
        }
        let frontier = try TreeFrontier(size: size, nodes: edge)
        if let signed {
            guard signed.checkpoint.root.constantTimeEquals(frontier.root) else {
                throw LogError(.tampered, "the log's checkpoint does not match its tree's nodes")
            }
        }
        let pruned = signed?.checkpoint.prunedBefore ?? 0
        if let note { lastWrite.withLock { $0 = (note, frontier, pruned) } }
        return (frontier, pruned)
    }

    /// Signs the checkpoint of `frontier` with the pruned boundary and stores it in the meta row.
    func storeCheckpoint(
        _ transaction: any SQLTransaction, _ frontier: TreeFrontier, pruned: UInt64
    ) async throws -> SignedCheckpoint {
        let signed = try SignedCheckpoint(
            checkpoint: try Checkpoint(origin: origin, size: frontier.size, root: frontier.root, prunedBefore: pruned),
            signer: signer)
        _ = try await transaction.run(
            """
            INSERT INTO shadow_oplog_meta (name, value) VALUES ('checkpoint', ?) ON CONFLICT (name) DO UPDATE SET \
            value = excluded.value
            """, .blob(Array(signed.note.utf8)))
        return signed
    }

    public func append(_ entries: [[UInt8]]) async throws -> (first: UInt64, checkpoint: SignedCheckpoint) {
        let stored = try entries.map { bytes in
            guard bytes.count <= EntryCodec.maxBytes else {
                throw LogError(.invalidParameter, "an entry is over \(EntryCodec.maxBytes) bytes")
            }
            return (bytes: bytes, entity: try EntryCodec.decode(bytes).entityHash, leaf: TreeHash.leaf(bytes))
        }
        let (first, signed, frontier, pruned) = try await Self.storing {
            try await database.transaction(retrying: false) { [self] transaction in
                let note = try await lockAndReadCheckpoint(transaction)
                var (frontier, pruned) = try await loadFrontier(transaction, note: note)
                let size = frontier.size
                guard size + UInt64(stored.count) <= Self.maxSize else {
                    throw LogError(.invalidParameter, "the log would grow past 2^48 entries")
                }
                var nodes: [(NodeID, TreeHash)] = []
                for item in stored { nodes += frontier.append(item.leaf).dropFirst() }
                for (offset, chunk) in stored.chunked(200).enumerated() {
                    let base = Int64(size) + Int64(offset * 200)
                    var values: [SQLValue] = []
                    for (position, item) in chunk.enumerated() {
                        values += [
                            .integer(base + Int64(position)), .blob(item.leaf.bytes), .blob(item.entity),
                            .blob(item.bytes),
                        ]
                    }
                    let rows = Array(repeating: "(?, ?, ?, ?)", count: chunk.count).joined(separator: ", ")
                    _ = try await transaction.run(
                        "INSERT INTO shadow_oplog_entries (idx, leaf, entity, body) VALUES \(rows)", values)
                }
                for chunk in nodes.chunked(400) {
                    let rows = Array(repeating: "(?, ?)", count: chunk.count).joined(separator: ", ")
                    _ = try await transaction.run(
                        "INSERT INTO shadow_oplog_nodes (id, hash) VALUES \(rows)",
                        chunk.flatMap { id, hash in [Self.nodeID(id.level, id.index), .blob(hash.bytes)] })
                }
                pruned = min(pruned, frontier.size)
                let signed = try await storeCheckpoint(transaction, frontier, pruned: pruned)
                return (size, signed, frontier, pruned)
            }
        }
        // Remembered once committed; keyed by the exact row, so another writer's row never matches it.
        lastWrite.withLock { $0 = (Array(signed.note.utf8), frontier, pruned) }
        return (first, signed)
    }

    /// Removes the bytes of the entries before `index` and moves the signed pruned boundary there
    /// (never back): a prefix, as the checkpoint says, so an entry erased past it is caught.
    public func prune(before index: UInt64) async throws -> UInt64 {
        try await Self.storing {
            try await database.transaction(retrying: false) { [self] transaction in
                let note = try await lockAndReadCheckpoint(transaction)
                let (frontier, pruned) = try await loadFrontier(transaction, note: note)
                let boundary = max(pruned, min(index, frontier.size))
                let count = try await transaction.run(
                    """
                    UPDATE shadow_oplog_entries SET body = NULL, entity = NULL WHERE idx < ? AND body IS NOT NULL \
                    RETURNING idx
                    """, .integer(Int64(boundary))
                ).count
                if boundary != pruned {
                    let signed = try await storeCheckpoint(transaction, frontier, pruned: boundary)
                    lastWrite.withLock { $0 = (Array(signed.note.utf8), frontier, boundary) }
                }
                return UInt64(count)
            }
        }
    }
}
