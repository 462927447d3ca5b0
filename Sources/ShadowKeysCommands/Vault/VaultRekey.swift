import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowCrypto
import ShadowVault

extension VaultCommand {
    struct Rekey: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "rekey",
            abstract: "Re-encrypt the vault under a new passphrase or key, or with more iterations, atomically.",
            discussion:
                """
                The current key comes from --key-file/--key-env/--passphrase-*, the new one from \
                --new-key-file/--new-key-env/--new-passphrase-*.
                """
        )

        @OptionGroup var vault: VaultOptions

        @OptionGroup var newKey: NewKeyOptions

        @Option(help: "PBKDF2 iterations for a new passphrase.")
        var iterations: Int = PBKDF2.defaultIterations

        @Flag(help: "Print JSON.")
        var json = false

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func validate() throws {
            try vault.requireKey()
            guard let newKey = try newKey.input() else {
                throw ValidationError(
                    """
                    give exactly one new key: --new-key-file, --new-key-env, --new-passphrase-stdin, \
                    --new-passphrase-file or --new-passphrase-env
                    """
                )
            }
            if vault.keyUsesStdin, newKey.usesStdin {
                throw ValidationError("only one of the current and new passphrases can come from stdin")
            }
            try checkIterations(iterations)
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                guard let newUnlock = try newKey.input()?.vaultUnlock() else {
                    throw CLIError(.usage, "no new key given")
                }
                try vault.open().rekeySync(to: newUnlock, iterations: iterations)
                let info = try TokenVault.headerInfo(path: vault.path)
                if json {
                    Console.json([
                        "rekeyed": true, "key_kind": .string(info.keyKind),
                        "iterations": info.iterations.map { .int(Int64($0)) } ?? .null,
                    ])
                } else {
                    Console.note("the vault is now locked with a \(info.keyKind)")
                }
            }
        }
    }
}
