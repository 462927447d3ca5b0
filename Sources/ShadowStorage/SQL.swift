/// A value bound into, or read out of, a statement. Each engine maps it to its own types:
/// INTEGER/`bigint` (and `smallint`, `boolean` read as 0 or 1), BLOB/`bytea`, TEXT/`text`.
package enum SQLValue: Sendable, Hashable {
    case integer(Int64)
    case blob([UInt8])
    case text(String)
    case null

    package static func integer(_ value: Int) -> SQLValue { .integer(Int64(value)) }
    package static func optional(_ value: Int64?) -> SQLValue { value.map { .integer($0) } ?? .null }
    package static func optional(_ value: [UInt8]?) -> SQLValue { value.map { .blob($0) } ?? .null }
}

/// One statement and its values.
package struct SQLStatement: Sendable {
    package let sql: String
    package let values: [SQLValue]

    package init(_ sql: String, _ values: [SQLValue]) {
        self.sql = sql
        self.values = values
    }
}

/// One row of a result, its columns by name.
package struct SQLRow: Sendable {
    package let names: [String]
    package let values: [SQLValue]

    package init(names: [String], values: [SQLValue]) {
        self.names = names
        self.values = values
    }

    package subscript(_ name: String) -> SQLValue {
        guard let index = names.firstIndex(of: name) else { return .null }
        return values[index]
    }

    package func integer(_ name: String) -> Int64? {
        if case .integer(let value) = self[name] { return value }
        return nil
    }

    package func blob(_ name: String) -> [UInt8]? {
        if case .blob(let value) = self[name] { return value }
        return nil
    }

    package func text(_ name: String) -> String? {
        if case .text(let value) = self[name] { return value }
        return nil
    }

    package func isNull(_ name: String) -> Bool { self[name] == .null }
}

