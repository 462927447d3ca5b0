import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowCrypto
import ShadowVault

/// Where the vault is and how to open it: `--vault`, one of `--key-file`, `--key-env` and the
/// passphrase options, and `--lock-timeout`.
struct VaultOptions: ParsableArguments {
    @Option(
        name: .customLong("vault"),
        help: "The vault file (default: $SHADOW_KEYS_VAULT, else under $XDG_DATA_HOME/shadow-keys/).")
    var explicitPath: String?

    @Option(name: .customLong("key-file"), help: "The vault's 256-bit key: 32 raw bytes, 64 hex digits, or base64.")
    var keyFile: String?

    @Option(name: .customLong("key-env"), help: "An environment variable holding the vault's key (hex or base64).")
    var keyEnvironment: String?

    @OptionGroup var passphrase: PassphraseOptions

    @Option(name: .customLong("lock-timeout"), help: "Seconds to wait for another process's lock (0 to 3600).")
    var lockTimeout: Double = Self.defaultLockTimeout

    /// `--lock-timeout` when none is given, in seconds.
    static let defaultLockTimeout: Double = 10

    /// The options as plain values.
    var access: VaultAccess {
        VaultAccess(
            explicitPath: explicitPath, keyFile: keyFile, keyEnvironment: keyEnvironment,
            passphrase: passphrase.sources, lockTimeout: lockTimeout)
    }

    /// The group holding `access`'s values.
    init(_ access: VaultAccess) {
        explicitPath = access.explicitPath
        keyFile = access.keyFile
        keyEnvironment = access.keyEnvironment
        passphrase = PassphraseOptions(access.passphrase)
        lockTimeout = access.lockTimeout
    }

    init() {}

    var path: String { access.path }
    var isGiven: Bool { access.isGiven }
    func validate() throws { try access.validate() }
    func key() throws -> KeyInput? { try access.key() }
    var keyUsesStdin: Bool { access.keyUsesStdin }
    func requirePath() throws { try access.requirePath() }
    func requireKey() throws { try access.requireKey() }
    func unlock(confirm: Bool = false) throws -> VaultUnlock { try access.unlock(confirm: confirm) }
    func open() throws -> TokenVault { try access.open() }
}

/// Where the vault is and how to open it, as plain values: what ``VaultOptions`` says, and what
/// the direct readers build without argument-parser's property wrappers (Docs/cli.md, "Start-up").
struct VaultAccess {
    var explicitPath: String?
    var keyFile: String?
    var keyEnvironment: String?
    var passphrase = PassphraseSources()
    var lockTimeout = VaultOptions.defaultLockTimeout

    /// The vault file: `--vault`, else the default (``requirePath()`` checks there is one).
    var path: String { explicitPath ?? (try? TokenVault.defaultPath()) ?? "" }

    /// True when any vault option was given.
    var isGiven: Bool {
        explicitPath != nil || keyFile != nil || keyEnvironment != nil || passphrase.stdin || passphrase.file != nil
            || passphrase.environment != nil
    }

    func validate() throws {
        _ = try key()
        guard lockTimeout >= 0, lockTimeout <= 3600 else { throw ValidationError("--lock-timeout: 0 to 3600 seconds") }
        if let explicitPath, explicitPath.isEmpty { throw ValidationError("--vault: the path is empty") }
    }

    /// The key or passphrase given, or nil when none was.
    func key() throws -> KeyInput? {
        try KeyInput.one(
            key: origins(file: keyFile, environment: keyEnvironment), passphrase: passphrase.candidates,
            options: "--key-file, --key-env, --passphrase-stdin, --passphrase-file or --passphrase-env")
    }

    /// True when the key or passphrase comes from stdin.
    var keyUsesStdin: Bool { (try? key())?.usesStdin == true }

    /// Checks that there is a vault path: `--vault`, or a default the environment can give.
    func requirePath() throws {
        guard explicitPath == nil else { return }
        do { _ = try TokenVault.defaultPath() } catch let error as VaultError { throw ValidationError(error.reason) }
    }

    func requireKey() throws {
        try requirePath()
        guard try key() != nil || TerminalPrompt.available else {
            throw ValidationError(
                """
                open the vault with one of --key-file, --key-env, --passphrase-stdin, --passphrase-file or \
                --passphrase-env
                """
            )
        }
    }

    /// The key or passphrase given; with none and stdin a terminal, a passphrase asked for there
    /// (twice when `confirm`, for a new vault).
    func unlock(confirm: Bool = false) throws -> VaultUnlock {
        if let key = try key() { return try key.vaultUnlock() }
        guard TerminalPrompt.available else { throw CLIError(.usage, "no vault key given") }
        return try KeyInput.passphrase(SecretInput(origin: .prompt(confirm: confirm), what: "passphrase")).vaultUnlock()
    }

    /// A handle on the vault, after warning about loose permissions.
    func open() throws -> TokenVault {
        for warning in TokenVault.permissionWarnings(path: path) { Console.warn("\(warning)") }
        return TokenVault(path: path, unlock: try unlock(), lockTimeout: .seconds(lockTimeout))
    }
}

/// The metadata of an entry as JSON; no secret.
func entryJSON(_ entry: VaultEntry, expired: Bool) -> JSONObject {
    var labels = JSONObject()
    for (key, value) in entry.labels { labels.set(key, .string(value)) }
    return [
        "name": .string(entry.name), "provider": .string(entry.provider.rawValue), "kind": .string(entry.kind.rawValue),
        "subject": entry.subject.map(JSONValue.string) ?? .null,
        "created_at": .string(Timestamp.rfc3339(entry.createdAt)),
        "updated_at": .string(Timestamp.rfc3339(entry.updatedAt)),
        "expires_at": entry.expiresAt.map { .string(Timestamp.rfc3339($0)) } ?? .null,
        "expired": .bool(expired), "labels": .object(labels),
    ]
}

/// `--iterations` for a vault passphrase: 100000 to 10000000, the range readers accept.
func checkIterations(_ iterations: Int) throws {
    guard (PBKDF2.minimumIterations...Envelope.maxIterations).contains(iterations) else {
        throw ValidationError(
            "--iterations: \(PBKDF2.minimumIterations) to \(Envelope.maxIterations), not \(iterations)")
    }
}

/// `--label k=v`, repeatable: keys compared byte for byte, as the vault compares them.
func parseLabels(_ items: [String]) throws -> VaultLabels {
    var labels = VaultLabels()
    for item in items {
        guard let (key, value) = keyValue(item) else { throw ValidationError("--label \(item): expected key=value") }
        guard labels.updateValue(value, forKey: key) == nil else {
            throw ValidationError("--label \(key) is given twice")
        }
    }
    return labels
}
