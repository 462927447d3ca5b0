import Foundation
import ShadowCore
import ShadowOperationLog
import ShadowPostgres
import ShadowTestSupport
import ShadowVault
import Testing

/// The operation log in PostgreSQL, shared by several writers: one order, no gap, no duplicate;
/// and edits to its rows caught as in SQLite.
@Suite(.tags(.postgres), .ownThreads, .enabled(if: postgresWanted)) struct PostgresLogTests {
    let url: String
    let cluster: PostgresCluster

    init() throws {
        cluster = try PostgresCluster.shared.get()
        url = try cluster.freshDatabase()
    }

    func connect(create: Bool = false) async throws -> DatabaseLogStorage {
        // Generous timeouts: the whole suite runs beside this test and can starve the server for a while.
        try await PostgresLogStorage.connect(
            try PostgresLocation(url: url), unlock: LogFixtures.unlock, create: create,
            origin: create ? LogFixtures.origin : nil, connectTimeout: .seconds(60), retryFor: .seconds(90))
    }

    @Test func concurrentWritersOnTwoInstancesGetOneOrderWithoutGaps() async throws {
        let storages = [try await connect(create: true), try await connect(create: true), try await connect()]
        let logs = try storages.map { try OperationLog(storage: $0) }
        let indices = try await withThrowingTaskGroup(of: [UInt64].self) { group in
            for (writer, log) in logs.enumerated() {
                group.addTask {
                    var got: [UInt64] = []
                    for round in 0..<15 {
                        if round % 2 == 0 {
                            got += Array(
                                try await log.append(
                                    contentsOf: (0..<4).map { LogFixtures.entry(1000 * writer + 10 * round + $0) }))
                        } else {
                            got.append(try await log.append(LogFixtures.entry(1000 * writer + 10 * round)))
                        }
                    }
                    return got
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(indices.count == 3 * (8 * 4 + 7))
        #expect(indices.sorted() == Array(0..<UInt64(indices.count)), "no gap, no duplicate")
        let report = try await logs[2].verify()
        #expect(report.size == UInt64(indices.count))
        for index in [UInt64(0), 50, UInt64(indices.count - 1)] {
            try await logs[1].inclusionProof(index: index).verify()
        }
        try await logs[0].consistencyProof(from: 7).verify()
        #expect(try await logs[0].prune(before: 10) == 10)
        #expect(try await logs[1].verify().root == report.root)
        for storage in storages { await storage.close() }
    }

    /// A database without a log is not found: an answer, not a lost connection (retried, a lost
    /// connection ends as `io` once the retries run out).
    @Test func aMissingLogIsNotFound() async throws {
        await #expect(throws: LogError(.notFound, "")) { try await connect() }
    }

    @Test func editedRowsAreCaught() async throws {
        let storage = try await connect(create: true)
        let log = try OperationLog(storage: storage)
        _ = try await log.append(contentsOf: (0..<12).map { LogFixtures.entry($0) })
        await storage.close()
        let database = String(url.split(separator: "/").last!.split(separator: "?").first!)
        for (what, statement) in [
            ("a changed body", "UPDATE shadow_oplog_entries SET body = decode('00', 'hex') WHERE idx = 3"),
            ("a deleted entry", "DELETE FROM shadow_oplog_entries WHERE idx = 11"),
        ] {
            try cluster.psql(database, statement)
            let tampered = try await connect()
            await #expect(throws: LogError(.tampered, ""), "\(what)") {
                _ = try await OperationLog(storage: tampered).verify()
            }
            await tampered.close()
        }
        await #expect(throws: LogError(.wrongKey, "")) {
            try await PostgresLogStorage.connect(
                try PostgresLocation(url: url), unlock: .key(SecretBytes([UInt8](repeating: 5, count: 32))))
        }
    }
}
