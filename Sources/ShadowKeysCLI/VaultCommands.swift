import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowCrypto
import ShadowVault

struct VaultCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vault",
        abstract: "Keep tokens and keys in an encrypted, crash-safe vault file.",
        discussion: """
            The vault is --vault PATH, else $SHADOW_KEYS_VAULT, else $XDG_DATA_HOME/shadow-keys/vault.skv
            (~/.local/share/shadow-keys/vault.skv). It opens with --key-file, --key-env, or a passphrase
            option; secrets never come from argv. Exit codes: 30 wrong passphrase or key, 31 vault
            corrupted or tampered, 32 no such entry, 33 lock timeout, 64 usage, 66 no vault.
            Format: Docs/vault-format.md.
            """,
        subcommands: [Init.self, Put.self, Get.self, List.self, Remove.self, Rekey.self, Info.self]
    )

    struct Init: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create an empty vault (folder 0700, file 0600).")

        @OptionGroup var vault: VaultOptions

        @Option(help: "PBKDF2 iterations for a passphrase (at least 100000; OWASP currently recommends 600000).")
        var iterations: Int = PBKDF2.defaultIterations

        @Flag(help: "Print JSON.")
        var json = false

        func validate() throws {
            try vault.requireKey()
            try checkIterations(iterations)
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                try TokenVault.create(at: vault.path, unlock: try vault.unlock(), iterations: iterations)
                // An existing folder keeps its mode: say so when others can get at the new vault.
                for warning in TokenVault.permissionWarnings(path: vault.path) { Console.err("shadow-keys: warning: \(warning)") }
                let info = try TokenVault.headerInfo(path: vault.path)
                if json {
                    Console.json(["created": true, "vault": .string(vault.path), "vault_id": .string(info.vaultID)])
                } else {
                    Console.err("shadow-keys: created the vault \(vault.path)")
                }
            }
        }
    }

    struct Put: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Store a secret read from stdin under NAME, replacing any entry of that name.",
            discussion: "One trailing newline is dropped from the secret unless --raw is given. The passphrase cannot come from stdin here."
        )

        @Argument(help: "The entry's name (1 to 255 bytes of printable text).")
        var name: String

        @OptionGroup var vault: VaultOptions

        @Option(help: "Who issued it: apple, google or other.")
        var provider: String = "other"

        @Option(help: "What it is: refresh-token, access-token, id-token, key or other.")
        var kind: String = "other"

        @Option(help: "The user it belongs to (a `sub`).")
        var subject: String?

        @Option(help: "When it expires: RFC 3339 or epoch seconds.")
        var expires: String?

        @Option(name: .customLong("expires-in"), help: "Seconds until it expires (as in an OAuth `expires_in`).")
        var expiresIn: Int?

        @Option(name: .customLong("label"), help: "A label key=value; repeatable.")
        var labels: [String] = []

        @Flag(help: "Store stdin byte for byte, keeping a trailing newline.")
        var raw = false

        @Flag(help: "Print JSON.")
        var json = false

        func validate() throws {
            try vault.requireKey()
            if vault.passphrase.fromStdin { throw ValidationError("put reads the secret from stdin; give the passphrase with --passphrase-file or --passphrase-env") }
            guard VaultEntry.Provider(rawValue: provider) != nil else { throw ValidationError("--provider: one of apple, google, other") }
            guard VaultEntry.Kind(rawValue: kind) != nil else { throw ValidationError("--kind: one of refresh-token, access-token, id-token, key, other") }
            if expires != nil, expiresIn != nil { throw ValidationError("give --expires or --expires-in, not both") }
            if let expiresIn {
                guard expiresIn >= 0 else { throw ValidationError("--expires-in: a number of seconds, 0 or more") }
                _ = try timeFromNow(seconds: expiresIn, option: "--expires-in")
            }
            if let expires { _ = try parseTime(expires, option: "--expires") }
            _ = try parseLabels(labels)
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                var secret = try readSecret()
                defer { for index in secret.indices { secret[index] = 0 } }
                let expiresAt = try (expires.map { try parseTime($0, option: "--expires") } ?? expiresIn.map { try timeFromNow(seconds: $0, option: "--expires-in") })?.date
                let entry = VaultEntry(
                    name: name, secret: SecretBytes(secret), provider: VaultEntry.Provider(rawValue: provider) ?? .other,
                    kind: VaultEntry.Kind(rawValue: kind) ?? .other, subject: subject, expiresAt: expiresAt, labels: try parseLabels(labels))
                let opened = try vault.open()
                try opened.putSync(entry)
                if json { Console.json(["stored": .string(name), "generation": .int(Int64(try TokenVault.headerInfo(path: vault.path).generation))]) }
            }
        }

        private func readSecret() throws -> [UInt8] {
            let limit = 1 << 20
            guard var bytes = try Files.readAll(0, limit: limit, path: "stdin") else { throw CLIError(.usage, "the secret on stdin exceeds \(limit) bytes") }
            if !raw {
                if bytes.last == 0x0A { bytes.removeLast() }
                if bytes.last == 0x0D { bytes.removeLast() }
            }
            guard !bytes.isEmpty else { throw CLIError(.usage, "the secret on stdin is empty") }
            return bytes
        }
    }

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the secret stored under NAME (or with --json, the whole entry).",
            discussion: "Warns on stderr when the entry has expired; the exit code is still 0."
        )

        @Argument(help: "The entry's name.")
        var name: String

        @OptionGroup var vault: VaultOptions

        @Flag(name: [.customShort("n"), .customLong("no-newline")], help: "Do not print a newline after the secret.")
        var noNewline = false

        @Flag(help: "Print the entry as JSON, secret included.")
        var json = false

        func validate() throws { try vault.requireKey() }

        func run() async throws {
            try await reportingFailures(json: json) {
                let entry = try vault.open().entrySync(named: name)
                if entry.expired, let expiresAt = entry.expiresAt {
                    Console.err("shadow-keys: warning: the entry \(name.quotedForMessage) expired at \(Timestamp.rfc3339(expiresAt))")
                }
                if json {
                    var object = entryJSON(entry, expired: entry.expired)
                    entry.secret.withUnsafeBytes { bytes in
                        let text = String(validating: bytes, as: UTF8.self)
                        object.set("secret", text.map(JSONValue.string) ?? .null)
                        object.set("secret_base64url", .string(Base64URL.encode(bytes)))
                    }
                    Console.json(.object(object))
                } else {
                    entry.secret.withUnsafeBytes { Console.outBytes($0, newline: !noNewline) }
                }
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List entries and their metadata; never secrets.")

        @OptionGroup var vault: VaultOptions

        @Flag(help: "Print JSON.")
        var json = false

        func validate() throws { try vault.requireKey() }

        func run() async throws {
            try await reportingFailures(json: json) {
                let opened = try vault.open()
                let now = Date()
                let entries = try opened.contents().entries
                if json {
                    Console.json(["entries": .array(entries.map { .object(entryJSON($0, expired: $0.isExpired(at: now))) })])
                    return
                }
                for entry in entries {
                    var line = "\(entry.name.terminalSafe)\t\(entry.provider.rawValue)\t\(entry.kind.rawValue)\t\((entry.subject ?? "-").terminalSafe)\t"
                    line += entry.expiresAt.map { Timestamp.rfc3339($0) + (entry.isExpired(at: now) ? " (expired)" : "") } ?? "-"
                    Console.out(line)
                }
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "rm", abstract: "Delete the entry NAME (exit 32 when there is none).")

        @Argument(help: "The entry's name.")
        var name: String

        @OptionGroup var vault: VaultOptions

        @Flag(help: "Print JSON.")
        var json = false

        func validate() throws { try vault.requireKey() }

        func run() async throws {
            try await reportingFailures(json: json) {
                try vault.open().removeSync(named: name)
                if json { Console.json(["removed": .string(name)]) }
            }
        }
    }

    struct Rekey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Re-encrypt the vault under a new passphrase or key, or with more iterations, atomically.",
            discussion: "The current key comes from --key-file/--key-env/--passphrase-*, the new one from --new-key-file/--new-key-env/--new-passphrase-*."
        )

        @OptionGroup var vault: VaultOptions

        @Option(name: .customLong("new-key-file"), help: "The new 256-bit key: 32 raw bytes, 64 hex digits, or base64.")
        var newKeyFile: String?

        @Option(name: .customLong("new-key-env"), help: "An environment variable holding the new key (hex or base64).")
        var newKeyEnvironment: String?

        @Flag(name: .customLong("new-passphrase-stdin"), help: "Read the new passphrase from stdin.")
        var newPassphraseStdin = false

        @Option(name: .customLong("new-passphrase-file"), help: "Read the new passphrase from this file.")
        var newPassphraseFile: String?

        @Option(name: .customLong("new-passphrase-env"), help: "Read the new passphrase from this environment variable.")
        var newPassphraseEnvironment: String?

        @Option(help: "PBKDF2 iterations for a new passphrase.")
        var iterations: Int = PBKDF2.defaultIterations

        @Flag(help: "Print JSON.")
        var json = false

        private var newSources: Int {
            [newKeyFile != nil, newKeyEnvironment != nil, newPassphraseStdin, newPassphraseFile != nil, newPassphraseEnvironment != nil].filter { $0 }.count
        }

        func validate() throws {
            try vault.requireKey()
            guard newSources == 1 else {
                throw ValidationError("give exactly one new key: --new-key-file, --new-key-env, --new-passphrase-stdin, --new-passphrase-file or --new-passphrase-env")
            }
            if vault.passphrase.fromStdin, newPassphraseStdin { throw ValidationError("only one of the current and new passphrases can come from stdin") }
            try checkIterations(iterations)
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                let newUnlock: VaultUnlock
                if let newKeyFile {
                    newUnlock = .key(try readKeyFile(newKeyFile))
                } else if let newKeyEnvironment {
                    newUnlock = .key(try readKeyEnvironment(newKeyEnvironment))
                } else {
                    let options = try PassphraseOptions.parse(
                        newPassphraseStdin ? ["--passphrase-stdin"]
                            : newPassphraseFile.map { ["--passphrase-file", $0] } ?? ["--passphrase-env", newPassphraseEnvironment ?? ""])
                    guard let passphrase = try options.read() else { throw CLIError(.usage, "no new passphrase given") }
                    newUnlock = .passphrase(passphrase)
                }
                try vault.open().rekeySync(to: newUnlock, iterations: iterations)
                let info = try TokenVault.headerInfo(path: vault.path)
                if json {
                    Console.json(["rekeyed": true, "key_kind": .string(info.keyKind), "iterations": info.iterations.map { .int(Int64($0)) } ?? .null])
                } else {
                    Console.err("shadow-keys: the vault is now locked with a \(info.keyKind)")
                }
            }
        }
    }

    struct Info: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the vault's format version, KDF parameters, generation and, given the key, its entry count.",
            discussion: "Without a key only the header is read; with one the whole vault is checked."
        )

        @OptionGroup var vault: VaultOptions

        @Flag(help: "Print JSON.")
        var json = false

        func validate() throws { try vault.requirePath() }

        func run() async throws {
            try await reportingFailures(json: json) {
                let header = try TokenVault.headerInfo(path: vault.path)
                var entries: Int?
                var generation = header.generation
                if vault.hasKey {
                    let contents = try vault.open().contents()
                    entries = contents.count
                    generation = contents.generation
                } else {
                    for warning in TokenVault.permissionWarnings(path: vault.path) { Console.err("shadow-keys: warning: \(warning)") }
                }
                let object: JSONObject = [
                    "vault": .string(vault.path), "format_version": .int(Int64(header.version)), "key_kind": .string(header.keyKind),
                    "kdf": header.iterations.map { iterations in
                        ["algorithm": "PBKDF2-HMAC-SHA256", "iterations": .int(Int64(iterations)), "salt_bytes": .int(Int64(header.saltBytes ?? 0))]
                    } ?? .null,
                    "generation": .int(Int64(generation)), "entries": entries.map { .int(Int64($0)) } ?? .null, "vault_id": .string(header.vaultID),
                    "file_bytes": .int(Int64(header.fileBytes)), "verified": .bool(entries != nil),
                ]
                Console.out(JSONValue.object(object).serializedForTerminal(pretty: !json))
            }
        }
    }
}

