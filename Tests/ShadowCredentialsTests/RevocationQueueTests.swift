import Crypto
import Foundation
import Logging
import ShadowApple
import ShadowCore
import ShadowCredentials
import ShadowServer
import ShadowHTTP
import ShadowJOSE
import ShadowJWKS
import ShadowPostgres
import ShadowSQLite
import ShadowTestSupport
import ShadowVault
import SQLiteNIO
import Testing

/// The revocation queue of the database stores, and the worker that empties it.
@Suite(.serialized, .ownThreads) struct RevocationQueueTests {
    static let client = "com.example.app"
    static let databases: [StoreKind] = [.sqlite, .postgres].filter(StoreKind.wanted.contains)

    struct Setup {
        let fixture: StoreFixture
        let clock: ManualClock
        let store: any DatabaseCredentialStore

        init(_ kind: StoreKind) async throws {
            fixture = try StoreFixture(kind)
            clock = ManualClock()
            store = try #require(try await fixture.open(clock: clock.clock) as? any DatabaseCredentialStore)
        }

        func event(
            _ kind: CredentialEvent.Kind, _ subject: String, at offset: Double, id: String
        ) throws -> CredentialEvent {
            try CredentialEvent(
                kind: kind, clientID: RevocationQueueTests.client, subject: subject,
                time: clock.now.addingTimeInterval(offset), id: id)
        }

        /// A refresh token stored for alice and one for bob, then each signed in (one write each).
        func aliceAndBobSignedIn() async throws {
            try await store.put(token("alice"))
            try await store.put(token("bob"))
            _ = try await store.apply([event(.signIn, "alice", at: -120, id: "s1")])
            _ = try await store.apply([event(.signIn, "bob", at: -120, id: "s2")])
        }

        func token(
            _ subject: String, _ kind: ServerToken.Kind = .refresh, value: String? = nil, storedAt offset: Double = -60
        ) throws -> ServerToken {
            try ServerToken(
                clientID: RevocationQueueTests.client, subject: subject, kind: kind,
                value: SecretBytes(utf8: value ?? "r.\(subject).\(kind)"),
                storedAt: clock.now.addingTimeInterval(offset))
        }
    }

    /// Runs `body` with a fresh store of `kind`, closed afterwards however `body` ends.
    static func with(_ kind: StoreKind, _ body: (Setup) async throws -> Void) async throws {
        let setup = try await Setup(kind)
        do { try await body(setup) } catch {
            await setup.store.close()
            throw error
        }
        await setup.store.close()
    }

    @Test(arguments: databases)
    func aDeletionQueuesTheTokensStoredBeforeIt(kind: StoreKind) async throws {
        try await Self.with(kind) { setup in
            let store = setup.store
            try await store.put(setup.token("alice", .refresh))
            try await store.put(setup.token("alice", .access))
            try await store.put(setup.token("bob"))
            _ = try await store.apply([
                setup.event(.signIn, "alice", at: -120, id: "s1"), setup.event(.signIn, "bob", at: -120, id: "s2"),
            ])
            #expect(
                try await store.revocationCounts() == RevocationCounts(pending: 0, done: 0, failed: 0),
                "a sign-in queues nothing")

            let deletion = try setup.event(.accountDeleted, "alice", at: 0, id: "n1")
            _ = try await store.apply([deletion])
            #expect(try await store.revocationCounts() == RevocationCounts(pending: 2, done: 0, failed: 0))
            _ = try await store.apply([deletion])
            #expect(try await store.revocationCounts().pending == 2, "a duplicate queues nothing more")

            let due = try await store.dueRevocations(limit: 10, lease: .seconds(60))
            #expect(Set(due.map { "\($0.token.subject)/\($0.token.kind)" }) == ["alice/refresh", "alice/access"])
            #expect(due.allSatisfy { $0.attempts == 1 && $0.eventTime == deletion.time })
            #expect(
                try await store.dueRevocations(limit: 10, lease: .seconds(60)).isEmpty, "claimed revocations are leased"
            )

