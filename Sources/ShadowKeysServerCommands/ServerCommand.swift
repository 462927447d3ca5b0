public import ArgumentParser
import ShadowCredentials
import ShadowKeysCommands
import ShadowOperationLog
import ShadowPostgres
import ShadowVault

/// `shadow-keys-server`: every command of `shadow-keys`, `serve`, and stores on PostgreSQL.
public struct ShadowKeysServerCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "shadow-keys-server",
        abstract: "Serve Sign in with Apple notifications, and every shadow-keys command with PostgreSQL stores too.",
        discussion: ShadowKeysTool.exitCodes,
        version: ShadowKeysTool.version,
        subcommands: ShadowKeysTool.commands + [Serve.self, SessionsCommand.self]
    )

    public init() {}

    /// Parses and runs with `postgres://` stores available.
    public static func main() async {
        await ShadowKeysTool.main(Self.self, postgres: PostgresBackend())
    }
}

/// `postgres://` stores, through ShadowPostgres.
struct PostgresBackend: PostgresStores {
    func describe(_ url: String) throws -> String { try PostgresLocation(url: url).description }

    func open(
        _ url: String, unlock: VaultUnlock, retryFor: Duration, create: Bool
    ) async throws
        -> any AuditedCredentialStore
    {
        let location = try PostgresLocation(url: url)
        guard create else {
            return try await PostgresCredentialStore.connectForReading(location, unlock: unlock, retryFor: retryFor)
        }
        return try await PostgresCredentialStore.connect(
            location, unlock: unlock, connectTimeout: .seconds(10), retryFor: retryFor)
    }

    func migrate(from vault: VaultCredentialStore, to url: String, unlock: VaultUnlock) async throws -> MigrationReport
    {
        try await PostgresCredentialStore.migrate(from: vault, to: try PostgresLocation(url: url), unlock: unlock)
    }

    func migrateSchema(_ url: String) async throws -> Int {
        try await PostgresCredentialStore.migrateSchema(try PostgresLocation(url: url))
    }

    func openLog(
        _ url: String, unlock: VaultUnlock, create: Bool, origin: String?, retryFor: Duration
    ) async throws
        -> any LogStorage
    {
        try await PostgresLogStorage.connect(
            try PostgresLocation(url: url), unlock: unlock, create: create, origin: origin, retryFor: retryFor)
    }
}
