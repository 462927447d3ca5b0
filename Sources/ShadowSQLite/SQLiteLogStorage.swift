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
import NIOCore
import ShadowCore
import ShadowCredentials
public import ShadowOperationLog
public import ShadowVault
import SQLiteNIO
import Synchronization
import ShadowStorage

/// An operation log in a SQLite database (Docs/operation-log.md, "SQLite and PostgreSQL"): its own
/// tables, so it may share the state store's file. WAL mode, `synchronous=FULL`; writers in any
/// number of processes are serialised by `BEGIN IMMEDIATE`, and each batch re-reads the tree's
/// right edge inside its transaction, so every writer appends after the last.
public final class SQLiteLogStorage: LogStorage {
    public let path: String
    public let origin: String
    public let keys: LogKeys
    private let signer: NoteSigner
    private let verifier: NoteVerifier
    /// The database's shared handle: its reader, its writer, and its second reader, on which tree
    /// nodes are read, so `verify` compares the stored nodes of one stretch while the next
    /// stretch's entries are read (a node never changes once written, so the two need no common
    /// snapshot).
    private let database: SQLiteDatabase
    /// Whether closing the log closes the database (it opened it itself).
    private let ownsDatabase: Bool
    /// The checkpoint row this process last wrote or checked, and the tree's right edge under
    /// it: while the row is byte for byte the same, the next batch skips re-reading both.
    private let lastWrite = Mutex<(note: [UInt8], frontier: TreeFrontier)?>(nil)

    /// The most entries a log holds: node IDs keep the level in their top 8 bits.
    public static let maxSize: UInt64 = 1 << 48

    static let schema = [
        "CREATE TABLE IF NOT EXISTS shadow_oplog_meta (name TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID",
        """
        CREATE TABLE IF NOT EXISTS shadow_oplog_entries (idx INTEGER PRIMARY KEY, leaf BLOB NOT NULL, entity BLOB, \
        body BLOB)
        """,
        "CREATE INDEX IF NOT EXISTS shadow_oplog_entity ON shadow_oplog_entries (entity) WHERE entity IS NOT NULL",
        "CREATE TABLE IF NOT EXISTS shadow_oplog_nodes (id INTEGER PRIMARY KEY, hash BLOB NOT NULL)",
    ]

    private init(database: SQLiteDatabase, owned: Bool, origin: String, keys: LogKeys) throws {
        self.path = database.path
        self.origin = origin
        self.keys = keys
        signer = try keys.signer(origin: origin)
        verifier = signer.verifier
        self.database = database
        ownsDatabase = owned
    }

    /// Opens the log in the database at `path` (which may be the state store's), creating the
    /// file (mode 0600) and the log's tables when `create` is set.
    /// - Throws: ``LogErrorCode/notFound`` (no file, or no log in it and `create` off),
    ///   ``LogErrorCode/wrongKey``, ``LogErrorCode/tampered``, ``LogErrorCode/io``.
    public static func open(
        path: String, unlock: VaultUnlock, create: Bool = false, origin: String? = nil,
        lockTimeout: Duration = .seconds(10)
    ) async throws -> SQLiteLogStorage {
        guard lockTimeout >= .zero, lockTimeout <= .seconds(3600) else {
            throw LogError(.invalidParameter, "the lock timeout is 0 to 3600 seconds")
        }
        var status = stat()
        if !create, lstat(path, &status) != 0 { throw LogError(.notFound, "no operation log at \(path)") }
        let database: SQLiteDatabase
        do {
            database = try await SQLiteDatabase.open(path: path, create: create, lockTimeout: lockTimeout)
        } catch let error as StorageError {
            throw LogError(storeFailure: error, opening: true)
        }
        do {
            return try await open(database: database, owned: true, unlock: unlock, create: create, origin: origin)
        } catch {
            await database.close()
            throw error
        }
    }

    /// Opens the log in a database this process already has open (shared with credential state
    /// and sessions; it stays open when the log closes).
    public static func open(
        database: SQLiteDatabase, unlock: VaultUnlock, create: Bool = false, origin: String? = nil
    ) async throws -> SQLiteLogStorage {
        try await open(database: database, owned: false, unlock: unlock, create: create, origin: origin)
    }

