/// One entry as stored: its leaf hash, and its bytes unless they were pruned.
public struct LogRecord: Sendable, Hashable {
    public let index: UInt64
    public let leaf: TreeHash
    /// The entry's bytes; nil once pruned.
    public let bytes: [UInt8]?

    public init(index: UInt64, leaf: TreeHash, bytes: [UInt8]?) {
        (self.index, self.leaf, self.bytes) = (index, leaf, bytes)
    }
}

/// A checkpoint and the signed note that carries it.
public struct SignedCheckpoint: Sendable, Hashable {
    /// The whole signed note, as stored and printed.
    public let note: String
    public let checkpoint: Checkpoint

    /// Opens `note` with `verifier` and parses its checkpoint.
    public init(note: String, verifier: NoteVerifier) throws {
        self.note = note
        checkpoint = try Checkpoint(text: try SignedNote.open(note, verifiers: [verifier]))
    }

    /// Signs `checkpoint` with `signer`.
    public init(checkpoint: Checkpoint, signer: NoteSigner) throws {
        self.checkpoint = checkpoint
        note = try signer.sign(checkpoint.text)
    }
}

/// Where an operation log keeps its entries, tree nodes and checkpoints: an append-only file
/// (``FileLogStorage``), SQLite (ShadowSQLite) or PostgreSQL (ShadowPostgres).
///
/// A storage signs and stores one checkpoint per appended batch, in the same write as the batch,
/// and serialises writers in any number of processes.
public protocol LogStorage: Sendable {
    /// The log's name: its checkpoints' origin and its note key's name.
    var origin: String { get }
    /// The keys derived from the log's secret.
    var keys: LogKeys { get }

    /// Appends `entries` (encoded) after every entry any writer appended before, with the signed
    /// checkpoint of the grown tree, durably, as one write. Returns the first new index and the checkpoint.
    func append(_ entries: [[UInt8]]) async throws -> (first: UInt64, checkpoint: SignedCheckpoint)
    /// The latest checkpoint stored; nil for a log without entries.
    func latest() async throws -> SignedCheckpoint?
    /// Every checkpoint this storage keeps, oldest first (the file keeps one per batch, the
    /// databases the latest).
    func checkpoints() async throws -> [SignedCheckpoint]
    /// Entries `from ..< from + count` (fewer at the end of the log), in order.
    func records(from: UInt64, count: Int) async throws -> [LogRecord]
    /// The stored complete-subtree hashes at `level` (≥ 1) with indices in `range`, by index.
    func nodes(level: Int, in range: Range<UInt64>) async throws -> [UInt64: TreeHash]
    /// Removes the bytes of entries before `index`; their leaf hashes stay. Returns how many were pruned.
    func prune(before index: UInt64) async throws -> UInt64
    /// The indices, from `index` on and in order, of entries (not pruned) whose entity hash is
    /// `entityHash`, at most `limit`.
    func find(entityHash: [UInt8], from index: UInt64, limit: Int) async throws -> [UInt64]
    /// Releases the storage's files or connections.
    func close() async
}

extension LogStorage {
    /// The stored hashes of `ids`: level 0 from the records, higher levels from the nodes.
    func nodes(_ ids: Set<NodeID>) async throws -> [NodeID: TreeHash] {
        var found: [NodeID: TreeHash] = [:]
        for (level, group) in Dictionary(grouping: ids, by: \.level) {
            for id in group {
                if level == 0 {
                    guard let record = try await records(from: id.index, count: 1).first else { continue }
                    found[id] = record.leaf
                } else if let hash = try await nodes(level: level, in: id.index..<(id.index + 1))[id.index] {
                    found[id] = hash
                }
            }
        }
        return found
    }
}
