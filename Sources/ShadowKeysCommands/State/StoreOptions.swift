import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
package import ShadowCredentials
package import ShadowOperationLog
import ShadowSQLite
package import ShadowVault

/// PostgreSQL stores, which only `shadow-keys-server` opens: the lean `shadow-keys` links no
/// PostgreSQL client. Each URL is a `postgres://` or `postgresql://` URL as `--store` takes it.
package protocol PostgresStores: Sendable {
    /// Checks `url` and describes it without its password.
    func describe(_ url: String) throws -> String
    /// Connects (waiting up to `retryFor` for the server) and opens the store: a writer migrates the
    /// schema and creates a new store; a reader (`create` off) only reads.
    func open(
        _ url: String, unlock: VaultUnlock, retryFor: Duration, create: Bool
    ) async throws
        -> any AuditedCredentialStore
    /// Moves a vault's state into a new store at `url` (`state migrate`).
    func migrate(from vault: VaultCredentialStore, to url: String, unlock: VaultUnlock) async throws -> MigrationReport
    /// Brings the schema up to date and returns its version (`state migrate-schema`).
    func migrateSchema(_ url: String) async throws -> Int
    /// Opens the operation log in the database at `url` (`log --log postgres://…`).
    func openLog(
        _ url: String, unlock: VaultUnlock, create: Bool, origin: String?, retryFor: Duration
    ) async throws
        -> any LogStorage
}

/// The store kinds this executable opens beyond SQLite and vaults, set by its `main`.
package enum StoreBackends {
    @TaskLocal package static var postgres: (any PostgresStores)?

    /// The PostgreSQL stores, or a usage error naming the executable that has them.
    static func requirePostgres(option: String) throws -> any PostgresStores {
        guard let postgres else {
            throw ValidationError(
                """
                \(option): postgres:// stores are opened by shadow-keys-server; shadow-keys opens sqlite: and vault: \
                stores
                """
            )
        }
        return postgres
    }
}

/// Where credential state lives: a SQLite file, a vault, or a PostgreSQL database.
enum StoreLocation: CustomStringConvertible {
    case sqlite(String)
    case vault(String)
    /// The URL, and its description without the password.
    case postgres(url: String, description: String)

    /// `sqlite:PATH`, `vault:PATH`, or a `postgres://` / `postgresql://` URL.
    init(parsing text: String, option: String) throws {
        if text.hasPrefix("sqlite:") {
            let path = String(text.dropFirst("sqlite:".count))
            guard !path.isEmpty else { throw ValidationError("\(option): sqlite: needs a path (sqlite:PATH)") }
            self = .sqlite(path)
        } else if text.hasPrefix("vault:") {
            let path = String(text.dropFirst("vault:".count))
            guard !path.isEmpty else { throw ValidationError("\(option): vault: needs a path (vault:PATH)") }
            self = .vault(path)
        } else if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
            let postgres = try StoreBackends.requirePostgres(option: option)
            do { self = .postgres(url: text, description: try postgres.describe(text)) } catch let error
                as CredentialError
            { throw ValidationError("\(option): \(error.reason)") }
        } else {
            throw ValidationError(
                """
                \(option): expected sqlite:PATH, vault:PATH or postgres://user@host:port/database, not \
                \(text.quotedForMessage)
                """
            )
        }
    }

    var description: String {
        switch self {
        case .sqlite(let path): return "sqlite:\(path)"
        case .vault(let path): return "vault:\(path)"
        case .postgres(_, let description): return description
        }
    }
}

