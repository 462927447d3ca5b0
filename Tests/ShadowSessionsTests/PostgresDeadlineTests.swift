import ShadowCore
import ShadowPostgres
import ShadowStorage
import ShadowTestSupport
import Testing

/// The pool's watchdog (Docs/architecture.md, "Storage"): a statement still unanswered 15 s after
/// its connection was due is given up as `store_unavailable`, and its connection is closed, so the
/// pool's slot comes back.
@Suite(.ownThreads) struct PostgresDeadlineTests {
    @Test(.enabled(if: postgresWanted)) func aStatementPastItsDeadlineIsGivenUpAndItsConnectionClosed() async throws {
        let url = try PostgresCluster.shared.get().freshDatabase()
        // One connection, and no retry budget: the give-up is the answer.
        let postgres = try PostgresDatabase(try PostgresLocation(url: url), retryFor: .zero, maximumConnections: 1)
        try await closing({ await postgres.close() }) {
            let started = ContinuousClock.now
            await #expect(throws: StorageError(.unavailable, "")) {
                _ = try await postgres.sql.read("SELECT pg_sleep(60)", [])
            }
            let waited = ContinuousClock.now - started
            #expect(waited >= .seconds(15) && waited < .seconds(25), "given up after \(waited)")
            // The pool's one slot is free again: the next statement is answered at once.
            let again = ContinuousClock.now
            let rows = try await postgres.sql.read("SELECT 1 AS one", [])
            #expect(rows.first?.integer("one") == 1)
            #expect(ContinuousClock.now - again < .seconds(5))
        }
    }
}
