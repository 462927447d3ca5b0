#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import NIOCore
import PostgresNIO
import ShadowCore
import ShadowCredentials
public import ShadowOperationLog
public import ShadowVault
import Synchronization
import ShadowStorage

/// An operation log in PostgreSQL, for several writers on several hosts (Docs/operation-log.md,
/// "SQLite and PostgreSQL"): the same tables as in SQLite. Every batch locks the `writer` meta row
/// (`SELECT … FOR UPDATE`) first, so writers everywhere append one after another: one order, no
/// gap. An append is tried once: one that fails on a lost connection may have committed, and
/// trying it again could append it twice (reads are retried).
public final class PostgresLogStorage: LogStorage {
    public let origin: String
    public let keys: LogKeys
    private let signer: NoteSigner
    private let verifier: NoteVerifier
    let database: PostgresStateDatabase
    /// Whether closing the log closes the database (it connected itself).
    let ownsDatabase: Bool
    private let lastWrite = Mutex<(note: [UInt8], frontier: TreeFrontier)?>(nil)

    static let schema: [PostgresQuery] = [
        "CREATE TABLE IF NOT EXISTS shadow_oplog_meta (name text PRIMARY KEY, value bytea NOT NULL)",
        """
        CREATE TABLE IF NOT EXISTS shadow_oplog_entries (idx bigint PRIMARY KEY, leaf bytea NOT NULL, entity bytea, \
        body bytea)
        """,
        "CREATE INDEX IF NOT EXISTS shadow_oplog_entity ON shadow_oplog_entries (entity) WHERE entity IS NOT NULL",
        "CREATE TABLE IF NOT EXISTS shadow_oplog_nodes (id bigint PRIMARY KEY, hash bytea NOT NULL)",
        "INSERT INTO shadow_oplog_meta (name, value) VALUES ('writer', ''::bytea) ON CONFLICT (name) DO NOTHING",
    ]

    private init(origin: String, keys: LogKeys, database: PostgresStateDatabase, owned: Bool) throws {
        self.origin = origin
        self.keys = keys
        signer = try keys.signer(origin: origin)
        verifier = signer.verifier
        self.database = database
        ownsDatabase = owned
    }

    /// Connects and opens the log, creating its tables and secret (under an advisory lock, so
    /// instances starting together do not race) when `create` is set.
    public static func connect(
        _ location: PostgresLocation, unlock: VaultUnlock, create: Bool = false, origin: String? = nil,
        connectTimeout: Duration = .seconds(10), retryFor: Duration = .seconds(30), maximumConnections: Int = 8
    ) async throws -> PostgresLogStorage {
        let database = try PostgresStateDatabase(
            location: location, connectTimeout: connectTimeout, retryFor: retryFor,
            maximumConnections: maximumConnections,
            logger: Logger(label: "shadow-keys.postgres", factory: { _ in SwiftLogNoOpLogHandler() }))
        do {
            return try await open(database, owned: true, unlock: unlock, create: create, origin: origin)
        } catch {
            await database.close()
            throw error
        }
    }

    /// Opens the log on a database handle this process already has (shared with credential state
    /// and sessions; it stays open when the log closes).
    static func open(
        _ database: PostgresStateDatabase, owned: Bool, unlock: VaultUnlock, create: Bool, origin: String?
    ) async throws -> PostgresLogStorage {
        do {
            // A refusal of the log's own (no log, another version) is an answer, not a lost connection:
            // it comes out of the retries at once.
            let meta = try await mapped(database) {
                try await database.retrying {
                    try await database.withConnection { connection -> Result<[String: [UInt8]], LogError> in
                        do {
                            return .success(
                                try await database.inTransaction(connection) {
                                    try await setUp(
                                        connection, database: database, unlock: unlock, create: create, origin: origin)
                                })
                        } catch let error as LogError {
                            return .failure(error)
                        }
                    }
                }
            }.get()
            guard let originBytes = meta["origin"], let name = String(validating: originBytes, as: UTF8.self),
                let sealed = meta["secret"]
            else { throw LogError(.tampered, "the log's origin or secret row is missing") }
            if let origin, origin != name {
                throw LogError(.invalidParameter, "the log's origin is \(name), not \(origin)")
            }
            let secret: [UInt8]
            do {
                secret = try SealedStoreSecret.open(sealed, unlock: unlock, purpose: .operationLog)
            } catch let error as StorageError {
                throw LogError(storeFailure: error)
            }
            return try PostgresLogStorage(
                origin: name, keys: try LogKeys(secret: secret), database: database, owned: owned)
        }
    }

