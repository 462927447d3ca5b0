public import Logging
public import ShadowCore
import ShadowCredentials
public import ShadowOperationLog
public import ShadowSessions
package import ShadowStorage
public import ShadowVault

/// One PostgreSQL database, connected once per process: one pool (its retries, its watchdog, its
/// error mapping) that credential state, sessions and the operation log share
/// (Docs/architecture.md, "Storage"). `--lock-timeout` is its `retryFor`.
public final class PostgresDatabase: Sendable {
    let database: PostgresStateDatabase
    /// Where it connects (the password is never printed).
    public var location: PostgresLocation { database.location }

    /// Connects a pool of at most `maximumConnections` (16) to `location`; the pool runs until ``close()``.
    public init(
        _ location: PostgresLocation, connectTimeout: Duration = .seconds(10), retryFor: Duration = .seconds(30),
        maximumConnections: Int = 16,
        logger: Logger = Logger(label: "shadow-keys.postgres", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws {
        database = try PostgresStateDatabase(
            location: location, connectTimeout: connectTimeout, retryFor: retryFor,
            maximumConnections: maximumConnections, logger: logger)
    }

    /// The same, with the watchdog's deadline for a leased connection's work set instead of 15 s:
    /// for tests that tell a lost connection's own error from the watchdog's while other tests
    /// keep the process's threads busy, which delays the one more than the other.
    package init(_ location: PostgresLocation, retryFor: Duration, statementDeadline: Duration) throws {
        database = try PostgresStateDatabase(
            location: location, connectTimeout: .seconds(10), retryFor: retryFor, maximumConnections: 16,
            logger: Logger(label: "shadow-keys.postgres", factory: { _ in SwiftLogNoOpLogHandler() }),
            statementDeadline: statementDeadline)
    }

    /// Credential state in this database (migrated, and created when `create` is set).
    public func credentialStore(
        unlock: VaultUnlock, create: Bool = true, clock: WallClock = .system
    ) async throws -> PostgresCredentialStore {
        try await PostgresCredentialStore.open(database, unlock: unlock, create: create, clock: clock)
    }

    /// The session tables in this database (migrated; the secret made in a new store).
    public func sessionStore(unlock: VaultUnlock) async throws -> DatabaseSessionStore {
        try await DatabaseSessionStore.open(database, unlock: unlock)
    }

    /// The operation log in this database (created, with `origin` or a default, when `create` is set).
    public func logStorage(
        unlock: VaultUnlock, create: Bool = false, origin: String? = nil
    ) async throws -> DatabaseLogStorage {
        try await DatabaseLogStorage.open(database, unlock: unlock, create: create, origin: origin)
    }

    /// Closes the pool; the stores it handed out stop working.
    public func close() async { await database.close() }

    /// The row seam over this pool, for statements of the package's own.
    package var sql: any SQLDatabase { database }
}
