public import ShadowSessions
public import ShadowVault
import ShadowStorage

extension SQLiteDatabase {
    /// The session tables in this database (Docs/sessions.md, "Tables"), sharing its connections:
    /// migrated, their secret opened with `unlock` (made in a new store).
    public func sessionStore(unlock: VaultUnlock) async throws -> DatabaseSessionStore {
        try await DatabaseSessionStore.open(self, unlock: unlock)
    }
}

/// Sessions in a SQLite file with a database handle of their own, closed with the store.
public enum SQLiteSessionStore {
    /// Opens (creating the file, mode 0600, and the tables) the session tables at `path`.
    public static func open(
        path: String, unlock: VaultUnlock, lockTimeout: Duration = .seconds(10)
    ) async throws -> DatabaseSessionStore {
        let database: SQLiteDatabase
        do {
            database = try await SQLiteDatabase.open(path: path, create: true, lockTimeout: lockTimeout)
        } catch let error as StorageError {
            throw SessionError(storeFailure: error)
        }
        return try await DatabaseSessionStore.open(database, unlock: unlock, closing: { await database.close() })
    }
}