    private static func setUp(
        _ connection: PostgresConnection, database: PostgresStateDatabase, unlock: VaultUnlock, create: Bool,
        origin given: String?
    ) async throws -> [String: [UInt8]] {
        let logger = database.logger
        let exists =
            try await connection.query(
                "SELECT 1 FROM information_schema.tables WHERE table_name = 'shadow_oplog_meta'", logger: logger
            ).collect().count > 0
        if !exists || create {
            guard create else { throw LogError(.notFound, "\(database.location) holds no operation log") }
            try await connection.run("SELECT pg_advisory_xact_lock(7395012, 2)", logger: logger)
            for statement in schema { try await connection.run(statement, logger: logger) }
        }
        var meta = try await readMeta(connection, logger: logger)
        if meta["secret"] == nil {
            guard create else { throw LogError(.notFound, "\(database.location) holds no operation log") }
            guard
                try await connection.query("SELECT 1 FROM shadow_oplog_entries LIMIT 1", logger: logger).collect()
                    .isEmpty
            else { throw LogError(.tampered, "the log holds entries but its secret row is missing: it was deleted") }
            let origin =
                given ?? "oplog.shadow-keys.invalid/"
                + Hex.encode(SecretBytes.random(count: 8).withUnsafeBytes { Array($0) })
            _ = try Checkpoint(origin: origin, size: 0, root: .empty)
            _ = try NoteSigner(name: origin, seed: [UInt8](repeating: 0, count: 32))
            let sealed: [UInt8]
            do {
                sealed = try SealedStoreSecret.create(unlock: unlock, purpose: .operationLog).stored
            } catch let error as StorageError {
                throw LogError(storeFailure: error)
            }
            for (name, value) in [("version", Array("1".utf8)), ("origin", Array(origin.utf8)), ("secret", sealed)] {
                let bytes = ByteBuffer(bytes: value)
                try await connection.run(
                    "INSERT INTO shadow_oplog_meta (name, value) VALUES (\(name), \(bytes))", logger: logger)
                meta[name] = value
            }
        }
        guard meta["version"] == Array("1".utf8) else { throw LogError(.notALog, "the log's tables are not version 1") }
        return meta
    }

    static func readMeta(_ connection: PostgresConnection, logger: Logger) async throws -> [String: [UInt8]] {
        var meta: [String: [UInt8]] = [:]
        for try await (name, value) in try await connection.query(
            "SELECT name, value FROM shadow_oplog_meta", logger: logger
        ).decode((String, ByteBuffer).self) {
            meta[name] = Array(value.readableBytesView)
        }
        return meta
    }

    /// Runs `body`, turning the store's errors into the log's.
    static func mapped<R>(_ database: PostgresStateDatabase, _ body: () async throws -> R) async throws -> R {
        do {
            return try await body()
        } catch let error as LogError {
            throw error
        } catch {
            throw LogError(storeFailure: database.map(error).error)
        }
    }

    static func nodeID(_ level: Int, _ index: UInt64) -> Int64 { Int64(bitPattern: UInt64(level) << 56 | index) }

