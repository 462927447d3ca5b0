public import ArgumentParser
import Dispatch
import ShadowCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
        Sign.self, DPoPCommand.self, DeriveKey.self,
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
            await parsed(root).run(root: root)
        }
        root.exit()
    }

    /// ``main(_:postgres:)`` without PostgreSQL, for `shadow-keys`: the command line is read on
    /// the main thread, and a command that does nothing that waits (``SynchronousCommand``) runs
    /// there too, so the concurrency runtime starts no worker thread; any other command runs as
    /// in ``main(_:postgres:)``.
    package static func start(_ root: any ParsableCommand.Type) -> Never {
        let command = parsed(root)
        if let runIfSynchronous = command.runIfSynchronous {
            do {
                if try runIfSynchronous() { root.exit() }
            } catch {
                leave(root, error)
            }
        }
        runAsynchronously(command, root: root)
    }

    /// The command as a task on the concurrency runtime, for every command that waits. A function
    /// of its own, kept out of line: inlined, the optimizer hoisted the task's generic metadata
    /// (`Optional<TaskPriority>`, instantiated at run time) above the synchronous path, which
    /// then paid for it at every start.
    @inline(never)
    private static func runAsynchronously(_ command: ParsedCommand, root: any ParsableCommand.Type) -> Never {
        let unchecked = UncheckedCommand(command: command)
        Task {
            await unchecked.command.run(root: root)
            root.exit()
        }
        dispatchMain()
    }

    /// The command the process's arguments name, with `--quiet` applied; exits for `--version`,
    /// `--help` and usage errors.
    private static func parsed(_ root: any ParsableCommand.Type) -> ParsedCommand {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments == ["--version"] {
            // What argument-parser prints, without building the command tree to print it.
            Console.out(version)
            root.exit()
        }
        let command: ParsedCommand
        if let direct = directlyParsed(arguments) {
            command = direct
        } else {
            do {
                command = ParsedCommand(any: try root.parseAsRoot(arguments))
            } catch {
                // An option's value that begins with "-" is its value (Docs/cli.md, "Usage
                // errors"): the line is read again with each such value joined to its option.
                guard let joined = UnknownOptions.joiningValues(arguments, root: root) else {
                    reportUsage(error, arguments: arguments, root: root)
                }
                do {
                    command = ParsedCommand(any: try root.parseAsRoot(joined))
                } catch {
                    reportUsage(error, arguments: joined, root: root)
                }
            }
        }
        Console.setQuiet(command.quiet)
        return command
    }

    /// Exits for an error a command threw. A command has already reported its failure when it
    /// throws an `ExitCode` (every refusal does, exit 10 and up), so the process leaves with that
    /// code at once: argument-parser's `exit(withError:)` would first build the root command's
    /// usage text for a message an `ExitCode` does not print (a failed `verify-token` cost 1.05×
    /// `jose` where a passing one costs 0.79×).
    static func leave(_ root: any ParsableCommand.Type, _ error: any Error) -> Never {
        guard let code = error as? ExitCode else { root.exit(withError: error) }
        exit(code.rawValue)
    }

    /// Reports a parse failure and exits: 0 for `--help` and `--version`, else 64 (see ``main(_:postgres:)``).
    private static func reportUsage(_ error: any Error, arguments: [String], root: any ParsableCommand.Type) -> Never {
        // --help and --version end parsing too; they are not errors.
        guard root.exitCode(for: error) != .success else { root.exit(withError: error) }
        let json = arguments.prefix { $0 != "--" }.contains("--json")
        if let unknown = UnknownOptions.first(in: arguments, root: root) {
            if json { Console.json(["error": .error(code: "usage", message: unknown.message)]) }
            Console.err("Error: \(unknown.message)")
            let name = root.configuration.commandName ?? "shadow-keys"
            let help = ([name] + unknown.commandPath + ["--help"]).joined(separator: " ")
            Console.err("  See '\(help)' for more information.")
            leave(root, ExitCode(ExitStatus.usage.rawValue))
        }
        if json {
            Console.json(["error": .error(code: "usage", message: root.message(for: error))])
        }
        root.exit(withError: error)
    }

    /// The commands scripts run once per token or secret, read without argument-parser's
    /// reflection when their command line is plain enough (``LongOptions``); nil otherwise.
    static func directlyParsed(_ arguments: [String]) -> ParsedCommand? {
        switch arguments.first {
        case "verify-token": return VerifyToken.parsedDirectly(arguments.dropFirst()).map(ParsedCommand.init)
        case "vault" where arguments.dropFirst().first == "get":
            return VaultCommand.Get.parsedDirectly(arguments.dropFirst(2))
        case "vault" where arguments.dropFirst().first == "token":
            return VaultCommand.Token.parsedDirectly(arguments.dropFirst(2)).map(ParsedCommand.init)
        case "state" where arguments.dropFirst().first == "check":
            return StateCommand.Check.parsedDirectly(arguments.dropFirst(2)).map(ParsedCommand.init)
        case "encrypt": return Encrypt.parsedDirectly(arguments.dropFirst()).map(ParsedCommand.init)
        case "decrypt": return Decrypt.parsedDirectly(arguments.dropFirst()).map(ParsedCommand.init)
        default: return nil
        }
    }
}

/// A parsed command and how to run it. For the commands read directly, the ways are fixed when the
/// type is known; for any other, they are found by casting. Each cast to a protocol the first time
/// costs a scan of every protocol conformance in the binary, which is a large part of a plain
/// command's start (Docs/cli.md, "Start-up").
struct ParsedCommand {
    let quiet: Bool
    /// Set for a ``SynchronousCommand``.
    let runIfSynchronous: (() throws -> Bool)?
    private let body: () async throws -> Void

    init<Command: AsyncParsableCommand & QuietCommand>(_ command: Command) {
        quiet = command.quiet
        runIfSynchronous = nil
        body = {
            var command = command
            try await command.run()
        }
    }

    init<Command: AsyncParsableCommand & QuietCommand & SynchronousCommand>(_ command: Command) {
        quiet = command.quiet
        runIfSynchronous = command.runIfSynchronous
        body = {
            var command = command
            try await command.run()
        }
    }

    /// A synchronous command read into plain values (no argument-parser type).
    init(quiet: Bool, synchronous run: @escaping () throws -> Bool) {
        self.quiet = quiet
        runIfSynchronous = run
        body = { _ = try run() }
    }

    /// A command argument-parser read.
    init(any command: any ParsableCommand) {
        quiet = (command as? any QuietCommand)?.quiet ?? false
        runIfSynchronous = (command as? any SynchronousCommand)?.runIfSynchronous
        body = {
            var command = command
            if var asynchronous = command as? any AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try command.run()
            }
        }
    }

    /// Runs the command; exits with its error's code when it throws.
    func run(root: any ParsableCommand.Type) async {
        do {
            try await body()
        } catch {
            ShadowKeysTool.leave(root, error)
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

    /// Parses and runs, as ``ShadowKeysTool/start(_:)`` says: `shadow-keys`'s entry point.
    public static func start() -> Never {
        ShadowKeysTool.start(Self.self)
    }
}

/// A parsed command handed to the task that runs it. argument-parser's commands are plain values
/// that are not declared `Sendable`; this one is read by that task alone.
private struct UncheckedCommand: @unchecked Sendable {
    let command: ParsedCommand
}
