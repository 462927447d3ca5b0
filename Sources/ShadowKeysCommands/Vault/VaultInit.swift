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
    struct Init: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "init", abstract: "Create an empty vault (folder 0700, file 0600).")

        @OptionGroup var vault: VaultOptions

        @Option(
            name: .customLong("new-key"),
            help: ArgumentHelp(
                "Make a new 256-bit key in this file (as keygen does) and create the vault under it.", valueName: "file"
            ))
        var newKey: String?

        @Option(help: "PBKDF2 iterations for a passphrase (at least 100000; OWASP currently recommends 600000).")
        var iterations: Int = PBKDF2.defaultIterations

        @Flag(help: "Print JSON.")
        var json = false

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func validate() throws {
            if newKey != nil {
                try vault.requirePath()
                guard try vault.key() == nil else {
                    throw ValidationError("--new-key makes the key: give no other key or passphrase")
                }
            } else {
                try vault.requireKey()
            }
            try checkIterations(iterations)
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                let unlock: VaultUnlock
                if let newKey {
                    // The vault must not exist yet: check before making a key nobody needs.
                    guard !FileManager.default.fileExists(atPath: vault.path) else {
                        throw CLIError(
                            .failure, code: "vault_exists",
                            "the vault \(vault.path.terminalSafe) exists already; it was left untouched")
                    }
                    try writeNewKey(to: newKey)
                    Console.note("wrote a new 256-bit key to \(newKey.terminalSafe) (mode 0600)")
                    unlock = try KeyInput.key(SecretInput(origin: .file(newKey), what: "key")).vaultUnlock()
                } else {
                    unlock = try vault.unlock(confirm: true)
                }
                try await TokenVault.create(at: vault.path, unlock: unlock, iterations: iterations)
                // An existing folder keeps its mode: say so when others can get at the new vault.
                for warning in TokenVault.permissionWarnings(path: vault.path) { Console.warn("\(warning)") }
                let info = try TokenVault.headerInfo(path: vault.path)
                if json {
                    Console.json(["created": true, "vault": .string(vault.path), "vault_id": .string(info.vaultID)])
                } else {
                    Console.note("created the vault \(vault.path)")
                }
            }
        }
    }
}
