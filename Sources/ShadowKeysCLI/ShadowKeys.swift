import ArgumentParser
import ShadowCore

@main
struct ShadowKeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "shadow-keys",
        abstract: "Verify JWTs, check keys and vectors: the ShadowKeys command line.",
        discussion: """
            Exit codes: 0 success, 10 malformed token, 11 signature rejected, 12 claims rejected, \
            13 keys unavailable, 20 authentication failed (decryption), 30/31/32/33 vault or store: wrong \
            passphrase or key / corrupted / no such entry / lock timeout, 34 database unreachable, \
            40/41/42 Apple refused the \
            grant / refused the request / was unavailable, 64 usage error, \
            65 malformed input, 66 no input, 73 output exists (keygen), 1 anything else. \
            See Docs/cli.md.
            """,
        version: "0.1.0",
        subcommands: [VerifyToken.self, Decode.self, JWKSCommand.self, ClientSecretCommand.self, AppleCommand.self, Keygen.self, Sign.self, DeriveKey.self, Encrypt.self, Decrypt.self, Rewrap.self, Hash.self, VaultCommand.self, StateCommand.self, Serve.self, SelfTestCommand.self]
    )

    /// Parses, then runs. When parsing fails and the command line names an option the command
    /// does not have, that is what is reported (exit 64), before any other complaint. With
    /// `--json`, a usage error is a JSON object on stdout too: `{"error":{"code":"usage","message":…}}`.
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        let command: any ParsableCommand
        do {
            command = try parseAsRoot(arguments)
        } catch {
            // --help and --version end parsing too; they are not errors.
            guard exitCode(for: error) != .success else { exit(withError: error) }
            let json = arguments.prefix { $0 != "--" }.contains("--json")
            if let unknown = UnknownOptions.first(in: arguments, root: Self.self) {
                if json { Console.json(["error": ["code": "usage", "message": .string(unknown.message)]]) }
                Console.err("Error: \(unknown.message)")
                Console.err("  See 'shadow-keys \((unknown.commandPath + ["--help"]).joined(separator: " "))' for more information.")
                exit(withError: ExitCode(ExitStatus.usage.rawValue))
            }
            if json {
                Console.json(["error": ["code": "usage", "message": .string(message(for: error))]])
            }
            exit(withError: error)
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
            exit(withError: error)
        }
    }
}
