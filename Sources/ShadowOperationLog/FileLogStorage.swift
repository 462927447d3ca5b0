#if canImport(Darwin)
import Darwin
#else
import Glibc
#endif
import ShadowCore
public import ShadowVault
import Synchronization
import ShadowStorage

/// An operation log in one append-only file (Docs/operation-log.md, "The log file").
///
/// Each batch is one write of its entry records and a checkpoint record, then `fsync`: a crash
/// leaves at most an unfinished batch after the last checkpoint, which readers ignore and the
/// next writer cuts off. Writers in any number of processes take the lock file `<path>.lock`.
/// Opening reads the whole file and rebuilds the tree in memory (about 64 bytes per entry), checking
/// every checkpoint on the way.
public final class FileLogStorage: LogStorage {
    public let path: String
    public let origin: String
    public let keys: LogKeys
    private let signer: NoteSigner
    private let verifier: NoteVerifier
    private let lockTimeout: Double
    private let state: Mutex<State>

    static let magic = Array("SKOL".utf8)
    static let version: UInt8 = 1
    static let entryRecord: UInt8 = 1
    static let prunedRecord: UInt8 = 2
    static let checkpointRecord: UInt8 = 3
    /// The largest file opened.
    public static let maxFileBytes = 1 << 40

    struct State {
        var device: UInt64 = 0
        var inode: UInt64 = 0
        var headerLength = 0
        /// Bytes through the last checkpoint record.
        var committed = 0
        var tree = MemoryTree()
        /// Each entry's payload offset and length; length -1 once pruned.
        var spans: [(offset: Int, length: Int)] = []
        var checkpoints: [SignedCheckpoint] = []
    }

    private init(path: String, origin: String, keys: LogKeys, lockTimeout: Double, state: State) throws {
        self.path = path
        self.origin = origin
        self.keys = keys
        signer = try keys.signer(origin: origin)
        verifier = signer.verifier
        self.lockTimeout = lockTimeout
        self.state = Mutex(state)
    }

    /// Opens the log file at `path`, creating it (mode 0600) when `create` is set and there is none.
    /// - Parameter origin: the new log's name (a schema-less URL such as `example.com/sync-log`);
    ///   an existing log keeps its own, and a different one given here is refused.
    /// - Throws: ``LogErrorCode/notFound``, ``LogErrorCode/notALog``, ``LogErrorCode/wrongKey``,
    ///   ``LogErrorCode/tampered``.
    public static func open(
        path: String, unlock: VaultUnlock, create: Bool = false, origin: String? = nil,
        lockTimeout: Duration = .seconds(10)
    ) async throws -> FileLogStorage {
        guard lockTimeout >= .zero, lockTimeout <= .seconds(3600) else {
            throw LogError(.invalidParameter, "the lock timeout is 0 to 3600 seconds")
        }
        let seconds = lockTimeout.inSeconds
        return try await runBlocking {
            try openSync(path: path, unlock: unlock, create: create, origin: origin, lockTimeout: seconds)
        }
    }

    /// The log's lock file, taken; nil at the timeout. A missing folder is ``LogErrorCode/notFound``.
    static func lock(_ path: String, timeout: Double) throws -> FileLock? {
        do { return try FileLock.acquire(path + ".lock", timeout: timeout) } catch let error as FileError {
            throw LogError(error.isNotFound ? .notFound : .io, error.description)
        }
    }

    /// ``open(path:unlock:create:origin:lockTimeout:)`` on the calling thread.
    package static func openSync(
        path: String, unlock: VaultUnlock, create: Bool = false, origin: String? = nil, lockTimeout seconds: Double = 10
    ) throws -> FileLogStorage {
        if create, !Self.exists(path) {
            guard let lock = try Self.lock(path, timeout: seconds) else {
                throw LogError(.lockTimeout, "another process held the log's lock for \(seconds) s")
            }
            defer { lock.release() }
            if !Self.exists(path) { try Self.create(path: path, unlock: unlock, origin: origin) }
        }
        let header = try Self.readHeader(path: path, unlock: unlock)
        if let origin, origin != header.origin {
            throw LogError(.invalidParameter, "the log's origin is \(header.origin), not \(origin)")
        }
        let storage: FileLogStorage
        do {
            storage = try FileLogStorage(
                path: path, origin: header.origin, keys: header.keys, lockTimeout: seconds,
                state: State(headerLength: header.length))
        } catch let error as LogError {
            throw LogError(.tampered, "the log's origin: \(error.reason)")
        }
        try storage.state.withLock { try storage.refresh(&$0, truncateTail: false) }
        return storage
    }

