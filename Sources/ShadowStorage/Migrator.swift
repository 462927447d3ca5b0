#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore

/// One step of a table set's schema: the n-th migration of a set brings it to version n.
package struct Migration: Sendable {
    package let version: Int
    package let name: String
    package let sqlite: [String]
    package let postgres: [String]

    package init(_ version: Int, _ name: String, sqlite: [String], postgres: [String]) {
        self.version = version
        self.name = name
        self.sqlite = sqlite
        self.postgres = postgres
    }
}

/// The schema's history of every table set (sessions, the operation log), in the manner of
/// GRDB's `DatabaseMigrator`: named, versioned migrations, each applied once, recorded in
/// `shadow_migrations` (Docs/architecture.md, "Storage"). A writer migrates when it opens; a
/// reader never does: it only reads the version.
package enum Migrator {
    static let table = """
        CREATE TABLE IF NOT EXISTS shadow_migrations (table_set TEXT NOT NULL, version BIGINT NOT NULL, name TEXT \
        NOT NULL, applied_ms BIGINT NOT NULL, PRIMARY KEY (table_set, version))
        """

    /// Applies the migrations of `tableSet` that `database` has not had, in order, in one
    /// transaction (so instances starting together apply each once); returns the version now.
    /// - Throws: ``StorageErrorCode/corrupted`` for a version newer than `migrations` know, or
    ///   one recorded out of order.
    @discardableResult
    package static func migrate(
        _ database: any SQLDatabase, tableSet: String, _ migrations: [Migration]
    ) async throws -> Int {
        let dialect = database.dialect
        // Fast path: already current (one read, no write lock).
        if let current = try? await version(database, tableSet: tableSet), current == migrations.count {
            return current
        }
        return try await database.transaction { transaction in
            if dialect == .postgres {
                // Every instance's migrations one at a time ("shadowky" in ASCII, and the set).
                _ = try await transaction.run(
                    "SELECT pg_advisory_xact_lock(\(0x7368_6164), hashtext(?))", .text(tableSet))
            }
            _ = try await transaction.run(table)
            let applied = try await transaction.run(
                "SELECT version FROM shadow_migrations WHERE table_set = ? ORDER BY version", .text(tableSet)
            ).compactMap { $0.integer("version") }
            guard applied == (0..<applied.count).map({ Int64($0 + 1) }) else {
                throw StorageError(.corrupted, "the \(tableSet) tables' migrations are recorded out of order")
            }
            guard applied.count <= migrations.count else {
                throw StorageError(
                    .corrupted,
                    """
                    the \(tableSet) tables are at version \(applied.count); this ShadowKeys knows up to \
                    \(migrations.count)
                    """
                )
            }
            let now = Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
            for migration in migrations.dropFirst(applied.count) {
                for statement in dialect == .sqlite ? migration.sqlite : migration.postgres {
                    _ = try await transaction.run(statement)
                }
                _ = try await transaction.run(
                    "INSERT INTO shadow_migrations (table_set, version, name, applied_ms) VALUES (?, ?, ?, ?)",
                    .text(tableSet), .integer(migration.version), .text(migration.name), .integer(now))
            }
            return migrations.count
        }
    }

    /// The version of `tableSet`, read only: nil when no migration of it was ever applied.
    package static func version(_ database: any SQLDatabase, tableSet: String) async throws -> Int? {
        let exists = try await database.read(
            database.dialect == .sqlite
                ? "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'shadow_migrations'"
                : "SELECT 1 WHERE to_regclass('shadow_migrations') IS NOT NULL")
        guard !exists.isEmpty else { return nil }
        let rows = try await database.read(
            "SELECT max(version) AS version FROM shadow_migrations WHERE table_set = ?", .text(tableSet))
        return rows.first?.integer("version").map(Int.init)
    }
}
