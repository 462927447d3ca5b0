import ShadowCore
import ShadowStorage
import VaporCSQLite

/// The writer of a ``SQLiteDatabase``: a connection on SQLite's C API, in the library sqlite-nio
/// bundles, called only on the writer's thread and only under the writer's lock (so it needs no
/// lock of its own). A group commit (BEGIN, its statements, COMMIT) runs as one job on that
/// thread, and a statement of up to ``keptValues`` values is compiled once and kept: sqlite-nio
/// compiles every statement anew, and hands every statement to its thread and every answer back
/// through an event loop on its own (Docs/architecture.md, "Why sqlite-nio").
final class SQLiteWriterConnection: @unchecked Sendable {
    private let path: String
    private var handle: OpaquePointer?
    /// Compiled statements by their SQL, with their columns' names; at most ``capacity``, the
    /// oldest compiled dropped first.
    private var prepared: [String: (statement: OpaquePointer, names: [String])] = [:]
    private var compiledOrder: [String] = []
    static let capacity = 64
    /// A statement with more values (a batch's multi-row INSERT, whose text changes with its
    /// size) is compiled for one run.
    static let keptValues = 32

    /// Opens the file at `path`, which exists, for reading and writing, with `pragmas` run on it
    /// and a busy handler that waits up to `lockTimeout` seconds. `path` is read as sqlite-nio
    /// reads the readers' (`SQLITE_OPEN_URI`: a name that begins with `file:` is a URI), so the
    /// writer and the readers open the same file, and errors carry extended result codes.
    init(path: String, lockTimeout: Double, pragmas: [String]) throws {
        self.path = path
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI | SQLITE_OPEN_EXRESCODE
        let code = sqlite_nio_sqlite3_open_v2(path, &handle, flags, nil)
        self.handle = handle
        guard code == SQLITE_OK, handle != nil else {
            let error = failure(code)
            close()
            throw error
        }
        sqlite_nio_sqlite3_busy_timeout(handle, Int32(min(lockTimeout * 1000, Double(Int32.max))))
        do {
            for pragma in pragmas { _ = try run(SQLStatement("PRAGMA " + pragma, []), keep: false) }
        } catch {
            close()
            throw error
        }
    }

    /// One transaction of `statements`, each with its own result, as
    /// ``SQLiteDatabase/writeEach(_:)`` documents it. A BEGIN or COMMIT that fails throws; so does
    /// a statement after which SQLite has ended the transaction itself (a full disk, an I/O
    /// error), and the statements after it do not run, so none commits alone.
    func commit(_ statements: [SQLStatement]) throws -> [Result<[SQLRow], any Error>] {
        _ = try run(SQLStatement("BEGIN IMMEDIATE", []))
        var results: [Result<[SQLRow], any Error>] = []
        results.reserveCapacity(statements.count)
        for statement in statements {
            do {
                results.append(.success(try run(statement)))
            } catch {
                guard sqlite_nio_sqlite3_get_autocommit(handle) == 0 else { throw error }
                results.append(.failure(error))
            }
        }
        do {
            _ = try run(SQLStatement("COMMIT", []))
        } catch {
            _ = try? run(SQLStatement("ROLLBACK", []))
            throw error
        }
        return results
    }

    /// Finalizes every kept statement and closes the connection (once).
    func close() {
        for (statement, _) in prepared.values { sqlite_nio_sqlite3_finalize(statement) }
        prepared = [:]
        compiledOrder = []
        sqlite_nio_sqlite3_close_v2(handle)
        handle = nil
    }

    // MARK: Statements

    /// Runs `statement` to its end and returns its rows.
    func run(_ statement: SQLStatement) throws -> [SQLRow] {
        try run(statement, keep: statement.values.count <= Self.keptValues)
    }

