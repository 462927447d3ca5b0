import Foundation
import ShadowCore
import ShadowCredentials
import ShadowPostgres
import ShadowTestSupport
import ShadowVault
import Testing

/// PostgreSQL restarted (`pg_ctl restart -m immediate`, as after a crash) under load from four
/// writers: they reconnect, no acknowledged transition is lost, and the chain verifies.
@Suite(.serialized, .tags(.postgres, .stress), .alone, .enabled(if: postgresWanted)) struct PostgresRestartTests {
    @Test func writersSurviveAnImmediateRestart() async throws {
        let cluster = try PostgresCluster.start()
        defer { cluster.stop() }
        let url = try cluster.createDatabase("restart")
        let key = SecretBytes((0..<32).map { UInt8($0) })
        var writers: [PostgresCredentialStore] = []
        for _ in 0..<4 {
            writers.append(
                try await PostgresCredentialStore.connect(
                    try PostgresLocation(url: url), unlock: .key(key), retryFor: .seconds(120)))
        }
        let started = ContinuousClock.now
        let acknowledged = try await withThrowingTaskGroup(of: [String].self) { group in
            for (index, store) in writers.enumerated() {
                group.addTask {
                    var done: [String] = []
                    var batch = 0
                    while ContinuousClock.now - started < .seconds(6) {
                        let subjects = (0..<10).map { "w\(index).b\(batch).u\($0)" }
                        let events = try subjects.map {
                            try CredentialEvent(
                                kind: .signIn, clientID: "com.example.app", subject: $0,
                                timeMilliseconds: 1_700_000_000_000, id: "s")
                        }
                        _ = try await store.apply(events)
                        done += subjects
                        batch += 1
                    }
                    return done
                }
            }
            group.addTask {
                try await Task.sleep(for: .seconds(2))
                try cluster.restartImmediately()
                return []
            }
            var all: [String] = []
            for try await part in group { all += part }
            return all
        }
        #expect(acknowledged.count > 100)
        let reader = try await PostgresCredentialStore.connect(try PostgresLocation(url: url), unlock: .key(key))
        for subject in acknowledged {
            #expect(
                try await reader.status(clientID: "com.example.app", subject: subject).state == .authorized,
                "\(subject) was acknowledged and lost")
        }
        #expect(try await reader.verifyAudit().entries == acknowledged.count)
        #expect(try await reader.counts()[.authorized] == acknowledged.count)
        for store in writers + [reader] { await store.close() }
    }
}
