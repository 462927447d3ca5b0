import Foundation
import ShadowCore
import ShadowOperationLog
import ShadowPostgres
import ShadowSQLite
import ShadowTestSupport
import ShadowVault
import SQLiteNIO
import Testing

/// The log's rules over both engines, from one suite: what one `DatabaseLogStorage` does on
/// SQLite it does on PostgreSQL, and an edited row is caught on both (Docs/operation-log.md).
@Suite(.ownThreads) struct LogStorageConformanceTests {
    static let engines = postgresWanted ? ["sqlite", "postgres"] : ["sqlite"]

    /// A fresh location of `engine`: how to open its log, and how to run SQL on its rows beside
    /// it (someone with write access to the database, without the key).
    struct Fixture {
        let open: @Sendable (_ create: Bool, _ unlock: VaultUnlock) async throws -> DatabaseLogStorage
        let sql: @Sendable (String) async throws -> Void
        /// An expression of 32 zero bytes in the engine's dialect.
        let zeroHash: String
        let directory: TemporaryDirectory
    }

    func fixture(_ engine: String) throws -> Fixture {
        let directory = try TemporaryDirectory()
        if engine == "sqlite" {
            let path = directory.path + "/state.sqlite"
            return Fixture(
                open: { create, unlock in
                    try await SQLiteLogStorage.open(
                        path: path, unlock: unlock, create: create, origin: create ? LogFixtures.origin : nil)
                },
                sql: { statement in
                    let connection = try await SQLiteConnection.open(storage: .file(path: path))
                    _ = try await connection.query(statement, [])
                    try await connection.close()
                }, zeroHash: "zeroblob(32)", directory: directory)
        }
        let cluster = try PostgresCluster.shared.get()
        let url = try cluster.freshDatabase()
        let name = try PostgresLocation(url: url).database
        return Fixture(
            open: { create, unlock in
                try await PostgresLogStorage.connect(
                    try PostgresLocation(url: url), unlock: unlock, create: create,
                    origin: create ? LogFixtures.origin : nil, connectTimeout: .seconds(60), retryFor: .seconds(90))
            },
            sql: { _ = try cluster.psql(name, $0) }, zeroHash: "decode(repeat('00', 32), 'hex')", directory: directory)
    }

    func withLog<R>(
        _ fixture: Fixture, create: Bool = false, _ body: (OperationLog) async throws -> R
    ) async throws -> R {
        let storage = try await fixture.open(create, LogFixtures.unlock)
        return try await LogFixtures.withLog(storage, body)
    }

    func fill(_ log: OperationLog, count: Int, from start: Int = 0) async throws {
        try await LogFixtures.fill(log, count: count, from: start)
    }

    @Test(arguments: engines) func anEntityIsReadAPageAtATime(engine: String) async throws {
        try await withLog(try fixture(engine), create: true) {
            try await LogFixtures.pagesThroughAnEntity($0, count: 10)
        }
    }

    @Test(arguments: engines) func appendsProvesPrunesAndReopens(engine: String) async throws {
        let fixture = try fixture(engine)
        try await withLog(fixture, create: true) { log in
            try await fill(log, count: 5)
            let old = try await log.checkpoint().checkpoint
            try await fill(log, count: 60, from: 5)
            let report = try await log.verify()
            #expect(report.size == 65)
            for index in [UInt64(0), 31, 64] { try await log.inclusionProof(index: index).verify() }
            let consistency = try await log.consistencyProof(from: old.size)
            #expect(consistency.oldRoot == old.root)
            try consistency.verify()
            #expect(try await log.indices(ofEntity: "Documents/report-42.pdf") == [42])
            #expect(try await log.prune(before: 20) == 20)
            #expect(try await log.verify().root == report.root)
            #expect(try await log.checkpoint().checkpoint.prunedBefore == 20)
            await #expect(throws: LogError(.pruned, "")) { try await log.entry(at: 19) }
        }
        try await withLog(fixture) { log in
            try await fill(log, count: 3, from: 65)
            let report = try await log.verify()
            #expect(report.size == 68 && report.pruned == 20)
        }
    }

    @Test(arguments: engines) func aWrongKeyOrAMissingLogIsRefused(engine: String) async throws {
        let fixture = try fixture(engine)
        await #expect(throws: LogError(.notFound, "")) { _ = try await fixture.open(false, LogFixtures.unlock) }
        try await withLog(fixture, create: true) { log in try await fill(log, count: 1) }
        await #expect(throws: LogError(.wrongKey, "")) {
            _ = try await fixture.open(false, .key(SecretBytes([UInt8](repeating: 3, count: 32))))
        }
    }

    /// Someone who can edit rows but holds no key: each edit is `log_tampered` on the next verify.
    @Test(arguments: engines) func editedRowsAreCaught(engine: String) async throws {
        let edits: [(String, (String) -> String)] = [
            ("a changed leaf", { "UPDATE shadow_oplog_entries SET leaf = \($0) WHERE idx = 3" }),
            ("a deleted entry", { _ in "DELETE FROM shadow_oplog_entries WHERE idx = 5" }),
            ("a cut tail", { _ in "DELETE FROM shadow_oplog_entries WHERE idx >= 18" }),
            ("an entry erased by hand", { _ in "UPDATE shadow_oplog_entries SET body = NULL WHERE idx = 7" }),
            (
                "an entry and its entity erased by hand",
                { _ in "UPDATE shadow_oplog_entries SET body = NULL, entity = NULL WHERE idx = 0" }
            ),
            ("a changed tree node", { "UPDATE shadow_oplog_nodes SET hash = \($0)" }),
        ]
        for (what, statement) in edits {
            let fixture = try fixture(engine)
            try await withLog(fixture, create: true) { log in
                try await fill(log, count: 10)
                try await fill(log, count: 10, from: 10)
            }
            try await fixture.sql(statement(fixture.zeroHash))
            await #expect(throws: LogError(.tampered, ""), "\(engine): \(what)") {
                try await withLog(fixture) { _ = try await $0.verify() }
            }
        }
    }
}
