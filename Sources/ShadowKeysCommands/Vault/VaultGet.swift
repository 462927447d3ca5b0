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
    struct Get: AsyncParsableCommand, QuietCommand, SynchronousCommand {
        static let configuration = CommandConfiguration(
            commandName: "get",
            abstract: "Print the secret stored under NAME (or with --json, the whole entry).",
            discussion: "Warns on stderr when the entry has expired; the exit code is still 0."
        )

        @Argument(help: "The entry's name.")
        var name: String

        @OptionGroup var vault: VaultOptions

        @Flag(name: [.customShort("n"), .customLong("no-newline")], help: "Do not print a newline after the secret.")
        var noNewline = false

        @Flag(help: "Print the entry as JSON, secret included.")
        var json = false

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func validate() throws { try vault.requireKey() }

        func run() async throws { _ = try runIfSynchronous() }

        func runIfSynchronous() throws -> Bool { try line.run() }

        /// The command's values, plain.
        var line: VaultGetLine { VaultGetLine(name: name, vault: vault.access, noNewline: noNewline, json: json) }
    }
}

/// `vault get`'s values, plain: the direct reader builds it without argument-parser's property
/// wrappers (Docs/cli.md, "Start-up"), and ``VaultCommand/Get`` runs through it.
struct VaultGetLine {
    var name: String
    var vault: VaultAccess
    var noNewline = false
    var json = false

    /// The vault is read, opened and printed on this thread: nothing waits.
    func run() throws -> Bool {
        try reportingFailuresSynchronously(json: json) {
            let entry = try vault.open().entrySync(named: name)
            if entry.expired, let expiresAt = entry.expiresAt {
                Console.warn("the entry \(name.quotedForMessage) expired at \(Timestamp.rfc3339(expiresAt))")
            }
            if json {
                var object = entryJSON(entry, expired: entry.expired)
                entry.secret.withUnsafeBytes { bytes in
                    let text = String(validating: bytes, as: UTF8.self)
                    object.set("secret", text.map(JSONValue.string) ?? .null)
                    object.set("secret_base64url", .string(Base64URL.encode(bytes)))
                }
                Console.json(.object(object))
            } else {
                entry.secret.withUnsafeBytes { Console.outBytes($0, newline: !noNewline) }
            }
        }
        return true
    }
}
