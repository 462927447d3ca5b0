#if canImport(Darwin)
import Darwin
#else
import Glibc
#endif
import Logging
import NIOCore
import ShadowCore
public import ShadowStorage
package import SQLiteNIO
import Synchronization
import VaporCSQLite

/// One SQLite database file, opened once per process and shared by every feature kept in it
/// (credential state, sessions, the operation log): one writer connection, whose writes are
/// group-committed, and at most two readers (Docs/architecture.md, "Storage"). WAL mode and
/// `synchronous=FULL`; writers in every process are serialised by SQLite's write lock (`BEGIN
/// IMMEDIATE`, waiting up to the lock timeout), and readers never wait for them.
public final class SQLiteDatabase: SQLDatabase {
    public let path: String
    /// How long a write waits for another process's write lock, in seconds.
    let lockTimeout: Double
    /// Opened for reading only: SQLite refuses every write, and no writer is ever opened.
    let readOnly: Bool
    private let reader: SQLiteConnection
    private let readLock = AsyncLock()
    /// A second reader, for a reader that reads two things at once (the log's tree nodes).
    private let secondReader = Mutex<SQLiteConnection?>(nil)
    private let secondReadLock = AsyncLock()
    /// The writer (``SQLiteWriterConnection``), opened on first use.
    private let writer = Mutex<SQLiteWriterConnection?>(nil)
    private let writeLock = AsyncLock()
    /// The writer's own thread: every call on the writer runs there (a group commit, its BEGIN,
    /// statements and COMMIT, as one job).
    private let writerThread = NIOThreadPool(numberOfThreads: 1)
    private let writerThreadStarted = Mutex(false)
    /// Writes waiting for the next commit, and whether a commit is under way.
    private let queue = Mutex<(waiting: [Write], committing: Bool)>(([], false))

    /// Statements sent together (one ``write(_:_:)``, or one ``writeEach(_:)``), answered together.
    private struct Write: Sendable {
        let statements: [SQLStatement]
        let done: CheckedContinuation<[Result<[SQLRow], any Error>], Never>
    }

    package var dialect: SQLDialect { .sqlite }
    package var locationDescription: String { path }

    private init(path: String, reader: SQLiteConnection, lockTimeout: Double, readOnly: Bool) {
        self.path = path
        self.reader = reader
        self.lockTimeout = lockTimeout
        self.readOnly = readOnly
    }

    /// Opens the database at `path`; with `create`, makes the file first (mode 0600, its folder
    /// 0700) when it is missing. A reader (`readOnly`) opens it read-only (`mode=ro`).
    /// - Throws: ``StorageErrorCode/unavailable`` when it cannot be opened (no file, and not
    ///   `create`: with the reason "no database"); ``StorageErrorCode/invalidParameter``.
    public static func open(
        path: String, create: Bool, readOnly: Bool = false, lockTimeout: Duration = .seconds(10)
    ) async throws -> SQLiteDatabase {
        guard lockTimeout >= .zero, lockTimeout <= .seconds(3600) else {
            throw StorageError(.invalidParameter, "the lock timeout is 0 to 3600 seconds")
        }
        try prepareFile(path, create: create && !readOnly)
        let seconds = lockTimeout.inSeconds
        return SQLiteDatabase(
            path: path, reader: try await connect(path, seconds, readOnly: readOnly), lockTimeout: seconds,
            readOnly: readOnly)
    }

    private let closed = Mutex(false)

    /// Closes every connection (once; closing again does nothing).
    public func close() async {
        guard
            !closed.withLock({ was in
                defer { was = true }
                return was
            })
        else { return }
        let writerThreadStarted = writerThreadStarted.withLock { $0 }
        let connections = [secondReader.withLock { $0 }].compactMap { $0 } + [reader]
        let writer = writer.withLock { $0 }
        // Closed in a task of its own: a cancelled caller (a server past its grace) must still close them.
        await Task { [writerThread] in
            for connection in connections { try? await connection.close() }
            if let writer { try? await writerThread.runIfActive { writer.close() } }
            if writerThreadStarted { try? await writerThread.shutdownGracefully() }
        }.value
    }

