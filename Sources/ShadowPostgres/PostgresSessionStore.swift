import Logging
public import ShadowSessions
public import ShadowVault

/// Sessions in PostgreSQL, shared by several instances (Docs/sessions.md, "Tables"): the
/// session rules of `DatabaseSessionStore` over a pooled connection of their own, closed with the store.
public enum PostgresSessionStore {
    /// Connects and migrates the tables (under an advisory lock) when needed.
    public static func connect(
        _ location: PostgresLocation, unlock: VaultUnlock, connectTimeout: Duration = .seconds(10),
        retryFor: Duration = .seconds(30), maximumConnections: Int = 16
    ) async throws -> DatabaseSessionStore {
        let database = try PostgresStateDatabase(
            location: location, connectTimeout: connectTimeout, retryFor: retryFor,
            maximumConnections: maximumConnections,
            logger: Logger(label: "shadow-keys.postgres", factory: { _ in SwiftLogNoOpLogHandler() }))
        return try await DatabaseSessionStore.open(database, unlock: unlock, closing: { await database.close() })
    }
}
