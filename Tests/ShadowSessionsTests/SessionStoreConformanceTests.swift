import Foundation
import ShadowCore
import ShadowDPoP
import ShadowPostgres
import ShadowSQLite
import ShadowSessions
import ShadowStorage
import ShadowTestSupport
import ShadowVault
import Synchronization
import Testing

/// The session rules over both engines, from one suite: what one `DatabaseSessionStore` does on
/// SQLite it does on PostgreSQL, and an edited row fails closed on both (Docs/sessions.md, "Tables").
@Suite(.ownThreads) struct SessionStoreConformanceTests {
    static let engines = postgresWanted ? ["sqlite", "postgres"] : ["sqlite"]
    let configuration = SessionConfiguration(
        issuer: "https://api.example.com", audience: "https://api.example.com/v1", clientID: "com.example.app")
    let unlock = VaultUnlock.key(SecretBytes((0..<32).map { UInt8($0) }))

    /// A fresh store of `engine`, and a way to run SQL on its rows beside it (an attacker without the key).
    struct Fixture {
        let store: DatabaseSessionStore
        let sql: @Sendable (String) async throws -> Void
        /// The same database opened again, as another instance opens it.
        let reopen: @Sendable () async throws -> DatabaseSessionStore
        let directory: TemporaryDirectory
        /// The engine's plan for a statement (its `?` placeholders bound to 0), as text: SQLite's
        /// `EXPLAIN QUERY PLAN`; PostgreSQL's `EXPLAIN` with sequential scans turned off, so a
        /// usable index is used on a table of a few rows too.
        let plan: @Sendable (String) async throws -> String
    }

    func fixture(_ engine: String) async throws -> Fixture {
        let directory = try TemporaryDirectory()
        if engine == "sqlite" {
            let path = directory.path + "/state.sqlite"
            let store = try await SQLiteSessionStore.open(path: path, unlock: unlock)
            return Fixture(
                store: store,
                sql: { statement in
                    let database = try await SQLiteDatabase.open(path: path, create: false)
                    _ = try await database.write(statement, [])
                    await database.close()
                }, reopen: { [unlock] in try await SQLiteSessionStore.open(path: path, unlock: unlock) },
                directory: directory,
                plan: { statement in
                    let database = try await SQLiteDatabase.open(path: path, create: false)
                    let count = statement.filter { $0 == "?" }.count
                    let rows = try await database.read(
                        "EXPLAIN QUERY PLAN " + statement, Array(repeating: .integer(0), count: count))
                    await database.close()
                    return rows.compactMap { $0.text("detail") }.joined(separator: "\n")
                })
        }
        let cluster = try PostgresCluster.shared.get()
        let url = try cluster.freshDatabase()
        let store = try await PostgresSessionStore.connect(try PostgresLocation(url: url), unlock: unlock)
        let name = try PostgresLocation(url: url).database
        return Fixture(
            store: store, sql: { try cluster.psql(name, $0) },
            reopen: { [unlock] in try await PostgresSessionStore.connect(try PostgresLocation(url: url), unlock: unlock)
            },
            directory: directory,
            plan: { statement in
                try cluster.psql(
                    name, "SET enable_seqscan = off; EXPLAIN " + statement.replacingOccurrences(of: "?", with: "0"))
            })
    }

    func signIn(_ authority: SessionAuthority, _ subject: String = "001234.abc.0042") async throws -> IssuedTokens {
        try await authority.signIn(
            appleSubject: subject, appleClientID: "com.example.app", appleRefreshToken: SecretBytes(utf8: "apple-rt"),
            device: "iPhone")
    }

