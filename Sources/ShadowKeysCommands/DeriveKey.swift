import ArgumentParser
import ShadowCore
import ShadowCrypto

struct DeriveKey: AsyncParsableCommand, QuietCommand {
    static let configuration = CommandConfiguration(
        commandName: "derive-key",
        abstract: "Derive a key with PBKDF2-HMAC-SHA256 and print it as hex.",
        discussion: "The passphrase comes from --passphrase-stdin, --passphrase-file or --passphrase-env, never argv."
    )

    @Option(name: .customLong("salt-hex"), help: "The salt, in hex (at least 16 bytes).")
    var saltHex: String

    @Option(help: "PBKDF2 iterations (at least 100000; OWASP currently recommends 600000).")
    var iterations: Int = PBKDF2.defaultIterations

    @Option(help: "Output length in bytes.")
    var length: Int = PBKDF2.defaultLength

    @OptionGroup var passphrase: PassphraseOptions

    @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

    func validate() throws {
        guard try passphrase.input() != nil else {
            throw ValidationError("give the passphrase with --passphrase-stdin, --passphrase-file or --passphrase-env")
        }
        guard let salt = try? Hex.decode(saltHex) else { throw ValidationError("--salt-hex is not hex") }
        guard salt.count >= PBKDF2.minimumSaltBytes else {
            throw ValidationError(
                "--salt-hex: the salt is \(salt.count) bytes; at least \(PBKDF2.minimumSaltBytes) are required")
        }
        guard iterations >= PBKDF2.minimumIterations else {
            throw ValidationError("--iterations: at least \(PBKDF2.minimumIterations)")
        }
        guard iterations <= PBKDF2.maximumIterations else {
            throw ValidationError("--iterations: at most \(PBKDF2.maximumIterations)")
        }
        guard (1...1024).contains(length) else { throw ValidationError("--length: 1 to 1024 bytes") }
    }

    func run() async throws {
        try await reportingFailures(json: false) {
            guard let secret = try passphrase.input()?.secret() else { throw CLIError(.usage, "no passphrase given") }
            let key = try PBKDF2.deriveKey(
                passphrase: secret, salt: try Hex.decode(saltHex), iterations: iterations, length: length)
            Console.out(key.withUnsafeBytes { Hex.encode($0) })
        }
    }
}
