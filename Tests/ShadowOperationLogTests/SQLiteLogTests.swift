import Foundation
import NIOCore
import ShadowCore
import ShadowOperationLog
import ShadowSQLite
import ShadowTestSupport
import ShadowVault
import SQLiteNIO
import Testing

/// The operation log in SQLite: the same contract as the file, plus edits to its rows by
/// someone who can write the database.
@Suite struct SQLiteLogTests {
    let directory: TemporaryDirectory
    let path: String

    init() throws {
        directory = try TemporaryDirectory()
        path = directory.path + "/state.sqlite"
    }

    func withLog<R>(create: Bool = true, _ body: (OperationLog) async throws -> R) async throws -> R {
        let storage = try await SQLiteLogStorage.open(
            path: path, unlock: LogFixtures.unlock, create: create, origin: create ? LogFixtures.origin : nil)
        return try await LogFixtures.withLog(storage, body)
    }

    func fill(_ log: OperationLog, count: Int, from start: Int = 0) async throws {
        try await LogFixtures.fill(log, count: count, from: start)
    }

    /// Runs SQL on the database as an attacker with write access would.
    func edit(_ statements: String...) async throws {
        let connection = try await SQLiteConnection.open(storage: .file(path: path))
        for statement in statements { _ = try await connection.query(statement, []) }
        try await connection.close()
    }