/// Where the vault is and how to open it.
struct VaultOptions: ParsableArguments {
    @Option(name: .customLong("vault"), help: "The vault file (default: $SHADOW_KEYS_VAULT, else under $XDG_DATA_HOME/shadow-keys/).")
    var explicitPath: String?

    @Option(name: .customLong("key-file"), help: "The vault's 256-bit key: 32 raw bytes, 64 hex digits, or base64.")
    var keyFile: String?

    @Option(name: .customLong("key-env"), help: "An environment variable holding the vault's key (hex or base64).")
    var keyEnvironment: String?

    @OptionGroup var passphrase: PassphraseOptions

    @Option(name: .customLong("lock-timeout"), help: "Seconds to wait for another process's lock.")
    var lockTimeout: Double = 10

    /// The vault file: `--vault`, else the default (which must exist in the environment).
    var path: String { explicitPath ?? (try? TokenVault.defaultPath()) ?? "" }

    var keySources: Int { passphrase.given + (keyFile == nil ? 0 : 1) + (keyEnvironment == nil ? 0 : 1) }
    var hasKey: Bool { keySources == 1 }

    func validate() throws {
        if keySources > 1 { throw ValidationError("give one of --key-file, --key-env, --passphrase-stdin, --passphrase-file or --passphrase-env") }
        guard lockTimeout >= 0, lockTimeout <= 3600 else { throw ValidationError("--lock-timeout: 0 to 3600 seconds") }
        if let explicitPath, explicitPath.isEmpty { throw ValidationError("--vault: the path is empty") }
    }

