import ShadowSQLite
import ShadowStorage
import ShadowTestSupport
import Testing

/// The SQLite writer's group commit, which the session store's single writes go through: writes
/// that arrive together share one transaction, run in order on the writer's thread, and a
/// statement that fails fails alone.
@Suite struct SQLiteGroupCommitTests {
    @Test func concurrentWritesEachTakeEffectOnceInOrderAndAFailureFailsAlone() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/group.sqlite"
        let database = try await SQLiteDatabase.open(path: path, create: true)
        try await closing({ await database.close() }) {
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
}
