import ArgumentParser
import ShadowCore
import ShadowJOSE
import Testing

@testable import ShadowKeysCommands

/// `verify-token` and `vault get` read without argument-parser must mean exactly what
/// argument-parser makes of the same command line, or decline it.
@Suite struct DirectParseTests {
    /// The direct reader must take `arguments` as `command`, and make of them what argument-parser
    /// makes, property for property, with nothing left unset (`DirectReaderAgreement`).
    static func expectTheSameCommand(_ command: String, _ arguments: [String]) {
        #expect(DirectReaderAgreement.compare(command, arguments) == .agreed, "\(command) \(arguments)")
    }

    /// Every long option name argument-parser knows for `command`, from its own description.
    static func declaredLongNames(_ command: any ParsableCommand.Type) throws -> Set<String> {
        let help = try #require(
            try StrictJSON.parse(Array(command._dumpHelp().utf8)).objectValue?["command"]?.objectValue)
        var names: Set<String> = []
        for argument in help["arguments"]?.arrayValue ?? [] {
            for name in argument.objectValue?["names"]?.arrayValue ?? []
            where name.objectValue?["kind"]?.stringValue == "long" {
                if let text = name.objectValue?["name"]?.stringValue { names.insert(text) }
            }
        }
        names.remove("help")
        return names
    }

    /// Every long option argument-parser declares for `command`, by kind: a flag, an option taking
    /// one value, or an option that may repeat.
    static func declaredKinds(_ command: any ParsableCommand.Type) throws -> [String: LongOptions.Kind] {
        let help = try #require(
            try StrictJSON.parse(Array(command._dumpHelp().utf8)).objectValue?["command"]?.objectValue)
        var kinds: [String: LongOptions.Kind] = [:]
        for argument in help["arguments"]?.arrayValue ?? [] {
            guard let argument = argument.objectValue else { continue }
            let kind: LongOptions.Kind? =
                switch argument["kind"]?.stringValue {
                case "flag": .flag
                case "option": argument["isRepeating"] == .bool(true) ? .repeating : .value
                default: nil
                }
            for name in argument["names"]?.arrayValue ?? [] where name.objectValue?["kind"]?.stringValue == "long" {
                if let text = name.objectValue?["name"]?.stringValue, text != "help", let kind { kinds[text] = kind }
            }
        }
        return kinds
    }

    /// The direct readers take each option as argument-parser does: a flag as a flag, a single
    /// value as a single value (given twice, it declines), a repeating option as repeating.
    @Test func theDirectReadersKnowEachOptionsKind() throws {
        #expect(VerifyToken.longOptions == (try Self.declaredKinds(VerifyToken.self)))
        #expect(VaultCommand.Get.longOptions == (try Self.declaredKinds(VaultCommand.Get.self)))
        #expect(VaultCommand.Token.longOptions == (try Self.declaredKinds(VaultCommand.Token.self)))
        #expect(StateCommand.Check.longOptions == (try Self.declaredKinds(StateCommand.Check.self)))
    }

    @Test func theEnvelopeReadersKnowEachOptionAndItsKind() throws {
        #expect(Encrypt.longOptions == (try Self.declaredKinds(Encrypt.self)))
        #expect(Decrypt.longOptions == (try Self.declaredKinds(Decrypt.self)))
        #expect(Set(Encrypt.longOptions.keys) == (try Self.declaredLongNames(Encrypt.self)))
        #expect(Set(Decrypt.longOptions.keys) == (try Self.declaredLongNames(Decrypt.self)))
    }

    @Test(arguments: [
        ["in", "-o", "out", "--key-file", "k"],
        [
            "--key-file=k", "-o", "out", "--key-id", "v2", "--context", "a=b", "--context", "c=d=e", "--chunk-size",
            "4096", "-q",
        ],
        ["-", "-o", "out", "--passphrase-env", "P", "--iterations", "200000", "--record"],
        ["in", "--passphrase-file", "p", "--quiet"],
        ["in", "--passphrase-stdin", "-o", "o"],
    ])
    func encryptIsTheSameCommandEitherWay(arguments: [String]) {
        Self.expectTheSameCommand("encrypt", arguments)
    }

    @Test(arguments: [
        ["in.skx", "-o", "out", "--key-file", "k"],
        ["-", "--key-file", "k", "--context", "a=b", "-q"],
        ["in", "-o", "o", "--passphrase-file", "p", "--quiet"],
    ])
    func decryptIsTheSameCommandEitherWay(arguments: [String]) {
        Self.expectTheSameCommand("decrypt", arguments)
    }

    @Test(arguments: [
        ["in", "-o", "-", "--key-file", "k"],
        ["in", "--output", "o", "--key-file", "k"],
        ["in", "-qo", "x", "--key-file", "k"],
        ["in", "-o", "x", "-o", "y", "--key-file", "k"],
        ["in", "-x", "--key-file", "k"],
        ["in", "--key-file", "k", "--chunk-size", "1000"],
        ["in", "--key-file", "k", "--iterations", "10"],
        ["-", "--passphrase-stdin"],
        ["in", "--key-file", "k", "--context", "nokey"],
        ["in", "--key-file", "k", "--passphrase-env", "P"],
        ["a", "b", "--key-file", "k"],
        ["in", "--key-file", "k", "--help"],
        ["in", "--key-file", "k", "-q", "--quiet"],
        ["in", "-o", "out", "--key-file", "k", "--key-id="],
    ])
    func envelopeCommandLinesDecline(arguments: [String]) {
        #expect(Encrypt.parsedDirectly(arguments[...]) == nil, "\(arguments) was read directly by encrypt")
        #expect(Decrypt.parsedDirectly(arguments[...]) == nil, "\(arguments) was read directly by decrypt")
    }

    @Test func theDirectReadersKnowExactlyTheDeclaredOptions() throws {
        #expect(Set(VerifyToken.longOptions.keys) == (try Self.declaredLongNames(VerifyToken.self)))
        #expect(Set(VaultCommand.Get.longOptions.keys) == (try Self.declaredLongNames(VaultCommand.Get.self)))
        #expect(Set(VaultCommand.Token.longOptions.keys) == (try Self.declaredLongNames(VaultCommand.Token.self)))
        #expect(Set(StateCommand.Check.longOptions.keys) == (try Self.declaredLongNames(StateCommand.Check.self)))
    }

    @Test(arguments: [
        ["--client-id", "com.example.app", "--sub", "001.a.1", "--store", "sqlite:s.sqlite", "--key-file", "k"],
        ["--sub=001.a.1", "--client-id=c", "--json", "-q", "--store", "vault:v.skv", "--passphrase-env", "P"],
        ["--client-id", "c", "--sub", "s", "--vault", "v.skv", "--key-env", "K", "--quiet", "--lock-timeout", "3"],
    ])
    func stateCheckIsTheSameCommandEitherWay(arguments: [String]) {
        Self.expectTheSameCommand("state check", arguments)
    }

    @Test(arguments: [
        ["--client-id", "c", "--store", "sqlite:s.sqlite", "--key-file", "k"],
        ["--client-id", "c", "--sub", "-x", "--key-file", "k"],
        ["--client-id", "", "--sub", "s", "--key-file", "k"],
        ["--client-id", "c", "--sub", "s", "--key-file", "k", "extra"],
        ["--client-id", "c", "--sub", "s", "--key-file", "k", "-x"],
        ["--client-id", "c", "--sub", "s", "--key-file", "k", "-q", "--quiet"],
        ["--client-id", "c", "--sub", "s", "--sub", "t", "--key-file", "k"],
        ["--client-id", "c", "--sub", "s", "--key-file", "k", "--lock-timeout", "-1"],
        ["--client-id", "c", "--sub", "s", "--key-file", "k", "--help"],
        ["--client-id", "c", "--sub", "s", "--key-file", "k", "--store", "ftp://x"],
        ["--client-id=", "--sub", "s", "--key-file", "k"],
    ])
    func stateCheckDeclines(arguments: [String]) {
        #expect(StateCommand.Check.parsedDirectly(arguments[...]) == nil, "\(arguments) was read directly")
    }

    @Test(arguments: [
        ["drive", "--vault", "v.skv", "--key-file", "k"],
        ["--key-env", "K", "drive", "--json", "--quiet", "--skew", "120", "--allow-http-loopback"],
        ["drive", "--vault=v.skv", "--passphrase-file", "p", "--no-newline", "--ca-file", "ca.pem"],
    ])
    func vaultTokenIsTheSameCommandEitherWay(arguments: [String]) {
        Self.expectTheSameCommand("vault token", arguments)
    }

    @Test(arguments: [
        ["drive", "--key-file", "k", "--skew", "-1"], ["drive", "--key-file", "k", "--skew", "x"],
        ["drive", "--key-file", "k", "--skew", "90000"], ["a", "b", "--key-file", "k"],
    ])
    func vaultTokenDeclines(arguments: [String]) {
        #expect(VaultCommand.Token.parsedDirectly(arguments[...]) == nil, "\(arguments) was read directly")
    }

    @Test(arguments: [
        ["drive", "--vault", "v.skv", "--key-file", "k"],
        ["--key-env", "K", "drive", "--json", "--quiet", "--lock-timeout", "2.5"],
        ["drive", "--vault=v.skv", "--passphrase-file", "p", "--no-newline"],
    ])
    func vaultGetIsTheSameCommandEitherWay(arguments: [String]) {
        Self.expectTheSameCommand("vault get", arguments)
    }

    @Test(arguments: [
        ["--vault", "v.skv", "--key-file", "k"],
        ["a", "b", "--key-file", "k"],
        ["drive", "-n", "--key-file", "k"],
        ["-", "--key-file", "k"],
        ["drive", "--key-file", "k", "--key-env", "K"],
        ["drive", "--key-file", "k", "--lock-timeout", "4000"],
        ["drive", "--vault", "", "--key-file", "k"],
        ["drive", "--key-file", "k", "--help"],
    ])
    func vaultGetDeclines(arguments: [String]) {
        #expect(VaultCommand.Get.readDirectly(arguments[...]) == nil, "\(arguments) was read directly")
    }

    /// Command lines both readers take; each must give the same command, property for property
    /// (the description of a parsed command prints every value, nested groups included).
    static let accepted: [[String]] = [
        ["--token-file", "t", "--jwks", "k.json"],
        [
            "--token-file=t", "--jwks=k.json", "--iss", "https://issuer", "--aud", "a", "--aud", "b",
            "--all-aud-accepted",
        ],
        [
            "--token-env", "T", "--jwks", "https://example.com/keys", "--offline", "--alg", "rs256", "--alg", "ES256",
            "--json", "--quiet",
        ],
        [
            "--token-file", "t", "--jwks", "http://127.0.0.1:9/k", "--allow-http-loopback", "--ca-file", "ca.pem",
            "--leeway", "5.5", "--max-age", "300",
        ],
        [
            "--token-file", "t", "--jwks", "k", "--require", "sub", "--require", "email", "--typ", "JWT",
            "--allow-missing-exp", "--now", "1700000000",
        ],
        ["--token-file", "t", "--jwks", "k", "--max-token-bytes", "4096", "--nonce-sha256-env", "N"],
        ["--jwks", "k", "--each-line", "--aud", "x", "--nonce-file", "n.txt", "--json"],
        ["--token-file", "t", "--apple", "--aud", "com.example", "--jwks", "k"],
        // The token as an argument, or `-` for stdin: the shapes scripts write most.
        ["eyJhbGciOiJSUzI1NiJ9.e30.sig", "--jwks", "k", "--iss", "i", "--aud", "a", "--now", "1700000000", "--quiet"],
        ["--jwks", "k", "TOKEN", "--json"],
        ["-", "--jwks", "k", "--aud", "a"],
        ["TOKEN", "--apple", "--aud", "com.example", "--jwks", "k", "--state", "--key-file", "key"],
        ["--jwks", "k", "--apple", "--aud", "com.example", "--state", "--store", "sqlite:s", "--key-env", "K", "-"],
    ]

    @Test(arguments: accepted)
    func theSameCommandEitherWay(arguments: [String]) {
        Self.expectTheSameCommand("verify-token", arguments)
    }

    /// Command lines the direct reader leaves to argument-parser: forms it does not read, and
    /// values any validation refuses.
    static let declined: [[String]] = [
        ["--token-file", "t", "--jwks", "k", "-q"],
        ["TOKEN", "OTHER", "--jwks", "k"],
        ["TOKEN", "--token-file", "t", "--jwks", "k"],
        ["-", "-", "--jwks", "k"],
        ["-x", "--jwks", "k"],
        ["--token-file", "t", "--jwks", "k", "--help"],
        ["--token-file", "t", "--jwks", "k", "--", "x"],
        ["--token-file", "t", "--token-file", "u", "--jwks", "k"],
        ["--token-file", "t", "--jwks", "k", "--json", "--json"],
        ["--token-file", "t", "--jwks", "k", "--jwk", "x"],
        ["--token-file", "t", "--jwks"],
        ["--token-file", "t", "--jwks", "-"],
        ["--token-file", "t", "--jwks", "k", "--leeway", "ten"],
        ["--token-file", "t", "--jwks", "k", "--leeway", "-1"],
        ["--token-file", "t", "--jwks", "k", "--max-token-bytes", "0"],
        ["--token-file", "t", "--jwks", "k", "--alg", "HS256"],
        ["--token-file", "t", "--jwks", "k", "--alg", "r\u{17F}256"],
        ["--token-file", "t", "--jwks", "http://example.com/k"],
        ["--token-file", "t", "--token-env", "T", "--jwks", "k"],
        ["--token-file", "t", "--jwks", "k", "--nonce", "a", "--nonce-file", "b"],
        ["--token-file", "t", "--jwks", "k", "--state"],
        ["--token-file", "t", "--jwks", "k", "--apple"],
        ["--token-file", "t", "--jwks", "k", "--json=yes"],
        ["--each-line", "--token-file", "t", "--jwks", "k"],
        // argument-parser's "Missing value": the fuzz harness's input, FailCases/argv.
        ["TOKEN", "--jwks="],
        ["--token-file=", "--jwks", "k"],
    ]

    /// `--alg` ignores ASCII case only: a long s (U+017F) upper-cases to S, and was RS256.
    @Test func algorithmNamesIgnoreASCIICaseOnly() {
        #expect(VerificationOptions.algorithm("rs256") == .rs256 && VerificationOptions.algorithm("eS256") == .es256)
        for name in ["r\u{17F}256", "\u{212A}S256", "RS256 ", "HS256", "none", "RS2\u{FF15}6"] {
            #expect(VerificationOptions.algorithm(name) == nil, "\(name.debugDescription)")
        }
    }

    @Test(arguments: declined)
    func declinedCommandLinesGoToArgumentParser(arguments: [String]) {
        #expect(VerifyToken.parsedDirectly(arguments[...]) == nil, "\(arguments) was read directly")
    }
}

