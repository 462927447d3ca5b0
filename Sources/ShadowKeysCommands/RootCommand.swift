public import ArgumentParser
import ShadowCore

/// The commands of the ShadowKeys command line, shared by its two executables: `shadow-keys`
/// (``ShadowKeysCommand``, for scripts) and `shadow-keys-server` (`serve` and PostgreSQL stores).
public enum ShadowKeysTool {
    /// The version both executables print.
    public static let version = "0.1.0"

    /// The exit-code summary at the end of the root help (Docs/cli.md has the whole contract).
    public static let exitCodes = """
        Exit codes: 0 success, 10 malformed token, 11 signature rejected, 12 claims rejected, \
        13 keys unavailable, 20 authentication failed (decryption), 30/31/32/33 vault or store: wrong \
        passphrase or key / corrupted / no such entry / lock timeout, 34 database unreachable, \
        40/41/42 Apple refused the \
        grant / refused the request / was unavailable, 64 usage error, \
        65 malformed input, 66 no input, 73 output exists (keygen), 1 anything else. \
        See Docs/cli.md.
        """

    /// Every command that needs no server and no PostgreSQL, in the order help lists them.
    public static let commands: [any ParsableCommand.Type] = [
        VerifyToken.self, Decode.self, JWKSCommand.self, ClientSecretCommand.self, AppleCommand.self, Keygen.self,
        Sign.self, DeriveKey.self,
        Encrypt.self, Decrypt.self, Rewrap.self, Hash.self, VaultCommand.self, StateCommand.self, LogCommand.self,
        SelfTestCommand.self,
    ]

    /// Parses the process's arguments against `root`, then runs the command and exits.
    ///
    /// When parsing fails and the command line names an option the command does not have, that is
    /// what is reported (exit 64), before any other complaint. With `--json`, a usage error is a
    /// JSON object on stdout too: `{"error":{"code":"usage","message":…}}`. `postgres` opens
    /// `postgres://` stores; without it such a store is a usage error that names
    /// `shadow-keys-server`.
    package static func main(_ root: any ParsableCommand.Type, postgres: (any PostgresStores)? = nil) async -> Never {
        await StoreBackends.$postgres.withValue(postgres) {
            await parseAndRun(root)
        }
        root.exit()
    }

    private static func parseAndRun(_ root: any ParsableCommand.Type) async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments == ["--version"] {
            // What argument-parser prints, without building the command tree to print it.
            Console.out(version)
            return
        }
        if let command = directlyParsed(arguments) { return await run(command, root: root) }
        let command: any ParsableCommand
        do {
            command = try root.parseAsRoot(arguments)
        } catch {
            // --help and --version end parsing too; they are not errors.
            guard root.exitCode(for: error) != .success else { root.exit(withError: error) }
            let json = arguments.prefix { $0 != "--" }.contains("--json")
            if let unknown = UnknownOptions.first(in: arguments, root: root) {
                if json { Console.json(["error": .error(code: "usage", message: unknown.message)]) }
                Console.err("Error: \(unknown.message)")
                let name = root.configuration.commandName ?? "shadow-keys"
                let help = ([name] + unknown.commandPath + ["--help"]).joined(separator: " ")
                Console.err("  See '\(help)' for more information.")
                root.exit(withError: ExitCode(ExitStatus.usage.rawValue))
            }
            if json {
                Console.json(["error": .error(code: "usage", message: root.message(for: error))])
            }
            root.exit(withError: error)
        }
        Console.setQuiet((command as? any QuietCommand)?.quiet ?? false)
        do {
            var command = command
            if var asynchronous = command as? any AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try command.run()
            }
        } catch {
            root.exit(withError: error)
        }
    }

    /// The commands scripts run once per token or secret, read without argument-parser's
    /// reflection when their command line is plain enough (``LongOptions``); nil otherwise.
    static func directlyParsed(_ arguments: [String]) -> (any AsyncParsableCommand & QuietCommand)? {
        switch arguments.first {
        case "verify-token": return VerifyToken.parsedDirectly(arguments.dropFirst())
        case "vault" where arguments.dropFirst().first == "get":
            return VaultCommand.Get.parsedDirectly(arguments.dropFirst(2))
        case "vault" where arguments.dropFirst().first == "token":
            return VaultCommand.Token.parsedDirectly(arguments.dropFirst(2))
        default: return nil
        }
    }

    /// Runs a command read by ``directlyParsed(_:)``.
    private static func run(_ command: any AsyncParsableCommand & QuietCommand, root: any ParsableCommand.Type) async {
        Console.setQuiet(command.quiet)
        do {
            var command = command
            try await command.run()
        } catch {
            root.exit(withError: error)
        }
    }
}

/// `shadow-keys`: the lean executable for scripts, with every command but `serve` and the
/// PostgreSQL stores (those are `shadow-keys-server`'s).
public struct ShadowKeysCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "shadow-keys",
        abstract: "Verify JWTs, check keys and vectors: the ShadowKeys command line.",
        discussion: ShadowKeysTool.exitCodes,
        version: ShadowKeysTool.version,
        subcommands: ShadowKeysTool.commands
    )

    public init() {}

    /// Parses and runs, as ``ShadowKeysTool/main(_:postgres:)`` says.
    public static func main() async {
        await ShadowKeysTool.main(Self.self)
    }
}