            for revocation in due { try await store.completeRevocation(revocation, .revoked) }
            #expect(
                try await store.tokens(clientID: Self.client, subject: "alice").isEmpty, "revoked tokens are deleted")
            #expect(try await store.tokens(clientID: Self.client, subject: "bob").count == 1)
            #expect(try await store.revocationCounts() == RevocationCounts(pending: 0, done: 2, failed: 0))
        }
    }

    /// The worker's count of unfinished entries, read after every pass (once a second when idle),
    /// is the counts' `pending`, read from the due index: it counted every entry the queue ever
    /// held (about 100 ms for a million on SQLite, holding the reader every other read waits for).
    @Test(arguments: databases)
    func thePendingCountIsReadFromTheDueIndex(kind: StoreKind) async throws {
        try await Self.with(kind) { setup in
            let store = setup.store
            try await setup.aliceAndBobSignedIn()
            #expect(try await store.pendingRevocations() == 0)
            _ = try await store.apply([
                setup.event(.accountDeleted, "alice", at: 0, id: "n1"),
                setup.event(.consentRevoked, "bob", at: 0, id: "n2"),
            ])
            #expect(try await store.pendingRevocations() == 2)
            let due = try await store.dueRevocations(limit: 1, lease: .seconds(60))
            for revocation in due { try await store.completeRevocation(revocation, .revoked) }
            #expect(try await store.pendingRevocations() == 1)
            #expect(try await store.revocationCounts() == RevocationCounts(pending: 1, done: 1, failed: 0))

            let plan: String
            switch kind {
            case .sqlite:
                let connection = try await SQLiteConnection.open(storage: .file(path: setup.fixture.location))
                plan = try await connection.query("EXPLAIN QUERY PLAN " + StateEngine.pendingRevocationsSQL, [])
                    .compactMap { $0.column("detail")?.string }.joined(separator: "\n")
                try await connection.close()
            default:
                plan = try PostgresCluster.shared.get().psql(
                    try PostgresLocation(url: setup.fixture.location).database,
                    "SET enable_seqscan = off; EXPLAIN " + StateEngine.pendingRevocationsSQL)
            }
            #expect(plan.contains("shadow_revocations_due"), "\(plan)")
            #expect(
                !plan.contains("Seq Scan") && !plan.split(separator: "\n").contains("SCAN shadow_revocations"),
                "\(plan)")
        }
    }

    /// Alice's stored token edited without the key (its body moved from bob's row): her
    /// revocation is still recorded and queued, and the queue gives her entry up as `failed`
    /// instead of stopping at it, so bob's revocation still goes out.
    @Test(arguments: databases)
    func anEditedTokenNeitherBlocksARevocationNorStopsTheQueue(kind: StoreKind) async throws {
        try await Self.with(kind) { setup in
            let store = setup.store
            try await setup.aliceAndBobSignedIn()
            let alice = "(SELECT subject FROM shadow_audit WHERE seq = 1)"
            try await DatabaseStoreTests().sql(
                setup.fixture,
                "UPDATE shadow_tokens SET body = (SELECT body FROM shadow_tokens WHERE row_id <> \(alice)) "
                    + "WHERE row_id = \(alice)")
            _ = try await store.apply([setup.event(.consentRevoked, "alice", at: 0, id: "n1")])
            #expect(try await store.status(clientID: Self.client, subject: "alice").state == .revoked)
            _ = try await store.apply([setup.event(.consentRevoked, "bob", at: 0, id: "n2")])
            #expect(try await store.revocationCounts() == RevocationCounts(pending: 2, done: 0, failed: 0))
            let (due, unreadable) = try await store.claimRevocations(limit: 10, lease: .seconds(60))
            #expect(due.map(\.token.subject) == ["bob"])
            #expect(unreadable == 1, "alice's entry, given up and counted")
            #expect(try await store.revocationCounts() == RevocationCounts(pending: 1, done: 0, failed: 1))
            for revocation in due { try await store.completeRevocation(revocation, .revoked) }
            #expect(try await store.revocationCounts() == RevocationCounts(pending: 0, done: 1, failed: 1))
        }
    }

    /// One write that deletes or revokes several users reads their tokens together: each user's
    /// tokens stored before their own event are queued, once however many events name them, and
    /// no one else's.
    @Test(arguments: databases)
    func oneWriteQueuesEachRevokedUsersOwnTokens(kind: StoreKind) async throws {
        try await Self.with(kind) { setup in
            let store = setup.store
            try await store.put(setup.token("alice", .refresh))
            try await store.put(setup.token("alice", .access))
            try await store.put(setup.token("bob", storedAt: -30))
            try await store.put(setup.token("carol"))
            try await store.put(setup.token("dave"))
            _ = try await store.apply(
                try ["alice", "bob", "carol", "dave"].map { try setup.event(.signIn, $0, at: -120, id: "s.\($0)") })
            _ = try await store.apply([
                try setup.event(.accountDeleted, "alice", at: 0, id: "n1"),
                try setup.event(.consentRevoked, "alice", at: 1, id: "n2"),
                try setup.event(.consentRevoked, "bob", at: -45, id: "n3"),
                try setup.event(.consentRevoked, "carol", at: 0, id: "n4"),
                try setup.event(.consentRevoked, "erin", at: 0, id: "n5"),
            ])
            let due = try await store.dueRevocations(limit: 10, lease: .seconds(60))
            #expect(
                due.map { "\($0.token.subject)/\($0.token.kind)" }.sorted()
                    == ["alice/access", "alice/refresh", "carol/refresh"],
                "bob's token is newer than his event; dave and erin were not revoked")
            #expect(try await store.revocationCounts() == RevocationCounts(pending: 3, done: 0, failed: 0))
        }
    }

    @Test(arguments: databases)
    func leasesRetriesAndGivingUp(kind: StoreKind) async throws {
        try await Self.with(kind) { setup in
            let store = setup.store
            try await store.put(setup.token("carol"))
            _ = try await store.apply([setup.event(.consentRevoked, "carol", at: 0, id: "n1")])

            let first = try #require(try await store.dueRevocations(limit: 5, lease: .seconds(60)).first)
            setup.clock.advance(by: 61)
            let again = try #require(
                try await store.dueRevocations(limit: 5, lease: .seconds(60)).first, "an expired lease is claimed again"
            )
            #expect(again.attempts == 2 && first.attempts == 1)

            try await store.completeRevocation(
                again, .retry(after: setup.clock.now.addingTimeInterval(30), reason: "Apple answered 503"))
            setup.clock.advance(by: 29)
            #expect(
                try await store.dueRevocations(limit: 5, lease: .seconds(60)).isEmpty, "not due before the retry time")
            setup.clock.advance(by: 2)
            let third = try #require(try await store.dueRevocations(limit: 5, lease: .seconds(60)).first)
            #expect(third.attempts == 3)

            try await store.completeRevocation(third, .failed(reason: "too many attempts"))
            #expect(try await store.revocationCounts() == RevocationCounts(pending: 0, done: 0, failed: 1))
            #expect(
                try await store.tokens(clientID: Self.client, subject: "carol").count == 1,
                "a token given up on is kept")
        }
    }

    @Test(arguments: databases)
    func aNewerTokenIsNeverRevoked(kind: StoreKind) async throws {
        try await Self.with(kind) { setup in
            let store = setup.store
            try await store.put(setup.token("dave", value: "old"))
            _ = try await store.apply([setup.event(.accountDeleted, "dave", at: 0, id: "n1")])

            // Replaced after the deletion (the user came back): finished as superseded, kept.
            try await store.put(setup.token("dave", value: "new", storedAt: 10))
            #expect(try await store.dueRevocations(limit: 5, lease: .seconds(60)).isEmpty)
            #expect(try await store.revocationCounts() == RevocationCounts(pending: 0, done: 1, failed: 0))
            #expect(try await store.token(clientID: Self.client, subject: "dave", kind: .refresh)?.text == "new")

            // Replaced between the claim and the result: the new token stays.
            try await store.put(setup.token("erin", value: "old"))
            _ = try await store.apply([setup.event(.accountDeleted, "erin", at: 0, id: "n2")])
            let claimed = try #require(try await store.dueRevocations(limit: 5, lease: .seconds(60)).first)
            try await store.put(setup.token("erin", value: "newer", storedAt: 10))
            try await store.completeRevocation(claimed, .revoked)
            #expect(try await store.token(clientID: Self.client, subject: "erin", kind: .refresh)?.text == "newer")

            // A later deletion queues the token again.
            setup.clock.advance(by: 60)
            _ = try await store.apply([setup.event(.accountDeleted, "erin", at: 0, id: "n3")])
            #expect(try await store.revocationCounts().pending == 1)
        }
    }

    @Test(arguments: databases)
    func claimsAreBounded(kind: StoreKind) async throws {
        try await Self.with(kind) { setup in
            await #expect(throws: CredentialError(.invalidParameter, "")) {
                try await setup.store.dueRevocations(limit: 0, lease: .seconds(60))
            }
            await #expect(throws: CredentialError(.invalidParameter, "")) {
                try await setup.store.dueRevocations(limit: 10, lease: .zero)
            }
        }
    }

    /// A schema-1 SQLite file (before the queue) is brought to schema 2 when opened.
    @Test func aVersionOneDatabaseGainsTheQueue() async throws {
        let setup = try await Setup(.sqlite)
        try await setup.store.put(setup.token("frank"))
        await setup.store.close()
        let connection = try await SQLiteConnection.open(storage: .file(path: setup.fixture.location))
        _ = try await connection.query("DROP TABLE shadow_revocations", [])
        _ = try await connection.query(
            "UPDATE shadow_meta SET value = CAST('1' AS BLOB) WHERE name = 'schema_version'", [])
        try await connection.close()

        let reopened = try await SQLiteCredentialStore.open(
            path: setup.fixture.location, unlock: .key(setup.fixture.key), clock: setup.clock.clock)
        _ = try await reopened.apply([setup.event(.accountDeleted, "frank", at: 0, id: "n1")])
        let pending = try await reopened.revocationCounts().pending
        await reopened.close()
        #expect(pending == 1)
    }

    /// The worker against a loopback fake of Apple: revoked once, retried after a 503, an
    /// `invalid_grant` counts as done.
    @Test(arguments: databases)
    func theWorkerRevokesWithApple(kind: StoreKind) async throws {
        try await Self.with(kind) { setup in
            let store = setup.store
            let p8 = P256.Signing.PrivateKey()
            let apple = try FakeAppleServer(clientKey: p8.publicKey, clientIDs: [Self.client])
            var configuration = AppleAuthClient.Configuration()
            configuration.baseURL = apple.baseURL
            configuration.allowLoopbackHTTP = true
            configuration.retries = 0
            let builder = try ClientSecretBuilder(
                key: AppleSigningKey(p8), teamID: apple.teamID, keyID: apple.keyID, clientID: Self.client)
            let client = try AppleAuthClient(
                configuration: configuration, secrets: ClientSecretProvider(builder: builder),
                transport: try AsyncHTTPClientTransport(options: .init(allowLoopbackHTTP: true)),
                identityTokenKeys: JWKSProvider.serving(JWKSet(keys: [apple.identitySigner.publicJWK()])))
            var settings = RevocationWorker.Configuration()
            settings.firstRetryDelay = .seconds(30)
            let worker = RevocationWorker(
                queue: store, configuration: settings, clock: setup.clock.clock,
                revoke: RevocationWorker.apple([Self.client: client]))

            for user in ["u1", "u2", "u3"] { try await store.put(setup.token(user)) }
            _ = try await store.apply(
                ["u1", "u2", "u3"].enumerated().map { try setup.event(.accountDeleted, $1, at: 0, id: "n\($0)") })
            apple.inject(
                "/auth/revoke",
                [FakeAppleServer.error("server_error", status: 503), FakeAppleServer.error("invalid_grant")])

            #expect(try await worker.runOnce() == 3)
            var counts = try await store.revocationCounts()
            #expect(
                counts == RevocationCounts(pending: 1, done: 2, failed: 0),
                "one 503 is retried later; invalid_grant is done")
            #expect(try await worker.runOnce() == 0, "the failed one waits for its retry time")
            setup.clock.advance(by: 31)
            #expect(try await worker.runOnce() == 1)
            counts = try await store.revocationCounts()
            #expect(counts == RevocationCounts(pending: 0, done: 3, failed: 0))
            #expect(
                apple.revokeCalls.values.allSatisfy { $0 == 1 } && apple.revokeCalls.count == 2, "\(apple.revokeCalls)")
            for user in ["u1", "u2", "u3"] {
                #expect(try await store.tokens(clientID: Self.client, subject: user).isEmpty)
            }
        }
    }
}
