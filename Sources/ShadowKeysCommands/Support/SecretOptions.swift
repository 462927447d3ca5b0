import ArgumentParser
#if canImport(Darwin)
import Darwin
#else
import Glibc
#endif
import ShadowCore
import ShadowCrypto
import ShadowVault

/// The option groups that name where a secret comes from. Their option names differ (the
/// current and the new key of a rekey cannot share names); what they give is one `SecretInput`,
/// or a `KeyInput`, read the same way everywhere.
typealias Origins = [(given: Bool, origin: SecretInput.Origin)]

/// The origins a group's options name, for ``oneOrigin(_:options:)``.
func origins(stdin: Bool = false, file: String?, environment: String?) -> Origins {
    [(stdin, .standardInput), (file != nil, .file(file ?? "")), (environment != nil, .environment(environment ?? ""))]
}

/// A raw 256-bit key or a passphrase, wherever it comes from.
enum KeyInput {
    case key(SecretInput)
    case passphrase(SecretInput)

    var usesStdin: Bool {
        switch self {
        case .key(let input), .passphrase(let input): return input.usesStdin
        }
    }

    /// A key-encryption key for envelopes; `iterations` applies when sealing with a passphrase.
    func kek(id: String = "", iterations: Int = PBKDF2.defaultIterations) throws -> KeyEncryptionKey {
        switch self {
        case .key(let input): return try .raw(try input.key(), id: id)
        case .passphrase(let input): return try .passphrase(try input.secret(), id: id, iterations: iterations)
        }
    }

    /// How to open a vault.
    func vaultUnlock() throws -> VaultUnlock {
        switch self {
        case .key(let input): return .key(try input.key())
        case .passphrase(let input): return .passphrase(try input.secret())
        }
    }

    /// The one key among a group's options, or nil when none was given.
    static func one(key: Origins, passphrase: Origins, options: String) throws -> KeyInput? {
        let keyOrigin = try oneOrigin(key + passphrase, options: options)
        guard let keyOrigin else { return nil }
        let isKey = key.contains { $0.given }
        return isKey
            ? .key(SecretInput(origin: keyOrigin, what: "key"))
            : .passphrase(SecretInput(origin: keyOrigin, what: "passphrase"))
    }
}

/// `--passphrase-stdin`, `--passphrase-file F`, `--passphrase-env VAR`.
struct PassphraseOptions: ParsableArguments {
    @Flag(
        name: .customLong("passphrase-stdin"), help: "Read the passphrase from stdin (one trailing newline is dropped)."
    )
    var stdin = false
    @Option(
        name: .customLong("passphrase-file"),
        help: "Read the passphrase from this file (one trailing newline is dropped).")
    var file: String?
    @Option(name: .customLong("passphrase-env"), help: "Read the passphrase from this environment variable.")
    var environment: String?

    /// The options as plain values.
    var sources: PassphraseSources { PassphraseSources(stdin: stdin, file: file, environment: environment) }

    /// The group holding `sources`' values.
    init(_ sources: PassphraseSources) {
        stdin = sources.stdin
        file = sources.file
        environment = sources.environment
    }

    init() {}

    var candidates: Origins { sources.candidates }

    func validate() throws { _ = try sources.input() }

    /// The passphrase's origin, or nil when none was given.
    func input() throws -> SecretInput? { try sources.input() }
}

/// What the passphrase options say, as plain values: the direct readers build it without
/// argument-parser's property wrappers (Docs/cli.md, "Start-up").
struct PassphraseSources {
    var stdin = false
    var file: String?
    var environment: String?

    var candidates: Origins { origins(stdin: stdin, file: file, environment: environment) }

    /// The passphrase's origin, or nil when none was given.
    func input() throws -> SecretInput? {
        try oneOrigin(candidates, options: "--passphrase-stdin, --passphrase-file or --passphrase-env").map {
            SecretInput(origin: $0, what: "passphrase")
        }
    }
}

/// `--key-file F` or a passphrase option: an envelope's key-encryption key.
struct KEKOptions: ParsableArguments {
    @Option(name: .customLong("key-file"), help: "A 256-bit key: 32 raw bytes, 64 hex digits, or base64.")
    var keyFile: String?
    @OptionGroup var passphrase: PassphraseOptions

    func validate() throws {
        guard try input() != nil || TerminalPrompt.available else {
            throw ValidationError(
                "give exactly one of --key-file, --passphrase-stdin, --passphrase-file or --passphrase-env")
        }
    }

    func input() throws -> KeyInput? {
        try KeyInput.one(
            key: origins(file: keyFile, environment: nil), passphrase: passphrase.candidates,
            options: "--key-file, --passphrase-stdin, --passphrase-file or --passphrase-env")
    }

    /// The key, after ``validate()`` made sure there is one or a terminal to ask for a
    /// passphrase (twice when `confirm`, for a passphrase that will seal something).
    func required(confirm: Bool = false) throws -> KeyInput {
        if let input = try input() { return input }
        guard TerminalPrompt.available else { throw CLIError(.usage, "no key given") }
        return .passphrase(SecretInput(origin: .prompt(confirm: confirm), what: "passphrase"))
    }
}