    /// Checks that there is a vault path: `--vault`, or a default the environment can give.
    func requirePath() throws {
        guard explicitPath == nil else { return }
        do { _ = try TokenVault.defaultPath() } catch let error as VaultError { throw ValidationError(error.reason) }
    }

    func requireKey() throws {
        try requirePath()
        guard keySources == 1 else {
            throw ValidationError("open the vault with one of --key-file, --key-env, --passphrase-stdin, --passphrase-file or --passphrase-env")
        }
    }

    func unlock() throws -> VaultUnlock {
        if let keyFile { return .key(try readKeyFile(keyFile)) }
        if let keyEnvironment { return .key(try readKeyEnvironment(keyEnvironment)) }
        guard let secret = try passphrase.read() else { throw CLIError(.usage, "no vault key given") }
        return .passphrase(secret)
    }

    /// A handle on the vault, after warning about loose permissions.
    func open() throws -> TokenVault {
        for warning in TokenVault.permissionWarnings(path: path) { Console.err("shadow-keys: warning: \(warning)") }
        return TokenVault(path: path, unlock: try unlock(), lockTimeout: lockTimeout)
    }
}

/// The metadata of an entry as JSON; no secret.
private func entryJSON(_ entry: VaultEntry, expired: Bool) -> JSONObject {
    var labels = JSONObject()
    for key in entry.labels.keys.sorted() { labels.set(key, .string(entry.labels[key] ?? "")) }
    return [
        "name": .string(entry.name), "provider": .string(entry.provider.rawValue), "kind": .string(entry.kind.rawValue),
        "subject": entry.subject.map(JSONValue.string) ?? .null, "created_at": .string(Timestamp.rfc3339(entry.createdAt)),
        "updated_at": .string(Timestamp.rfc3339(entry.updatedAt)), "expires_at": entry.expiresAt.map { .string(Timestamp.rfc3339($0)) } ?? .null,
        "expired": .bool(expired), "labels": .object(labels),
    ]
}

private func checkIterations(_ iterations: Int) throws {
    guard iterations >= PBKDF2.minimumIterations else { throw ValidationError("--iterations: at least \(PBKDF2.minimumIterations)") }
    guard iterations <= 10_000_000 else { throw ValidationError("--iterations: at most 10000000") }
}


private func parseLabels(_ items: [String]) throws -> [String: String] {
    var labels: [String: String] = [:]
    for item in items {
        guard let equals = item.firstIndex(of: "="), equals != item.startIndex else { throw ValidationError("--label \(item): expected key=value") }
        let key = String(item[..<equals])
        guard labels.updateValue(String(item[item.index(after: equals)...]), forKey: key) == nil else { throw ValidationError("--label \(key) is given twice") }
    }
    return labels
}