    /// With `keep`, from the kept compiled form.
    private func run(_ statement: SQLStatement, keep: Bool) throws -> [SQLRow] {
        guard handle != nil else { throw SQLiteDatabase.closed(path) }
        let (compiled, names) = try compile(statement.sql, keep: keep)
        defer {
            if keep {
                sqlite_nio_sqlite3_reset(compiled)
                sqlite_nio_sqlite3_clear_bindings(compiled)
            } else {
                sqlite_nio_sqlite3_finalize(compiled)
            }
        }
        for (index, value) in statement.values.enumerated() {
            let code = bind(value, at: Int32(index + 1), of: compiled)
            guard code == SQLITE_OK else { throw failure(code) }
        }
        var rows: [SQLRow] = []
        while true {
            let code = sqlite_nio_sqlite3_step(compiled)
            if code == SQLITE_DONE { return rows }
            guard code == SQLITE_ROW else { throw failure(code) }
            rows.append(SQLRow(names: names, values: (0..<Int32(names.count)).map { column(compiled, $0) }))
        }
    }

    private func compile(_ sql: String, keep: Bool) throws -> (OpaquePointer, [String]) {
        if keep, let kept = prepared[sql] { return kept }
        var compiled: OpaquePointer?
        let code = sqlite_nio_sqlite3_prepare_v3(
            handle, sql, -1, keep ? UInt32(SQLITE_PREPARE_PERSISTENT) : 0, &compiled, nil)
        guard code == SQLITE_OK, let compiled else { throw failure(code == SQLITE_OK ? SQLITE_MISUSE : code) }
        let names = (0..<sqlite_nio_sqlite3_column_count(compiled)).map {
            sqlite_nio_sqlite3_column_name(compiled, $0).map { String(cString: $0) } ?? ""
        }
        guard keep else { return (compiled, names) }
        if compiledOrder.count >= Self.capacity {
            let oldest = compiledOrder.removeFirst()
            if let dropped = prepared.removeValue(forKey: oldest) { sqlite_nio_sqlite3_finalize(dropped.statement) }
        }
        prepared[sql] = (compiled, names)
        compiledOrder.append(sql)
        return (compiled, names)
    }

    /// SQLite copies every value it is handed (`SQLITE_TRANSIENT`); an empty blob is bound as a
    /// blob of no bytes, not as NULL (which a nil pointer would bind).
    private func bind(_ value: SQLValue, at index: Int32, of statement: OpaquePointer) -> Int32 {
        switch value {
        case .integer(let number):
            return sqlite_nio_sqlite3_bind_int64(statement, index, number)
        case .blob(let bytes) where bytes.isEmpty:
            return sqlite_nio_sqlite3_bind_zeroblob(statement, index, 0)
        case .blob(let bytes):
            return bytes.withUnsafeBytes {
                sqlite_nio_sqlite3_bind_blob64(statement, index, $0.baseAddress, UInt64($0.count), Self.transient)
            }
        case .text(let text):
            var text = text
            return text.withUTF8 {
                sqlite_nio_sqlite3_bind_text64(
                    statement, index, $0.baseAddress, UInt64($0.count), Self.transient, UInt8(SQLITE_UTF8))
            }
        case .null:
            return sqlite_nio_sqlite3_bind_null(statement, index)
        }
    }

    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    /// A column of the current row, read as ``SQLiteDatabase`` reads sqlite-nio's.
    private func column(_ statement: OpaquePointer, _ index: Int32) -> SQLValue {
        switch sqlite_nio_sqlite3_column_type(statement, index) {
        case SQLITE_INTEGER:
            return .integer(sqlite_nio_sqlite3_column_int64(statement, index))
        case SQLITE_FLOAT:
            return SQLiteDatabase.value(ofReal: sqlite_nio_sqlite3_column_double(statement, index))
        case SQLITE_TEXT:
            let count = Int(sqlite_nio_sqlite3_column_bytes(statement, index))
            guard let text = sqlite_nio_sqlite3_column_text(statement, index) else { return .text("") }
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self))
        case SQLITE_BLOB:
            let count = Int(sqlite_nio_sqlite3_column_bytes(statement, index))
            guard count > 0, let bytes = sqlite_nio_sqlite3_column_blob(statement, index) else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: bytes, count: count)))
        default:
            return .null
        }
    }

    /// SQLite's result `code` as the ``StorageError`` ``SQLiteDatabase/storageError(_:_:)`` gives
    /// for sqlite-nio's error of the same code.
    private func failure(_ code: Int32) -> any Error {
        let message = handle.flatMap { sqlite_nio_sqlite3_errmsg($0) }.map { String(cString: $0) } ?? "error \(code)"
        return SQLiteDatabase.storageError(code: code, message: message, path)
    }
}