    static func open(
        database: SQLiteDatabase, owned: Bool, unlock: VaultUnlock, create: Bool, origin: String?
    ) async throws -> SQLiteLogStorage {
        let path = database.path
        let (secret, origin) = try await mapped(path, opening: true) {
            try await database.withWriter { writer in
                try await setUp(writer, path: path, unlock: unlock, create: create, origin: origin)
            }
        }
        return try SQLiteLogStorage(database: database, owned: owned, origin: origin, keys: try LogKeys(secret: secret))
    }

    /// The log's sealed secret and origin; a new log's, made and stored, when `create` is set.
    private static func setUp(
        _ connection: SQLiteConnection, path: String, unlock: VaultUnlock, create: Bool, origin given: String?
    ) async throws -> (secret: [UInt8], origin: String) {
        try await mapped(path, opening: true) {
            _ = try await connection.query("BEGIN IMMEDIATE", [])
            do {
                let hasTables = try await !connection.query(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'shadow_oplog_meta'", []
                ).isEmpty
                if !hasTables {
                    guard create else { throw LogError(.notFound, "\(path) holds no operation log") }
                    for statement in schema { _ = try await connection.query(statement, []) }
                }
                var meta = try await readMeta(connection)
                if meta["secret"] == nil {
                    guard create else { throw LogError(.notFound, "\(path) holds no operation log") }
                    guard try await connection.query("SELECT 1 FROM shadow_oplog_entries LIMIT 1", []).isEmpty else {
                        throw LogError(.tampered, "the log holds entries but its secret row is missing: it was deleted")
                    }
                    let origin =
                        given ?? "oplog.shadow-keys.invalid/"
                        + Hex.encode(SecretBytes.random(count: 8).withUnsafeBytes { Array($0) })
                    _ = try Checkpoint(origin: origin, size: 0, root: .empty)
                    _ = try NoteSigner(name: origin, seed: [UInt8](repeating: 0, count: 32))
                    let sealed = try SealedStoreSecret.create(unlock: unlock, purpose: .operationLog).stored
                    for (name, value) in [
                        ("version", Array("1".utf8)), ("origin", Array(origin.utf8)), ("secret", sealed),
                    ] {
                        _ = try await connection.query(
                            "INSERT INTO shadow_oplog_meta (name, value) VALUES (?, ?)",
                            [.text(name), .blob(ByteBuffer(bytes: value))])
                        meta[name] = value
                    }
                }
                _ = try await connection.query("COMMIT", [])
                guard meta["version"] == Array("1".utf8) else {
                    throw LogError(.notALog, "the log's tables are not version 1")
                }
                guard let originBytes = meta["origin"], let origin = String(validating: originBytes, as: UTF8.self),
                    let sealed = meta["secret"]
                else { throw LogError(.tampered, "the log's origin or secret row is missing") }
                if let given, given != origin {
                    throw LogError(.invalidParameter, "the log's origin is \(origin), not \(given)")
                }
                do {
                    return (try SealedStoreSecret.open(sealed, unlock: unlock, purpose: .operationLog), origin)
                } catch let error as StorageError {
                    throw LogError(storeFailure: error)
                }
            } catch {
                _ = try? await connection.query("ROLLBACK", [])
                throw error
            }
        }
    }

    static func readMeta(_ connection: SQLiteConnection) async throws -> [String: [UInt8]] {
        var meta: [String: [UInt8]] = [:]
        for row in try await connection.query("SELECT name, value FROM shadow_oplog_meta", []) {
            if let name = row.column("name")?.string, let value = row.column("value")?.blob {
                meta[name] = Array(value.readableBytesView)
            }
        }
        return meta
    }

    static func mapped<R>(_ path: String, opening: Bool = false, _ body: () async throws -> R) async throws -> R {
        do {
            return try await SQLiteDatabase.mapped(path, body)
        } catch let error as StorageError {
            throw LogError(storeFailure: error, opening: opening)
        } catch let error as CredentialError {
            throw LogError(storeFailure: error, opening: opening)
        }
    }

    static func nodeID(_ level: Int, _ index: UInt64) -> SQLiteData {
        .integer(Int(UInt64(level) << 56 | index))
    }

    // MARK: Reading

    private func checkpoint(_ connection: SQLiteConnection) async throws -> SignedCheckpoint? {
        let rows = try await connection.query("SELECT value FROM shadow_oplog_meta WHERE name = 'checkpoint'", [])
        guard let value = rows.first?.column("value")?.blob else { return nil }
        do {
            let signed = try SignedCheckpoint(
                note: String(decoding: value.readableBytesView, as: UTF8.self), verifier: verifier)
            guard signed.checkpoint.origin == origin else { throw LogError(.tampered, "it names another log") }
            return signed
        } catch let error as LogError {
            throw LogError(.tampered, "the log's checkpoint row: \(error.reason)")
        }
    }