    /// The number of entries (the tree's size), as read.
    package var size: UInt64 { state.withLock { $0.tree.size } }

    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    static func create(path: String, unlock: VaultUnlock, origin: String?) throws {
        let origin =
            origin ?? "oplog.shadow-keys.invalid/"
            + Hex.encode(SecretBytes.random(count: 8).withUnsafeBytes { Array($0) })
        _ = try Checkpoint(origin: origin, size: 0, root: .empty)
        try NoteKeys.checkName(origin)
        let sealed: [UInt8]
        do {
            sealed = try SealedStoreSecret.create(unlock: unlock, purpose: .operationLog).stored
        } catch let error as StorageError {
            throw LogError(storeFailure: error)
        }
        var header = magic + [version, UInt8(origin.utf8.count)] + Array(origin.utf8)
        header += [UInt8(sealed.count >> 8), UInt8(sealed.count & 0xFF)] + sealed
        header += SHA256Bytes.of(header)
        try Files.writeAtomically(path, header)
    }

    static func readHeader(path: String, unlock: VaultUnlock) throws -> (origin: String, keys: LogKeys, length: Int) {
        let fd = systemOpen(path, O_RDONLY | O_CLOEXEC, 0)
        guard fd >= 0 else {
            if errno == ENOENT { throw LogError(.notFound, "there is no operation log at \(path)") }
            throw LogError(.io, "\(FileError("open", path))")
        }
        defer { systemClose(fd) }
        var reader = FileChunks(fd: fd, path: path)
        func notALog(_ why: String) -> LogError { LogError(.notALog, "\(path) is not an operation log: \(why)") }
        guard let start = try reader.bytes(at: 0, count: 6) else { throw notALog("it is too short") }
        guard Array(start[start.startIndex..<start.startIndex + 4]) == magic else { throw notALog("no SKOL magic") }
        guard start[start.startIndex + 4] == version else { throw notALog("version \(start[start.startIndex + 4])") }
        let originLength = Int(start[start.startIndex + 5])
        guard let originBytes = try reader.bytes(at: 6, count: originLength + 2) else {
            throw LogError(.tampered, "the log's header is cut short")
        }
        let sealedLength = Int(originBytes[originBytes.endIndex - 2]) << 8 | Int(originBytes[originBytes.endIndex - 1])
        let length = 6 + originLength + 2 + sealedLength + 32
        guard let header = try reader.bytes(at: 0, count: length) else {
            throw LogError(.tampered, "the log's header is cut short")
        }
        let body = Array(header.dropLast(32))
        guard ConstantTime.equals(SHA256Bytes.of(body), Array(header.suffix(32))) else {
            throw LogError(.tampered, "the log's header is damaged (its SHA-256 does not match)")
        }
        guard let origin = String(validating: body[6..<(6 + originLength)], as: UTF8.self), !origin.isEmpty else {
            throw LogError(.tampered, "the log's origin is not UTF-8")
        }
        let secret: [UInt8]
        do {
            secret = try SealedStoreSecret.open(
                Array(body[(6 + originLength + 2)...]), unlock: unlock, purpose: .operationLog)
        } catch let error as StorageError {
            throw LogError(storeFailure: error)
        }
        return (origin, try LogKeys(secret: secret), length)
    }

    // MARK: Reading the file