    // MARK: Connections

    /// Runs `body` on the reader, alone.
    package func withReader<R: Sendable>(_ body: @Sendable (SQLiteConnection) async throws -> R) async throws -> R {
        try await readLock.withLock { try await mapped { try await body(reader) } }
    }

    /// Runs `body` on the second reader (opened on first use), alone.
    package func withSecondReader<R: Sendable>(_ body: @Sendable (SQLiteConnection) async throws -> R) async throws -> R
    {
        try await secondReadLock.withLock {
            let connection: SQLiteConnection
            if let existing = secondReader.withLock({ $0 }) {
                connection = existing
            } else {
                connection = try await Self.connect(path, lockTimeout, readOnly: readOnly)
                secondReader.withLock { $0 = connection }
            }
            return try await mapped { try await body(connection) }
        }
    }

    /// Runs `body` with the writer (opened on first use, in WAL mode with `synchronous=FULL`),
    /// alone: every transaction and group commit of this process takes its turn here.
    func withWriter<R: Sendable>(_ body: @Sendable (SQLiteWriter) async throws -> R) async throws -> R {
        try await writeLock.withLock {
            let writer = SQLiteWriter(connection: try await writeConnection(), thread: writerThread, path: path)
            return try await mapped { try await body(writer) }
        }
    }

    /// The writer's settings. Beside WAL and `synchronous=FULL`: a multi-row INSERT with an
    /// explicit `INTEGER PRIMARY KEY` (the log's entries and nodes, the audit lines) or an upsert
    /// or UPDATE of many rows keeps a statement journal, a copy of every existing page it
    /// touches, so that it can fail alone; `temp_store=MEMORY` keeps that copy in memory instead
    /// of writing it to a temporary file. A page cache of 16 MiB (SQLite's default is 2 MiB)
    /// holds a batch's pages at random keys (the state rows, the log's entity index) until
    /// COMMIT, instead of spilling them to the WAL mid-transaction. The journal lasts one
    /// statement; the cache fills only as pages are used.
    static let writerPragmas = [
        "journal_mode = WAL", "synchronous = FULL", "temp_store = MEMORY", "cache_size = -16384",
    ]

    private func startWriterThread() {
        writerThreadStarted.withLock { started in
            if !started { writerThread.start() }
            started = true
        }
    }

    /// The writer, opened on its thread with ``writerPragmas`` when it is not open yet; called
    /// with the writer's lock held.
    private func writeConnection() async throws -> SQLiteWriterConnection {
        if let existing = writer.withLock({ $0 }) { return existing }
        guard !readOnly else { throw StorageError(.invalidParameter, "\(path) was opened for reading only") }
        startWriterThread()
        let opened = try await SQLiteWriter.onThread(writerThread, path) { [path, lockTimeout] in
            try SQLiteWriterConnection(path: path, lockTimeout: lockTimeout, pragmas: Self.writerPragmas)
        }
        writer.withLock { $0 = opened }
        return opened
    }

    /// A connection whose busy handler waits up to the lock timeout (sqlite-nio's default retries
    /// at once, forever). sqlite-nio opens with `SQLITE_OPEN_URI`, so a read-only open is a
    /// `file:` URI with `mode=ro`.
    package static func connect(_ path: String, _ lockTimeout: Double, readOnly: Bool) async throws -> SQLiteConnection
    {
        var logger = Logger(label: "shadow-keys.sqlite")
        logger.logLevel = .critical
        let name = readOnly ? "file:\(uriPath(path))?mode=ro" : path
        let connection = try await mapped(path) {
            try await SQLiteConnection.open(
                storage: .file(path: name), threadPool: .singleton, logger: logger,
                on: MultiThreadedEventLoopGroup.singleton.any())
        }
        do {
            _ = try await mapped(path) {
                try await connection.query("PRAGMA busy_timeout = \(Int(lockTimeout * 1000))", [])
            }
        } catch {
            try? await connection.close()
            throw error
        }
        return connection
    }

    // MARK: SQLDatabase

    package func read(_ sql: String, _ values: [SQLValue]) async throws -> [SQLRow] {
        try await withReader { try await Self.rows($0, sql, values) }
    }