    private func reading<R: Sendable>(
        _ body: @escaping @Sendable (SQLiteConnection) async throws -> R
    ) async throws
        -> R
    {
        try await Self.mapped(path) {
            try await database.withReader { reader in
                _ = try await reader.query("BEGIN", [])
                do {
                    let result = try await body(reader)
                    _ = try await reader.query("COMMIT", [])
                    return result
                } catch {
                    _ = try? await reader.query("ROLLBACK", [])
                    throw error
                }
            }
        }
    }

    private func writing<R: Sendable>(
        _ body: @escaping @Sendable (SQLiteConnection) async throws -> R
    ) async throws
        -> R
    {
        try await Self.mapped(path) {
            try await database.withWriter { writer in
                _ = try await writer.query("BEGIN IMMEDIATE", [])
                do {
                    let result = try await body(writer)
                    _ = try await writer.query("COMMIT", [])
                    return result
                } catch {
                    _ = try? await writer.query("ROLLBACK", [])
                    throw error
                }
            }
        }
    }

    public func latest() async throws -> SignedCheckpoint? {
        try await reading { try await self.checkpoint($0) }
    }

    public func checkpoints() async throws -> [SignedCheckpoint] {
        try await latest().map { [$0] } ?? []
    }

    public func records(from index: UInt64, count: Int) async throws -> [LogRecord] {
        guard count > 0, index < Self.maxSize else { return [] }
        return try await reading { connection in
            try await Self.records(connection, from: index, count: count)
        }
    }

    static func records(_ connection: SQLiteConnection, from index: UInt64, count: Int) async throws -> [LogRecord] {
        try await connection.query(
            "SELECT idx, leaf, body FROM shadow_oplog_entries WHERE idx >= ? ORDER BY idx LIMIT ?",
            [.integer(Int(index)), .integer(count)]
        ).map { row in
            guard let idx = row.column("idx")?.integer, idx >= 0, let leafBytes = row.column("leaf")?.blob,
                let leaf = TreeHash(bytes: leafBytes.readableBytesView)
            else { throw LogError(.tampered, "an entry row's index or leaf hash is malformed") }
            let body = row.column("body")?.blob.map { Array($0.readableBytesView) }
            return LogRecord(index: UInt64(idx), leaf: leaf, bytes: body)
        }
    }

    public func nodes(level: Int, in range: Range<UInt64>) async throws -> [UInt64: TreeHash] {
        guard level >= 1, level < 56, !range.isEmpty else { return [:] }
        return try await Self.mapped(path) {
            try await database.withSecondReader { try await Self.nodes($0, level: level, in: range) }
        }
    }

    static func nodes(
        _ connection: SQLiteConnection, level: Int, in range: Range<UInt64>
    ) async throws
        -> [UInt64: TreeHash]
    {
        var found: [UInt64: TreeHash] = [:]
        for row in try await connection.query(
            "SELECT id, hash FROM shadow_oplog_nodes WHERE id >= ? AND id < ?",
            [nodeID(level, range.lowerBound), nodeID(level, range.upperBound)])
        {
            guard let id = row.column("id")?.integer, let bytes = row.column("hash")?.blob,
                let hash = TreeHash(bytes: bytes.readableBytesView)
            else { throw LogError(.tampered, "a tree node row is malformed") }
            found[UInt64(id) & ((1 << 56) - 1)] = hash
        }
        return found
    }

    public func find(entityHash: [UInt8], limit: Int) async throws -> [UInt64] {
        try await reading { connection in
            try await connection.query(
                "SELECT idx FROM shadow_oplog_entries WHERE entity = ? ORDER BY idx LIMIT ?",
                [.blob(ByteBuffer(bytes: entityHash)), .integer(max(0, limit))]
            ).compactMap { $0.column("idx")?.integer.map(UInt64.init) }
        }
    }

    // MARK: Writing

