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
    struct Info: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "info",
            abstract:
                "Show the vault's format version, KDF parameters, generation and, given the key, its entry count.",
            discussion: "Without a key only the header is read; with one the whole vault is checked."
        )

        @OptionGroup var vault: VaultOptions

        @Flag(help: "Print JSON.")
        var json = false

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func validate() throws { try vault.requirePath() }

        func run() async throws {
            try await reportingFailures(json: json) {
                let header = try TokenVault.headerInfo(path: vault.path)
                var entries: Int?
                var generation = header.generation
                if try vault.key() != nil {
                    let contents = try vault.open().contents()
                    entries = contents.count
                    generation = contents.generation
                } else {
                    for warning in TokenVault.permissionWarnings(path: vault.path) { Console.warn("\(warning)") }
                }
                let object: JSONObject = [
                    "vault": .string(vault.path), "format_version": .int(Int64(header.version)),
                    "key_kind": .string(header.keyKind),
                    "kdf": header.iterations.map { iterations in
                        [
                            "algorithm": "PBKDF2-HMAC-SHA256", "iterations": .int(Int64(iterations)),
                            "salt_bytes": .int(Int64(header.saltBytes ?? 0)),
                        ]
                    } ?? .null,
                    "generation": .int(Int64(generation)), "entries": entries.map { .int(Int64($0)) } ?? .null,
                    "vault_id": .string(header.vaultID),
                    "file_bytes": .int(Int64(header.fileBytes)), "verified": .bool(entries != nil),
                ]
                Console.out(JSONValue.object(object).serializedForTerminal(pretty: !json))
            }
        }
    }
}