    /// Each row handed to `row` on the reader's thread as SQLite steps to it: no array of driver
    /// rows, and no ``SQLRow``. After the first error `row` throws, the rest are skipped.
    package func read(
        _ sql: String, _ values: [SQLValue], aside: Bool, each row: @escaping @Sendable (any SQLColumns) throws -> Void
    ) async throws {
        let body: @Sendable (SQLiteConnection) async throws -> Void = { connection in
            let failure = RowFailure()
            try await connection.query(sql, values.map(Self.data)) { stepped in
                guard failure.error == nil else { return }
                do { try row(SQLiteColumns(columns: stepped.columns)) } catch { failure.error = error }
            }
            if let error = failure.error { throw error }
        }
        try await aside ? withSecondReader(body) : withReader(body)
    }

    /// The first error of a read's rows, set and read on the thread that steps the statement.
    private final class RowFailure: @unchecked Sendable {
        var error: (any Error)?
    }

    /// The rows of one statement, sharing one array of column names.
    static func rows(_ connection: SQLiteConnection, _ sql: String, _ values: [SQLValue]) async throws -> [SQLRow] {
        rows(try await connection.query(sql, values.map(Self.data)))
    }

    static func rows(_ rows: [SQLiteRow]) -> [SQLRow] {
        guard let first = rows.first else { return [] }
        let names = first.columns.map(\.name)
        return rows.map { row(names, $0) }
    }

    /// One statement, committed durably before it returns. Statements that arrive while a commit
    /// is under way run together in the next transaction (group commit): each has its own effect,
    /// so running them together changes nothing but the number of fsyncs. A statement that fails
    /// fails alone; a commit that fails fails its whole group.
    package func write(_ sql: String, _ values: [SQLValue]) async throws -> [SQLRow] {
        guard let result = await writeEach([SQLStatement(sql, values)]).first else { return [] }
        return try result.get()
    }

