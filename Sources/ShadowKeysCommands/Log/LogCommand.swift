import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowCredentials
import ShadowOperationLog
import ShadowSQLite

struct LogCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log",
        abstract: "Keep a tamper-evident log of cloud operations (upload, download, delete).",
        discussion: """
            The log lives in a file (--log PATH, the default, under $XDG_DATA_HOME/shadow-keys/), in a SQLite \
            database (--log sqlite:PATH, which may be the state store's), or, with shadow-keys-server, in \
            PostgreSQL (--log postgres://…); $SHADOW_KEYS_OPERATION_LOG sets the default. The key options (as \
            for `vault`) open it. Entity IDs and error messages are sealed; every batch gets a checkpoint \
            (C2SP tlog-checkpoint, signed with the log's Ed25519 key) over an RFC 9162 Merkle tree of the \
            entries. Exit codes: 0; 30 wrong key; 31 log tampered with; 35 not an operation log; 36 rolled \
            back (the witness saw a later log, vault or state store); 64 usage; 65 bad entry; \
            66 no log. See Docs/operation-log.md.
            """,
        subcommands: [
            Append.self, Show.self, Checkpoint.self, Prove.self, Verify.self, Prune.self,
        ]
    )
}

/// Where the log is (`--log`), how to open it (the vault key options), and `--json`.
struct LogOptions: ParsableArguments {
    @Option(
        name: .customLong("log"),
        help: ArgumentHelp(
            "The log: a file PATH or sqlite:PATH.",
            discussion:
                "Default: $SHADOW_KEYS_OPERATION_LOG, else $XDG_DATA_HOME/shadow-keys/operations.log."))
    var location: String?

    @OptionGroup var key: VaultOptions

    @Flag(help: "Print JSON on stdout, errors included.") var json = false

    @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

    enum Location {
        case file(String)
        case sqlite(String)
        case postgres(String)
    }

    func resolved() throws -> Location {
        let text: String
        if let location {
            text = location
        } else if let configured = ProcessInfo.processInfo.environment["SHADOW_KEYS_OPERATION_LOG"],
            !configured.isEmpty
        {
            text = configured
        } else {
            let environment = ProcessInfo.processInfo.environment
            if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
                text = xdg + "/shadow-keys/operations.log"
            } else if let home = environment["HOME"], home.hasPrefix("/") {
                text = home + "/.local/share/shadow-keys/operations.log"
            } else {
                throw ValidationError("no log path: give --log, or set XDG_DATA_HOME or HOME to an absolute path")
            }
        }
        if text.hasPrefix("sqlite:") {
            guard text.count > "sqlite:".count else { throw ValidationError("--log: sqlite: needs a path") }
            return .sqlite(String(text.dropFirst("sqlite:".count)))
        }
        if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
            let postgres = try StoreBackends.requirePostgres(option: "--log")
            do { _ = try postgres.describe(text) } catch let error as CredentialError {
                throw ValidationError("--log: \(error.reason)")
            }
            return .postgres(text)
        }
        guard !text.isEmpty else { throw ValidationError("--log: the path is empty") }
        return .file(text)
    }

    func validate() throws { _ = try resolved() }

    /// Opens the log, runs `body`, closes it.
    func withLog<R>(
        create: Bool = false, origin: String? = nil, _ body: (OperationLog) async throws -> R
    ) async throws -> R {
        let timeout = Duration.seconds(key.lockTimeout)
        let storage: any LogStorage
        switch try resolved() {
        case .file(let path):
            if create, !FileManager.default.fileExists(atPath: path) {
                let folder = Files.parentDirectory(path)
                if !Files.isDirectory(folder) { try Files.makeDirectory(folder) }
            }
            storage = try await FileLogStorage.open(
                path: path, unlock: try key.unlock(confirm: create), create: create, origin: origin,
                lockTimeout: timeout)
        case .sqlite(let path):
            storage = try await SQLiteLogStorage.open(
                path: path, unlock: try key.unlock(confirm: create), create: create, origin: origin,
                lockTimeout: timeout)
        case .postgres(let url):
            storage = try await StoreBackends.requirePostgres(option: "--log").openLog(
                url, unlock: try key.unlock(), create: create, origin: origin, retryFor: timeout)
        }
        do {
            let result = try await body(try OperationLog(storage: storage))
            await storage.close()
            return result
        } catch {
            await storage.close()
            throw error
        }
    }
}

/// Every `log` subcommand honours `-q` through its ``LogOptions``.
protocol LogSubcommand: QuietCommand {
    var log: LogOptions { get }
}

extension LogSubcommand {
    var quiet: Bool { log.quiet }
}

extension JSONValue {
    static func checkpoint(_ checkpoint: ShadowOperationLog.Checkpoint) -> JSONValue {
        ["origin": .string(checkpoint.origin), "size": .int(checkpoint.size), "root": .string(checkpoint.root.base64)]
    }

    static func hashes(_ hashes: [TreeHash]) -> JSONValue { .array(hashes.map { .string($0.base64) }) }
}
