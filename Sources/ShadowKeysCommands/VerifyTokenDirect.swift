import ArgumentParser
import ShadowCrypto
import ShadowJOSE

extension VerifyToken {
    /// Every long option `verify-token` declares, by kind. A test checks this against
    /// argument-parser's own description of the command, so an option added there and not here
    /// fails it.
    static let longOptions: [String: LongOptions.Kind] = [
        "token-file": .value, "token-env": .value,
        "jwks": .value, "offline": .flag, "allow-http-loopback": .flag, "ca-file": .value,
        "alg": .repeating, "iss": .value, "aud": .repeating, "all-aud-accepted": .flag,
        "nonce": .value, "nonce-file": .value, "nonce-env": .value, "nonce-sha256": .value, "nonce-sha256-file": .value,
        "nonce-sha256-env": .value,
        "leeway": .value, "max-age": .value, "require": .repeating, "typ": .value, "allow-missing-exp": .flag,
        "now": .value, "max-token-bytes": .value,
        "apple": .flag, "state": .flag, "client-id": .value, "json": .flag, "quiet": .flag, "each-line": .flag,
        "store": .value,
    ].merging(VaultOptions.longOptions) { _, _ in preconditionFailure("verify-token declares a vault option twice") }

    /// The command for `arguments` (after `verify-token`) when they are long options only and
    /// pass every validation argument-parser would run; nil otherwise, for argument-parser to
    /// parse and report. Equal, property for property, to what argument-parser makes of the
    /// same arguments (a test compares the two).
    static func parsedDirectly(_ arguments: ArraySlice<String>) -> VerifyToken? {
        // TOKEN (or `-`, stdin) is the one positional argument, and may be left out.
        guard let given = LongOptions(arguments, kinds: longOptions, positionals: 0...1, dashIsPositional: true),
            let leeway = given.number("leeway", default: VerificationOptions.defaultLeeway),
            let maxTokenBytes = given.number("max-token-bytes", default: CompactJWS.defaultMaxBytes),
            let store = StoreOptions.direct(given)
        else { return nil }
        var maxAge: Double?
        if let text = given.value("max-age") {
            guard let value = Double(text) else { return nil }
            maxAge = value
        }
        // Each option group is filled, then set whole: a group not yet set cannot be read.
        var token = TokenOptions()
        token.token = given.positionals.first
        token.file = given.value("token-file")
        token.environment = given.value("token-env")
        var network = NetworkOptions()
        network.allowHTTPLoopback = given.flag("allow-http-loopback")
        network.caFile = given.value("ca-file")
        var keySource = KeySourceOptions()
        keySource.jwks = given.value("jwks")
        keySource.offline = given.flag("offline")
        keySource.network = network
        var nonce = NonceOptions()
        nonce.argument = given.value("nonce")
        nonce.file = given.value("nonce-file")
        nonce.environment = given.value("nonce-env")
        nonce.hashedArgument = given.value("nonce-sha256")
        nonce.hashedFile = given.value("nonce-sha256-file")
        nonce.hashedEnvironment = given.value("nonce-sha256-env")
        var options = VerificationOptions()
        options.algorithms = given.all("alg")
        options.issuer = given.value("iss")
        options.audiences = given.all("aud")
        options.everyAudienceAccepted = given.flag("all-aud-accepted")
        options.nonce = nonce
        options.leeway = leeway
        options.maxAge = maxAge
        options.requiredClaims = given.all("require")
        options.type = given.value("typ")
        options.allowMissingExpiration = given.flag("allow-missing-exp")
        options.now = given.value("now")
        options.maxTokenBytes = maxTokenBytes
        var command = VerifyToken()
        command.token = token
        command.keySource = keySource
        command.options = options
        command.apple = given.flag("apple")
        command.state = given.flag("state")
        command.clientID = given.value("client-id")
        command.store = store
        command.json = given.flag("json")
        command.quiet = given.flag("quiet")
        command.eachLine = given.flag("each-line")
        // The validations argument-parser runs: each option group's, then the command's.
        return LongOptions.validate(token, network, keySource, nonce, options, store, command) ? command : nil
    }
}

