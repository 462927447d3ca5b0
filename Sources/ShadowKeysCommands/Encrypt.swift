import ArgumentParser
#if canImport(Darwin)
import Darwin
import Foundation
#else
import Glibc
import FoundationEssentials
#endif
import ShadowCore
import ShadowCrypto

/// `--iterations` for a passphrase envelope: what readers accept, 100000 to 10000000.
func checkEnvelopeIterations(_ iterations: Int) throws {
    guard (PBKDF2.minimumIterations...Envelope.maxIterations).contains(iterations) else {
        throw ValidationError(
            "--iterations: \(PBKDF2.minimumIterations) to \(Envelope.maxIterations), not \(iterations)")
    }
}

/// `key=value` split at its first `=` byte (so a value may hold `=`, and one that begins with a
/// combining mark, which a split by Character would join to the `=`, is still split); nil when
/// there is no `=` or the key is empty.
func keyValue(_ item: String) -> (key: String, value: String)? {
    let halves = item.split(byte: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
    guard halves.count == 2, !halves[0].isEmpty else { return nil }
    return (String(halves[0]), String(halves[1]))
}

/// `--context k=v`, repeatable, in order: each value splits at its first `=` (so a value may
/// hold `=`); the key must not be empty.
func parseContext(_ items: [String]) throws -> EnvelopeContext {
    let pairs = try items.map { item -> (String, String) in
        guard let pair = keyValue(item) else { throw ValidationError("--context \(item): expected key=value") }
        return pair
    }
    do { return try EnvelopeContext(pairs) } catch let error as ShadowCryptoError {
        throw ValidationError("--context: \(error.reason)")
    }
}

struct Encrypt: AsyncParsableCommand, QuietCommand {
    static let configuration = CommandConfiguration(
        commandName: "encrypt",
        abstract: "Encrypt a file or stdin into a ShadowKeys envelope (stream form, or --record).",
        discussion:
            """
            Exit 0, 64 for usage errors, 65 for an input the record form cannot hold, 66 when the input cannot be \
            opened. Format: Docs/envelope-format.md.
            """
    )

    @Argument(help: "The input file, or '-' for stdin.")
    var input: String = "-"

    @Option(name: .short, help: "The output file (written atomically, mode 0600), or '-' for stdout.")
    var output: String = "-"

    @OptionGroup var key: KEKOptions

    @Option(
        name: .customLong("key-id"),
        help: "A key id stored in the header, for rotation (at most 255 bytes; default empty).")
    var keyID: String = ""

    @Option(
        name: .customLong("context"),
        help: "A context pair key=value, repeatable, in order; decryption must give the same.")
    var context: [String] = []

    @Option(name: .customLong("chunk-size"), help: "Stream chunk size in bytes: a power of two from 64 to 16777216.")
    var chunkSize: Int = Envelope.defaultChunkSize

    @Option(help: "PBKDF2 iterations for a passphrase (at least 100000).")
    var iterations: Int = PBKDF2.defaultIterations

    @Flag(help: "Use the record (single-shot) form; the input must be at most 1 MiB.")
    var record = false

    @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

    func validate() throws {
        if (try key.input())?.usesStdin == true && input == "-" {
            throw ValidationError("the passphrase and the input cannot both come from stdin")
        }
        try checkEnvelopeIterations(iterations)
        guard EnvelopeHeader.validChunkSize(chunkSize) else {
            throw ValidationError("--chunk-size must be a power of two from 64 to 16777216")
        }
        _ = try parseContext(context)
    }

    func run() async throws {
        try await reportingFailures(json: false) {
            let kek = try key.required(confirm: true).kek(id: keyID, iterations: iterations)
            let context = try parseContext(self.context)
            let source = try InputFile(input)
            defer { source.close() }
            let progress = Progress(verb: "encrypting", total: source.size)
            try withOutput(output) { fd in
                if record {
                    guard
                        let plaintext = try Files.readAll(source.fd, limit: Envelope.maxRecordBytes, path: source.name)
                    else {
                        throw CLIError(
                            .malformedInput,
                            """
                            the record form holds at most \(Envelope.maxRecordBytes) bytes; drop --record to use the \
                            stream form
                            """
                        )
                    }
                    try Files.writeAll(fd, try Envelope.seal(plaintext, kek: kek, context: context), path: output)
                } else {
                    var encryptor = try EnvelopeStreamEncryptor(kek: kek, context: context, chunkSize: chunkSize)
                    try EnvelopeFiles.encrypt(
                        input: source.fd, encryptor: &encryptor, chunkSize: chunkSize, output: fd,
                        progress: progress.update)
                }
            }
            progress.finish()
        }
    }
}
