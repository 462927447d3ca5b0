import Foundation
import ShadowCore
import ShadowCredentials
import ShadowPostgres
import ShadowSQLite
import ShadowTestSupport
import ShadowVault
import SQLiteNIO
import Testing

/// Readers never write (Docs/credential-state.md, "Readers and writers"): a SQLite store opened for reading is
/// opened read-only, and nothing it finds is created, migrated or repaired.
@Suite(.ownThreads) struct ReadOnlyStoreTests {
    typealias Table = StateMachineTests

    /// The result of a query, outside the store.
    static func query(_ path: String, _ statement: String) async throws -> [SQLiteRow] {
        let connection = try await SQLiteConnection.open(storage: .file(path: path))
        do {
            let rows = try await connection.query(statement, [])
            try await connection.close()
            return rows
        } catch {
            try? await connection.close()
            throw error
        }
    }

    static func tables(_ path: String) async throws -> [String] {
        try await query(path, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").compactMap {
            $0.column("name")?.string
        }
    }

    /// A store with one user, written and closed.
    static func writtenStore() async throws -> StoreFixture {
        let fixture = try StoreFixture(.sqlite)
        let store = try await SQLiteCredentialStore.open(path: fixture.location, unlock: .key(fixture.key))
        _ = try await store.apply([
            Table.event(.signIn, at: Table.t, subject: "u1"),
            Table.event(.consentRevoked, at: Table.t + 1000, subject: "u1"),
        ])
        await store.close()
        return fixture
    }

