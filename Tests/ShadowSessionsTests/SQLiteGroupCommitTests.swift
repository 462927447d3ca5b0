import ShadowCore
import ShadowSQLite
import ShadowStorage
import ShadowTestSupport
import Testing

/// The SQLite writer's group commit, which the session store's single writes go through: writes
/// that arrive together share one transaction, run in order on the writer's thread, and a
/// statement that fails fails alone.
@Suite struct SQLiteGroupCommitTests {
    /// `body` with a new database in a folder of its own, and the file's path; closed after it.
    static func withDatabase(_ body: (SQLiteDatabase, String) async throws -> Void) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/group.sqlite"
        let database = try await SQLiteDatabase.open(path: path, create: true)
        try await closing({ await database.close() }) { try await body(database, path) }
    }

    @Test func concurrentWritesEachTakeEffectOnceInOrderAndAFailureFailsAlone() async throws {
        try await Self.withDatabase { database, path in
            _ = try await database.write("CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)", [])
            _ = try await database.write("CREATE TABLE items (id INTEGER PRIMARY KEY)", [])
            _ = try await database.write("INSERT INTO counter (id, n) VALUES (1, 0)", [])
            _ = try await database.write("INSERT INTO items (id) VALUES (0)", [])
            // 60 writes at once: increments of one counter, and inserts of which every sixth
            // repeats the existing key 0.
            let results = await withTaskGroup(of: (Int, Result<[SQLRow], any Error>).self) { group in
                for index in 0..<60 {
                    group.addTask {
                        do {
                            if index.isMultiple(of: 2) {
                                return (
                                    index,
                                    .success(
                                        try await database.write(
                                            "UPDATE counter SET n = n + 1 WHERE id = 1 RETURNING n", []))
                                )
                            }
                            let key = index % 6 == 1 ? 0 : Int64(index)
                            return (
                                index,
                                .success(
                                    try await database.write(
                                        "INSERT INTO items (id) VALUES (?) RETURNING id", [.integer(key)]))
                            )
                        } catch {
                            return (index, .failure(error))
                        }
                    }
                }
                return await group.reduce(into: [Int: Result<[SQLRow], any Error>]()) { $0[$1.0] = $1.1 }
            }
            var seen: [Int64] = []
            for (index, result) in results {
                if index.isMultiple(of: 2) {
                    seen.append(try #require(try result.get().first?.integer("n")))
                } else if index % 6 == 1 {
                    #expect(throws: StorageError.self) { try result.get() }
                } else {
                    #expect(try result.get().first?.integer("id") == Int64(index))
                }
            }
            // Each increment saw the one before it: 1 to 30, each once.
            #expect(seen.sorted() == Array(1...30))
            let reopened = try await SQLiteDatabase.open(path: path, create: false, readOnly: true)
            try await closing({ await reopened.close() }) {
                #expect(try await reopened.read("SELECT n FROM counter", []).first?.integer("n") == 30)
                let items = try await reopened.read("SELECT COUNT(*) AS c FROM items", []).first?.integer("c")
                #expect(items == 21, "the first row, and the 20 inserts of new keys")
            }
        }
    }

    /// Statements handed over together (`writeEach`) and single writes sent at the same time: each
    /// statement is answered in its own place, a failing one fails alone, and all are durable.
    @Test func statementsHandedOverTogetherAreAnsweredEachInPlace() async throws {
        try await Self.withDatabase { database, path in
            _ = try await database.write("CREATE TABLE items (id INTEGER PRIMARY KEY, batch INTEGER NOT NULL)", [])
            _ = try await database.write("INSERT INTO items (id, batch) VALUES (0, -1)", [])
            // 20 batches of three inserts, the middle one of every fifth batch repeating key 0,
            // beside 20 single writes.
            let answers = await withTaskGroup(of: (Int, [Result<[SQLRow], any Error>]).self) { group in
                for batch in 0..<20 {
                    group.addTask {
                        let statements = (0..<3).map { slot in
                            let key = slot == 1 && batch.isMultiple(of: 5) ? 0 : Int64(1000 + batch * 3 + slot)
                            return SQLStatement(
                                "INSERT INTO items (id, batch) VALUES (?, ?) RETURNING id",
                                [.integer(key), .integer(Int64(batch))])
                        }
                        return (batch, await database.writeEach(statements))
                    }
                    group.addTask {
                        do {
                            return (
                                100 + batch,
                                [
                                    .success(
                                        try await database.write(
                                            "INSERT INTO items (id, batch) VALUES (?, 100) RETURNING id",
                                            [.integer(Int64(5000 + batch))]))
                                ]
                            )
                        } catch {
                            return (100 + batch, [.failure(error)])
                        }
                    }
                }
                return await group.reduce(into: [Int: [Result<[SQLRow], any Error>]]()) { $0[$1.0] = $1.1 }
            }
            #expect(answers.count == 40)
            for batch in 0..<20 {
                let results = try #require(answers[batch])
                #expect(results.count == 3)
                for (slot, result) in results.enumerated() {
                    if slot == 1 && batch.isMultiple(of: 5) {
                        #expect(throws: StorageError.self) { try result.get() }
                    } else {
                        #expect(try result.get().first?.integer("id") == Int64(1000 + batch * 3 + slot))
                    }
                }
                let single = try #require(answers[100 + batch]?.first)
                #expect(try single.get().first?.integer("id") == Int64(5000 + batch))
            }
            #expect(await database.writeEach([]).isEmpty)
            let reopened = try await SQLiteDatabase.open(path: path, create: false, readOnly: true)
            try await closing({ await reopened.close() }) {
                let count = try await reopened.read("SELECT COUNT(*) AS c FROM items", []).first?.integer("c")
                // The first row, 56 batched inserts of new keys, and 20 single ones.
                let expected: Int64 = 1 + 56 + 20
                #expect(count == expected)
            }
        }
    }

    /// A statement that rewrites megabytes of existing pages and then fails undoes itself alone,
    /// while the statement beside it in the same transaction commits: the writer keeps its
    /// statement journal in memory (`temp_store=MEMORY`), far past the 64 KiB at which SQLite
    /// would otherwise have spilled it to a file, with a page cache of 16 MiB.
    @Test func aLargeStatementThatFailsUndoesItselfAloneFromAJournalInMemory() async throws {
        try await Self.withDatabase { database, path in
            _ = try await database.write("CREATE TABLE items (id INTEGER PRIMARY KEY, body BLOB NOT NULL)", [])
            // 4,000 rows of 1 KiB: about 1,000 pages, which the failing statement rewrites.
            for start in stride(from: 0, to: 4000, by: 200) {
                _ = try await database.write(
                    "INSERT INTO items (id, body) VALUES "
                        + Array(repeating: "(?, zeroblob(1024))", count: 200).joined(separator: ", "),
                    (start..<start + 200).map { .integer(Int64($0)) })
            }
            #expect(try await database.write("PRAGMA temp_store", []).first?.integer("temp_store") == 2)
            #expect(try await database.write("PRAGMA cache_size", []).first?.integer("cache_size") == -16384)
            let answers = await database.writeEach([
                // Rows 0 to 3998 grow to 2 KiB, in order; the last row breaks NOT NULL.
                SQLStatement("UPDATE items SET body = CASE WHEN id < 3999 THEN zeroblob(2048) END", []),
                SQLStatement("INSERT INTO items (id, body) VALUES (9999, x'01') RETURNING id", []),
            ])
            #expect(answers.count == 2)
            #expect(throws: StorageError.self) { try answers.first?.get() }
            #expect(try answers.last?.get().first?.integer("id") == 9999)
            let reopened = try await SQLiteDatabase.open(path: path, create: false, readOnly: true)
            try await closing({ await reopened.close() }) {
                let sizes = try await reopened.read(
                    "SELECT COUNT(*) AS c, MIN(length(body)) AS low, MAX(length(body)) AS high FROM items "
                        + "WHERE id < 4000", [])
                #expect(sizes.first?.integer("c") == 4000)
                #expect(sizes.first?.integer("low") == 1024)
                #expect(sizes.first?.integer("high") == 1024, "no row keeps the failed statement's change")
                #expect(try await reopened.read("SELECT id FROM items WHERE id = 9999", []).count == 1)
            }
        }
    }

    /// A statement that makes SQLite end the transaction itself (a trigger's `RAISE(ROLLBACK)`)
    /// fails its whole group: the statements before it are undone with it, and the ones after it
    /// do not run outside the transaction, where each would have committed alone.
    @Test func aStatementThatEndsTheTransactionFailsItsWholeGroupAndNoneCommitsAlone() async throws {
        try await Self.withDatabase { database, path in
            _ = try await database.write("CREATE TABLE items (id INTEGER PRIMARY KEY)", [])
            _ = try await database.write("CREATE TABLE doomed (id INTEGER PRIMARY KEY)", [])
            _ = try await database.write(
                "CREATE TRIGGER doom BEFORE INSERT ON doomed BEGIN SELECT RAISE(ROLLBACK, 'doomed'); END", [])
            let answers = await database.writeEach([
                SQLStatement("INSERT INTO items (id) VALUES (1) RETURNING id", []),
                SQLStatement("INSERT INTO doomed (id) VALUES (1)", []),
                SQLStatement("INSERT INTO items (id) VALUES (2) RETURNING id", []),
            ])
            #expect(answers.count == 3)
            for answer in answers { #expect(throws: StorageError.self) { try answer.get() } }
            #expect(try await database.read("SELECT id FROM items", []).isEmpty)
            // The next group has a transaction of its own again.
            let next = await database.writeEach([SQLStatement("INSERT INTO items (id) VALUES (3) RETURNING id", [])])
            #expect(try next.first?.get().first?.integer("id") == 3)
        }
    }

    /// Values go in and come out as they were: an empty blob stays a blob (not NULL), text keeps
    /// its bytes, and integers their full range; more distinct statements than the writer keeps
    /// compiled still each answer for themselves, the second time as the first.
    @Test func valuesRoundTripAndStatementsPastTheKeptOnesStillAnswer() async throws {
        try await Self.withDatabase { database, path in
            _ = try await database.write("CREATE TABLE items (id INTEGER PRIMARY KEY, b BLOB, t TEXT, n INTEGER)", [])
            let text = "zoë ✓ \u{0}tail"
            _ = try await database.write(
                "INSERT INTO items (id, b, t, n) VALUES (1, ?, ?, ?)", [.blob([]), .text(text), .integer(.min)])
            _ = try await database.write(
                "INSERT INTO items (id, b, t, n) VALUES (2, ?, ?, ?)", [.blob([0, 255, 0]), .null, .integer(.max)])
            let rows = try await database.write(
                "SELECT id, typeof(b) AS kind, b, t, n FROM items ORDER BY id", [])
            #expect(rows.count == 2)
            #expect(rows.first?.text("kind") == "blob")
            #expect(rows.first?.blob("b") == [])
            #expect(rows.first?.text("t") == text)
            #expect(rows.first?.integer("n") == .min)
            #expect(rows.last?.blob("b") == [0, 255, 0])
            #expect(rows.last?["t"] == .null)
            #expect(rows.last?.integer("n") == .max)
            for round in 0..<2 {
                for shape in 0..<100 {
                    let answer = try await database.write("SELECT ? + \(shape) AS n", [.integer(Int64(round))])
                    #expect(answer.first?.integer("n") == Int64(round + shape))
                }
            }
        }
    }

    /// A write while another connection holds the write lock waits for the lock timeout and then
    /// fails as a lock timeout, having written nothing; once the lock is free it writes.
    @Test func aWriteLockHeldElsewhereIsALockTimeout() async throws {
        try await Self.withDatabase { database, path in
            _ = try await database.write("CREATE TABLE items (id INTEGER PRIMARY KEY)", [])
            let other = try await SQLiteDatabase.open(path: path, create: false, lockTimeout: .milliseconds(200))
            try await closing({ await other.close() }) {
                let (holding, held) = AsyncStream<Void>.makeStream()
                let (released, release) = AsyncStream<Void>.makeStream()
                let holder = Task {
                    try await database.transaction(retrying: false) { transaction in
                        _ = try await transaction.run("INSERT INTO items (id) VALUES (1)", [])
                        held.yield()
                        for await _ in released { break }
                    }
                }
                for await _ in holding { break }
                let started = ContinuousClock.now
                var failure: StorageError?
                do { _ = try await other.write("INSERT INTO items (id) VALUES (2)", []) } catch let error
                    as StorageError
                {
                    failure = error
                }
                let waited = ContinuousClock.now - started
                #expect(failure?.code == .lockTimeout, "\(String(describing: failure))")
                #expect(waited >= .milliseconds(150) && waited < .seconds(5), "\(waited)")
                release.yield()
                try await holder.value
                _ = try await other.write("INSERT INTO items (id) VALUES (3)", [])
                let ids = try await other.read("SELECT id FROM items ORDER BY id", []).compactMap { $0.integer("id") }
                #expect(ids == [1, 3])
            }
        }
    }

    /// A REAL where an integer belongs (an edited file) is read as its whole part when Int64 holds
    /// it and as NULL when it does not, by the writer and the readers alike, never a trap.
    @Test func realValuesOutOfIntegerRangeReadAsNull() async throws {
        try await Self.withDatabase { database, _ in
            _ = try await database.write("CREATE TABLE items (id INTEGER PRIMARY KEY, x)", [])
            _ = try await database.write(
                "INSERT INTO items (id, x) VALUES (1, 2.75), (2, 1e300), (3, -1e300), (4, 9.3e18)", [])
            let sql = "SELECT x FROM items ORDER BY id"
            for rows in [try await database.write(sql, []), try await database.read(sql, [])] {
                #expect(rows.map { $0["x"] } == [.integer(2), .null, .null, .null])
            }
        }
    }
}
