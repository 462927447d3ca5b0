#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore

/// A tamper-evident log of cloud operations (Docs/operation-log.md): entries with sealed entity
/// IDs and errors, an RFC 9162 Merkle tree over them, and a signed C2SP checkpoint per batch.
///
/// Appends from concurrent callers are committed together: while one batch is being written,
/// the next callers' entries queue up and go in the following write, so the hot path of a sync
/// tool pays one durable write per batch, not per entry. Every append returns only once its
/// entry is durable.
public actor OperationLog {
    public nonisolated let storage: any LogStorage
    nonisolated let signer: NoteSigner
    /// The log's note key, for checking its checkpoints anywhere.
    public nonisolated let verifier: NoteVerifier

    private var queued: [(bytes: [UInt8], waiter: CheckedContinuation<UInt64, any Error>)] = []
    private var writing = false

    /// The most entries one read returns.
    public static let maxReadCount = 10_000

    public init(storage: any LogStorage) throws {
        self.storage = storage
        signer = try storage.keys.signer(origin: storage.origin)
        verifier = signer.verifier
    }

    // MARK: Appending

    /// Appends one entry; returns its index once it is durable.
    public func append(_ entry: OperationEntry) async throws -> UInt64 {
        let bytes = try EntryCodec.encode(entry, keys: storage.keys)
        return try await withCheckedThrowingContinuation { waiter in
            queued.append((bytes, waiter))
            if !writing {
                writing = true
                Task { await self.drain() }
            }
        }
    }

    /// Appends entries in order, in one write; returns their indices.
    public func append(contentsOf entries: [OperationEntry]) async throws -> Range<UInt64> {
        let encoded = try entries.map { try EntryCodec.encode($0, keys: storage.keys) }
        guard !encoded.isEmpty else {
            let size = try await storage.latest()?.checkpoint.size ?? 0
            return size..<size
        }
        let (first, _) = try await storage.append(encoded)
        return first..<(first + UInt64(encoded.count))
    }

    private func drain() async {
        while !queued.isEmpty {
            let batch = queued
            queued = []
            do {
                let (first, _) = try await storage.append(batch.map(\.bytes))
                for (offset, item) in batch.enumerated() { item.waiter.resume(returning: first + UInt64(offset)) }
            } catch {
                for item in batch { item.waiter.resume(throwing: error) }
            }
        }
        writing = false
    }

    // MARK: Reading

    /// The latest checkpoint; for a log without entries, a fresh signed checkpoint of the empty tree.
    public func checkpoint() async throws -> SignedCheckpoint {
        if let latest = try await storage.latest() { return latest }
        return try SignedCheckpoint(
            checkpoint: try Checkpoint(origin: storage.origin, size: 0, root: .empty), signer: signer)
    }

    /// The number of entries.
    public func size() async throws -> UInt64 { try await storage.latest()?.checkpoint.size ?? 0 }

    /// Entry `index`, opened.
    /// - Throws: ``LogErrorCode/pruned`` for a pruned entry; ``LogErrorCode/invalidParameter``
    ///   past the end; ``LogErrorCode/tampered`` when its bytes do not match its leaf hash.
    public func entry(at index: UInt64) async throws -> OperationEntry {
        guard let record = try await storage.records(from: index, count: 1).first, record.index == index else {
            throw LogError(.invalidParameter, "the log has no entry \(index)")
        }
        if record.bytes == nil { try Self.checkPruned(index, boundary: try await prunedBoundary()) }
        return try Self.open(record, keys: storage.keys)
    }

    /// The pruned boundary the latest checkpoint signs.
    func prunedBoundary() async throws -> UInt64 { try await storage.latest()?.checkpoint.prunedBefore ?? 0 }

    /// An entry without bytes must lie before the signed pruned boundary: pruning covers a prefix,
    /// and one erased past it was erased by someone without the log's key.
    /// Checks each record of a stretch on its own, in slices on every core at once: its index
    /// follows the one before, and its bytes match its leaf hash and, with the key, open (the
    /// sealed part opens, its plaintext keeps the rules, the entity hash is the HMAC of the sealed
    /// entity ID); a record without bytes lies below the signed pruned boundary. Throws the
    /// failure of the lowest entry; returns how many were pruned.
    static func checkRecords(
        _ records: [LogRecord], from first: UInt64, keys: LogKeys, boundary: UInt64
    ) async throws -> UInt64 {
        let parts = min(max(1, ProcessInfo.processInfo.activeProcessorCount), max(1, records.count / 1024), 8)
        if parts == 1 { return try checkRecords(records[...], from: first, keys: keys, boundary: boundary) }
        let size = (records.count + parts - 1) / parts
        let results = await withTaskGroup(of: (Int, Result<UInt64, any Error>).self) { group in
            for part in 0..<parts {
                let slice = records[min(part * size, records.count)..<min((part + 1) * size, records.count)]
                group.addTask {
                    (
                        part,
                        Result {
                            try checkRecords(slice, from: first + UInt64(part * size), keys: keys, boundary: boundary)
                        }
                    )
                }
            }
            var results = [Result<UInt64, any Error>](repeating: .success(0), count: parts)
            for await (part, result) in group { results[part] = result }
            return results
        }
        var pruned: UInt64 = 0
        for result in results { pruned += try result.get() }
        return pruned
    }

    static func checkRecords(
        _ records: ArraySlice<LogRecord>, from first: UInt64, keys: LogKeys, boundary: UInt64
    ) throws -> UInt64 {
        var expected = first
        var pruned: UInt64 = 0
        for record in records {
            guard record.index == expected else {
                throw LogError(.tampered, "entry \(expected) is missing (the next stored is \(record.index))")
            }
            expected += 1
            if let bytes = record.bytes {
                guard TreeHash.leaf(bytes).constantTimeEquals(record.leaf) else {
                    throw LogError(.tampered, "entry \(record.index)'s bytes do not match its leaf hash")
                }
                do {
                    try EntryCodec.verify(bytes, keys: keys)
                } catch let error as LogError {
                    throw LogError(.tampered, "entry \(record.index): \(error.reason)")
                }
            } else {
                try checkPruned(record.index, boundary: boundary)
                pruned += 1
            }
        }
        return pruned
    }

    static func checkPruned(_ index: UInt64, boundary: UInt64) throws {
        guard index < boundary else {
            throw LogError(
                .tampered,
                """
                entry \(index) has no bytes, but the checkpoint signs only entries before \(boundary) as pruned: it \
                was erased
                """)
        }
    }

    /// Entries `from ..< from + count`, opened (nil where pruned).
    public func entries(from index: UInt64, count: Int) async throws -> [(index: UInt64, entry: OperationEntry?)] {
        guard (0...Self.maxReadCount).contains(count) else {
            throw LogError(.invalidParameter, "read 0 to \(Self.maxReadCount) entries at a time")
        }
        let records = try await storage.records(from: index, count: count)
        let boundary = records.contains { $0.bytes == nil } ? try await prunedBoundary() : 0
        return try records.map { record in
            if record.bytes == nil { try Self.checkPruned(record.index, boundary: boundary) }
            return (record.index, record.bytes == nil ? nil : try Self.open(record, keys: storage.keys))
        }
    }

    static func open(_ record: LogRecord, keys: LogKeys) throws -> OperationEntry {
        guard let bytes = record.bytes else { throw LogError(.pruned, "entry \(record.index) was pruned") }
        guard TreeHash.leaf(bytes).constantTimeEquals(record.leaf) else {
            throw LogError(.tampered, "entry \(record.index)'s bytes do not match its leaf hash")
        }
        return try EntryCodec.open(try EntryCodec.decode(bytes), keys: keys)
    }

    /// The indices of the entries about `entityID` (found by its keyed hash) from `index` on,
    /// oldest first, at most `limit` (0 to ``maxReadCount``): the next page starts after the last.
    public func indices(
        ofEntity entityID: String, from index: UInt64 = 0, limit: Int = 1000
    ) async throws
        -> [UInt64]
    {
        guard (0...Self.maxReadCount).contains(limit) else {
            throw LogError(.invalidParameter, "find 0 to \(Self.maxReadCount) entries at a time")
        }
        return try await storage.find(entityHash: storage.keys.entityHash(entityID), from: index, limit: limit)
    }

    // MARK: Proofs

    /// The inclusion proof of entry `index` in the tree of `size` entries (default: the latest checkpoint's).
    public func inclusionProof(index: UInt64, size: UInt64? = nil) async throws -> InclusionProof {
        let latest = try await checkpoint().checkpoint
        let size = size ?? latest.size
        guard size <= latest.size else {
            throw LogError(.invalidParameter, "the log has \(latest.size) entries, not \(size)")
        }
        guard index < size else { throw LogError(.invalidParameter, "entry \(index) is not in a tree of \(size)") }
        let nodes = try await fetch(size: latest.size) {
            _ = try $0.node(level: 0, index: index)
            _ = try MerkleTree.root(of: $0, size: size)
            return try MerkleTree.inclusionProof(of: $0, index: index, size: size)
        }
        let leaf = try nodes.node(level: 0, index: index)
        return InclusionProof(
            index: index, size: size, leaf: leaf,
            path: try MerkleTree.inclusionProof(of: nodes, index: index, size: size),
            root: try MerkleTree.root(of: nodes, size: size))
    }

    /// The consistency proof from the tree of `oldSize` entries to that of `newSize` (default: the latest).
    public func consistencyProof(from oldSize: UInt64, to newSize: UInt64? = nil) async throws -> ConsistencyProof {
        let latest = try await checkpoint().checkpoint
        let newSize = newSize ?? latest.size
        guard newSize <= latest.size else {
            throw LogError(.invalidParameter, "the log has \(latest.size) entries, not \(newSize)")
        }
        guard oldSize <= newSize else {
            throw LogError(.invalidParameter, "the old size \(oldSize) is larger than the new size \(newSize)")
        }
        let nodes = try await fetch(size: latest.size) {
            _ = try MerkleTree.root(of: $0, size: oldSize)
            _ = try MerkleTree.root(of: $0, size: newSize)
            return try MerkleTree.consistencyProof(of: $0, from: oldSize, to: newSize)
        }
        return ConsistencyProof(
            oldSize: oldSize, newSize: newSize, oldRoot: try MerkleTree.root(of: nodes, size: oldSize),
            newRoot: try MerkleTree.root(of: nodes, size: newSize),
            path: try MerkleTree.consistencyProof(of: nodes, from: oldSize, to: newSize))
    }

    /// Runs `work` once to learn which nodes it reads, fetches exactly those, and returns them.
    private func fetch(size: UInt64, _ work: (NodeRecorder) throws -> [TreeHash]) async throws -> NodeMap {
        let recorder = NodeRecorder(size: size)
        _ = try work(recorder)
        return NodeMap(size: size, nodes: try await storage.nodes(recorder.wanted))
    }

    // MARK: Verifying and pruning

    /// Compares the nodes a stretch of entries closed, level by level, with the stored ones.
    private static func checkStoredNodes(
        _ closed: [Int: [(UInt64, TreeHash)]], in storage: any LogStorage
    ) async throws {
        for (level, nodes) in closed {
            guard let first = nodes.first, let last = nodes.last else { continue }
            let range = first.0..<(last.0 + 1)
            let stored = try await storage.nodes(level: level, in: range)
            for (index, hash) in nodes {
                guard let found = stored[index], found.constantTimeEquals(hash) else {
                    throw LogError(.tampered, "the stored tree node at level \(level), index \(index) is wrong")
                }
            }
        }
    }

    /// Checks the whole log: every entry's bytes against its leaf hash and format, every stored
    /// node against the tree rebuilt from the leaves, every stored checkpoint's signature and
    /// root, and that the latest checkpoint covers every entry.
    /// - Throws: ``LogErrorCode/tampered`` naming the first thing that does not hold.
    public func verify() async throws -> LogVerification {
        let checkpoints = try await storage.checkpoints()
        var pending = checkpoints[...]
        for signed in checkpoints {
            _ = try SignedCheckpoint(note: signed.note, verifier: verifier)
            guard signed.checkpoint.origin == storage.origin else {
                throw LogError(.tampered, "a checkpoint names another log (\(signed.checkpoint.origin))")
            }
        }
        var frontier = TreeFrontier()
        var pruned: UInt64 = 0
        let boundary = checkpoints.last?.checkpoint.prunedBefore ?? 0
        let keys = storage.keys
        let chunk = 8192
        let storage = self.storage
        // Reading the next chunk and comparing the last chunk's stored nodes overlap hashing this one.
        var next: Task<[LogRecord], any Error>? = Task { try await storage.records(from: 0, count: chunk) }
        var nodeCheck: Task<Void, any Error>?
        defer {
            next?.cancel()
            nodeCheck?.cancel()
        }
        while let fetching = next {
            let records = try await fetching.value
            let following = frontier.size + UInt64(records.count)
            next = records.count < chunk ? nil : Task { try await storage.records(from: following, count: chunk) }
            // The entries' own checks run beside the tree's growth from their leaf hashes; an entry
            // that fails its check is named before the tree it breaks.
            let first = frontier.size
            async let checked = Self.checkRecords(records, from: first, keys: keys, boundary: boundary)
            var closed: [Int: [(UInt64, TreeHash)]] = [:]
            let grown = Result {
                for record in records {
                    frontier.appendEach(record.leaf) { id, hash in
                        closed[id.level, default: []].append((id.index, hash))
                    }
                    while let checkpoint = pending.first, checkpoint.checkpoint.size <= frontier.size {
                        guard checkpoint.checkpoint.size == frontier.size,
                            checkpoint.checkpoint.root.constantTimeEquals(frontier.root)
                        else {
                            throw LogError(
                                .tampered,
                                """
                                the checkpoint of \(checkpoint.checkpoint.size) entries does not match the entries' \
                                tree
                                """)
                        }
                        pending = pending.dropFirst()
                    }
                }
            }
            pruned += try await checked
            try grown.get()
            try await nodeCheck?.value
            let computed = closed
            nodeCheck = Task { try await Self.checkStoredNodes(computed, in: storage) }
        }
        try await nodeCheck?.value
        if let next = pending.first {
            throw LogError(
                .tampered,
                """
                a checkpoint covers \(next.checkpoint.size) entries but the log holds \(frontier.size): it was cut \
                short
                """
            )
        }
        if frontier.size > 0 {
            guard let last = checkpoints.last, last.checkpoint.size == frontier.size else {
                throw LogError(.tampered, "entries after the latest checkpoint: the last write did not finish")
            }
        }
        return LogVerification(size: frontier.size, root: frontier.root, pruned: pruned, checkpoints: checkpoints.count)
    }

    /// Removes the bytes of entries before `index` (their leaf hashes stay, so the tree still
    /// verifies and proves); returns how many entries were pruned now.
    public func prune(before index: UInt64) async throws -> UInt64 {
        let size = try await size()
        guard index <= size else { throw LogError(.invalidParameter, "the log has \(size) entries, not \(index)") }
        return try await storage.prune(before: index)
    }
}

/// What ``OperationLog/verify()`` checked.
public struct LogVerification: Sendable, Hashable {
    public let size: UInt64
    public let root: TreeHash
    /// Entries whose bytes were pruned (their leaf hashes were checked against the tree).
    public let pruned: UInt64
    /// Signed checkpoints checked.
    public let checkpoints: Int
}

/// An inclusion proof, with what it proves.
public struct InclusionProof: Sendable, Hashable {
    public let index: UInt64
    public let size: UInt64
    public let leaf: TreeHash
    public let path: [TreeHash]
    public let root: TreeHash

    /// Checks the proof against its own root (use ``MerkleProof`` against a root you trust).
    public func verify() throws {
        try MerkleProof.verifyInclusion(index: index, size: size, leaf: leaf, proof: path, root: root)
    }
}

/// A consistency proof, with what it proves.
public struct ConsistencyProof: Sendable, Hashable {
    public let oldSize: UInt64
    public let newSize: UInt64
    public let oldRoot: TreeHash
    public let newRoot: TreeHash
    public let path: [TreeHash]

    public func verify() throws {
        try MerkleProof.verifyConsistency(
            oldSize: oldSize, newSize: newSize, oldRoot: oldRoot, newRoot: newRoot, proof: path)
    }
}