    private func reading<R: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> R
    ) async throws
        -> R
    {
        let database = self.database
        return try await Self.mapped(database) {
            try await database.retrying { try await database.withConnection(body) }
        }
    }

    // MARK: Reading

    private func checkpoint(_ connection: PostgresConnection) async throws -> (note: [UInt8], SignedCheckpoint)? {
        let rows = try await connection.query(
            "SELECT value FROM shadow_oplog_meta WHERE name = 'checkpoint'", logger: database.logger
        ).collect()
        guard let row = rows.first else { return nil }
        let note = Array(try row.decode(ByteBuffer.self).readableBytesView)
        do {
            let signed = try SignedCheckpoint(note: String(decoding: note, as: UTF8.self), verifier: verifier)
            guard signed.checkpoint.origin == origin else { throw LogError(.tampered, "it names another log") }
            return (note, signed)
        } catch let error as LogError {
            throw LogError(.tampered, "the log's checkpoint row: \(error.reason)")
        }
    }

    public func latest() async throws -> SignedCheckpoint? {
        try await reading { try await self.checkpoint($0)?.1 }
    }

    public func checkpoints() async throws -> [SignedCheckpoint] {
        try await latest().map { [$0] } ?? []
    }

    public func records(from index: UInt64, count: Int) async throws -> [LogRecord] {
        guard count > 0, index < SQLiteCompatibleLimits.maxSize else { return [] }
        let logger = database.logger
        return try await reading { connection in
            try await Self.records(connection, from: index, count: count, logger: logger)
        }
    }

    static func records(
        _ connection: PostgresConnection, from index: UInt64, count: Int, logger: Logger
    ) async throws
        -> [LogRecord]
    {
        let start = Int64(index), limit = Int64(count)
        var records: [LogRecord] = []
        for try await (idx, leafBytes, body) in try await connection.query(
            "SELECT idx, leaf, body FROM shadow_oplog_entries WHERE idx >= \(start) ORDER BY idx LIMIT \(limit)",
            logger: logger
        ).decode((Int64, ByteBuffer, ByteBuffer?).self) {
            guard idx >= 0, let leaf = TreeHash(bytes: leafBytes.readableBytesView) else {
                throw LogError(.tampered, "an entry row's index or leaf hash is malformed")
            }
            records.append(LogRecord(index: UInt64(idx), leaf: leaf, bytes: body.map { Array($0.readableBytesView) }))
        }
        return records
    }

    public func nodes(level: Int, in range: Range<UInt64>) async throws -> [UInt64: TreeHash] {
        guard level >= 1, level < 56, !range.isEmpty else { return [:] }
        let logger = database.logger
        return try await reading { connection in
            try await Self.nodes(connection, level: level, in: range, logger: logger)
        }
    }

    static func nodes(
        _ connection: PostgresConnection, level: Int, in range: Range<UInt64>, logger: Logger
    )
        async throws -> [UInt64: TreeHash]
    {
        let low = nodeID(level, range.lowerBound), high = nodeID(level, range.upperBound)
        var found: [UInt64: TreeHash] = [:]
        for try await (id, bytes) in try await connection.query(
            "SELECT id, hash FROM shadow_oplog_nodes WHERE id >= \(low) AND id < \(high)", logger: logger
        ).decode((Int64, ByteBuffer).self) {
            guard let hash = TreeHash(bytes: bytes.readableBytesView) else {
                throw LogError(.tampered, "a tree node row is malformed")
            }
            found[UInt64(bitPattern: id) & ((1 << 56) - 1)] = hash
        }
        return found
    }

    public func find(entityHash: [UInt8], limit: Int) async throws -> [UInt64] {
        let logger = database.logger
        let hash = ByteBuffer(bytes: entityHash), count = Int64(max(0, limit))
        return try await reading { connection in
            var found: [UInt64] = []
            for try await idx in try await connection.query(
                "SELECT idx FROM shadow_oplog_entries WHERE entity = \(hash) ORDER BY idx LIMIT \(count)",
                logger: logger
            ).decode(Int64.self) { found.append(UInt64(idx)) }
            return found
        }
    }

    // MARK: Writing

    /// The tree's right edge: from the cache while the checkpoint row is the one this process
    /// last wrote or checked, else read (and checked against the signed checkpoint).
    private func loadFrontier(_ connection: PostgresConnection) async throws -> TreeFrontier {
        let logger = database.logger
        let current = try await checkpoint(connection)
        if let current, let cached = lastWrite.withLock({ $0 }), cached.note == current.note { return cached.frontier }
        let size = current?.1.checkpoint.size ?? 0
        var edge: [NodeID: TreeHash] = [:]
        for id in TreeFrontier.ids(size: size) {
            if id.level == 0 {
                edge[id] = try await Self.records(connection, from: id.index, count: 1, logger: logger).first.flatMap {
                    $0.index == id.index ? $0.leaf : nil
                }
            } else {
                edge[id] = try await Self.nodes(
                    connection, level: id.level, in: id.index..<(id.index + 1), logger: logger)[id.index]
            }
        }
        let frontier = try TreeFrontier(size: size, nodes: edge)
        if let current {
            guard current.1.checkpoint.root.constantTimeEquals(frontier.root) else {
                throw LogError(.tampered, "the log's checkpoint does not match its tree's nodes")
            }
            lastWrite.withLock { $0 = (current.note, frontier) }
        }
        return frontier
    }

    public func append(_ entries: [[UInt8]]) async throws -> (first: UInt64, checkpoint: SignedCheckpoint) {
        let stored = try entries.map { bytes in
            guard bytes.count <= EntryCodec.maxBytes else {
                throw LogError(.invalidParameter, "an entry is over \(EntryCodec.maxBytes) bytes")
            }
            return (bytes: bytes, entity: try EntryCodec.decode(bytes).entityHash, leaf: TreeHash.leaf(bytes))
        }
        let database = self.database, logger = database.logger, origin = self.origin, signer = self.signer
        let (first, signed, frontier) = try await Self.mapped(database) {
            try await database.withConnection { connection in
                try await database.inTransaction(connection) {
                    try await connection.run(
                        "SELECT 1 FROM shadow_oplog_meta WHERE name = 'writer' FOR UPDATE", logger: logger)
                    var frontier = try await self.loadFrontier(connection)
                    let size = frontier.size
                    guard size + UInt64(stored.count) <= SQLiteCompatibleLimits.maxSize else {
                        throw LogError(.invalidParameter, "the log would grow past 2^48 entries")
                    }
                    var nodes: [(NodeID, TreeHash)] = []
                    for item in stored { nodes += frontier.append(item.leaf).dropFirst() }
                    let indices = (0..<stored.count).map { Int64(size) + Int64($0) }
                    let leaves = stored.map { ByteBuffer(bytes: $0.leaf.bytes) }
                    let entities = stored.map { ByteBuffer(bytes: $0.entity) }
                    let bodies = stored.map { ByteBuffer(bytes: $0.bytes) }
                    try await connection.run(
                        """
                        INSERT INTO shadow_oplog_entries (idx, leaf, entity, body) SELECT * FROM \
                        unnest(\(indices)::bigint[], \(leaves)::bytea[], \(entities)::bytea[], \(bodies)::bytea[])
                        """,
                        logger: logger)
                    if !nodes.isEmpty {
                        let ids = nodes.map { Self.nodeID($0.0.level, $0.0.index) }
                        let hashes = nodes.map { ByteBuffer(bytes: $0.1.bytes) }
                        try await connection.run(
                            """
                            INSERT INTO shadow_oplog_nodes (id, hash) SELECT * FROM unnest(\(ids)::bigint[], \
                            \(hashes)::bytea[])
                            """,
                            logger: logger)
                    }
                    let signed = try SignedCheckpoint(
                        checkpoint: try Checkpoint(origin: origin, size: frontier.size, root: frontier.root),
                        signer: signer)
                    let note = ByteBuffer(bytes: Array(signed.note.utf8))
                    try await connection.run(
                        """
                        INSERT INTO shadow_oplog_meta (name, value) VALUES ('checkpoint', \(note)) ON CONFLICT (name) \
                        DO UPDATE SET value = EXCLUDED.value
                        """,
                        logger: logger)
                    return (size, signed, frontier)
                }
            }
        }
        lastWrite.withLock { $0 = (Array(signed.note.utf8), frontier) }
        return (first, signed)
    }

    public func prune(before index: UInt64) async throws -> UInt64 {
        let database = self.database, logger = database.logger
        let bound = Int64(min(index, SQLiteCompatibleLimits.maxSize))
        return try await Self.mapped(database) {
            try await database.withConnection { connection in
                try await database.inTransaction(connection) {
                    try await connection.run(
                        "SELECT 1 FROM shadow_oplog_meta WHERE name = 'writer' FOR UPDATE", logger: logger)
                    let rows = try await connection.query(
                        """
                        UPDATE shadow_oplog_entries SET body = NULL, entity = NULL WHERE idx < \(bound) AND body IS \
                        NOT NULL RETURNING idx
                        """,
                        logger: logger
                    ).collect()
                    return UInt64(rows.count)
                }
            }
        }
    }

    public func close() async {
        if ownsDatabase { await database.close() }
    }
}

/// The size limit both databases share: node IDs keep the level in their top 8 bits.
enum SQLiteCompatibleLimits {
    static let maxSize: UInt64 = 1 << 48
}