    public func append(_ entries: [[UInt8]]) async throws -> (first: UInt64, checkpoint: SignedCheckpoint) {
        let stored = try entries.map { bytes in
            guard bytes.count <= EntryCodec.maxBytes else {
                throw LogError(.invalidParameter, "an entry is over \(EntryCodec.maxBytes) bytes")
            }
            return (bytes: bytes, entity: try EntryCodec.decode(bytes).entityHash, leaf: TreeHash.leaf(bytes))
        }
        let (first, signed, frontier) = try await writing { [self] connection in
            var frontier = try await loadFrontier(connection)
            let size = frontier.size
            guard size + UInt64(entries.count) <= Self.maxSize else {
                throw LogError(.invalidParameter, "the log would grow past \(Self.maxSize) entries")
            }
            var nodes: [(NodeID, TreeHash)] = []
            for item in stored {
                nodes += frontier.append(item.leaf).dropFirst()
            }
            for (offset, chunk) in stored.chunked(200).enumerated() {
                let base = size + UInt64(offset * 200)
                let values = Array(repeating: "(?, ?, ?, ?)", count: chunk.count).joined(separator: ", ")
                var bindings: [SQLiteData] = []
                for (position, item) in chunk.enumerated() {
                    bindings += [
                        .integer(Int(base + UInt64(position))), .blob(ByteBuffer(bytes: item.leaf.bytes)),
                        .blob(ByteBuffer(bytes: item.entity)), .blob(ByteBuffer(bytes: item.bytes)),
                    ]
                }
                _ = try await connection.query(
                    "INSERT INTO shadow_oplog_entries (idx, leaf, entity, body) VALUES \(values)", bindings)
            }
            for chunk in nodes.chunked(400) {
                let values = Array(repeating: "(?, ?)", count: chunk.count).joined(separator: ", ")
                let bindings = chunk.flatMap { id, hash -> [SQLiteData] in
                    [Self.nodeID(id.level, id.index), .blob(ByteBuffer(bytes: hash.bytes))]
                }
                _ = try await connection.query("INSERT INTO shadow_oplog_nodes (id, hash) VALUES \(values)", bindings)
            }
            let signed = try SignedCheckpoint(
                checkpoint: try Checkpoint(origin: origin, size: frontier.size, root: frontier.root), signer: signer)
            _ = try await connection.query(
                "INSERT OR REPLACE INTO shadow_oplog_meta (name, value) VALUES ('checkpoint', ?)",
                [.blob(ByteBuffer(bytes: Array(signed.note.utf8)))])
            return (size, signed, frontier)
        }
        // Remembered once committed; keyed by the exact row, so another writer's row never matches it.
        lastWrite.withLock { $0 = (Array(signed.note.utf8), frontier) }
        return (first, signed)
    }

    /// The tree's right edge as the last writer left it: from the cache when the checkpoint row is
    /// the one this process last saw, else read (and the checkpoint's signature checked).
    private func loadFrontier(_ connection: SQLiteConnection) async throws -> TreeFrontier {
        let rows = try await connection.query("SELECT value FROM shadow_oplog_meta WHERE name = 'checkpoint'", [])
        let note = rows.first?.column("value")?.blob.map { Array($0.readableBytesView) }
        if let note, let cached = lastWrite.withLock({ $0 }), cached.note == note { return cached.frontier }
        let signed = try await checkpoint(connection)
        let size = signed?.checkpoint.size ?? 0
        var edge: [NodeID: TreeHash] = [:]
        for id in TreeFrontier.ids(size: size) {
            if id.level == 0 {
                edge[id] = try await Self.records(connection, from: id.index, count: 1).first.flatMap {
                    $0.index == id.index ? $0.leaf : nil
                }
            } else {
                edge[id] = try await Self.nodes(connection, level: id.level, in: id.index..<(id.index + 1))[id.index]
            }
        }
        let frontier = try TreeFrontier(size: size, nodes: edge)
        if let note {
            guard signed?.checkpoint.root.constantTimeEquals(frontier.root) == true else {
                throw LogError(.tampered, "the log's checkpoint does not match its tree's nodes")
            }
            lastWrite.withLock { $0 = (note, frontier) }
        }
        return frontier
    }

    public func prune(before index: UInt64) async throws -> UInt64 {
        try await writing { connection in
            let rows = try await connection.query(
                """
                UPDATE shadow_oplog_entries SET body = NULL, entity = NULL WHERE idx < ? AND body IS NOT NULL \
                RETURNING idx
                """,
                [.integer(Int(min(index, Self.maxSize)))])
            return UInt64(rows.count)
        }
    }

    public func close() async {
        if ownsDatabase { await database.close() }
    }
}