    /// Statements queued for the group commit at once, with one wait for all their answers: a
    /// caller with several independent writes hands them over in one step, not one task each.
    package func writeEach(_ statements: [SQLStatement]) async -> [Result<[SQLRow], any Error>] {
        guard !statements.isEmpty else { return [] }
        return await withCheckedContinuation { done in
            let start = queue.withLock { state -> Bool in
                state.waiting.append(Write(statements: statements, done: done))
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
            let statements = group.flatMap(\.statements)
            let results: [Result<[SQLRow], any Error>]
            do {
                results = try await withWriter { try await $0.commit(statements) }
            } catch {
                results = Array(repeating: .failure(error), count: statements.count)
            }
            var next = results[...]
            for write in group {
                write.done.resume(returning: Array(next.prefix(write.statements.count)))
                next = next.dropFirst(write.statements.count)
            }
        }
    }

    package func readAside(_ sql: String, _ values: [SQLValue]) async throws -> [SQLRow] {
        try await withSecondReader { try await Self.rows($0, sql, values) }
    }

    package func transaction<R: Sendable>(
        retrying: Bool, _ body: @escaping @Sendable (any SQLTransaction) async throws -> R
    ) async throws -> R {
        try await withWriter { writer in
            _ = try await writer.rows("BEGIN IMMEDIATE", [])
            do {
                let result = try await body(SQLiteSQLTransaction(writer: writer))
                _ = try await writer.rows("COMMIT", [])
                return result
            } catch {
                _ = try? await writer.rows("ROLLBACK", [])
                throw error
            }
        }
    }

    // MARK: Values and errors

    static func data(_ value: SQLValue) -> SQLiteData {
        switch value {
        case .integer(let number): .integer(Int(number))
        case .blob(let bytes): .blob(ByteBuffer(bytes: bytes))
        case .text(let text): .text(text)
        case .null: .null
        }
    }

    static func row(_ row: SQLiteRow) -> SQLRow { Self.row(row.columns.map(\.name), row) }

    static func row(_ names: [String], _ row: SQLiteRow) -> SQLRow {
        let columns = row.columns
        return SQLRow(
            names: names,
            values: columns.map { column in
                switch column.data {
                case .integer(let number): .integer(Int64(number))
                case .blob(let buffer): .blob(Array(buffer.readableBytesView))
                case .text(let text): .text(text)
                case .float(let number): value(ofReal: number)
                case .null: .null
                }
            })
    }

    /// A REAL read where the schema has integers: its whole part when Int64 holds it, else NULL
    /// (an edited file may hold any REAL, 1e300 or NaN, on which `Int64(_:)` would trap). The
    /// writer and the readers read it so alike.
    static func value(ofReal number: Double) -> SQLValue {
        Int64(exactly: number.rounded(.towardZero)).map(SQLValue.integer) ?? .null
    }

    /// What a call on a closed database fails with.
    static func closed(_ path: String) -> StorageError { StorageError(.unavailable, "the database \(path) is closed") }

    private func mapped<R>(_ body: () async throws -> R) async throws -> R { try await Self.mapped(path, body) }

    /// Runs `body`, reporting SQLite's errors as ``StorageError``s.
    package static func mapped<R>(_ path: String, _ body: () async throws -> R) async throws -> R {
        do { return try await body() } catch { throw storageError(error, path) }
    }

    /// SQLite's error, classified: a busy lock is a lock timeout, a file that is no database or is
    /// damaged is that, a file that cannot be opened is unavailable.
    package static func storageError(_ error: any Error, _ path: String) -> any Error {
        guard let error = error as? SQLiteError else { return error }
        let kind: Failure
        switch error.reason {
        case .busy, .busyTimeout, .locked, .busyInRecovery, .busyInSnapshot: kind = .lockTimeout
        case .notADatabase: kind = .notADatabase
        case .corrupt, .format, .corruptVirtualTable, .corruptSequenceSchema, .corruptIndex,
            .ioErrorCorruptedFilesystem:
            kind = .corrupted
        case .cantOpen, .cantOpenDirectory, .cantOpenInvalidPath, .permission, .readOnly, .readonlyDirectory,
            .readonlyCantLock, .auth:
            kind = .cannotOpen
        case .constraint, .constraintCheckFailed, .constraintUniqueFailed, .constraintNotNullFailed,
            .constraintPrimaryKeyFailed, .constraintForeignKeyFailed, .mismatch:
            kind = .refusedRow
        default: kind = .other
        }
        return storageError(kind, error.message, path)
    }

    /// SQLite's result `code` (primary or extended), classified as sqlite-nio's error of that code is.
    static func storageError(code: Int32, message: String, _ path: String) -> any Error {
        let kind: Failure
        switch code & 0xff {
        case SQLITE_BUSY, SQLITE_LOCKED: kind = .lockTimeout
        case SQLITE_NOTADB: kind = .notADatabase
        case SQLITE_CORRUPT, SQLITE_FORMAT: kind = .corrupted
        case SQLITE_IOERR where code == SQLITE_IOERR | (33 << 8): kind = .corrupted  // SQLITE_IOERR_CORRUPTFS
        case SQLITE_CANTOPEN, SQLITE_PERM, SQLITE_READONLY, SQLITE_AUTH: kind = .cannotOpen
        case SQLITE_CONSTRAINT, SQLITE_MISMATCH: kind = .refusedRow
        default: kind = .other
        }
        return storageError(kind, message, path)
    }

    private enum Failure { case lockTimeout, notADatabase, corrupted, cannotOpen, refusedRow, other }

    private static func storageError(_ kind: Failure, _ message: String, _ path: String) -> StorageError {
        switch kind {
        case .lockTimeout:
            StorageError(
                .lockTimeout, "another process held the database's write lock for longer than the lock timeout")
        case .notADatabase: StorageError(.notADatabase, "\(path) is damaged or is not a SQLite database")
        case .corrupted: StorageError(.corrupted, "\(path) is damaged or is not a SQLite database")
        case .cannotOpen: StorageError(.unavailable, "cannot open \(path) for reading and writing: \(message)")
        case .refusedRow: StorageError(.corrupted, "\(path) refused a row: \(message)")
        case .other: StorageError(.unavailable, "the database \(path): \(message)")
        }
    }

    /// Creates the file with mode 0600 (and its folder with 0700) before SQLite opens it, so the
    /// database and its -wal and -shm files (which SQLite gives the database's mode) are private.
    package static func prepareFile(_ path: String, create: Bool) throws {
        guard !path.isEmpty else { throw StorageError(.invalidParameter, "the database path is empty") }
        var status = stat()
        if lstat(path, &status) == 0 {
            guard status.st_mode & S_IFMT == S_IFREG else {
                throw StorageError(.unavailable, "\(path) is not a regular file")
            }
            return
        }
        guard create else { throw StorageError(.unavailable, "no database at \(path)") }
        let folder = Files.parentDirectory(path)
        if !Files.isDirectory(folder) {
            do { try Files.makeDirectory(folder) } catch {
                throw StorageError(.unavailable, "creating \(folder): \(error)")
            }
        }
        let fd = systemOpen(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 || errno == EEXIST else {
            throw StorageError(.unavailable, "creating \(path): \(String(cString: strerror(errno)))")
        }
        if fd >= 0 { systemClose(fd) }
    }

    /// `path` as the path of a `file:` URI (RFC 3986; SQLite's "URI Filenames"): every byte but
    /// unreserved characters and `/` percent-encoded, so `?`, `#` and `%` in a name stay in it.
    static func uriPath(_ path: String) -> String {
        var encoded = ""
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"), UInt8(ascii: "/"):
                encoded.append(Character(Unicode.Scalar(byte)))
            default:
                encoded += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return encoded
    }
}

/// A SQLite row's columns by position, read from the driver's values in place.
struct SQLiteColumns: SQLColumns {
    let columns: [SQLiteColumn]

    func integer(_ column: Int) -> Int64? {
        guard columns.indices.contains(column), case .integer(let value) = columns[column].data else { return nil }
        return Int64(value)
    }

    func blob(_ column: Int) -> [UInt8]? {
        guard columns.indices.contains(column), case .blob(let buffer) = columns[column].data else { return nil }
        return Array(buffer.readableBytesView)
    }

    func withBlob<R>(_ column: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R? {
        guard columns.indices.contains(column), case .blob(let buffer) = columns[column].data else { return nil }
        return try buffer.withUnsafeReadableBytes(body)
    }
}

/// The statements of one SQLite transaction, on the writer.
struct SQLiteSQLTransaction: SQLTransaction {
    let writer: SQLiteWriter

    func run(_ sql: String, _ values: [SQLValue]) async throws -> [SQLRow] { try await writer.rows(sql, values) }
}

/// One connection's statements, run one at a time and answered as ``SQLRow``s: the writer's or a
/// reader's.
protocol SQLiteStatements: Sendable {
    func rows(_ sql: String, _ values: [SQLValue]) async throws -> [SQLRow]
}

extension SQLiteConnection: SQLiteStatements {
    func rows(_ sql: String, _ values: [SQLValue]) async throws -> [SQLRow] {
        try await SQLiteDatabase.rows(self, sql, values)
    }
}

/// The writer as a caller holding the writer's lock sees it: each call runs on the writer's thread.
struct SQLiteWriter: SQLiteStatements {
    let connection: SQLiteWriterConnection
    let thread: NIOThreadPool
    let path: String

    func rows(_ sql: String, _ values: [SQLValue]) async throws -> [SQLRow] {
        try await Self.onThread(thread, path) { [connection] in try connection.run(SQLStatement(sql, values)) }
    }

    func commit(_ statements: [SQLStatement]) async throws -> [Result<[SQLRow], any Error>] {
        try await Self.onThread(thread, path) { [connection] in try connection.commit(statements) }
    }

    /// `body` run on `thread`; a thread already shut down (the database closed) is reported as
    /// an unavailable database.
    static func onThread<R: Sendable>(
        _ thread: NIOThreadPool, _ path: String, _ body: @escaping @Sendable () throws -> R
    ) async throws -> R {
        do {
            return try await thread.runIfActive(body)
        } catch let error as StorageError {
            throw error
        } catch {
            throw SQLiteDatabase.closed(path)
        }
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}
