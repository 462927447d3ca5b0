import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowCredentials
import ShadowSQLite
import ShadowVault

extension StateCommand {
    struct Migrate: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "migrate",
            abstract: "Move a vault's credential state and audit log into a new SQLite or PostgreSQL store.",
            discussion: """
                The key options open the vault, and seal the new store under the same key. The target must \
                hold no credential state yet. The audit log moves line for line with its chain intact, so \
                `state audit` prints the same entries from both; the vault is left as it was.
                """)
        @Option(help: "The vault: vault:PATH.") var from: String
        @Option(help: "The new store: sqlite:PATH or postgres://…") var to: String
        @OptionGroup var vault: VaultOptions
        @Flag(help: "Print JSON.") var json = false

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func validate() throws {
            guard case .vault = try StoreLocation(parsing: from, option: "--from") else {
                throw ValidationError("--from: a vault (vault:PATH)")
            }
            if case .vault = try StoreLocation(parsing: to, option: "--to") {
                throw ValidationError("--to: a SQLite or PostgreSQL store, not a vault")
            }
            if vault.explicitPath != nil { throw ValidationError("--from names the vault; --vault does not apply") }
            guard try vault.key() != nil || TerminalPrompt.available else {
                throw ValidationError("give the vault's key with --key-file, --key-env or a passphrase option")
            }
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                guard case .vault(let path) = try StoreLocation(parsing: from, option: "--from") else { return }
                var options = vault
                options.explicitPath = path
                let unlock = try options.unlock()
                let source = VaultCredentialStore(
                    vault: TokenVault(path: path, unlock: unlock, lockTimeout: .seconds(vault.lockTimeout)))
                let report: MigrationReport
                switch try StoreLocation(parsing: to, option: "--to") {
                case .sqlite(let target):
                    report = try await SQLiteCredentialStore.migrate(
                        from: source, toPath: target, unlock: unlock, lockTimeout: .seconds(vault.lockTimeout))
                case .postgres(let url, _):
                    report = try await StoreBackends.requirePostgres(option: "--to").migrate(
                        from: source, to: url, unlock: unlock)
                case .vault: return
                }
                if json {
                    Console.json([
                        "users": .int(report.users), "audit_entries": .int(report.auditEntries),
                        "to": .string(
                            to.hasPrefix("postgres") ? "\(try StoreLocation(parsing: to, option: "--to"))" : to),
                    ])
                } else {
                    Console.out("moved \(report.users) users and \(report.auditEntries) audit entries")
                }
            }
        }
    }

    struct MigrateSchema: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "migrate-schema",
            abstract: "Bring a SQLite or PostgreSQL store's schema up to date (stores also do this when they open).",
            discussion: "Needs no key. Safe to run from several hosts at once: migrations run under a lock.")
        @Option(help: "The store: sqlite:PATH or postgres://… (default: $SHADOW_KEYS_STATE_STORE).")
        var store: String?
        @Flag(help: "Print JSON.") var json = false

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func run() async throws {
            try await reportingFailures(json: json) {
                guard let text = store ?? ProcessInfo.processInfo.environment["SHADOW_KEYS_STATE_STORE"] else {
                    throw CLIError(.usage, "give --store")
                }
                let version: Int
                switch try StoreLocation(parsing: text, option: "--store") {
                case .sqlite(let path): version = try await SQLiteCredentialStore.migrateSchema(path: path)
                case .postgres(let url, _):
                    version = try await StoreBackends.requirePostgres(option: "--store").migrateSchema(url)
                case .vault: throw CLIError(.usage, "--store: a vault has no schema to migrate")
                }
                if json {
                    Console.json(["schema_version": .int(version)])
                } else {
                    Console.out("schema version \(version)")
                }
            }
        }
    }
}
