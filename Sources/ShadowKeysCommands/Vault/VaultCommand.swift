import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowCrypto
import ShadowVault

struct VaultCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vault",
        abstract: "Keep tokens and keys in an encrypted, crash-safe vault file.",
        discussion: """
            The vault is --vault PATH, else $SHADOW_KEYS_VAULT, else $XDG_DATA_HOME/shadow-keys/vault.skv \
            (~/.local/share/shadow-keys/vault.skv). It opens with --key-file, --key-env, or a passphrase \
            option; secrets never come from argv. Exit codes: 30 wrong passphrase or key, 31 vault \
            corrupted or tampered, 32 no such entry, 33 lock timeout, 43 reauthentication required (vault token), \
            64 usage, 66 no vault. \
            Format: Docs/vault-format.md.
            """,
        subcommands: [
            Init.self, Put.self, Get.self, List.self, Remove.self, Rekey.self, Info.self, Login.self, Token.self,
        ]
    )
}
