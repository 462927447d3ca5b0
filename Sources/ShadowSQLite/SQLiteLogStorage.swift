#if canImport(Darwin)
import Darwin
#else
import Glibc
#endif
import ShadowCore
public import ShadowOperationLog
import ShadowStorage
public import ShadowVault

/// An operation log in a SQLite database (Docs/operation-log.md, "SQLite and PostgreSQL"): its own
/// tables, so it may share the state store's file; the rules are `DatabaseLogStorage`'s.
public enum SQLiteLogStorage {
    /// Opens the log in the database at `path` (which may be the state store's) with a handle of
    /// its own, closed with the log; creates the file (mode 0600) and the log when `create` is set.
    /// - Throws: ``LogErrorCode/notFound`` (no file, or no log in it and `create` off),
    ///   ``LogErrorCode/notALog`` (a file that is no database), ``LogErrorCode/wrongKey``,
    ///   ``LogErrorCode/tampered``, ``LogErrorCode/lockTimeout``, ``LogErrorCode/unavailable``.
    public static func open(
        path: String, unlock: VaultUnlock, create: Bool = false, origin: String? = nil,
        lockTimeout: Duration = .seconds(10)
    ) async throws -> DatabaseLogStorage {
        guard lockTimeout >= .zero, lockTimeout <= .seconds(3600) else {
            throw LogError(.invalidParameter, "the lock timeout is 0 to 3600 seconds")
        }
        var status = stat()
        if !create, lstat(path, &status) != 0 { throw LogError(.notFound, "no operation log at \(path)") }
        let database: SQLiteDatabase
        do {
            database = try await SQLiteDatabase.open(path: path, create: create, lockTimeout: lockTimeout)
        } catch let error as StorageError {
            throw LogError(storeFailure: error, opening: true)
        }
        return try await DatabaseLogStorage.open(
            database, unlock: unlock, create: create, origin: origin, closing: { await database.close() })
    }

    /// Opens the log in a database this process already has open (shared with credential state
    /// and sessions; it stays open when the log closes).
    public static func open(
        database: SQLiteDatabase, unlock: VaultUnlock, create: Bool = false, origin: String? = nil
    ) async throws -> DatabaseLogStorage {
        try await DatabaseLogStorage.open(database, unlock: unlock, create: create, origin: origin)
    }
}
