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

struct Decrypt: AsyncParsableCommand, QuietCommand {
    static let configuration = CommandConfiguration(
        commandName: "decrypt",
        abstract: "Decrypt a ShadowKeys envelope (either form).",
        discussion: """
            Nothing is written to the destination until the whole envelope has authenticated: a file \
            appears by rename, stdout receives the plaintext after the last chunk verified. \
            Exit 20 for any authentication failure (wrong key or passphrase, wrong context, \
            tampering, truncation), 65 for input that is not an envelope, 66 when the input \
            cannot be opened, 64 for usage errors.
            """
    )

    @Argument(help: "The envelope file, or '-' for stdin.")
    var input: String = "-"

    @Option(name: .short, help: "The output file (written atomically, mode 0600), or '-' for stdout.")
    var output: String = "-"

    @OptionGroup var key: KEKOptions

    @Option(name: .customLong("context"), help: "The context pairs the envelope was sealed with, key=value, in order.")
    var context: [String] = []

    @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

    func validate() throws {
        if (try key.input())?.usesStdin == true && input == "-" {
            throw ValidationError("the passphrase and the input cannot both come from stdin")
        }
        _ = try parseContext(context)
    }

    func run() async throws {
        try await reportingFailures(json: false) {
            let kek = try key.required().kek()
            let context = try parseContext(self.context)
            let source = try InputFile(input)
            defer { source.close() }
            let progress = Progress(verb: "decrypting", total: source.size)
            let stagingDirectory =
                output == "-"
                ? (ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp") : Files.parentDirectory(output)
            if output == "-" && isatty(1) == 1 {
                throw CLIError(.usage, "refusing to write decrypted data to a terminal; use -o FILE or a pipe")
            }
            // Both forms go through the stream reader, which knows a record by its header.
            let writer = try AtomicFileWriter(path: output == "-" ? stagingDirectory + "/.shadow-keys-decrypt" : output)
            defer { writer.abort() }
            // A regular file is peeked at with pread, so the stream path can map it whole.
            let seekable = source.size != nil
            let head =
                seekable
                ? try Files.peek(source.fd, count: 512, path: source.name)
                : try Files.readFull(source.fd, count: 512, path: source.name)
            if (try? Envelope.describe(head))?.form == .record {
                guard let whole = try Files.readAll(source.fd, limit: Envelope.maxRecordBytes + 1024, path: source.name)
                else {
                    throw CLIError(.malformedInput, "a record envelope holds at most \(Envelope.maxRecordBytes) bytes")
                }
                try writer.write(try Envelope.open(seekable ? whole : head + whole, kek: kek, context: context))
            } else {
                var decryptor = EnvelopeStreamDecryptor(kek: kek, context: context)
                try EnvelopeFiles.decrypt(
                    input: source.fd, decryptor: &decryptor, initial: seekable ? [] : head, output: writer.fd,
                    progress: progress.update)
            }
            progress.finish()
            if output == "-" { try writer.copyContents(to: 1) } else { try writer.commit() }
        }
    }
}