    @Test(arguments: engines) func rotationReuseRevocationAndTheSweep(engine: String) async throws {
        let fixture = try await fixture(engine)
        try await closing({ await fixture.store.close() }) {
            var settings = configuration
            settings.grace = 0
            let authority = try await SessionAuthority(store: fixture.store, configuration: settings)
            let first = try await signIn(authority)
            let second = try await authority.refresh(first.refreshToken)
            #expect(second.session == first.session)
            await #expect(throws: SessionError(.reuseDetected, "")) {
                _ = try await authority.refresh(first.refreshToken)
            }
            await #expect(throws: SessionError(.invalidGrant, "")) {
                _ = try await authority.refresh(second.refreshToken)
            }
            let other = try await signIn(authority)
            let third = try await signIn(authority)
            #expect(try await authority.revokeAll(user: other.userID) == 2, "the third and the other device")
            #expect(try await authority.revokeAll(user: other.userID) == 0)
            #expect(try await authority.sweep() == 3)
            #expect(try await authority.sessions(user: third.userID).isEmpty)
            // Limits: the third request within the burst of two is refused, with a wait.
            let limit = try RateLimit(requests: 60, per: 60, burst: 2)
            #expect(try await authority.admit("ip:192.0.2.1", limit: limit) == nil)
            #expect(try await authority.admit("ip:192.0.2.1", limit: limit) == nil)
            #expect(try await authority.admit("ip:192.0.2.1", limit: limit) != nil)
        }
    }

    /// The grace path's touch is a compare-and-set: it wins on a live row as read, even at the
    /// same millisecond, and loses, writing nothing, on a row revoked or touched since.
    @Test(arguments: engines) func aTouchWinsOnlyOnTheRowAsRead(engine: String) async throws {
        let fixture = try await fixture(engine)
        try await closing({ await fixture.store.close() }) {
            let authority = try await SessionAuthority(store: fixture.store, configuration: configuration)
            let issued = try await signIn(authority)
            let read = try #require(try await fixture.store.session(issued.session))
            #expect(try await fixture.store.touch(read, now: read.lastUsedAt), "the same millisecond")
            #expect(try await fixture.store.touch(read, now: read.lastUsedAt + 1), "a touch that changed nothing")
            let touched = try #require(try await fixture.store.session(issued.session))
            #expect(try await !fixture.store.touch(read, now: read.lastUsedAt + 5), "touched since it was read")
            #expect(try await fixture.store.touch(touched, now: read.lastUsedAt + 5))
            let again = try #require(try await fixture.store.session(issued.session))
            #expect(again.lastUsedAt == read.lastUsedAt + 5)
            #expect(try await fixture.store.revoke(issued.session, now: read.lastUsedAt + 6))
            #expect(try await !fixture.store.touch(again, now: read.lastUsedAt + 7), "revoked since it was read")
            let revoked = try #require(try await fixture.store.session(issued.session))
            #expect(revoked.revokedAt == read.lastUsedAt + 6 && revoked.lastUsedAt == read.lastUsedAt + 5)
            #expect(try await !fixture.store.touch(revoked, now: read.lastUsedAt + 8), "a revoked row as read")
        }
    }

    /// A row for `user` opened at `created` (ms), stored as the store stores it.
    func insertSession(
        _ store: DatabaseSessionStore, user: UUID, created: Int64, id chosen: [UInt8]? = nil
    ) async throws -> SessionID {
        let id = try #require(SessionID(bytes: chosen ?? (0..<16).map { _ in UInt8.random(in: 0...255) }))
        try await store.insertSession(
            SessionRow(
                id: id, user: user, generation: 1, rotatedAt: created, createdAt: created, lastUsedAt: created,
                expiresAt: created + 30 * 86_400_000, revokedAt: nil, device: "iPhone"))
        return id
    }

    /// Revoking "every session" of a user with more than one page of them (an app that signs in at
    /// every launch): all are revoked, the oldest too, and the bound of a late revocation holds
    /// across pages; another user's session is left alone.
    @Test(arguments: engines) func revokingEverySessionGoesPastOnePage(engine: String) async throws {
        let fixture = try await fixture(engine)
        try await closing({ await fixture.store.close() }) {
            let authority = try await SessionAuthority(store: fixture.store, configuration: configuration)
            let latest = try await signIn(authority)
            let bystander = try await signIn(authority, "001234.other.0001")
            let base = Int64(Date().timeIntervalSince1970 * 1000) - 60_000
            var ids: [SessionID] = []
            for index in 0..<1_004 {
                ids.append(try await insertSession(fixture.store, user: latest.userID, created: base + Int64(index)))
            }
            #expect(try await authority.revokeAll(user: latest.userID, openedBefore: base + 1_002) == 1_002)
            #expect(try await fixture.store.session(ids[0])?.revokedAt != nil, "the oldest, past the newest 1,000")
            #expect(try await fixture.store.session(ids[1_001])?.revokedAt != nil)
            #expect(try await fixture.store.session(ids[1_002])?.revokedAt == nil, "opened at the bound")
            #expect(try await authority.revokeAll(user: latest.userID) == 3, "two inserted and the sign-in's")
            #expect(try await authority.revokeAll(user: latest.userID) == 0)
            await #expect(throws: SessionError(.invalidGrant, "")) {
                _ = try await authority.refresh(latest.refreshToken)
            }
            #expect(try await authority.refresh(bystander.refreshToken).session == bystander.session)
        }
    }

    /// A row edited without the key does not stop the revocation of the user's others: every row
    /// is revoked, the edited one as it stands, and the call then reports the edit.
    @Test(arguments: engines) func anEditedRowDoesNotShieldTheOthersFromRevocation(engine: String) async throws {
        let fixture = try await fixture(engine)
        try await closing({ await fixture.store.close() }) {
            let user = UUID()
            let first = try await insertSession(fixture.store, user: user, created: 1_000)
            _ = try await insertSession(fixture.store, user: user, created: 2_000)
            let third = try await insertSession(fixture.store, user: user, created: 3_000)
            try await fixture.sql("UPDATE shadow_sessions SET device = 'Mallory' WHERE created_ms = 2000")
            await #expect(throws: SessionError(.corrupted, "")) {
                _ = try await fixture.store.revokeAll(user: user, now: 4_000)
            }
            #expect(try await fixture.store.session(first)?.revokedAt == 4_000)
            #expect(try await fixture.store.session(third)?.revokedAt == 4_000)
            #expect(try await fixture.store.revokeAll(user: user, now: 5_000) == 0, "the edited row is revoked too")
            await #expect(throws: SessionError(.corrupted, ""), "and still reads as edited") {
                _ = try await fixture.store.sessions(user: user)
            }
        }
    }

    /// More dead rows than one batch in each table (sessions, rate limits, DPoP proofs): one sweep
    /// deletes them all, batch after batch, where it deleted one batch a minute and a busy server
    /// (a refresh a second with a proof) grew its tables without end.
    @Test(arguments: engines) func oneSweepDeletesMoreThanOneBatch(engine: String) async throws {
        let fixture = try await fixture(engine)
        try await closing({ await fixture.store.close() }) {
            let authority = try await SessionAuthority(store: fixture.store, configuration: configuration)
            let user = UUID()
            var sessions: [SessionID] = []
            for index in 0..<250 {
                let key = Array("k\(index)".utf8)
                #expect(try await fixture.store.rateLimit(key: key, now: 1_000, interval: 1, tolerance: 0) == nil)
                #expect(try await fixture.store.firstUse(of: key, until: 2_000, now: 1_000))
                let id = try await insertSession(fixture.store, user: user, created: 1_000)
                _ = try await fixture.store.revoke(id, now: 1_001)
                sessions.append(id)
            }
            #expect(try await authority.sweep(limit: 100) == 250)
            for index in [0, 249] {
                let key = Array("k\(index)".utf8)
                #expect(try await fixture.store.session(sessions[index]) == nil)
                #expect(try await fixture.store.rateLimit(key: key, now: 1_000, interval: 1, tolerance: 0) == nil)
                #expect(try await fixture.store.firstUse(of: key, until: 2_000, now: 1_000), "the proof's row is gone")
            }
        }
    }

    /// A sweep batch examines the next `limit` rows of each table in key order, live or dead, and
    /// deletes the dead among them; the next batch goes on after them, and the pass ends at each
    /// table's end. So a batch's statements stay short in a table of many live rows and few dead
    /// ones (they scanned every live row for dead ones), and nothing live is deleted.
    @Test(arguments: engines) func aSweepBatchExaminesItsRowsAndTheNextGoesOn(engine: String) async throws {
        let fixture = try await fixture(engine)
        try await closing({ await fixture.store.close() }) {
            let dead: Set = [1, 5, 9]
            var sessions: [(id: SessionID, dead: Bool)] = []
            for index in 0..<10 {
                // Keys "r0" to "r9" and "p0" to "p9" sort as their numbers; dead ones are due at 1,001.
                let key = Array("r\(index)".utf8)
                let interval: Int64 = dead.contains(index) ? 1 : 10_000
                #expect(
                    try await fixture.store.rateLimit(key: key, now: 1_000, interval: interval, tolerance: 0) == nil)
                #expect(
                    try await fixture.store.firstUse(
                        of: Array("p\(index)".utf8), until: dead.contains(index) ? 2_000 : 20_000, now: 1_000))
                let id = try await insertSession(fixture.store, user: UUID(), created: 1_000)
                if dead.contains(index) { _ = try await fixture.store.revoke(id, now: 1_001) }
                sessions.append((id, dead.contains(index)))
            }
            var position = SweepPosition()
            var batches: [SweptRows] = []
            for _ in 0..<5 where !position.isFinished {
                let (swept, next) = try await fixture.store.deleteDead(
                    expiredBefore: 5_000, idleBefore: 0, examining: 4, from: position)
                batches.append(swept)
                position = next
                if batches.count == 1 {
                    #expect(next.rateLimits == .after(Array("r3".utf8)), "the fourth key examined")
                    #expect(next.proofs == .after(Array("p3".utf8)))
                }
            }
            #expect(position.isFinished && batches.count == 3, "ten rows, four a batch")
            #expect(batches.map(\.rateLimits) == [1, 1, 1], "r1, then r5, then r9: one dead row in each four")
            #expect(batches.map(\.proofs) == [1, 1, 1])
            #expect(batches.map(\.sessions).reduce(0, +) == 3)
            #expect(batches.allSatisfy { $0.sessions <= 4 })
            for (id, wasDead) in sessions {
                #expect(try await (fixture.store.session(id) == nil) == wasDead)
            }
            for index in 0..<10 where !dead.contains(index) {
                #expect(
                    try await fixture.store.rateLimit(
                        key: Array("r\(index)".utf8), now: 1_000, interval: 10_000, tolerance: 0) != nil,
                    "a live row is still held")
                #expect(
                    try await !fixture.store.firstUse(of: Array("p\(index)".utf8), until: 20_000, now: 1_000),
                    "a live replay row is still there")
            }
            // A table at its end is not examined again in the pass.
            let (after, _) = try await fixture.store.deleteDead(
                expiredBefore: .max / 2, idleBefore: .max / 2, examining: 4,
                from: {
                    var end = SweepPosition()
                    end.rateLimits = .end
                    return end
                }())
            #expect(after.rateLimits == 0 && after.proofs == 4 && after.sessions == 4)
        }
    }

    /// The re-check's read of the users due (every minute) is served by the index migration 4
    /// made, where it scanned and sorted every user: about 100 ms for a million users on SQLite,
    /// holding the one reader every other read waits for.
    @Test(arguments: engines) func theUsersDueAreReadFromTheirIndex(engine: String) async throws {
        let fixture = try await fixture(engine)
        try await closing({ await fixture.store.close() }) {
            let plan = try await fixture.plan(DatabaseSessionStore.usersDueSQL)
            #expect(plan.contains("shadow_session_users_due"), "\(plan)")
            #expect(!plan.contains("TEMP B-TREE") && !plan.contains("Sort"), "no sort: the index is in order")
            #expect(!plan.contains("Seq Scan") && !plan.contains("SCAN shadow_session_users"), "\(plan)")
        }
    }

    /// The authority's pass goes on where `batches` cut it short, at the next call, and a new
    /// pass starts after a finished one: every dead session is deleted once, a batch at a time.
    @Test(arguments: engines) func aSweepCutShortGoesOnAtTheNextCall(engine: String) async throws {
        let fixture = try await fixture(engine)
        try await closing({ await fixture.store.close() }) {
            let authority = try await SessionAuthority(store: fixture.store, configuration: configuration)
            let user = UUID()
            // Fourteen sessions in key order, every other one revoked: a pass that started again
            // at each call would examine the first two, live and dead, again and again.
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            for index in 0..<14 {
                let id = try await insertSession(
                    fixture.store, user: user, created: now, id: [UInt8(index)] + Array(repeating: 0, count: 15))
                if index % 2 == 1 { _ = try await fixture.store.revoke(id, now: now) }
            }
            var counts: [Int] = []
            for _ in 0..<8 { counts.append(try await authority.sweep(limit: 2, batches: 1)) }
            #expect(counts == [1, 1, 1, 1, 1, 1, 1, 0], "one dead session in each batch of two rows")
            #expect(try await fixture.store.sessions(user: user).count == 7)
            // A session revoked after the pass finished is found by the next pass.
            let late = try await insertSession(fixture.store, user: user, created: now)
            _ = try await fixture.store.revoke(late, now: now)
            #expect(try await authority.sweep() == 1)
        }
    }

    /// A proof's replay row outlives its expiry by the sweep's margin: an instance whose clock runs
    /// two seconds behind the sweeper's still refuses the proof a second time, and a fresh burst is
    /// not granted early; a row past the margin is deleted.
    @Test(arguments: engines) func theSweepLeavesRowsAnInstanceBehindStillNeeds(engine: String) async throws {
        let fixture = try await fixture(engine)
        try await closing({ await fixture.store.close() }) {
            let authority = try await SessionAuthority(store: fixture.store, configuration: configuration)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let (recent, old) = (Array("recent".utf8), Array("old".utf8))
            #expect(try await fixture.store.firstUse(of: recent, until: now - 1_000, now: now - 60_000))
            #expect(try await fixture.store.firstUse(of: old, until: now - 400_000, now: now - 460_000))
            #expect(
                try await fixture.store.rateLimit(key: recent, now: now - 61_000, interval: 60_000, tolerance: 0) == nil
            )
            _ = try await authority.sweep()
            #expect(
                try await !fixture.store.firstUse(of: recent, until: now - 1_000, now: now - 2_000),
                "the replay is still refused by an instance two seconds behind")
            #expect(
                try await fixture.store.rateLimit(key: recent, now: now - 2_000, interval: 60_000, tolerance: 0) != nil,
                "the limit is still held by an instance two seconds behind")
            #expect(
                try await fixture.store.firstUse(of: old, until: now - 400_000, now: now - 459_000),
                "the row past the margin is gone: asked at a time it was live, it is new")
        }
    }

    /// A refresh's two limits and its proof's replay row, handed to the store together from many
    /// requests at once: every answer is the one its own step would get alone, in its place. SQLite
    /// answers through its group commit, PostgreSQL through one statement of `WITH` parts, and
    /// steps that share a key through `SQLDatabase.writeEach` (whose release build once trapped on
    /// PostgreSQL's first refresh).
    @Test(arguments: engines) func limitsAndProofsHandedOverTogetherAreAnsweredInPlace(engine: String) async throws {
        let fixture = try await fixture(engine)
        try await closing({ await fixture.store.close() }) {
            let authority = try await SessionAuthority(store: fixture.store, configuration: configuration)
            let perIP = try RateLimit(requests: 60, per: 60, burst: 1)
            let perUser = try RateLimit(requests: 60, per: 60, burst: 100)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            func round() async -> [Int: (waits: [Result<Int?, any Error>], replay: Result<Bool, any Error>?)] {
                await withTaskGroup(of: Admitted.self) { group in
                    for client in 0..<12 {
                        group.addTask {
                            let replay = DPoPReplayEntry(
                                key: Array(repeating: UInt8(client), count: 32), expiresAt: now + 60_000, now: now)
                            let answer = await authority.admit(
                                [("ip:198.51.100.\(client)", perIP), ("user:shared", perUser)],
                                replay: client.isMultiple(of: 3) ? nil : replay)
                            return Admitted(client: client, waits: answer.waits, replay: answer.replay)
                        }
                    }
                    var answers: [Int: (waits: [Result<Int?, any Error>], replay: Result<Bool, any Error>?)] = [:]
                    for await admitted in group { answers[admitted.client] = (admitted.waits, admitted.replay) }
                    return answers
                }
            }
            let first = await round()
            let second = await round()
            #expect(first.count == 12 && second.count == 12)
            for client in 0..<12 {
                let (before, after) = (try #require(first[client]), try #require(second[client]))
                #expect(before.waits.count == 2 && after.waits.count == 2)
                #expect(try before.waits[0].get() == nil, "the first request from \(client)'s address")
                #expect(try after.waits[0].get() != nil, "the second within a burst of one")
                #expect(try before.waits[1].get() == nil && after.waits[1].get() == nil, "24 of a burst of 100")
                if client.isMultiple(of: 3) {
                    #expect(before.replay == nil && after.replay == nil)
                } else {
                    #expect(try before.replay?.get() == true, "proof \(client) is new")
                    #expect(try after.replay?.get() == false, "proof \(client) is spent")
                }
            }
            // Two steps on one key each count: of two within a burst of one, one is refused.
            let twice = await authority.admit([("ip:192.0.2.9", perIP), ("ip:192.0.2.9", perIP)], replay: nil)
            let allowed = try twice.waits.map { try $0.get() == nil }
            #expect(allowed.count == 2 && allowed.filter { $0 }.count == 1)
        }
    }

    /// One request's answers in ``limitsAndProofsHandedOverTogetherAreAnsweredInPlace(engine:)``.
    struct Admitted: Sendable {
        let client: Int
        let waits: [Result<Int?, any Error>]
        let replay: Result<Bool, any Error>?
    }

    /// Someone who can edit rows but holds no key: every edit of a session's or a user's fields
    /// is refused as `sessions_corrupted` on the next read, and nothing is issued from it.
    @Test(arguments: engines) func aBoundRowWithAMalformedThumbprintIsRefusedNotStoredUnbound(
        engine: String
    )
        async throws
    {
        let fixture = try await fixture(engine)
        try await closing({ await fixture.store.close() }) {
            let id = try #require(SessionID(bytes: [UInt8](repeating: 7, count: 16)))
            let row = SessionRow(
                id: id, user: UUID(), generation: 1, rotatedAt: 1, createdAt: 1, lastUsedAt: 1, expiresAt: 2,
                revokedAt: nil, device: "iPhone", keyThumbprint: "not-a-thumbprint")
            await #expect(throws: SessionError.self) { try await fixture.store.insertSession(row) }
            #expect(try await fixture.store.session(id) == nil)
        }
    }

    @Test(arguments: engines) func anEditedRowFailsClosed(engine: String) async throws {
        let edits = [
            "UPDATE shadow_sessions SET generation = generation + 1",
            "UPDATE shadow_sessions SET revoked_ms = NULL",
            "UPDATE shadow_sessions SET expires_ms = expires_ms + 86400000",
            "UPDATE shadow_sessions SET used_ms = used_ms + 1",
            "UPDATE shadow_sessions SET device = 'Mallory''s laptop'",
            "UPDATE shadow_sessions SET mac = NULL",
            #"""
            UPDATE shadow_sessions SET "user" = (SELECT "user" FROM shadow_session_users WHERE "user" <> \#
            shadow_sessions."user" LIMIT 1)
            """#,
        ]
        for edit in edits {
            let fixture = try await fixture(engine)
            try await closing({ await fixture.store.close() }) {
                let authority = try await SessionAuthority(store: fixture.store, configuration: configuration)
                let issued = try await signIn(authority)
                _ = try await signIn(authority, "001234.other.0042")
                if edit.contains("revoked_ms = NULL") { try await authority.revoke(session: issued.session) }
                try await fixture.sql(edit)
                let error = await #expect(throws: SessionError.self, "\(engine): \(edit)") {
                    _ = try await authority.refresh(issued.refreshToken)
                }
                #expect(error?.code == .corrupted, "\(engine): \(edit): \(String(describing: error))")
            }
        }
        // A user row moved to another user's ID: the sign-in refuses it.
        let fixture = try await fixture(engine)
        try await closing({ await fixture.store.close() }) {
            let authority = try await SessionAuthority(store: fixture.store, configuration: configuration)
            _ = try await signIn(authority, "001234.a.0042")
            _ = try await signIn(authority, "001234.b.0042")
            try await fixture.sql(#"UPDATE shadow_session_users SET checked_ms = checked_ms - 1"#)
            let error = await #expect(throws: SessionError.self) { _ = try await signIn(authority, "001234.a.0042") }
            #expect(error?.code == .corrupted, "\(String(describing: error))")
        }
    }

    /// The residual the threat model names: a whole older row put back (from a backup) is
    /// consistent with itself, so it is taken; a generation set back this way revives a spent
    /// refresh token until the session rotates again.
    @Test(arguments: engines) func aWholeOlderRowReplayedIsTheDocumentedResidual(engine: String) async throws {
        let fixture = try await fixture(engine)
        try await closing({ await fixture.store.close() }) {
            var settings = configuration
            settings.grace = 0
            let authority = try await SessionAuthority(store: fixture.store, configuration: settings)
            let first = try await signIn(authority)
            try await fixture.sql("CREATE TABLE saved AS SELECT * FROM shadow_sessions")
            _ = try await authority.refresh(first.refreshToken)
            try await fixture.sql("DELETE FROM shadow_sessions")
            try await fixture.sql("INSERT INTO shadow_sessions SELECT * FROM saved")
            #expect(try await authority.refresh(first.refreshToken).session == first.session)
        }
    }

    /// The user signs in again while the monthly re-check asks Apple about their old token, and
    /// Apple refuses that token (consent was withdrawn, then given again): the sessions from
    /// before the check end, the new one and the new token stay, and the next check asks about
    /// the new token.
    @Test(arguments: engines) func aSignInDuringTheRecheckIsKept(engine: String) async throws {
        let fixture = try await fixture(engine)
        try await closing({ await fixture.store.close() }) {
            let authority = try await SessionAuthority(store: fixture.store, configuration: configuration)
            @Sendable func text(_ token: SecretBytes) -> String {
                token.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
            }
            let before = try await signIn(authority)
            try await Task.sleep(for: .milliseconds(5))
            let meanwhile = Mutex<IssuedTokens?>(nil)
            let result = try await authority.recheck(interval: 0) { token in
                let issued = try? await authority.signIn(
                    appleSubject: "001234.abc.0042", appleClientID: "com.example.app",
                    appleRefreshToken: SecretBytes(utf8: "apple-rt-2"), device: "iPad")
                meanwhile.withLock { $0 = issued }
                return text(token) == "apple-rt" ? .invalid : .valid
            }
            let fresh = try #require(meanwhile.withLock { $0 })
            #expect(result.checked == 1 && result.revoked == 1)
            await #expect(throws: SessionError(.invalidGrant, "")) {
                _ = try await authority.refresh(before.refreshToken)
            }
            #expect(try await authority.refresh(fresh.refreshToken).session == fresh.session)
            #expect(try await fixture.store.isInactive(user: fresh.userID) == false)
            try await Task.sleep(for: .milliseconds(5))
            let asked = Mutex<[String]>([])
            _ = try await authority.recheck(interval: 0) { token in
                asked.withLock { $0.append(text(token)) }
                return .valid
            }
            #expect(asked.withLock { $0 } == ["apple-rt-2"])
        }
    }

    /// Two instances on one store re-checking at once ask Apple about each due user once: while
    /// the first asks about its first user, the second runs a whole pass and skips that user
    /// (claimed), and the first then skips the ones the second checked. A user Apple could not be
    /// asked about is given back, and the next pass asks again.
    @Test(arguments: engines) func twoInstancesRecheckingAtOnceAskAboutEachUserOnce(engine: String) async throws {
        let fixture = try await fixture(engine)
        let other = try await fixture.reopen()
        try await closing({
            await other.close()
            await fixture.store.close()
        }) {
            let first = try await SessionAuthority(store: fixture.store, configuration: configuration)
            let second = try await SessionAuthority(store: other, configuration: configuration)
            for index in 0..<6 { _ = try await signIn(first, "001234.u\(index).0042") }
            try await Task.sleep(for: .milliseconds(3))
            let asked = Mutex(0)
            let inner = Mutex<(checked: Int, revoked: Int)?>(nil)
            let outer = try await first.recheck(interval: 0) { _ in
                guard
                    asked.withLock({ count in
                        count += 1
                        return count == 1
                    })
                else { return .valid }
                let pass = try? await second.recheck(interval: 0) { _ in
                    asked.withLock { $0 += 1 }
                    return .valid
                }
                inner.withLock { $0 = pass }
                return .valid
            }
            #expect(asked.withLock { $0 } == 6, "each user was asked about once")
            #expect(inner.withLock { $0?.checked } == 5 && outer.checked == 1)
            // Apple unreachable: the claim is given back, and the next pass asks again.
            try await Task.sleep(for: .milliseconds(3))
            let unreachable = try await second.recheck(interval: 0) { _ in .unavailable }
            #expect(unreachable.checked == 0)
            try await Task.sleep(for: .milliseconds(3))
            #expect(try await first.recheck(interval: 0) { _ in .valid }.checked == 6)
        }
    }

    /// The minute's upkeep with a signing-key row that no longer opens: the key step fails and
    /// says so, and the sweep and the re-check still run (the dead sessions are deleted, the due
    /// users asked about).
    @Test(arguments: engines) func aKeyRowThatDoesNotOpenStopsNeitherTheSweepNorTheRecheck(
        engine: String
    ) async throws {
        let fixture = try await fixture(engine)
        try await closing({ await fixture.store.close() }) {
            let clock = ManualClock(Date())
            let authority = try await SessionAuthority(
                store: fixture.store, configuration: configuration, clock: clock.clock)
            _ = try await signIn(authority)
            let ended = try await signIn(authority, "001234.other.0042")
            _ = try await authority.revokeAll(user: ended.userID)
            try await fixture.sql("UPDATE shadow_session_keys SET kid = 'edited'")
            clock.advance(by: 31 * 86_400)
            let asked = Mutex(0)
            let report = await authority.upkeep { _ in
                asked.withLock { $0 += 1 }
                return .valid
            }
            #expect(report.failures.map(\.step) == ["keys"])
            #expect((report.failures.first?.error as? SessionError)?.code == .corrupted)
            #expect(report.sweptSessions == 2, "the revoked session, and the other past its end")
            #expect(asked.withLock { $0 } == 2 && report.recheck?.checked == 2, "both users were asked about")
        }
    }

    /// One user's row edited, another's sealed Apple refresh token edited, a third intact, in that
    /// order in the queue: the re-check still asks Apple about the third. The two it cannot ask
    /// about fail closed (their sessions end, they leave the queue), and the pass says so.
    @Test(arguments: engines) func anEditedUserDoesNotStopTheRecheckOfTheOthers(engine: String) async throws {
        let fixture = try await fixture(engine)
        try await closing({ await fixture.store.close() }) {
            let authority = try await SessionAuthority(store: fixture.store, configuration: configuration)
            let rowEdited = try await signIn(authority, "001234.a.0042")
            try await Task.sleep(for: .milliseconds(3))
            let tokenEdited = try await signIn(authority, "001234.b.0042")
            try await Task.sleep(for: .milliseconds(3))
            let intact = try await signIn(authority, "001234.c.0042")
            try await Task.sleep(for: .milliseconds(3))
            let oldest = "(SELECT min(checked_ms) FROM shadow_session_users WHERE checked_ms > 1)"
            try await fixture.sql("UPDATE shadow_session_users SET checked_ms = 1 WHERE checked_ms = \(oldest)")
            try await fixture.sql("UPDATE shadow_session_users SET apple_refresh = mac WHERE checked_ms = \(oldest)")
            let asked = Mutex(0)
            let error = await #expect(throws: SessionError.self) {
                _ = try await authority.recheck(interval: 0) { _ in
                    asked.withLock { $0 += 1 }
                    return .valid
                }
            }
            #expect(error?.code == .corrupted, "\(String(describing: error))")
            #expect(asked.withLock { $0 } == 1, "the intact user was asked about")
            for edited in [rowEdited, tokenEdited] {
                await #expect(throws: SessionError(.invalidGrant, "")) {
                    _ = try await authority.refresh(edited.refreshToken)
                }
            }
            #expect(try await fixture.store.isInactive(user: tokenEdited.userID))
            #expect(try await authority.refresh(intact.refreshToken).session == intact.session)
            try await Task.sleep(for: .milliseconds(3))
            let again = try await authority.recheck(interval: 0) { _ in .valid }
            #expect(again.checked == 1 && again.revoked == 0, "the edited users left the queue")
        }
    }

    /// A sign-in that stores no Apple refresh token (a library caller's) while the re-check's
    /// refusal comes back: the user is marked inactive, and the session opened meanwhile stays.
    @Test(arguments: engines) func aSessionOpenedDuringTheRecheckStays(engine: String) async throws {
        let fixture = try await fixture(engine)
        try await closing({ await fixture.store.close() }) {
            let authority = try await SessionAuthority(store: fixture.store, configuration: configuration)
            let before = try await signIn(authority)
            try await Task.sleep(for: .milliseconds(5))
            let meanwhile = Mutex<IssuedTokens?>(nil)
            _ = try await authority.recheck(interval: 0) { _ in
                try? await Task.sleep(for: .milliseconds(5))
                let issued = try? await authority.signIn(
                    appleSubject: "001234.abc.0042", appleClientID: "com.example.app", appleRefreshToken: nil,
                    device: "iPad")
                meanwhile.withLock { $0 = issued }
                return .invalid
            }
            let fresh = try #require(meanwhile.withLock { $0 })
            await #expect(throws: SessionError(.invalidGrant, "")) {
                _ = try await authority.refresh(before.refreshToken)
            }
            #expect(try await authority.refresh(fresh.refreshToken).session == fresh.session)
            #expect(try await fixture.store.isInactive(user: fresh.userID))
        }
    }

    /// An app transfer on both engines: the new subject's first sign-in takes over the old
    /// subject's user (the moved row still opens under its MAC), once; the old subject, if it
    /// signed in again, would be a new user.
    @Test(arguments: engines) func aTransferMovesTheUserToTheNewSubject(engine: String) async throws {
        let fixture = try await fixture(engine)
        try await closing({ await fixture.store.close() }) {
            let authority = try await SessionAuthority(store: fixture.store, configuration: configuration)
            let before = try await signIn(authority, "001234.old.0042")
            let moved = try await authority.signIn(
                appleSubject: "001234.new.0042", appleClientID: "com.example.app",
                appleRefreshToken: SecretBytes(utf8: "apple-rt-2"), device: "iPad",
                appleTransferSubject: "001234.old.0042")
            #expect(moved.userID == before.userID)
            #expect(
                try await authority.user(appleSubject: "001234.new.0042", appleClientID: "com.example.app")
                    == before.userID)
            #expect(try await authority.user(appleSubject: "001234.old.0042", appleClientID: "com.example.app") == nil)
            #expect(try await authority.sessions(user: before.userID).count == 2)
            #expect(try await authority.refresh(moved.refreshToken).userID == before.userID)
            #expect(try await signIn(authority, "001234.old.0042").userID != before.userID)
        }
    }

    /// GCRA in the store against a model of its rule, step by step on both engines: a key's
    /// theoretical arrival time `tat` moves to max(tat, now) + T when max(tat, now) − now ≤ τ,
    /// and a refused step answers tat − τ. Clocks step back as well as forward (instances
    /// disagree), and τ is 0, a whole number of T or not.
    @Test(arguments: engines) func theRateLimitStatementIsGCRA(engine: String) async throws {
        let fixture = try await fixture(engine)
        try await closing({ await fixture.store.close() }) {
            var generator = SeededGenerator(seed: 0x6C1D)
            var model: [Int: Int64] = [:]
            var now: Int64 = 1_700_000_000_000
            var refused = 0
            for number in 0..<400 {
                let key = Int.random(in: 0..<4, using: &generator)
                let interval = [1, 700, 3_000][Int.random(in: 0..<3, using: &generator)] as Int64
                let tolerance = [0, interval, interval * 3, interval * 5 / 2][Int.random(in: 0..<4, using: &generator)]
                if let tat = model[key], Int.random(in: 0..<3, using: &generator) == 0 {
                    // At the edge: the first time a request is allowed again, or a millisecond either side.
                    now = tat - tolerance + Int64.random(in: -1...1, using: &generator)
                } else {
                    now += Int64.random(in: -3_000...4_000, using: &generator)
                }
                let expected: Int64?
                if let tat = model[key] {
                    let later = max(tat, now)
                    if later - now <= tolerance {
                        (expected, model[key]) = (nil, later + interval)
                    } else {
                        expected = tat - tolerance
                    }
                } else {
                    (expected, model[key]) = (nil, now + interval)
                }
                let answer = try await fixture.store.rateLimit(
                    key: Array("gcra-\(key)".utf8), now: now, interval: interval, tolerance: tolerance)
                #expect(answer == expected, "step \(number): key \(key), now \(now), T \(interval), τ \(tolerance)")
                if expected != nil { refused += 1 }
            }
            #expect((50...350).contains(refused), "the sequence tries both answers (refused \(refused) of 400)")
        }
    }

    /// A step the store cannot add without overflow, or whose τ is negative (where tat ≤ now + τ
    /// is no longer GCRA's rule), is refused as `invalid_parameter` with everything handed over
    /// with it, and nothing is written: the key's next step is its first, and the proof is unspent.
    @Test(arguments: engines) func aRateLimitStepOutOfRangeWritesNothing(engine: String) async throws {
        let fixture = try await fixture(engine)
        try await closing({ await fixture.store.close() }) { () async throws in
            let key = Array("edge".utf8)
            let proof = DPoPReplayEntry(key: Array("edge-proof".utf8), expiresAt: 70_000, now: 10_000)
            let wrong: [(now: Int64, interval: Int64, tolerance: Int64)] = [
                (-1, 1_000, 0), (RateLimitStep.latest + 1, 1_000, 0), (10_000, 0, 0),
                (10_000, RateLimitStep.longestInterval + 1, 0), (10_000, 1_000, -1),
                (10_000, 1_000, RateLimitStep.longestTolerance + 1), (Int64.max, Int64.max, Int64.max),
            ]
            for (now, interval, tolerance) in wrong {
                await #expect(throws: SessionError(.invalidParameter, "")) {
                    try await fixture.store.rateLimit(key: key, now: now, interval: interval, tolerance: tolerance)
                }
                let valid = RateLimitStep(key: Array("other".utf8), now: 10_000, interval: 1_000, tolerance: 0)
                let together = await fixture.store.admit(
                    [valid, RateLimitStep(key: key, now: now, interval: interval, tolerance: tolerance)], replay: proof)
                #expect(together.limits.count == 2)
                for answer in together.limits {
                    #expect(throws: SessionError(.invalidParameter, "")) { try answer.get() }
                }
                #expect(throws: SessionError(.invalidParameter, "")) { try together.replay?.get() }
            }
            // The widest steps a limit gives are taken.
            #expect(
                try await fixture.store.rateLimit(
                    key: Array("widest".utf8), now: RateLimitStep.latest, interval: RateLimitStep.longestInterval,
                    tolerance: RateLimitStep.longestTolerance) == nil)
            // Nothing was written by the refused ones.
            #expect(try await fixture.store.rateLimit(key: key, now: 10_000, interval: 1_000, tolerance: 0) == nil)
            #expect(try await fixture.store.rateLimit(key: key, now: 10_000, interval: 1_000, tolerance: 0) == 11_000)
            #expect(
                try await fixture.store.rateLimit(key: Array("other".utf8), now: 10_000, interval: 1_000, tolerance: 0)
                    == nil)
            #expect(try await fixture.store.firstUse(of: proof.key, until: proof.expiresAt, now: proof.now))
        }
    }

    /// The refresh's first trip reads the session with its steps: the row is the one
    /// ``SessionStore/session(_:)`` reads, in every shape the store may send them in (one
    /// statement, steps on one key apart, no step at all), none for a session that does not
    /// exist, an error for an edited row (while the steps still count), and the steps' error when
    /// a step is out of range.
    @Test(arguments: engines) func anAdmissionReadsTheSessionAsItsOwnReadDoes(engine: String) async throws {
        let fixture = try await fixture(engine)
        try await closing({ await fixture.store.close() }) {
            let authority = try await SessionAuthority(store: fixture.store, configuration: configuration)
            let issued = try await signIn(authority)
            let family = try authority.authenticate(refreshToken: issued.refreshToken).family
            let stored = try #require(try await fixture.store.session(family))
            let step = { (name: String) in
                RateLimitStep(key: Array(name.utf8), now: 10_000, interval: 1_000, tolerance: 0)
            }
            let proof = DPoPReplayEntry(key: Array("read-proof".utf8), expiresAt: 70_000, now: 10_000)
            let shapes: [(limits: [RateLimitStep], replay: DPoPReplayEntry?)] = [
                ([step("a"), step("b")], proof), ([step("c"), step("c")], nil), ([], nil), ([step("d")], nil),
            ]
            for (index, shape) in shapes.enumerated() {
                let answer = await fixture.store.admit(shape.limits, replay: shape.replay, reading: family)
                #expect(try answer.session.get() == stored, "shape \(index)")
                #expect(answer.limits.count == shape.limits.count)
                let allowed = try answer.limits.map { try $0.get() == nil }
                #expect(allowed.filter { $0 }.count == Set(shape.limits.map(\.key)).count, "each key's first step")
                #expect(try answer.replay?.get() == (shape.replay == nil ? nil : true))
            }
            let missing = await fixture.store.admit([step("f")], replay: nil, reading: SessionID.random())
            #expect(try missing.session.get() == nil)
            #expect(try missing.limits[0].get() == nil)

            try await fixture.sql("UPDATE shadow_sessions SET generation = generation + 1")
            let edited = await fixture.store.admit([step("g")], replay: proof, reading: family)
            #expect(throws: SessionError(.corrupted, "")) { try edited.session.get() }
            #expect(try edited.limits[0].get() == nil)
            #expect(try edited.replay?.get() == false, "the proof was spent by the first shape")
            #expect(
                try await fixture.store.rateLimit(key: Array("g".utf8), now: 10_000, interval: 1_000, tolerance: 0)
                    == 11_000, "the edited row's admission still counted its step")

            var wrong = step("h")
            wrong.interval = 0
            let refused = await fixture.store.admit([wrong], replay: nil, reading: family)
            #expect(throws: SessionError(.invalidParameter, "")) { try refused.session.get() }
        }
    }

    /// The row a refresh starts from is read with its admission, before the rotation: a logout,
    /// or another refresh of the same token, that lands between that read and the rotation's
    /// compare-and-set is seen. The logout leaves the refresh nothing; the racing refresh leaves
    /// it the grace path's successor, the same one the race handed out.
    @Test(arguments: engines) func aWriteBetweenTheAdmissionsReadAndTheRotationIsSeen(engine: String) async throws {
        let fixture = try await fixture(engine)
        try await closing({ await fixture.store.close() }) {
            let base = try await SessionAuthority(store: fixture.store, configuration: configuration)
            let between = Mutex<(@Sendable () async throws -> Void)?>(nil)
            let interposed = InterposedSessionStore(fixture.store, before: ["rotate"]) { _ in
                let step = between.withLock { step in
                    defer { step = nil }
                    return step
                }
                try await step?()
            }
            let authority = try await SessionAuthority(store: interposed, configuration: configuration)
            let limit = try RateLimit(requests: 60, per: 60, burst: 100)
            func refresh(_ text: String) async throws -> IssuedTokens {
                let token = try authority.authenticate(refreshToken: text)
                let admitted = await authority.admit([("ip:192.0.2.40", limit)], replay: nil, reading: token.family)
                #expect(try admitted.waits[0].get() == nil)
                #expect(try admitted.session.get() != nil, "the admission read the live row")
                return try await authority.refresh(token, read: admitted.session)
            }

            let signedOut = try await signIn(authority)
            between.withLock { $0 = { _ = try await base.revoke(refreshToken: signedOut.refreshToken) } }
            await #expect(throws: SessionError(.invalidGrant, "")) { _ = try await refresh(signedOut.refreshToken) }
            #expect(try await fixture.store.session(signedOut.session)?.revokedAt != nil)
            #expect(try await fixture.store.session(signedOut.session)?.generation == 1, "not rotated")

            let raced = try await signIn(authority)
            let winner = Mutex<String?>(nil)
            between.withLock { step in
                step = {
                    let issued = try await base.refresh(raced.refreshToken)
                    winner.withLock { $0 = issued.refreshToken }
                }
            }
            let loser = try await refresh(raced.refreshToken)
            #expect(loser.refreshToken == winner.withLock { $0 }, "the grace path's successor")
            #expect(try await fixture.store.session(raced.session)?.generation == 2, "rotated once")
        }
    }
}
