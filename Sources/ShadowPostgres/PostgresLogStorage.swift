import Logging
public import ShadowOperationLog
public import ShadowVault

/// An operation log in PostgreSQL, for several writers on several hosts (Docs/operation-log.md,
/// "SQLite and PostgreSQL"): the same tables as in SQLite, and `DatabaseLogStorage`'s rules.
public enum PostgresLogStorage {
    /// Connects a pool of its own (closed with the log) and opens the log, creating its tables and
    /// secret when `create` is set.
    public static func connect(
        _ location: PostgresLocation, unlock: VaultUnlock, create: Bool = false, origin: String? = nil,
        connectTimeout: Duration = .seconds(10), retryFor: Duration = .seconds(30), maximumConnections: Int = 8
    ) async throws -> DatabaseLogStorage {
        let database = try PostgresStateDatabase(
            location: location, connectTimeout: connectTimeout, retryFor: retryFor,
            maximumConnections: maximumConnections,
            logger: Logger(label: "shadow-keys.postgres", factory: { _ in SwiftLogNoOpLogHandler() }))
        return try await DatabaseLogStorage.open(
            database, unlock: unlock, create: create, origin: origin, closing: { await database.close() })
    }
}
