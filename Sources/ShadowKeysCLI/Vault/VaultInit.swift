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
    struct Init: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "init", abstract: "Create an empty vault (folder 0700, file 0600).")

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
}