extension StoreOptions {
    /// `--store` and the vault options as `given` sets them (validated by their owner); nil when
    /// a vault option's value does not convert or fails its validation.
    static func direct(_ given: LongOptions) -> StoreOptions? {
        guard let vault = VaultOptions.direct(given) else { return nil }
        var store = StoreOptions()
        store.url = given.value("store")
        store.vault = vault
        return store
    }
}

extension VaultOptions {
    /// The long options of the vault option group.
    static let longOptions = PassphraseOptions.longOptions.merging([
        "vault": .value, "key-file": .value, "key-env": .value, "lock-timeout": .value,
    ]) { _, _ in preconditionFailure("the vault options declare a name twice") }

    /// The group as `given` sets it, validated as argument-parser validates it; nil when a value
    /// does not convert or a validation fails.
    static func direct(_ given: LongOptions) -> VaultOptions? { VaultAccess.direct(given).map(VaultOptions.init) }
}

extension VaultAccess {
    /// The vault options as `given` sets them, validated as argument-parser validates them; nil
    /// when a value does not convert or a validation fails.
    static func direct(_ given: LongOptions) -> VaultAccess? {
        guard let lockTimeout = given.number("lock-timeout", default: VaultOptions.defaultLockTimeout) else {
            return nil
        }
        let vault = VaultAccess(
            explicitPath: given.value("vault"), keyFile: given.value("key-file"),
            keyEnvironment: given.value("key-env"),
            passphrase: PassphraseSources.direct(given), lockTimeout: lockTimeout)
        do {
            _ = try vault.passphrase.input()
            try vault.validate()
        } catch {
            return nil
        }
        return vault
    }
}

extension VaultCommand.Get {
    /// Every long option `vault get` declares.
    static let longOptions: [String: LongOptions.Kind] = ["no-newline": .flag, "json": .flag, "quiet": .flag].merging(
        VaultOptions.longOptions
    ) { _, _ in
        preconditionFailure("vault get declares a vault option twice")
    }

    /// `vault get NAME` read as ``VerifyToken/parsedDirectly(_:)`` reads `verify-token`, into
    /// plain values (no argument-parser type is built): the command and its `--quiet`.
    static func readDirectly(_ arguments: ArraySlice<String>) -> (line: VaultGetLine, quiet: Bool)? {
        guard let given = LongOptions(arguments, kinds: longOptions, positionals: 1...1),
            let vault = VaultAccess.direct(given)
        else { return nil }
        do { try vault.requireKey() } catch { return nil }
        let line = VaultGetLine(
            name: given.positionals[0], vault: vault, noNewline: given.flag("no-newline"), json: given.flag("json"))
        return (line, given.flag("quiet"))
    }

    static func parsedDirectly(_ arguments: ArraySlice<String>) -> ParsedCommand? {
        readDirectly(arguments).map { ParsedCommand(quiet: $0.quiet, synchronous: $0.line.run) }
    }
}

extension VaultCommand.Token {
    /// Every long option `vault token` declares.
    static let longOptions: [String: LongOptions.Kind] = [
        "no-newline": .flag, "json": .flag, "quiet": .flag, "skew": .value, "allow-http-loopback": .flag,
        "ca-file": .value,
    ].merging(VaultOptions.longOptions) { _, _ in preconditionFailure("vault token declares a vault option twice") }

    /// `vault token NAME` read as ``VerifyToken/parsedDirectly(_:)`` reads `verify-token`: a sync
    /// tool runs it before every request.
    static func parsedDirectly(_ arguments: ArraySlice<String>) -> Self? {
        guard let given = LongOptions(arguments, kinds: longOptions, positionals: 1...1),
            let vault = VaultOptions.direct(given), let skew = given.number("skew", default: defaultSkew)
        else { return nil }
        var command = Self()
        command.name = given.positionals[0]
        command.vault = vault
        var network = NetworkOptions()
        network.allowHTTPLoopback = given.flag("allow-http-loopback")
        network.caFile = given.value("ca-file")
        command.network = network
        command.skew = skew
        command.json = given.flag("json")
        command.noNewline = given.flag("no-newline")
        command.quiet = given.flag("quiet")
        do { try command.validate() } catch { return nil }
        return command
    }
}