    @Test func aReaderAnswersWithoutWriting() async throws {
        let fixture = try await Self.writtenStore()
        let before = try Data(contentsOf: URL(fileURLWithPath: fixture.location))
        let reader = try await SQLiteCredentialStore.openForReading(path: fixture.location, unlock: .key(fixture.key))
        #expect(try await reader.status(clientID: Table.client, subject: "u1").state == .revoked)
        #expect(try await reader.verifyAudit().entries == 2)
        await #expect(throws: CredentialError.self) {
            _ = try await reader.apply([Table.event(.signIn, at: Table.t + 2000, subject: "u2")])
        }
        await reader.close()
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: fixture.location)) == before,
            "the reader changed the database file")
        #expect(
            ((try? Data(contentsOf: URL(fileURLWithPath: fixture.location + "-wal"))) ?? Data()).isEmpty,
            "the reader wrote to the WAL")
    }

    @Test func aMissingFileIsNoStoreAndStaysMissing() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/none.sqlite"
        await #expect(throws: CredentialError(.noStore, "")) {
            _ = try await SQLiteCredentialStore.openForReading(path: path, unlock: .key(StoreFixture.defaultKey))
        }
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test func anEmptyFileOrAForeignDatabaseIsNotAStoreAndIsLeftAlone() async throws {
        let directory = try TemporaryDirectory()
        let empty = directory.path + "/empty.sqlite"
        _ = FileManager.default.createFile(atPath: empty, contents: Data())
        await #expect(throws: CredentialError(.notAStore, "")) {
            _ = try await SQLiteCredentialStore.openForReading(path: empty, unlock: .key(StoreFixture.defaultKey))
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: empty)).isEmpty, "the empty file was written")
        let foreign = directory.path + "/app.sqlite"
        _ = try await Self.query(foreign, "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
        await #expect(throws: CredentialError(.notAStore, "")) {
            _ = try await SQLiteCredentialStore.openForReading(path: foreign, unlock: .key(StoreFixture.defaultKey))
        }
        #expect(try await Self.tables(foreign) == ["notes"])
    }

    /// A deleted secret row must not turn every user into an unknown one: readers and writers
    /// both refuse the store, and neither makes a new secret.
    @Test func aDeletedSecretIsCorruptionForReadersAndWriters() async throws {
        let fixture = try await Self.writtenStore()
        _ = try await Self.query(fixture.location, "DELETE FROM shadow_meta WHERE name = 'secret'")
        await #expect(throws: CredentialError(.corruptedState, "")) {
            _ = try await SQLiteCredentialStore.openForReading(path: fixture.location, unlock: .key(fixture.key))
        }
        await #expect(throws: CredentialError(.corruptedState, "")) {
            _ = try await SQLiteCredentialStore.open(path: fixture.location, unlock: .key(fixture.key))
        }
        #expect(
            try await Self.query(fixture.location, "SELECT name FROM shadow_meta WHERE name = 'secret'").isEmpty,
            "a new secret was written")
    }

    /// A schema-1 store (before the revocation queue) is read as it is, not migrated.
    @Test func anOlderSchemaIsReadNotMigrated() async throws {
        let fixture = try await Self.writtenStore()
        _ = try await Self.query(fixture.location, "DROP TABLE shadow_revocations")
        _ = try await Self.query(
            fixture.location, "UPDATE shadow_meta SET value = CAST('1' AS BLOB) WHERE name = 'schema_version'")
        let reader = try await SQLiteCredentialStore.openForReading(path: fixture.location, unlock: .key(fixture.key))
        #expect(try await reader.status(clientID: Table.client, subject: "u1").state == .revoked)
        await reader.close()
        #expect(
            !(try await Self.tables(fixture.location)).contains("shadow_revocations"), "the reader migrated the schema")
        let version = try await Self.query(
            fixture.location, "SELECT value FROM shadow_meta WHERE name = 'schema_version'"
        ).first?.column("value")?.blob
        #expect(version.map { String(buffer: $0) } == "1")
    }

    /// A schema version is ASCII digits as written: `Int` reads `+1` as 1, and such a store
    /// was read as schema 1. It is refused as damaged, by readers and writers, and named quoted.
    @Test func aSchemaVersionWithASignIsDamage() async throws {
        let fixture = try await Self.writtenStore()
        _ = try await Self.query(
            fixture.location, "UPDATE shadow_meta SET value = CAST('+2' AS BLOB) WHERE name = 'schema_version'")
        for open in [
            { try await SQLiteCredentialStore.openForReading(path: fixture.location, unlock: .key(fixture.key)) },
            { try await SQLiteCredentialStore.open(path: fixture.location, unlock: .key(fixture.key)) },
        ] as [@Sendable () async throws -> SQLiteCredentialStore] {
            let error = await #expect(throws: CredentialError.self) { _ = try await open() }
            #expect(error?.code == .corruptedState && error?.reason.contains("schema version \"+2\"") == true)
        }
    }

    /// PostgreSQL readers likewise: a database without the tables is not a store and is left
    /// without them; a deleted secret is corruption; an older schema is read, not migrated.
    @Test(.tags(.postgres), .enabled(if: postgresWanted))
    func postgresReadersNeverWrite() async throws {
        let empty = try StoreFixture(.postgres)
        let location = try PostgresLocation(url: empty.location)
        await #expect(throws: CredentialError(.notAStore, "")) {
            _ = try await PostgresCredentialStore.connectForReading(
                location, unlock: .key(empty.key), retryFor: .seconds(30))
        }
        let tables = try PostgresCluster.shared.get().psql(
            location.database, "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'shadow_%'")
        #expect(tables.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "the reader created tables: \(tables)")

        let fixture = try StoreFixture(.postgres)
        let store = try await fixture.open()
        try await closing({ await close(store) }) {
            _ = try await store.apply([Table.event(.consentRevoked, at: Table.t, subject: "u1")])
        }
        let written = try PostgresLocation(url: fixture.location)
        let cluster = try PostgresCluster.shared.get()
        _ = try cluster.psql(written.database, "DROP TABLE shadow_revocations")
        _ = try cluster.psql(
            written.database, "UPDATE shadow_meta SET value = convert_to('1', 'UTF8') WHERE name = 'schema_version'")
        let reader = try await PostgresCredentialStore.connectForReading(
            written, unlock: .key(fixture.key), retryFor: .seconds(30))
        let status = try await reader.status(clientID: Table.client, subject: "u1")
        await reader.close()
        #expect(status.state == .revoked)
        let version = try cluster.psql(
            written.database, "SELECT convert_from(value, 'UTF8') FROM shadow_meta WHERE name = 'schema_version'")
        #expect(version.trimmingCharacters(in: .whitespacesAndNewlines) == "1", "the reader migrated the schema")
        _ = try cluster.psql(written.database, "DELETE FROM shadow_meta WHERE name = 'secret'")
        await #expect(throws: CredentialError(.corruptedState, "")) {
            _ = try await PostgresCredentialStore.connectForReading(
                written, unlock: .key(fixture.key), retryFor: .seconds(30))
        }
    }
}