/// One row's columns by their position in the statement, read where the driver holds them: a
/// reader that makes its own values from each row builds no ``SQLRow``.
package protocol SQLColumns {
    func integer(_ column: Int) -> Int64?
    func blob(_ column: Int) -> [UInt8]?
    /// `body` on the blob's bytes in place; nil when the column is not a blob.
    func withBlob<R>(_ column: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R?
}

extension SQLRow: SQLColumns {
    package func integer(_ column: Int) -> Int64? {
        guard values.indices.contains(column), case .integer(let value) = values[column] else { return nil }
        return value
    }

    package func blob(_ column: Int) -> [UInt8]? {
        guard values.indices.contains(column), case .blob(let value) = values[column] else { return nil }
        return value
    }

    package func withBlob<R>(_ column: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R? {
        guard let bytes = blob(column) else { return nil }
        return try bytes.withUnsafeBytes(body)
    }
}

/// Which engine a database is: statements are written once, with `?` placeholders and SQL both
/// engines read alike; only a migration's table definitions differ per dialect.
package enum SQLDialect: Sendable {
    case sqlite
    case postgres
}

/// The row seam every feature's store is written against (sessions, the operation log): one
/// handle per database location, which runs single statements and short transactions. SQLite
/// group-commits the writes of one process through its one writer; PostgreSQL runs them on its
/// pool. Failures are ``StorageError``s.
package protocol SQLDatabase: Sendable {
    var dialect: SQLDialect { get }
    /// Where it is, for messages (a path, or a URL without its password).
    var locationDescription: String { get }
    /// One reading statement, outside an explicit transaction.
    func read(_ sql: String, _ values: [SQLValue]) async throws -> [SQLRow]
    /// One writing statement, committed durably before it returns. It may share a transaction
    /// with other writes of this process (group commit), so each must stand alone.
    func write(_ sql: String, _ values: [SQLValue]) async throws -> [SQLRow]
    /// ``write(_:_:)`` of a statement the caller runs again and again, where only the number of
    /// rows it returns matters: PostgreSQL prepares it once per pooled connection, so the server
    /// does not parse and plan it at each run.
    func writeCount(_ sql: String, _ values: [SQLValue]) async throws -> Int
    /// Independent writing statements sent at once, each with the result ``write(_:_:)`` would
    /// give it (one that fails fails alone). They may share a transaction with one another and
    /// with other writes of this process, so each must stand alone; none waits for another.
    func writeEach(_ statements: [SQLStatement]) async -> [Result<[SQLRow], any Error>]
    /// `body`'s statements in one writing transaction, committed when it returns and rolled back
    /// when it throws; writers of every process are serialised from its first statement (in
    /// PostgreSQL, once `body` locks what it writes). A transient failure retries the whole body,
    /// which must only use the transaction given; with `retrying` off it is tried once (a body
    /// whose lost COMMIT answer must not be run again, such as an append).
    func transaction<R: Sendable>(
        retrying: Bool, _ body: @escaping @Sendable (any SQLTransaction) async throws -> R
    ) async throws -> R
    /// One reading statement that may run beside another read of this process (SQLite's second
    /// reader; any pooled connection in PostgreSQL).
    func readAside(_ sql: String, _ values: [SQLValue]) async throws -> [SQLRow]
    /// ``read(_:_:)`` (or, `aside`, ``readAside(_:_:)``) handing each row to `row` as it is read,
    /// by column position; the first error `row` throws ends the read and is thrown.
    func read(
        _ sql: String, _ values: [SQLValue], aside: Bool, each row: @escaping @Sendable (any SQLColumns) throws -> Void
    ) async throws
}

/// The values a reader makes from the rows of ``SQLDatabase/read(_:_:aside:each:)``, appended on
/// the one thread that steps the statement and read once the statement has returned.
package final class DecodedRows<T>: @unchecked Sendable {
    package var values: [T] = []

    package init() {}
}

/// The statements of one transaction.
package protocol SQLTransaction: Sendable {
    func run(_ sql: String, _ values: [SQLValue]) async throws -> [SQLRow]
}

extension SQLDatabase {
    /// A transaction retried whole on a transient failure.
    package func transaction<R: Sendable>(
        _ body: @escaping @Sendable (any SQLTransaction) async throws -> R
    ) async throws -> R {
        try await transaction(retrying: true, body)
    }

    /// The rows as ``SQLRow``s, then each handed to `row`.
    package func read(
        _ sql: String, _ values: [SQLValue], aside: Bool, each row: @escaping @Sendable (any SQLColumns) throws -> Void
    ) async throws {
        for value in try await aside ? readAside(sql, values) : read(sql, values) { try row(value) }
    }

    /// The rows of ``write(_:_:)``, counted.
    package func writeCount(_ sql: String, _ values: [SQLValue]) async throws -> Int {
        try await write(sql, values).count
    }

    /// Each statement as its own ``write(_:_:)``, all at once.
    ///
    /// The child tasks return a named struct, not an `(Int, Result)` tuple: built with Swift 6.3.1
    /// for release, a task group of that tuple in this unspecialized generic method read a pointer
    /// as the index (an out-of-range trap on PostgreSQL's first refresh).
    package func writeEach(_ statements: [SQLStatement]) async -> [Result<[SQLRow], any Error>] {
        await withTaskGroup(of: IndexedWrite.self) { group in
            for (index, statement) in statements.enumerated() {
                group.addTask {
                    do {
                        return IndexedWrite(
                            index: index, result: .success(try await write(statement.sql, statement.values)))
                    } catch {
                        return IndexedWrite(index: index, result: .failure(error))
                    }
                }
            }
            var results = [Result<[SQLRow], any Error>](repeating: .success([]), count: statements.count)
            for await answer in group { results[answer.index] = answer.result }
            return results
        }
    }

    package func read(_ sql: String, _ values: SQLValue...) async throws -> [SQLRow] { try await read(sql, values) }
    package func write(_ sql: String, _ values: SQLValue...) async throws -> [SQLRow] { try await write(sql, values) }
    package func write(_ statement: SQLStatement) async throws -> [SQLRow] {
        try await write(statement.sql, statement.values)
    }
}

/// One statement's answer in ``SQLDatabase/writeEach(_:)``, with its place in the batch.
private struct IndexedWrite: Sendable {
    let index: Int
    let result: Result<[SQLRow], any Error>
}

extension SQLTransaction {
    package func run(_ sql: String, _ values: SQLValue...) async throws -> [SQLRow] { try await run(sql, values) }
}