extension PassphraseOptions {
    static let longOptions: [String: LongOptions.Kind] = [
        "passphrase-stdin": .flag, "passphrase-file": .value, "passphrase-env": .value,
    ]

    /// The group as `given` sets it (validated by its owner).
    static func direct(_ given: LongOptions) -> Self { Self(PassphraseSources.direct(given)) }
}

extension PassphraseSources {
    /// The passphrase options as `given` sets them (validated by their owner).
    static func direct(_ given: LongOptions) -> Self {
        PassphraseSources(
            stdin: given.flag("passphrase-stdin"), file: given.value("passphrase-file"),
            environment: given.value("passphrase-env"))
    }
}

extension KEKOptions {
    static let longOptions = PassphraseOptions.longOptions.merging(["key-file": .value]) { _, _ in
        preconditionFailure("the key options declare a name twice")
    }

    /// The group as `given` sets it, validated as argument-parser validates it; nil when a
    /// validation fails.
    static func direct(_ given: LongOptions) -> Self? {
        var key = Self()
        key.keyFile = given.value("key-file")
        key.passphrase = PassphraseOptions.direct(given)
        do {
            try key.passphrase.validate()
            try key.validate()
        } catch {
            return nil
        }
        return key
    }
}

extension Encrypt {
    /// Every long option `encrypt` declares.
    static let longOptions: [String: LongOptions.Kind] = [
        "key-id": .value, "context": .repeating, "chunk-size": .value, "iterations": .value, "record": .flag,
        "quiet": .flag,
    ].merging(KEKOptions.longOptions) { _, _ in preconditionFailure("encrypt declares a key option twice") }
    /// `encrypt [INPUT] -o OUTPUT --key-file K …` read as ``VerifyToken/parsedDirectly(_:)`` reads
    /// `verify-token`: the envelope commands' start is part of a stream's cost and memory.
    static func parsedDirectly(_ arguments: ArraySlice<String>) -> Self? {
        guard let (given, input, output, key) = EnvelopeLine.read(arguments, kinds: longOptions),
            let chunkSize = given.number("chunk-size", default: Envelope.defaultChunkSize),
            let iterations = given.number("iterations", default: PBKDF2.defaultIterations)
        else { return nil }
        var command = Self()
        (command.input, command.output, command.key) = (input, output, key)
        command.keyID = given.value("key-id") ?? ""
        command.context = given.all("context")
        command.chunkSize = chunkSize
        command.iterations = iterations
        command.record = given.flag("record")
        command.quiet = given.flag("quiet")
        do { try command.validate() } catch { return nil }
        return command
    }
}

extension Decrypt {
    /// Every long option `decrypt` declares.
    static let longOptions: [String: LongOptions.Kind] = ["context": .repeating, "quiet": .flag].merging(
        KEKOptions.longOptions
    ) { _, _ in preconditionFailure("decrypt declares a key option twice") }
    /// `decrypt [INPUT] -o OUTPUT --key-file K …`, as ``Encrypt/parsedDirectly(_:)``.
    static func parsedDirectly(_ arguments: ArraySlice<String>) -> Self? {
        guard let (given, input, output, key) = EnvelopeLine.read(arguments, kinds: longOptions) else { return nil }
        var command = Self()
        (command.input, command.output, command.key) = (input, output, key)
        command.context = given.all("context")
        command.quiet = given.flag("quiet")
        do { try command.validate() } catch { return nil }
        return command
    }
}

/// What `encrypt` and `decrypt` command lines share: `[INPUT]`, `-o OUTPUT` (no long form), `-q`
/// for `--quiet`, and the key options.
enum EnvelopeLine {
    static let shortNames: [String: (String, LongOptions.Kind)] = ["o": ("output", .value), "q": ("quiet", .flag)]

    /// The options, the input and output (`-` when left out), and the key; nil to decline.
    static func read(
        _ arguments: ArraySlice<String>, kinds: [String: LongOptions.Kind]
    ) -> (LongOptions, String, String, KEKOptions)? {
        guard
            let given = LongOptions(
                arguments, kinds: kinds, shortNames: shortNames, positionals: 0...1, dashIsPositional: true),
            let key = KEKOptions.direct(given)
        else { return nil }
        return (given, given.positionals.first ?? "-", given.value("output") ?? "-", key)
    }
}
