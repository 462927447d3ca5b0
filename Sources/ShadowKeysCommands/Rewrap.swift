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

struct Rewrap: AsyncParsableCommand, QuietCommand {
    static let configuration = CommandConfiguration(
        commandName: "rewrap",
        abstract: "Re-wrap an envelope's data key under a new key-encryption key; the payload is copied untouched.",
        discussion:
            """
            Old key: --from-key-file or --from-passphrase-file/--from-passphrase-env. New key: --to-… likewise. Exit \
            codes as for decrypt.
            """
    )

    @Argument(help: "The envelope file.")
    var input: String

    @Option(name: .short, help: "The output file (written atomically); may equal the input.")
    var output: String

    @OptionGroup var from: FromKeyOptions
    @OptionGroup var to: ToKeyOptions
    @Option(name: .customLong("to-key-id"), help: "The new key id (at most 255 bytes; default empty).") var toKeyID:
        String = ""
    @Option(help: "PBKDF2 iterations for a new passphrase (100000 to 10000000).") var iterations: Int = PBKDF2
        .defaultIterations
    @Option(name: .customLong("context"), help: "The envelope's context pairs, key=value, in order.") var context:
        [String] = []

    @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

    func validate() throws {
        guard try from.input() != nil else {
            throw ValidationError(
                "give the current key: --from-key-file, --from-passphrase-file or --from-passphrase-env")
        }
        guard try to.input() != nil else {
            throw ValidationError("give the new key: --to-key-file, --to-passphrase-file or --to-passphrase-env")
        }
        try checkEnvelopeIterations(iterations)
        _ = try parseContext(context)
    }

    func run() async throws {
        try await reportingFailures(json: false) {
            guard let old = try from.input()?.kek(), let new = try to.input()?.kek(id: toKeyID, iterations: iterations)
            else {
                throw CLIError(.usage, "give the current and the new key")
            }
            let source = try InputFile(input)
            defer { source.close() }
            let head = try Files.readFull(source.fd, count: 512, path: source.name)
            let (header, replaced) = try Envelope.rewrapHeader(
                head, from: old, to: new, context: try parseContext(context))
            let writer = try AtomicFileWriter(path: output)
            try writer.write(header)
            try writer.write(head[replaced...])
            // The payload is copied as it is; an input that changes size meanwhile fails (65).
            do {
                var reader = InputReader(fd: source.fd, name: source.name)
                try reader.copyAll(to: writer.fd, path: output)
            } catch let error as InputReader.ChangedError {
                throw ShadowCryptoError(.inputChanged, error.description)
            }
            try writer.commit()
        }
    }
}