    /// Reads what other writers added (or everything, when the file was replaced). With
    /// `truncateTail` (the caller holds the lock), cuts off an unfinished batch.
    private func refresh(_ state: inout State, truncateTail: Bool) throws {
        let fd = systemOpen(path, (truncateTail ? O_RDWR : O_RDONLY) | O_CLOEXEC, 0)
        guard fd >= 0 else { throw LogError(.io, "\(FileError("open", path))") }
        defer { systemClose(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw LogError(.io, "\(FileError("stat", path))") }
        guard Int(info.st_size) <= Self.maxFileBytes else { throw LogError(.io, "the log file is over 1 TiB") }
        if UInt64(info.st_dev) != state.device || UInt64(info.st_ino) != state.inode
            || Int(info.st_size) < state.committed
        {
            state = State(headerLength: state.headerLength)
            state.device = UInt64(info.st_dev)
            state.inode = UInt64(info.st_ino)
            state.committed = state.headerLength
        }
        guard Int(info.st_size) > state.committed else { return }
        var reader = FileChunks(fd: fd, path: path)
        var offset = state.committed
        // The tree grows in place (a copy would cost the whole tree per checkpoint); the leaves
        // past the last checkpoint read are dropped again when the loop ends or fails.
        var committedSize = state.tree.size
        defer { state.tree.truncate(to: committedSize) }
        var spans: [(offset: Int, length: Int)] = []
        while let head = try reader.bytes(at: offset, count: 5) {
            let type = head[head.startIndex]
            let length = head.dropFirst().reduce(0) { $0 << 8 | Int($1) }
            let limit = type == Self.checkpointRecord ? SignedNote.maxBytes : EntryCodec.maxBytes
            guard length <= limit else { throw LogError(.tampered, "a record at byte \(offset) is too long") }
            guard let payload = try reader.bytes(at: offset + 5, count: length) else { break }
            switch type {
            case Self.entryRecord:
                state.tree.append(TreeHash.leaf(payload))
                spans.append((offset + 5, length))
            case Self.prunedRecord:
                guard let leaf = TreeHash(bytes: payload) else {
                    throw LogError(.tampered, "a pruned record at byte \(offset) is not a 32-byte hash")
                }
                state.tree.append(leaf)
                spans.append((offset + 5, -1))
            case Self.checkpointRecord:
                let signed: SignedCheckpoint
                do {
                    signed = try SignedCheckpoint(note: String(decoding: payload, as: UTF8.self), verifier: verifier)
                } catch let error as LogError {
                    throw LogError(.tampered, "the checkpoint at byte \(offset): \(error.reason)")
                }
                guard signed.checkpoint.origin == origin, signed.checkpoint.size == state.tree.size,
                    signed.checkpoint.root.constantTimeEquals(state.tree.root)
                else {
                    throw LogError(
                        .tampered,
                        "the checkpoint at byte \(offset) does not match the \(state.tree.size) entries before it")
                }
                committedSize = state.tree.size
                state.spans += spans
                spans = []
                state.checkpoints.append(signed)
                state.committed = offset + 5 + length
            default:
                throw LogError(.tampered, "a record at byte \(offset) has unknown type \(type)")
            }
            offset += 5 + length
        }
        if truncateTail, Int(info.st_size) > state.committed {
            // An unfinished batch of a writer that died: never acknowledged, so never a loss.
            guard ftruncate(fd, off_t(state.committed)) == 0, fsync(fd) == 0 else {
                throw LogError(.io, "\(FileError("truncate", path))")
            }
        }
    }

    private func withRefreshed<R>(_ body: (inout State) throws -> R) throws -> R {
        try state.withLock { state in
            try refresh(&state, truncateTail: false)
            return try body(&state)
        }
    }

    private func withLocked<R>(_ body: (inout State) throws -> R) throws -> R {
        guard let lock = try Self.lock(path, timeout: lockTimeout) else {
            throw LogError(.lockTimeout, "another process held the log's lock for \(lockTimeout) s")
        }
        defer { lock.release() }
        return try state.withLock { state in
            try refresh(&state, truncateTail: true)
            return try body(&state)
        }
    }

    // MARK: LogStorage

    public func append(_ entries: [[UInt8]]) async throws -> (first: UInt64, checkpoint: SignedCheckpoint) {
        try await runBlocking {
            try self.withLocked { state in
                // The batch's leaves go onto the tree in place, and come off again unless the batch
                // is written (a copy of the tree would cost the whole tree per append).
                let first = state.tree.size
                var written = false
                defer { if !written { state.tree.truncate(to: first) } }
                var out: [UInt8] = []
                var spans: [(offset: Int, length: Int)] = []
                for entry in entries {
                    guard entry.count <= EntryCodec.maxBytes else {
                        throw LogError(.invalidParameter, "an entry is over \(EntryCodec.maxBytes) bytes")
                    }
                    state.tree.append(TreeHash.leaf(entry))
                    spans.append((state.committed + out.count + 5, entry.count))
                    Self.appendRecord(Self.entryRecord, entry, to: &out)
                }
                // The signed pruned boundary carries on into every later checkpoint.
                let signed = try SignedCheckpoint(
                    checkpoint: try Checkpoint(
                        origin: self.origin, size: state.tree.size, root: state.tree.root,
                        prunedBefore: state.checkpoints.last?.checkpoint.prunedBefore ?? 0),
                    signer: self.signer)
                Self.appendRecord(Self.checkpointRecord, Array(signed.note.utf8), to: &out)
                let fd = systemOpen(self.path, O_WRONLY | O_CLOEXEC, 0)
                guard fd >= 0 else { throw LogError(.io, "\(FileError("open", self.path))") }
                defer { systemClose(fd) }
                do {
                    guard lseek(fd, off_t(state.committed), SEEK_SET) >= 0 else { throw FileError("seek", self.path) }
                    try Files.writeAll(fd, out, path: self.path)
                    guard fsync(fd) == 0 else { throw FileError("fsync", self.path) }
                } catch let error as FileError {
                    // Leave the file as it was: cut off whatever part of the batch reached it.
                    _ = ftruncate(fd, off_t(state.committed))
                    throw LogError(.io, "\(error)")
                }
                written = true
                state.spans += spans
                state.checkpoints.append(signed)
                state.committed += out.count
                return (first, signed)
            }
        }
    }

    static func appendRecord(_ type: UInt8, _ payload: [UInt8], to out: inout [UInt8]) {
        out.append(type)
        out += BigEndian.bytes(UInt32(payload.count))
        out += payload
    }

    public func latest() async throws -> SignedCheckpoint? {
        try await runBlocking { try self.withRefreshed { $0.checkpoints.last } }
    }

    public func checkpoints() async throws -> [SignedCheckpoint] {
        try await runBlocking { try self.withRefreshed { $0.checkpoints } }
    }

    public func records(from index: UInt64, count: Int) async throws -> [LogRecord] {
        try await runBlocking {
            try self.withRefreshed { state in
                let size = state.tree.size
                guard index < size, count > 0 else { return [] }
                let end = min(size, index + UInt64(count))
                let fd = systemOpen(self.path, O_RDONLY | O_CLOEXEC, 0)
                guard fd >= 0 else { throw LogError(.io, "\(FileError("open", self.path))") }
                defer { systemClose(fd) }
                var reader = FileChunks(fd: fd, path: self.path)
                return try (index..<end).map { position in
                    let span = state.spans[Int(position)]
                    guard let leaf = state.tree.leaf(position) else {
                        throw LogError(.tampered, "the log's tree has no leaf \(position)")
                    }
                    guard span.length >= 0 else { return LogRecord(index: position, leaf: leaf, bytes: nil) }
                    guard let bytes = try reader.bytes(at: span.offset, count: span.length) else {
                        throw LogError(.tampered, "entry \(position) was cut out of the file")
                    }
                    return LogRecord(index: position, leaf: leaf, bytes: Array(bytes))
                }
            }
        }
    }

    public func nodes(level: Int, in range: Range<UInt64>) async throws -> [UInt64: TreeHash] {
        try await runBlocking {
            try self.withRefreshed { state in
                var found: [UInt64: TreeHash] = [:]
                for index in range { found[index] = try? state.tree.node(level: level, index: index) }
                return found
            }
        }
    }

    /// Rewrites the file with the entries before `index` as pruned records (an atomic replace).
    public func prune(before index: UInt64) async throws -> UInt64 {
        try await runBlocking {
            try self.withLocked { state in
                let pruned = state.checkpoints.last?.checkpoint.prunedBefore ?? 0
                let end = max(pruned, min(index, state.tree.size))
                let toPrune = (0..<Int(end)).filter { state.spans[$0].length >= 0 }
                guard !toPrune.isEmpty || end != pruned else { return 0 }
                let fd = systemOpen(self.path, O_RDONLY | O_CLOEXEC, 0)
                guard fd >= 0 else { throw LogError(.io, "\(FileError("open", self.path))") }
                defer { systemClose(fd) }
                var reader = FileChunks(fd: fd, path: self.path)
                let writer = try AtomicFileWriter(path: self.path)
                do {
                    var out = Array(try reader.bytes(at: 0, count: state.headerLength) ?? [])
                    var offset = state.headerLength
                    var entry = 0
                    while offset < state.committed {
                        guard let head = try reader.bytes(at: offset, count: 5) else { break }
                        let type = head[head.startIndex]
                        let length = head.dropFirst().reduce(0) { $0 << 8 | Int($1) }
                        let payload = Array(try reader.bytes(at: offset + 5, count: length) ?? [])
                        if type == Self.entryRecord, entry < Int(end), let leaf = state.tree.leaf(UInt64(entry)) {
                            Self.appendRecord(Self.prunedRecord, leaf.bytes, to: &out)
                        } else {
                            Self.appendRecord(type, payload, to: &out)
                        }
                        if type != Self.checkpointRecord { entry += 1 }
                        offset += 5 + length
                        if out.count >= 1 << 20 {
                            try writer.write(out)
                            out.removeAll(keepingCapacity: true)
                        }
                    }
                    // A last checkpoint of the same tree that signs the new pruned boundary.
                    let signed = try SignedCheckpoint(
                        checkpoint: try Checkpoint(
                            origin: self.origin, size: state.tree.size, root: state.tree.root, prunedBefore: end),
                        signer: self.signer)
                    Self.appendRecord(Self.checkpointRecord, Array(signed.note.utf8), to: &out)
                    try writer.write(out)
                    try writer.commit()
                } catch {
                    writer.abort()
                    throw error
                }
                try self.refresh(&state, truncateTail: false)
                return UInt64(toPrune.count)
            }
        }
    }

    public func find(entityHash: [UInt8], from start: UInt64, limit: Int) async throws -> [UInt64] {
        var found: [UInt64] = []
        var index = start
        while found.count < limit {
            let records = try await records(from: index, count: 4096)
            for record in records {
                guard let bytes = record.bytes, let stored = try? EntryCodec.decode(bytes) else { continue }
                if ConstantTime.equals(stored.entityHash, entityHash) { found.append(record.index) }
                if found.count == limit { break }
            }
            if records.count < 4096 { break }
            index += 4096
        }
        return found
    }

    public func close() async {}
}

/// Reads a file through a 4 MiB window, so a log of any size is parsed with bounded memory and
/// few system calls.
struct FileChunks {
    let fd: Int32
    let path: String
    private var window: [UInt8] = []
    private var start = 0

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    /// The bytes `offset ..< offset + count`; nil when the file ends first.
    mutating func bytes(at offset: Int, count: Int) throws -> ArraySlice<UInt8>? {
        if offset >= start, offset + count <= start + window.count {
            return window[(offset - start)..<(offset - start + count)]
        }
        let size = max(count, 4 << 20)
        var buffer = [UInt8](repeating: 0, count: size)
        var filled = 0
        while filled < size {
            let read = buffer.withUnsafeMutableBytes {
                $0.baseAddress.map { pread(fd, $0 + filled, size - filled, off_t(offset + filled)) } ?? 0
            }
            if read < 0 {
                if errno == EINTR { continue }
                throw LogError(.io, "\(FileError("read", path))")
            }
            if read == 0 { break }
            filled += read
        }
        window = Array(buffer[..<filled])
        start = offset
        guard count <= filled else { return nil }
        return window[0..<count]
    }
}
