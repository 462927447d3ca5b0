import Foundation
import ShadowCore
import ShadowJOSE
import ShadowPostgres
@testable import ShadowSessions
import ShadowStorage
import ShadowTestSupport
import ShadowVault
import Synchronization
import Testing

/// Two instances on one PostgreSQL: the refresh race across them, rate limits that hold across
/// them, and a key rotated on one that the other verifies.
@Suite(.tags(.postgres), .ownThreads, .enabled(if: postgresWanted)) struct PostgresSessionTests {
    let url: String
    let configuration = SessionConfiguration(
        issuer: "https://api.example.com", audience: "https://api.example.com/v1", clientID: "com.example.app")

    init() throws { url = try PostgresCluster.shared.get().freshDatabase() }

    func withInstances(_ body: (SessionAuthority, SessionAuthority) async throws -> Void) async throws {
        let unlock = VaultUnlock.key(SecretBytes((0..<32).map { UInt8($0) }))
        let stores = [
            try await PostgresSessionStore.connect(
                try PostgresLocation(url: url), unlock: unlock, connectTimeout: .seconds(60), retryFor: .seconds(90)),
            try await PostgresSessionStore.connect(
                try PostgresLocation(url: url), unlock: unlock, connectTimeout: .seconds(60), retryFor: .seconds(90)),
        ]
        do {
            let first = try await SessionAuthority(store: stores[0], configuration: configuration)
            let second = try await SessionAuthority(store: stores[1], configuration: configuration)
            try await body(first, second)
        } catch {
            for store in stores { await store.close() }
            throw error
        }
        for store in stores { await store.close() }
    }

    @Test func theRefreshRaceAcrossTwoInstancesMakesOneSuccessor() async throws {
        try await withInstances { first, second in
            for round in 0..<10 {
                let issued = try await first.signIn(
                    appleSubject: "racer-\(round)", appleClientID: "com.example.app", appleRefreshToken: nil,
                    device: "phone")
                let results = try await withThrowingTaskGroup(of: String.self) { group in
                    for index in 0..<12 {
                        let instance = index % 2 == 0 ? first : second
                        group.addTask { try await instance.refresh(issued.refreshToken).refreshToken }
                    }
                    return try await group.reduce(into: Set<String>()) { $0.insert($1) }
                }
                #expect(results.count == 1, "round \(round): \(results.count) successors")
                // The one successor works on either instance.
                #expect(try await second.refresh(results.first!).session == issued.session)
            }
            // Both instances sign with the one ring, and each verifies the other's tokens.
            let token = try await first.signIn(
                appleSubject: "v", appleClientID: "com.example.app", appleRefreshToken: nil, device: "d")
            #expect(try await second.verifier().verify(token.accessToken).userID == token.userID)
        }
    }

    @Test func rateLimitsHoldAcrossInstances() async throws {
        try await withInstances { first, second in
            let limit = try RateLimit(requests: 10, per: 60)
            var allowed = 0
            for index in 0..<30 {
                let instance = index % 2 == 0 ? first : second
                if try await instance.admit("ip:198.51.100.7", limit: limit) == nil { allowed += 1 }
            }
            #expect(allowed == 10, "one limit over both instances, not one each")
        }
    }

    /// The rate limits' statement does not wait for its flush (Docs/sessions.md, "Rate limits"),
    /// and a session's change does: on a cluster with fsync on, 60 admits in a row cost a few of
    /// PostgreSQL's WAL flushes (the WAL writer's own, at most one per 200 ms), and 60 sign-ins
    /// at least one each. Each batch runs on a store of its own, closed before the count is read:
    /// a server process reports its counts when it ends.
    @Test func rateLimitCountsDoNotWaitForAFlushAndSessionChangesDo() async throws {
        let cluster = try PostgresCluster.start(durable: true)
        defer { cluster.stop() }
        let url = try cluster.createDatabase("flushes")
        func flushes() throws -> Int {
            let text = try cluster.psql("flushes", "SELECT wal_sync FROM pg_stat_wal")
            return try #require(Int(text.trimmingCharacters(in: .whitespacesAndNewlines)), "\(text)")
        }
        /// The flushes `body` waited for, on a store of its own.
        func flushes(of body: (SessionAuthority) async throws -> Void) async throws -> Int {
            let store = try await PostgresSessionStore.connect(
                try PostgresLocation(url: url), unlock: .key(SecretBytes((0..<32).map { UInt8($0) })),
                connectTimeout: .seconds(60), retryFor: .seconds(90))
            let authority: SessionAuthority
            do {
                authority = try await SessionAuthority(store: store, configuration: configuration)
            } catch {
                await store.close()
                throw error
            }
            let before = try flushes()
            do { try await body(authority) } catch {
                await store.close()
                throw error
            }
            await store.close()
            return try flushes() - before
        }
        let limit = try RateLimit(requests: 1000, per: 60)
        _ = try await flushes { _ = try await $0.admit("ip:192.0.2.1", limit: limit) }  // the first rows
        let admits = try await flushes { authority in
            for index in 0..<60 {
                let wait = try await authority.admit("ip:192.0.2.\(index)", limit: limit)
                #expect(wait == nil)
            }
        }
        let signIns = try await flushes { authority in
            for index in 0..<60 {
                _ = try await authority.signIn(
                    appleSubject: "flush-\(index)", appleClientID: "com.example.app", appleRefreshToken: nil,
                    device: "d")
            }
        }
        #expect(admits <= 10, "60 admits waited for \(admits) flushes")
        #expect(signIns >= 60, "60 sign-ins waited for \(signIns) flushes")
    }

    /// `body` with a store on a server of its own (which it may stop and restart), closed after.
    func onItsOwnServer(
        connectTimeout: Duration, retryFor: Duration, connections: Int,
        _ body: (PostgresCluster, DatabaseSessionStore) async throws -> Void
    ) async throws {
        let cluster = try PostgresCluster.start()
        defer { cluster.stop() }
        let store = try await PostgresSessionStore.connect(
            try PostgresLocation(url: try cluster.createDatabase("own")),
            unlock: .key(SecretBytes((0..<32).map { UInt8($0) })), connectTimeout: connectTimeout, retryFor: retryFor,
            maximumConnections: connections)
        try await closing({ await store.close() }) { try await body(cluster, store) }
    }

    /// Every rotation runs one `UPDATE`, prepared once per pooled connection: on a pool of one
    /// connection, after a few refreshes that statement is the connection's one prepared
    /// statement and the server runs its cached generic plan. After an immediate restart the
    /// next refresh prepares it again on the new connection, and the rotation's compare-and-set
    /// still refuses a token already used. A server that has lost the statement turns
    /// preparing off, and the rotations go on unprepared.
    @Test func theRotationIsPreparedOncePerConnectionAndAgainAfterARestart() async throws {
        try await onItsOwnServer(connectTimeout: .seconds(60), retryFor: .seconds(90), connections: 1) {
            cluster, store in
            let authority = try await SessionAuthority(store: store, configuration: configuration)
            func prepared() async throws -> [(statement: String, generic: Int64)] {
                try await store.database.read("SELECT statement, generic_plans FROM pg_prepared_statements", [])
                    .map { (try #require($0.text("statement")), try #require($0.integer("generic_plans"))) }
            }
            let issued = try await authority.signIn(
                appleSubject: "p", appleClientID: "com.example.app", appleRefreshToken: nil, device: "d")
            var token = issued.refreshToken
            for _ in 0..<8 { token = try await authority.refresh(token).refreshToken }
            let before = try await prepared()
            #expect(before.count == 1)
            #expect(before.first?.statement.hasPrefix("UPDATE shadow_sessions SET generation") == true)
            #expect((before.first?.generic ?? 0) > 0, "the server plans it once for every run")

            try cluster.restartImmediately()
            let used = token
            token = try await authority.refresh(token).refreshToken
            #expect(try await prepared().count == 1, "prepared again on the new connection, once")
            await #expect(throws: SessionError(.reuseDetected, "")) {
                _ = try await authority.refresh(issued.refreshToken)
            }
            await #expect(throws: SessionError(.invalidGrant, "")) { _ = try await authority.refresh(used) }

            // A server that lost the statement (as behind a pooler in transaction mode): the
            // rotation runs unprepared, once, and nothing is prepared from then on.
            let other = try await authority.signIn(
                appleSubject: "q", appleClientID: "com.example.app", appleRefreshToken: nil, device: "d")
            _ = try await authority.refresh(other.refreshToken)
            #expect(try await prepared().count == 1)
            _ = try await store.database.write("DEALLOCATE ALL", [])
            var next = try await authority.refresh(other.refreshToken).refreshToken  // the grace path's touch
            for _ in 0..<3 { next = try await authority.refresh(next).refreshToken }
            #expect(try await prepared().isEmpty)
            await #expect(throws: SessionError(.reuseDetected, "")) {
                _ = try await authority.refresh(other.refreshToken)
            }
        }
    }

    /// The server goes away between a refresh's admission and its rotation (the prepared
    /// statement's path): the refresh is `unavailable` within the retry budget and rotates
    /// nothing, and once the server is back the same token refreshes, on a new connection.
    @Test func aServerGoneBeforeTheRotationLeavesTheSessionAsItWas() async throws {
        try await onItsOwnServer(connectTimeout: .seconds(1), retryFor: .seconds(2), connections: 2) { cluster, base in
            let stopping = Mutex(false)
            let store = InterposedSessionStore(base, before: ["rotate"]) { _ in
                if stopping.withLock({ $0 }) { try cluster.stopServer() }
            }
            let authority = try await SessionAuthority(store: store, configuration: configuration)
            let issued = try await authority.signIn(
                appleSubject: "g", appleClientID: "com.example.app", appleRefreshToken: nil, device: "d")
            let warm = try await authority.refresh(issued.refreshToken).refreshToken  // prepared now
            stopping.withLock { $0 = true }
            let started = ContinuousClock.now
            await #expect(throws: SessionError(.unavailable, "")) { _ = try await authority.refresh(warm) }
            #expect(ContinuousClock.now - started < .seconds(20))
            stopping.withLock { $0 = false }
            try cluster.startServer()
            #expect(try await base.session(issued.session)?.generation == 2, "not rotated while the server was gone")
            let next = try await authority.refresh(warm)
            #expect(try await base.session(issued.session)?.generation == 3)
            #expect(next.session == issued.session)
        }
    }

    @Test func revocationOnOneInstanceHoldsOnTheOther() async throws {
        try await withInstances { first, second in
            let issued = try await first.signIn(
                appleSubject: "r", appleClientID: "com.example.app", appleRefreshToken: nil, device: "d")
            #expect(try await second.revokeAll(user: issued.userID) == 1)
            await #expect(throws: SessionError(.invalidGrant, "")) { try await first.refresh(issued.refreshToken) }
        }
    }
}
