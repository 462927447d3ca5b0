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
    struct Put: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "put",
            abstract: "Store a secret read from stdin under NAME, replacing any entry of that name.",
            discussion:
                """
                One trailing newline is dropped from the secret unless --raw is given. The passphrase cannot come \
                from stdin here.
                """
        )

        @Argument(help: "The entry's name (1 to 255 bytes of printable text).")
        var name: String

        @OptionGroup var vault: VaultOptions

        @Option(help: "Who issued it: apple, google or other.")
        var provider: String = "other"

        @Option(help: "What it is: refresh-token, access-token, id-token, key or other.")
        var kind: String = "other"

        @Option(help: "The user it belongs to (a `sub`).")
        var subject: String?

        @Option(help: "When it expires: RFC 3339 or epoch seconds.")
        var expires: String?

        @Option(name: .customLong("expires-in"), help: "Seconds until it expires (as in an OAuth `expires_in`).")
        var expiresIn: Int?

        @Option(name: .customLong("label"), help: "A label key=value; repeatable.")
        var labels: [String] = []

        @Flag(help: "Store stdin byte for byte, keeping a trailing newline.")
        var raw = false

        @Flag(help: "Print JSON.")
        var json = false

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func validate() throws {
            // Before the secret is read: the name is checked first.
            guard VaultEntry.isValidName(name) else {
                throw ValidationError("entry names are 1 to \(VaultEntry.maxNameBytes) bytes of printable text")
            }
            try vault.requireKey()
            if vault.keyUsesStdin {
                throw ValidationError(
                    "put reads the secret from stdin; give the passphrase with --passphrase-file or --passphrase-env")
            }
            guard VaultEntry.Provider(rawValue: provider) != nil else {
                throw ValidationError("--provider: one of apple, google, other")
            }
            guard VaultEntry.Kind(rawValue: kind) != nil else {
                throw ValidationError("--kind: one of refresh-token, access-token, id-token, key, other")
            }
            if expires != nil, expiresIn != nil { throw ValidationError("give --expires or --expires-in, not both") }
            if let expiresIn {
                guard expiresIn >= 0 else { throw ValidationError("--expires-in: a number of seconds, 0 or more") }
                _ = try timeFromNow(seconds: expiresIn, option: "--expires-in")
            }
            if let expires { _ = try parseTime(expires, option: "--expires") }
            _ = try parseLabels(labels)
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                var secret = try readSecret()
                defer { for index in secret.indices { secret[index] = 0 } }
                let expiresAt = try
                    (expires.map { try parseTime($0, option: "--expires") }
                    ?? expiresIn.map { try timeFromNow(seconds: $0, option: "--expires-in") })?.date
                let entry = VaultEntry(
                    name: name, secret: SecretBytes(secret),
                    provider: VaultEntry.Provider(rawValue: provider) ?? .other,
                    kind: VaultEntry.Kind(rawValue: kind) ?? .other, subject: subject, expiresAt: expiresAt,
                    labels: try parseLabels(labels))
                let opened = try vault.open()
                try opened.putSync(entry)
                if json {
                    Console.json([
                        "stored": .string(name),
                        "generation": .int(Int64(try TokenVault.headerInfo(path: vault.path).generation)),
                    ])
                }
            }
        }

        private func readSecret() throws -> [UInt8] {
            let limit = 1 << 20
            guard var bytes = try Files.readAll(0, limit: limit, path: "stdin") else {
                throw CLIError(.usage, "the secret on stdin exceeds \(limit) bytes")
            }
            if !raw {
                if bytes.last == 0x0A { bytes.removeLast() }
                if bytes.last == 0x0D { bytes.removeLast() }
            }
            guard !bytes.isEmpty else { throw CLIError(.usage, "the secret on stdin is empty") }
            return bytes
        }
    }
}