/// `--store URL` (or `--vault PATH`, the same as `--store vault:PATH`) and the key options that
/// open it, as for `vault`.
package struct StoreOptions: ParsableArguments {
    package init() {}

    @Option(
        name: .customLong("store"),
        help: ArgumentHelp(
            """
            Where state lives: sqlite:PATH, vault:PATH, or \
            postgres://user@host:port/db?sslmode=disable|require|verify-full (password also from PGPASSWORD).
            """,
            discussion: "Default: $SHADOW_KEYS_STATE_STORE, else sqlite:$XDG_DATA_HOME/shadow-keys/state.sqlite."))
    var url: String?

    @OptionGroup var vault: VaultOptions

    /// The location named, or the default one.
    func location() throws -> StoreLocation {
        if let url { return try StoreLocation(parsing: url, option: "--store") }
        if let path = vault.explicitPath { return .vault(path) }
        if let configured = ProcessInfo.processInfo.environment["SHADOW_KEYS_STATE_STORE"], !configured.isEmpty {
            return try StoreLocation(parsing: configured, option: "SHADOW_KEYS_STATE_STORE")
        }
        do { return .sqlite(try SQLiteCredentialStore.defaultPath()) } catch let error as CredentialError {
            throw ValidationError(error.reason)
        }
    }

    var isGiven: Bool { url != nil || vault.isGiven }
    var keyUsesStdin: Bool { vault.keyUsesStdin }

    /// Checks what was named; the default location is worked out when the store is opened.
    package func validate() throws {
        if url != nil, vault.explicitPath != nil {
            throw ValidationError("give --store or --vault, not both (--vault PATH is --store vault:PATH)")
        }
        if let url { _ = try StoreLocation(parsing: url, option: "--store") }
    }

    /// Checks there is a key (or a terminal to ask for a passphrase on).
    package func requireKey() throws {
        if case .vault = try location() { return try vault.requireKey() }
        guard try vault.key() != nil || TerminalPrompt.available else {
            throw ValidationError(
                """
                open the state store with one of --key-file, --key-env, --passphrase-stdin, --passphrase-file or \
                --passphrase-env
                """
            )
        }
    }

    /// Opens the store, runs `body` with it, and closes it. Readers (`create` off) open a SQLite
    /// file read-only, and never create, migrate or write one: a missing one is exit 66.
    func withStore<R>(create: Bool, _ body: (any AuditedCredentialStore) async throws -> R) async throws -> R {
        let store = try await open(create: create)
        do {
            let result = try await body(store)
            await close(store)
            return result
        } catch {
            await close(store)
            throw error
        }
    }

    package func open(create: Bool) async throws -> any AuditedCredentialStore {
        switch try location() {
        case .vault(let path):
            var options = vault
            options.explicitPath = path
            return VaultCredentialStore(vault: try options.open())
        case .sqlite(let path):
            if let (_, mode) = try? Files.ownerAndMode(path), mode & 0o077 != 0 {
                Console.warn(
                    """
                    the state database \(path.quotedForMessage) is open to other users (mode \
                    \(String(mode & 0o777, radix: 8))); chmod 600 it
                    """
                )
            }
            guard create else {
                return try await SQLiteCredentialStore.openForReading(
                    path: path, unlock: try vault.unlock(), lockTimeout: .seconds(vault.lockTimeout))
            }
            return try await SQLiteCredentialStore.open(
                path: path, unlock: try vault.unlock(confirm: !FileManager.default.fileExists(atPath: path)),
                lockTimeout: .seconds(vault.lockTimeout))
        case .postgres(let url, _):
            return try await StoreBackends.requirePostgres(option: "--store").open(
                url, unlock: try vault.unlock(), retryFor: .seconds(vault.lockTimeout), create: create)
        }
    }
}

/// Closes a database store's connections.
package func close(_ store: any AuditedCredentialStore) async {
    if let store = store as? any DatabaseCredentialStore { await store.close() }
}

extension StoreOptions {
    /// `--lock-timeout`: how long a write waits for another writer, and how long a PostgreSQL
    /// store keeps retrying an unreachable server.
    package var lockTimeout: Duration { .seconds(vault.lockTimeout) }

    /// The SQLite file the store is (named or the default), or nil for another kind of store.
    package func sqlitePath() throws -> String? {
        if case .sqlite(let path) = try location() { return path }
        return nil
    }

    /// The key or passphrase that opens the store; with `confirm`, a passphrase typed at a
    /// terminal is asked twice (a store about to be made).
    package func unlock(confirm: Bool = false) throws -> VaultUnlock { try vault.unlock(confirm: confirm) }
}

extension StoreOptions {
    /// The PostgreSQL URL the store is, or nil for another kind of store.
    package func postgresURL() throws -> String? {
        if case .postgres(let url, _) = try location() { return url }
        return nil
    }
}
