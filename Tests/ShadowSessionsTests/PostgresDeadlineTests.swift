import Logging
import NIOPosix
import PostgresNIO
import ShadowCore
@testable import ShadowPostgres
import ShadowStorage
import ShadowTestSupport
import Synchronization
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
        // The watchdog's deadline is 60 s here, not 15: at the start of the whole test run (a
        // thousand tests queued on two threads) each turn on Swift's pool waits behind that queue,
        // and the statement's own task takes turns before its query is sent. Its error then
        // reaches the caller from the event loop (aLostConnectionIsReportedFromTheEventLoop). A
        // statement the lost connection really hung still ends in the watchdog's error, and
        // fails this test.
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

    /// The caller of a statement whose connection ended hears of it on the connection's event
    /// loop, as the statement's result fails, not after the statement's task has had its next turn
    /// on Swift's pool: when every thread of that pool is busy, the turns of that task can take
    /// longer than the watchdog's deadline. A statement that fails otherwise, or succeeds, reports nothing.
    @Test(.enabled(if: postgresWanted)) func aLostConnectionIsReportedFromTheEventLoop() async throws {
        let url = try PostgresCluster.shared.get().freshDatabase()
        let postgres = try PostgresDatabase(try PostgresLocation(url: url), retryFor: .seconds(1))
        let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        try await closing({ await postgres.close() }) {
            try await postgres.database.client.withConnection { connection in
                let reports = LossReports()
                try await LostConnection.$observer.withValue(reports) {
                    _ = try await connection.collect("SELECT 1", logger: logger)
                    await #expect(throws: PSQLError.self) {
                        _ = try await connection.collect("SELECT 1 / 0", logger: logger)
                    }
                    #expect(reports.taken.isEmpty)
                    await #expect(throws: PSQLError.self) {
                        _ = try await connection.collect(
                            """
                            SELECT repeat('x', 1000) AS t FROM generate_series(1, 20000) UNION ALL \
                            SELECT pg_terminate_backend(pg_backend_pid())::text
                            """, logger: logger)
                    }
                }
                // Reported once, before the statement's own await went on, and on an event loop.
                #expect(reports.taken == [true])
            }
        }
    }
}

/// Each report of a lost connection: whether it came on an event loop's thread.
private final class LossReports: LostConnectionObserver {
    private let reports = Mutex<[Bool]>([])
    var taken: [Bool] { reports.withLock { $0 } }

    func connectionLost(_ error: any Error) {
        let onEventLoop = MultiThreadedEventLoopGroup.currentEventLoop != nil
        reports.withLock { $0.append(onEventLoop) }
    }
}