    @Test func appendsProofsAndPruning() async throws {
        try await withLog { log in
            try await fill(log, count: 5)
            let old = try await log.checkpoint().checkpoint
            let indices = try await withThrowingTaskGroup(of: UInt64.self) { group in
                for number in 5..<105 { group.addTask { try await log.append(LogFixtures.entry(number)) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(indices) == Set(5..<105))
            let report = try await log.verify()
            #expect(report.size == 105)
            for index in [UInt64(0), 4, 63, 64, 104] { try await log.inclusionProof(index: index).verify() }
            let consistency = try await log.consistencyProof(from: old.size)
            #expect(consistency.oldRoot == old.root)
            try consistency.verify()
            // Concurrent appends take indices in the order they arrive: find entry 77 by its entity.
            let found = try await log.indices(ofEntity: "Documents/report-77.pdf")
            #expect(found.count == 1)
            #expect(try await log.entry(at: found[0]) == LogFixtures.entry(77))
            #expect(try await log.prune(before: 50) == 50)
            #expect(try await log.verify().root == report.root)
            await #expect(throws: LogError(.pruned, "")) { try await log.entry(at: 49) }
            #expect(try await log.indices(ofEntity: "Documents/report-3.pdf") == [], "entry 3 was in the first batch")
            try await log.inclusionProof(index: 7).verify()
        }
        // Reopened, the log goes on where it was.
        try await withLog(create: false) { log in
            try await fill(log, count: 3, from: 105)
            #expect(try await log.verify().size == 108)
        }
    }

    /// Two writers on one database (two connections each, as two processes have): every append
    /// gets its own index, with no gap, and the tree verifies.
    @Test func twoWritersGetOneOrderWithoutGaps() async throws {
        try await withLog { log in try await fill(log, count: 1) }
        let storages = [
            try await SQLiteLogStorage.open(path: path, unlock: LogFixtures.unlock),
            try await SQLiteLogStorage.open(path: path, unlock: LogFixtures.unlock),
        ]
        let logs = try storages.map { try OperationLog(storage: $0) }
        let indices = try await withThrowingTaskGroup(of: [UInt64].self) { group in
            for (writer, log) in logs.enumerated() {
                group.addTask {
                    var got: [UInt64] = []
                    for round in 0..<20 {
                        let range = try await log.append(
                            contentsOf: (0..<5).map { LogFixtures.entry(1000 * writer + 10 * round + $0) })
                        got += Array(range)
                    }
                    return got
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(indices.sorted() == Array(1..<201))
        let report = try await logs[0].verify()
        #expect(report.size == 201)
        for storage in storages { await storage.close() }
    }

    @Test func theLogSharesTheStateStoreFile() async throws {
        let store = try await SQLiteCredentialStore.open(path: path, unlock: LogFixtures.unlock)
        try await withLog { log in try await fill(log, count: 3) }
        await store.close()
        let reopened = try await SQLiteCredentialStore.open(path: path, unlock: LogFixtures.unlock, create: false)
        await reopened.close()
        try await withLog(create: false) { log in
            let size = try await log.verify().size
            #expect(size == 3)
        }
    }

    @Test func aWrongKeyOrAMissingLogIsRefused() async throws {
        await #expect(throws: LogError(.notFound, "")) {
            try await SQLiteLogStorage.open(path: path, unlock: LogFixtures.unlock)
        }
        try await withLog { log in try await fill(log, count: 1) }
        await #expect(throws: LogError(.wrongKey, "")) {
            try await SQLiteLogStorage.open(path: path, unlock: .key(SecretBytes([UInt8](repeating: 3, count: 32))))
        }
    }

    func expectTampered(_ what: String, _ statements: String...) async throws {
        let backup = directory.path + "/backup.sqlite"
        try? FileManager.default.removeItem(atPath: backup)
        try FileManager.default.copyItem(atPath: path, toPath: backup)
        for statement in statements { try await edit(statement) }
        await #expect(throws: LogError(.tampered, ""), "\(what)") {
            try await withLog(create: false) { _ = try await $0.verify() }
        }
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.copyItem(atPath: backup, toPath: path)
        // The control: the unedited copy verifies.
        try await withLog(create: false) { log in _ = try await log.verify() }
    }

    /// A changed leaf breaks both the entry's own check and the tree its checkpoint signs. The
    /// entry's checks run beside the tree's rebuilding; whichever finishes first, the report names
    /// the entry (the lowest failure), as it would checked one after the other.
    @Test func anEntrysOwnFailureIsReportedBeforeTheTrees() async throws {
        try await withLog { log in try await fill(log, count: 20) }
        try await edit("PRAGMA wal_checkpoint(TRUNCATE)")
        try await edit("UPDATE shadow_oplog_entries SET leaf = zeroblob(32) WHERE idx = 3")
        let error = await #expect(throws: LogError.self) {
            try await withLog(create: false) { _ = try await $0.verify() }
        }
        #expect(error?.code == .tampered)
        #expect(error?.reason == "entry 3's bytes do not match its leaf hash")
    }

    @Test func editedRowsAreCaught() async throws {
        try await withLog { log in
            try await fill(log, count: 10)
            try await fill(log, count: 10, from: 10)
        }
        // Checkpointing the WAL keeps the copies whole.
        try await edit("PRAGMA wal_checkpoint(TRUNCATE)")
        try await expectTampered(
            "a changed body", "UPDATE shadow_oplog_entries SET body = zeroblob(length(body)) WHERE idx = 3")
        try await expectTampered(
            "a changed leaf", "UPDATE shadow_oplog_entries SET leaf = zeroblob(32) WHERE idx = 3")
        try await expectTampered(
            "a body and leaf both changed",
            """
            UPDATE shadow_oplog_entries SET (leaf, body) = (SELECT leaf, body FROM shadow_oplog_entries WHERE idx = \
            4) WHERE idx = 3
            """
        )
        try await expectTampered("a deleted entry", "DELETE FROM shadow_oplog_entries WHERE idx = 5")
        try await expectTampered("a cut tail", "DELETE FROM shadow_oplog_entries WHERE idx >= 18")
        try await expectTampered(
            "a reordering",
            "UPDATE shadow_oplog_entries SET idx = -1 WHERE idx = 1",
            "UPDATE shadow_oplog_entries SET idx = 1 WHERE idx = 2",
            "UPDATE shadow_oplog_entries SET idx = 2 WHERE idx = -1")
        try await expectTampered(
            "a changed tree node",
            """
            UPDATE shadow_oplog_nodes SET hash = zeroblob(32) WHERE rowid IN (SELECT rowid FROM shadow_oplog_nodes \
            LIMIT 1)
            """
        )
        // Columns of the wrong type or size, read where the driver holds them.
        try await expectTampered("a short leaf", "UPDATE shadow_oplog_entries SET leaf = zeroblob(31) WHERE idx = 3")
        try await expectTampered(
            "a leaf stored as text", "UPDATE shadow_oplog_entries SET leaf = hex(leaf) WHERE idx = 3")
        try await expectTampered(
            "a body stored as text", "UPDATE shadow_oplog_entries SET body = hex(body) WHERE idx = 3")
        try await expectTampered(
            "a tree node's hash stored as text",
            """
            UPDATE shadow_oplog_nodes SET hash = hex(hash) WHERE rowid IN (SELECT rowid FROM shadow_oplog_nodes \
            LIMIT 1)
            """
        )
        try await expectTampered(
            "an extra entry",
            "INSERT INTO shadow_oplog_entries SELECT 20, leaf, entity, body FROM shadow_oplog_entries WHERE idx = 0")
        try await expectTampered(
            "a changed checkpoint",
            """
            UPDATE shadow_oplog_meta SET value = replace(value, CAST('\n20\n' AS BLOB), CAST('\n19\n' AS BLOB)) \
            WHERE name = 'checkpoint'
            """
        )
        // Erasing an entry's bytes by hand (selective erasure) keeps the tree, but the signed
        // checkpoint says nothing was pruned there: caught, as is one erased past a real prune.
        try await expectTampered("an entry erased by hand", "UPDATE shadow_oplog_entries SET body = NULL WHERE idx = 7")
        try await expectTampered(
            "an entry and its entity erased by hand",
            "UPDATE shadow_oplog_entries SET body = NULL, entity = NULL WHERE idx = 0")
        try await withLog(create: false) { log in
            #expect(try await log.prune(before: 5) == 5)
            let report = try await log.verify()
            #expect(report.pruned == 5)
            // Pruning again before the boundary prunes nothing and never moves it back.
            #expect(try await log.prune(before: 2) == 0)
            #expect(try await log.checkpoint().checkpoint.prunedBefore == 5)
        }
        try await edit("PRAGMA wal_checkpoint(TRUNCATE)")
        try await expectTampered(
            "an entry erased past the boundary", "UPDATE shadow_oplog_entries SET body = NULL WHERE idx = 5")
        // An append keeps the boundary signed.
        try await withLog(create: false) { log in
            try await fill(log, count: 1, from: 20)
            #expect(try await log.checkpoint().checkpoint.prunedBefore == 5)
            #expect(try await log.verify().pruned == 5)
        }
    }
}
