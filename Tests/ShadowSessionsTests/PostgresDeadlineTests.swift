import ShadowCore
import ShadowPostgres
import ShadowStorage
import ShadowTestSupport
import Testing

/// The pool's deadlines (Docs/architecture.md, "Storage"): a statement still unanswered 15 s after
/// its lease deadline is given up as `store_unavailable`, and its connection is closed before the
/// caller hears, so the caller's next statement gets a connection that is not busy with it.
@Suite(.ownThreads) struct PostgresDeadlineTests {
    @Test(.enabled(if: postgresWanted)) func aStatementPastItsDeadlineIsGivenUpAndItsConnectionClosed() async throws {
        let url = try PostgresCluster.shared.get().freshDatabase()
        // One connection and a retry budget of 5 s: the lease deadline is 5 s after the start, so
        // the statement is given up about 20 s after it, with no budget left to try it again.
        let postgres = try PostgresDatabase(
            try PostgresLocation(url: url), retryFor: .seconds(5), maximumConnections: 1)
        try await closing({ await postgres.close() }) {
            let started = ContinuousClock.now
            await #expect(throws: StorageError(.unavailable, "")) {
                _ = try await postgres.sql.read("SELECT pg_sleep(60)", [])
            }
            // Given up, not answered: never before the deadline, and well before pg_sleep's 60 s
            // end. The upper bound leaves room for the start of a full test run, when the
            // watchdog's and the error's hops each wait behind a thousand queued tests on two
            // threads (given up after 35.4 s once there, against about 20 s alone).
            let waited = ContinuousClock.now - started
            #expect(waited >= .seconds(20) && waited < .seconds(50), "given up after \(waited)")
            // The pool's one slot comes back, on a new connection: the next statement is
            // answered well before the old one's pg_sleep would end.
            let again = ContinuousClock.now
            let rows = try await postgres.sql.read("SELECT 1 AS one", [])
            #expect(rows.first?.integer("one") == 1)
            #expect(ContinuousClock.now - again < .seconds(10))
        }
    }

    /// A server connection that ends in the middle of a long result (its backend ends itself
    /// after the last row, while this side is still taking the rows in) fails the statement as
    /// `store_unavailable`, never as the watchdog's timeout; the process goes on. The connection is
    /// closed before the pool has it back, so the next statement is never queued on a
    /// connection the server is ending (it waited for the watchdog, 15 s, when it was).
    @Test(.enabled(if: postgresWanted)) func aConnectionLostMidResultFailsTheStatementNotTheProcess() async throws {
        let url = try PostgresCluster.shared.get().freshDatabase()
        // The watchdog's deadline is 60 s here, not 15: the watchdog and the statement's own
        // error each wait for a thread of Swift's pool, and at the start of the whole test run
        // (a thousand tests queued on two threads) the error's few hops, each behind that queue,
        // once took longer than the watchdog's two. A statement the lost connection really hung
        // still ends in the watchdog's error, and fails this test.
        let postgres = try PostgresDatabase(
            try PostgresLocation(url: url), retryFor: .seconds(1), statementDeadline: .seconds(60))
        try await closing({ await postgres.close() }) {
            for _ in 0..<4 {
                let error = await #expect(throws: StorageError.self) {
                    _ = try await postgres.sql.read(
                        """
                        SELECT repeat('x', 1000) AS t FROM generate_series(1, 20000) UNION ALL \
                        SELECT pg_terminate_backend(pg_backend_pid())::text
                        """, [])
                }
                #expect(error?.code == .unavailable)
                let reason = error?.reason ?? ""
                #expect(!reason.contains("did not answer a transaction in time"), "\(reason)")
            }
            let rows = try await postgres.sql.read("SELECT 1 AS one", [])
            #expect(rows.first?.integer("one") == 1)
        }
    }
}
