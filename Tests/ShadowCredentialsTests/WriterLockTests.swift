import Foundation
import ShadowCore
import ShadowCredentials
import ShadowPostgres
import ShadowTestSupport
import Testing

/// A PostgreSQL write takes the store's write lock and reads the audit head and checkpoint in one
/// statement. The writer it waited for may have updated those rows, or inserted them (the first
/// write of a store, the first checkpoint); either way the waiting write must extend the chain
/// from what that writer committed. Here another session holds the lock, writes a batch's rows
/// (saved from a real write and taken back out), and commits only once a store write is seen
/// waiting for the lock.
@Suite(.tags(.postgres), .enabled(if: postgresWanted), .ownThreads) struct WriterLockTests {
    typealias Table = StateMachineTests

    /// After `earlier` writes, the held session's batch inserts the head (0: the store's first
    /// write), updates the head and inserts the first checkpoint (1), or updates both (2: only the
    /// rows as the holder committed them, not as the waiting statement began, chain on).
    @Test(arguments: [0, 1, 2])
    func aWriteThatWaitedForTheLockExtendsWhatTheHolderCommitted(earlier: Int) async throws {
        let fixture = try StoreFixture(.postgres)
        let database = try PostgresLocation(url: fixture.location).database
        let cluster = try PostgresCluster.shared.get()
        let store = try await fixture.open()
        try await closing({ await close(store) }) {
            for write in 0..<earlier {
                _ = try await store.apply([Table.event(.signIn, at: Table.t, subject: "earlier.\(write)")])
            }
            let lines = earlier
            _ = try cluster.psql(
                database,
                """
                CREATE TABLE before_meta AS SELECT * FROM shadow_meta WHERE name IN ('audit_head', 'audit_checkpoint');
                CREATE TABLE before_rows AS SELECT row_id FROM shadow_credentials
                """)
            _ = try await store.apply([
                Table.event(.signIn, at: Table.t + 1, subject: "held.1"),
                Table.event(.signIn, at: Table.t + 2, subject: "held.2"),
            ])
            // The batch's effects saved, then taken back out: the store is as it was before it.
            _ = try cluster.psql(
                database,
                """
                CREATE TABLE saved_audit AS SELECT * FROM shadow_audit WHERE seq > \(lines);
                CREATE TABLE saved_meta AS SELECT * FROM shadow_meta WHERE name IN ('audit_head', 'audit_checkpoint');
                CREATE TABLE saved_rows AS SELECT * FROM shadow_credentials
                    WHERE row_id NOT IN (SELECT row_id FROM before_rows);
                DELETE FROM shadow_audit WHERE seq > \(lines);
                DELETE FROM shadow_meta WHERE name IN ('audit_head', 'audit_checkpoint');
                INSERT INTO shadow_meta SELECT * FROM before_meta;
                DELETE FROM shadow_credentials WHERE row_id NOT IN (SELECT row_id FROM before_rows)
                """)
            #expect(try await store.verifyAudit().entries == lines)
            #expect(try await store.status(clientID: Table.client, subject: "held.1").state == .notFound)

            // A child task, so it runs on a thread of its own (the suite's trait), not the pool.
            async let holder = cluster.psql(
                database,
                """
                BEGIN;
                SELECT 1 FROM shadow_meta WHERE name = 'writer' FOR UPDATE;
                INSERT INTO shadow_audit SELECT * FROM saved_audit;
                INSERT INTO shadow_meta SELECT * FROM saved_meta
                    ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value;
                INSERT INTO shadow_credentials SELECT * FROM saved_rows;
                DO $$ DECLARE polls int := 0; BEGIN
                    LOOP
                        PERFORM pg_stat_clear_snapshot();
                        EXIT WHEN EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
                            AND wait_event_type = 'Lock' AND pid <> pg_backend_pid());
                        polls := polls + 1;
                        IF polls > 1200 THEN RAISE EXCEPTION 'no write waited for the lock'; END IF;
                        PERFORM pg_sleep(0.05);
                    END LOOP;
                END $$;
                COMMIT
                """)
            // The holder has the lock once it polls for a waiting write.
            let deadline = Date().addingTimeInterval(60)
            while try cluster.psql(
                database,
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'"
            ).trimmingCharacters(in: .whitespacesAndNewlines) == "0" {
                try #require(Date() < deadline, "the holder never took the lock")
                try await Task.sleep(for: .milliseconds(50))
            }
            // Waits for the lock the holder keeps until it sees this write waiting.
            _ = try await store.apply([Table.event(.signIn, at: Table.t + 3, subject: "waiting.1")])
            _ = try await holder
            #expect(try await store.verifyAudit().entries == lines + 3)
            for subject in ["held.1", "held.2", "waiting.1"] {
                #expect(try await store.status(clientID: Table.client, subject: subject).state == .authorized)
            }
            // The next write checks from the checkpoint the waiting write moved.
            _ = try await store.apply([Table.event(.consentRevoked, at: Table.t + 4, subject: "held.2")])
            #expect(try await store.verifyAudit().entries == lines + 4)
        }
    }
}