/// `--from-key-file`, `--from-passphrase-file`, `--from-passphrase-env`: the key an envelope has now.
struct FromKeyOptions: ParsableArguments {
    @Option(name: .customLong("from-key-file"), help: "The current 256-bit key file.") var keyFile: String?
    @Option(name: .customLong("from-passphrase-file"), help: "Read the current passphrase from this file.")
    var passphraseFile: String?
    @Option(
        name: .customLong("from-passphrase-env"), help: "Read the current passphrase from this environment variable.")
    var passphraseEnvironment: String?

    func input() throws -> KeyInput? {
        try KeyInput.one(
            key: origins(file: keyFile, environment: nil),
            passphrase: origins(file: passphraseFile, environment: passphraseEnvironment),
            options: "--from-key-file, --from-passphrase-file or --from-passphrase-env")
    }
}

/// `--to-key-file`, `--to-passphrase-file`, `--to-passphrase-env`: the key an envelope gets.
struct ToKeyOptions: ParsableArguments {
    @Option(name: .customLong("to-key-file"), help: "The new 256-bit key file.") var keyFile: String?
    @Option(name: .customLong("to-passphrase-file"), help: "Read the new passphrase from this file.")
    var passphraseFile: String?
    @Option(name: .customLong("to-passphrase-env"), help: "Read the new passphrase from this environment variable.")
    var passphraseEnvironment: String?

    func input() throws -> KeyInput? {
        try KeyInput.one(
            key: origins(file: keyFile, environment: nil),
            passphrase: origins(file: passphraseFile, environment: passphraseEnvironment),
            options: "--to-key-file, --to-passphrase-file or --to-passphrase-env")
    }
}

/// `--new-key-file`, `--new-key-env`, `--new-passphrase-stdin|file|env`: a vault's new key.
struct NewKeyOptions: ParsableArguments {
    @Option(name: .customLong("new-key-file"), help: "The new 256-bit key: 32 raw bytes, 64 hex digits, or base64.")
    var keyFile: String?
    @Option(name: .customLong("new-key-env"), help: "An environment variable holding the new key (hex or base64).")
    var keyEnvironment: String?
    @Flag(name: .customLong("new-passphrase-stdin"), help: "Read the new passphrase from stdin.") var passphraseStdin =
        false
    @Option(name: .customLong("new-passphrase-file"), help: "Read the new passphrase from this file.")
    var passphraseFile: String?
    @Option(name: .customLong("new-passphrase-env"), help: "Read the new passphrase from this environment variable.")
    var passphraseEnvironment: String?

    func input() throws -> KeyInput? {
        try KeyInput.one(
            key: origins(file: keyFile, environment: keyEnvironment),
            passphrase: origins(stdin: passphraseStdin, file: passphraseFile, environment: passphraseEnvironment),
            options:
                "--new-key-file, --new-key-env, --new-passphrase-stdin, --new-passphrase-file or --new-passphrase-env")
    }
}

/// `TOKEN|-`, `--token-file F`, `--token-env VAR`: a JWT. With none of them and stdin not a
/// terminal, the token is read from stdin; one given as an argument draws a warning (it is
/// visible in `ps`) unless `--quiet` is given.
struct TokenOptions: ParsableArguments {
    @Argument(help: "The token, or '-' to read it from stdin (also the default when stdin is not a terminal).")
    var token: String?
    @Option(name: .customLong("token-file"), help: "Read the token from this file.")
    var file: String?
    @Option(name: .customLong("token-env"), help: "Read the token from this environment variable.")
    var environment: String?

    /// Largest token read from stdin or a file.
    static let readLimit = 1 << 20

    func validate() throws {
        let origins = [(token != nil, true), (file != nil, true), (environment != nil, true)].filter(\.0).count
        guard origins <= 1 else {
            throw ValidationError("give the token once: as TOKEN, '-' for stdin, --token-file or --token-env")
        }
    }

    /// Checks there is a token to read: given, or stdin is not a terminal. Each command that reads
    /// one token calls this from its own `validate()`.
    func requireInput() throws {
        if !isGiven, isatty(0) == 1 {
            throw ValidationError("no token: give it as TOKEN, '-' or on stdin (a pipe), --token-file or --token-env")
        }
    }

    /// Where the token comes from.
    var input: SecretInput {
        let origin: SecretInput.Origin
        if let token, token != "-" {
            origin = .argument(token)
        } else if let file {
            origin = .file(file)
        } else if let environment {
            origin = .environment(environment)
        } else {
            origin = .standardInput
        }
        return SecretInput(origin: origin, what: "token")
    }

    var usesStdin: Bool { input.usesStdin }

    /// True when the token was given in any way (TOKEN, '-', --token-file or --token-env).
    var isGiven: Bool { token != nil || file != nil || environment != nil }

    /// The token text, surrounding whitespace removed.
    func read() throws -> String {
        if case .argument = input.origin {
            Console.warn(
                """
                a token on the command line is visible to other users (ps); prefer '-', --token-file or --token-env \
                (--quiet silences this)
                """
            )
        }
        return try input.text(limit: Self.readLimit, oversize: .malformedToken, trimmingWhitespace: true)
    }
}