/// `shadow-keys` runs a command on the main thread only when nothing in it waits; the command
/// lines that fetch, open a store or read many tokens go to the asynchronous path untouched.
@Suite struct SynchronousPathTests {
    @Test(arguments: [
        ["--jwks", "https://keys.example.com/jwks.json", "--token-file", "t"],
        ["--apple", "--aud", "com.example", "--token-file", "t"],
        [
            "--apple", "--aud", "com.example", "--jwks", "k", "--state", "--store", "sqlite:s", "--key-file", "key",
            "--token-file", "t",
        ],
        ["--jwks", "k", "--each-line"],
    ])
    func waitingCommandLinesAreLeftToTheAsynchronousPath(_ arguments: [String]) throws {
        // Every file named here is missing: running anything would throw.
        let command = try VerifyToken.parse(arguments)
        #expect(try command.runIfSynchronous() == false)
    }
}

extension SynchronousPathTests {
    /// The commands read directly keep their synchronous path, found without a cast.
    @Test func directlyReadCommandsKeepTheirSynchronousPath() throws {
        let verify = try #require(ShadowKeysTool.directlyParsed(["verify-token", "--jwks", "k", "--token-file", "t"]))
        #expect(verify.runIfSynchronous != nil)
        let get = try #require(
            ShadowKeysTool.directlyParsed(["vault", "get", "NAME", "--vault", "v", "--key-file", "k"]))
        #expect(get.runIfSynchronous != nil)
        let token = try #require(
            ShadowKeysTool.directlyParsed(["vault", "token", "NAME", "--vault", "v", "--key-file", "k"]))
        #expect(token.runIfSynchronous == nil)
        let quiet = try #require(ShadowKeysTool.directlyParsed(["verify-token", "--jwks", "k", "--quiet"]))
        #expect(quiet.quiet)
    }
}
