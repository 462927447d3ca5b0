import Foundation
import ShadowCore
import ShadowCredentials
import ShadowPostgres
import ShadowSQLite
import ShadowTestSupport
import ShadowVault
import SQLiteNIO
import Testing

/// What the database stores add: sealed rows, an audit chain in the database, server tokens.
@Suite(.serialized, .ownThreads) struct DatabaseStoreTests {
    typealias Table = StateMachineTests
    static let subject = "001234.8a2b3c4d5e6f70819a2b3c4d5e6f7081.1234"
    static let databases: [StoreKind] = [.sqlite, .postgres].filter(StoreKind.wanted.contains)

    /// Raw SQL against the fixture's database, outside the store (as an attacker with file or
    /// database access would).
    func sql(_ fixture: StoreFixture, _ statement: String) async throws {
        switch fixture.kind {
        case .sqlite:
            let connection = try await SQLiteConnection.open(storage: .file(path: fixture.location))
            defer { Task { try? await connection.close() } }
            _ = try await connection.query(statement, [])
        case .postgres:
            let url = try PostgresLocation(url: fixture.location)
            try PostgresCluster.shared.get().psql(url.database, statement)
        case .vault:
            Issue.record("no SQL for the vault")
        }
    }

    @Test func theSQLiteFileHoldsNoSubjectNoEventIDAndNoToken() async throws {
        let fixture = try StoreFixture(.sqlite)
        let store = try await SQLiteCredentialStore.open(path: fixture.location, unlock: .key(fixture.key))
        let transfer = try CredentialEvent(
            kind: .transferred, clientID: Table.client, subject: Self.subject, timeMilliseconds: Table.t,
            id: "jti-private-0042",
            linkedSubject: "002999.linkedlinkedlinked.9999")
        _ = try await store.apply([
            transfer, Table.event(.signIn, at: Table.t, id: "sign-in:feedfacefeedface", subject: "003777.another.7777"),
        ])
        try await store.put(
            try ServerToken(
                clientID: Table.client, subject: Self.subject, kind: .refresh,
                value: SecretBytes(utf8: "r.refreshtokenrefreshtoken")))
        await store.close()
        var bytes = Data()
        for suffix in ["", "-wal", "-shm"] {
            bytes += (try? Data(contentsOf: URL(fileURLWithPath: fixture.location + suffix))) ?? Data()
        }
        #expect(bytes.count > 4096)
        for secret in [
            Self.subject, "002999.linkedlinked", "jti-private-0042", "003777.another", "feedfacefeedface",
            "refreshtokenrefreshtoken",
        ] {
            #expect(bytes.range(of: Data(secret.utf8)) == nil, "\(secret) is readable in the database file")
        }
        let mode = try FileManager.default.attributesOfItem(atPath: fixture.location)[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    @Test func aDamagedFileIsReportedNotReset() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/state.sqlite"
        try Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }).write(to: URL(fileURLWithPath: path))
        await #expect(throws: CredentialError(.corruptedState, "")) {
            _ = try await SQLiteCredentialStore.open(path: path, unlock: .key(StoreFixture.defaultKey))
        }
        // A real store, cut in half.
        let fixture = try StoreFixture(.sqlite)
        let store = try await SQLiteCredentialStore.open(path: fixture.location, unlock: .key(fixture.key))
        _ = try await store.apply((0..<300).map { Table.event(.signIn, at: Table.t, subject: "user.\($0)") })
        await store.close()
        let whole = try Data(contentsOf: URL(fileURLWithPath: fixture.location))
        try? FileManager.default.removeItem(atPath: fixture.location + "-wal")
        try? FileManager.default.removeItem(atPath: fixture.location + "-shm")
        try whole.prefix(whole.count / 2).write(to: URL(fileURLWithPath: fixture.location))
        await #expect(throws: CredentialError.self) {
            let damaged = try await SQLiteCredentialStore.open(path: fixture.location, unlock: .key(fixture.key))
            defer { Task { await damaged.close() } }
            _ = try await damaged.verifyAudit()
            for index in 0..<300 { _ = try await damaged.status(clientID: Table.client, subject: "user.\(index)") }
        }
    }

    @Test(arguments: databases)
    func editingTheAuditOrMovingRowsIsDetected(kind: StoreKind) async throws {
        let fixture = try StoreFixture(kind)
        let store = try await fixture.open()
        defer { Task { await close(store) } }
        _ = try await store.apply([
            Table.event(.signIn, at: Table.t, subject: "a"), Table.event(.signIn, at: Table.t, subject: "b"),
            Table.event(.consentRevoked, at: Table.t + 1000, subject: "a"),
        ])
        #expect(try await store.verifyAudit().entries == 3)

        // The last line removed (and the head left): the chain no longer ends at the head.
        try await sql(fixture, "DELETE FROM shadow_audit WHERE seq = 3")
        await #expect(throws: CredentialError(.auditTampered, "")) { _ = try await store.verifyAudit() }
        // A line edited.
        try await sql(fixture, "UPDATE shadow_audit SET line = line || ' ' WHERE seq = 1")
        await #expect(throws: CredentialError(.auditTampered, "")) { _ = try await store.verifyAudit() }

        // b's sealed record copied over a's row: it does not open under a's row id.
        let copy =
            kind == .sqlite
            ? """
            UPDATE shadow_credentials SET body = (SELECT body FROM shadow_credentials ORDER BY row_id DESC LIMIT \
            1) WHERE row_id = (SELECT row_id FROM shadow_credentials ORDER BY row_id LIMIT 1)
            """
            : """
            UPDATE shadow_credentials SET body = (SELECT body FROM shadow_credentials ORDER BY row_id DESC LIMIT \
            1) WHERE row_id = (SELECT row_id FROM shadow_credentials ORDER BY row_id LIMIT 1)
            """
        try await sql(fixture, copy)
        await #expect(throws: CredentialError(.corruptedState, "")) {
            _ = try await store.status(clientID: Table.client, subject: "a")
            _ = try await store.status(clientID: Table.client, subject: "b")
        }
    }

    @Test(arguments: databases)
    func serverTokensAreKeptPerUserAndKind(kind: StoreKind) async throws {
        let fixture = try StoreFixture(kind)
        let store = try await fixture.open()
        defer { Task { await close(store) } }
        let tokens = try #require(store as? any ServerTokenStore)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        try await tokens.put(
            try ServerToken(
                clientID: Table.client, subject: "u1", kind: .refresh, value: SecretBytes(utf8: "refresh-1"),
                storedAt: now))
        try await tokens.put(
            try ServerToken(
                clientID: Table.client, subject: "u1", kind: .access, value: SecretBytes(utf8: "access-1"),
                expiresAt: now + 3600, storedAt: now))
        try await tokens.put(
            try ServerToken(
                clientID: Table.client, subject: "u2", kind: .access, value: SecretBytes(utf8: "access-2"),
                expiresAt: now - 10, storedAt: now))
        // Replacing a kind keeps one token of it.
        try await tokens.put(
            try ServerToken(
                clientID: Table.client, subject: "u1", kind: .refresh, value: SecretBytes(utf8: "refresh-1b"),
                storedAt: now))

        #expect(try await tokens.token(clientID: Table.client, subject: "u1", kind: .refresh)?.text == "refresh-1b")
        #expect(try await tokens.tokens(clientID: Table.client, subject: "u1").map(\.kind) == [.access, .refresh])
        #expect(try await tokens.tokens(clientID: "other.client", subject: "u1").isEmpty)
        let expired = try await tokens.expiredTokens(at: now, limit: 10)
        #expect(expired.map(\.subject) == ["u2"] && expired.first?.text == "access-2")
        #expect(try await tokens.expiredTokens(at: now + 7200, limit: 1).map(\.subject) == ["u2"])
        #expect(try await tokens.deleteToken(clientID: Table.client, subject: "u1", kind: .refresh))
        #expect(try await !tokens.deleteToken(clientID: Table.client, subject: "u1", kind: .refresh))
        #expect(try await tokens.tokens(clientID: Table.client, subject: "u1").map(\.kind) == [.access])
        // A sealed token moved to another kind does not open.
        try await sql(
            fixture, "UPDATE shadow_tokens SET kind = 'refresh' WHERE kind = 'access' AND expires_at_ms > 1800000000000"
        )
        await #expect(throws: CredentialError(.corruptedState, "")) {
            _ = try await tokens.tokens(clientID: Table.client, subject: "u1")
        }
        #expect("\(try await tokens.expiredTokens(at: now, limit: 10))".contains("access-2") == false)
    }

    @Test func thePostgresURLIsReadAsLibpqReadsIt() throws {
        let plain = try PostgresLocation(
            url: "postgres://alice:s%40cret@db.example:6543/state?sslmode=verify-full", environment: [:])
        #expect(
            plain.host == "db.example" && plain.port == 6543 && plain.user == "alice" && plain.password == "s@cret"
                && plain.database == "state")
        #expect(plain.sslMode == .verifyFull && plain.socketPath == nil)
        #expect(!plain.description.contains("cret") && plain.description == "postgres://alice@db.example:6543/state")
        let socket = try PostgresLocation(
            url: "postgresql://bob@%2Ftmp%2Fpg/app", environment: ["PGPASSWORD": "from-env"])
        #expect(
            socket.socketPath == "/tmp/pg/.s.PGSQL.5432" && socket.password == "from-env" && socket.sslMode == .prefer)
        let defaults = try PostgresLocation(
            url: "postgres://",
            environment: ["PGUSER": "carol", "PGHOST": "h", "PGPORT": "7000", "PGSSLMODE": "require"])
        #expect(
            defaults.host == "h" && defaults.port == 7000 && defaults.user == "carol" && defaults.database == "carol"
                && defaults.sslMode == .require)
        let query = try PostgresLocation(url: "postgres://u@/d?host=/run/pg&port=5999", environment: [:])
        #expect(query.socketPath == "/run/pg/.s.PGSQL.5999")
        let ipv6 = try PostgresLocation(url: "postgres://u@[::1]:5433/d", environment: [:])
        #expect(ipv6.host == "::1" && ipv6.port == 5433)
        for bad in [
            "mysql://u@h/d", "postgres://u@h:0/d", "postgres://u@h:99999/d", "postgres://u@h/d?sslmode=sometimes",
            "postgres://u@h/d?colour=blue",
            "postgres://u@h/d%zz", "postgres://u@/d?sslmode=verify-full&host=/tmp", "postgres://h/d",
        ] {
            #expect(throws: CredentialError(.invalidParameter, ""), "\(bad)") {
                _ = try PostgresLocation(url: bad, environment: [:])
            }
        }
    }

    @Test(.tags(.postgres), .enabled(if: postgresWanted)) func anUnreachableServerIsStoreUnavailable() async throws {
        let port = try PostgresCluster.shared.get().port
        // A port nobody listens on (the cluster's port plus one is as good as any free one).
        let location = try PostgresLocation(
            url: "postgres://shadow@127.0.0.1:\(port == 65535 ? 1 : port + 1)/x?sslmode=disable", environment: [:])
        let started = ContinuousClock.now
        await #expect(throws: CredentialError(.storeUnavailable, "")) {
            _ = try await PostgresCredentialStore.connect(
                location, unlock: .key(StoreFixture.defaultKey), connectTimeout: .seconds(2), retryFor: .seconds(1))
        }
        #expect(ContinuousClock.now - started < .seconds(30))
    }
}
