#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ArgumentParser
import ServiceLifecycle
import ShadowCredentials
import ShadowKeysCommands
import ShadowOperationLog
import ShadowPostgres
import ShadowSessions
import ShadowSQLite

/// The one database handle a server command opens for its store location (Docs/architecture.md,
/// "Storage"): credential state, the session tables and the authentication log share it. A
/// SQLite file is one writer with group commit and two readers; a PostgreSQL database one pool.
enum ServerDatabase: Sendable {
    case sqlite(SQLiteDatabase)
    case postgres(PostgresDatabase)
    /// A vault: credential state only.
    case vault

    /// Opens the store's database (a SQLite file is made, mode 0600, when missing).
    static func open(_ store: StoreOptions) async throws -> ServerDatabase {
        if let path = try store.sqlitePath() {
            return .sqlite(try await SQLiteDatabase.open(path: path, create: true, lockTimeout: store.lockTimeout))
        }
        if let url = try store.postgresURL() {
            return .postgres(
                try PostgresDatabase(
                    try PostgresLocation(url: url), connectTimeout: min(.seconds(10), store.lockTimeout),
                    retryFor: store.lockTimeout))
        }
        return .vault
    }

    /// Credential state, created when missing.
    func credentialStore(_ store: StoreOptions) async throws -> any AuditedCredentialStore {
        switch self {
        case .sqlite(let database):
            let fresh = (try? FileManager.default.attributesOfItem(atPath: database.path)[.size] as? Int) == 0
            return try await SQLiteCredentialStore.open(
                database: database, unlock: try store.unlock(confirm: fresh), create: true)
        case .postgres(let database):
            return try await database.credentialStore(unlock: try store.unlock(), create: true)
        case .vault:
            return try await store.open(create: true)
        }
    }

    /// The session tables.
    func sessionStore(_ store: StoreOptions) async throws -> DatabaseSessionStore {
        switch self {
        case .sqlite(let database): return try await database.sessionStore(unlock: try store.unlock())
        case .postgres(let database): return try await database.sessionStore(unlock: try store.unlock())
        case .vault: throw ValidationError("sessions live in a sqlite: or postgres:// store, not a vault")
        }
    }

    /// The operation log in the store's database.
    func logStorage(_ store: StoreOptions, create: Bool, origin: String?) async throws -> any LogStorage {
        switch self {
        case .sqlite(let database):
            return try await SQLiteLogStorage.open(
                database: database, unlock: try store.unlock(), create: create, origin: origin)
        case .postgres(let database):
            return try await database.logStorage(unlock: try store.unlock(), create: create, origin: origin)
        case .vault: throw ValidationError("the authentication log lives in a sqlite: or postgres:// store")
        }
    }

    func close() async {
        switch self {
        case .sqlite(let database): await database.close()
        case .postgres(let database): await database.close()
        case .vault: break
        }
    }
}

/// The database as a service of serve's group: it closes when the group shuts down, after every
/// other service stopped using it.
struct DatabaseService: Service {
    let database: ServerDatabase

    func run() async throws {
        try? await gracefulShutdown()
        await database.close()
    }
}
