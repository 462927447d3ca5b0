import ArgumentParser
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowCrypto

/// An input file or stdin, opened for reading.
struct InputFile {
    let fd: Int32
    let name: String
    let size: Int?

    init(_ path: String) throws {
        if path == "-" {
            fd = 0
            name = "stdin"
        } else {
            fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw CLIError(.noInput, "cannot open \(path): \(String(cString: strerror(errno)))") }
            name = path
        }
        var info = stat()
        size = fstat(fd, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG ? Int(info.st_size) : nil
    }

    func close() { if fd > 0 { _ = Glibc.close(fd) } }
}

/// Progress on stderr for large inputs, only when stderr is a terminal.
final class Progress {
    private let total: Int
    private let verb: String
    private var lastDraw = 0.0
    private let enabled: Bool

    init(verb: String, total: Int?) {
        self.verb = verb
        self.total = total ?? 0
        enabled = isatty(2) == 1 && (total ?? 0) >= 16 << 20
    }

    func update(_ done: Int) {
        guard enabled else { return }
        let now = monotonicSeconds()
        guard now - lastDraw >= 0.1 || done >= total else { return }
        lastDraw = now
        let fraction = total > 0 ? min(1, Double(done) / Double(total)) : 0
        let filled = Int(fraction * 30)
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: 30 - filled)
        Console.errNoNewline("\r\(verb) [\(bar)] \(Int(fraction * 100))% \(done >> 20)/\(total >> 20) MiB")
    }

    func finish() { if enabled { Console.err("") } }
}

/// Runs `body` with the descriptor to write to: a new file that appears atomically when `body`
/// succeeds, or stdout.
func withOutput(_ path: String, _ body: (_ fd: Int32) throws -> Void) throws {
    if path == "-" {
        guard isatty(1) == 0 else { throw CLIError(.usage, "refusing to write binary data to a terminal; use -o FILE or a pipe") }
        try body(1)
        return
    }
    let writer = try AtomicFileWriter(path: path)
    try body(writer.fd)
    try writer.commit()
}

/// `--iterations` for a passphrase envelope: what readers accept, 100000 to 10000000.
func checkEnvelopeIterations(_ iterations: Int) throws {
    guard (PBKDF2.minimumIterations...Envelope.maxIterations).contains(iterations) else {
        throw ValidationError("--iterations: \(PBKDF2.minimumIterations) to \(Envelope.maxIterations), not \(iterations)")
    }
}

struct Encrypt: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Encrypt a file or stdin into a ShadowKeys envelope (stream form, or --record).",
        discussion: "Exit 0, 64 for usage errors, 65 for an input the record form cannot hold, 66 when the input cannot be opened. Format: Docs/envelope-format.md."
    )

    @Argument(help: "The input file, or '-' for stdin.")
    var input: String = "-"

    @Option(name: .short, help: "The output file (written atomically, mode 0600), or '-' for stdout.")
    var output: String = "-"

    @OptionGroup var key: KEKOptions

    @Option(name: .customLong("key-id"), help: "A key id stored in the header (for rotation).")
    var keyID: String = ""

    @Option(name: .customLong("context"), help: "A context pair key=value, repeatable, in order; decryption must give the same.")
    var context: [String] = []

    @Option(name: .customLong("chunk-size"), help: "Stream chunk size in bytes: a power of two from 64 to 16777216.")
    var chunkSize: Int = Envelope.defaultChunkSize

    @Option(help: "PBKDF2 iterations for a passphrase (at least 100000).")
    var iterations: Int = PBKDF2.defaultIterations

    @Flag(help: "Use the record (single-shot) form; the input must be at most 1 MiB.")
    var record = false

    func validate() throws {
        if key.usesStdin && input == "-" { throw ValidationError("the passphrase and the input cannot both come from stdin") }
        try checkEnvelopeIterations(iterations)
        guard EnvelopeHeader.validChunkSize(chunkSize) else { throw ValidationError("--chunk-size must be a power of two from 64 to 16777216") }
        _ = try parseContext(context)
    }

    func run() async throws {
        try await reportingFailures(json: false) {
            let kek = try key.kek(id: keyID, iterations: iterations)
            let context = try parseContext(self.context)
            let source = try InputFile(input)
            defer { source.close() }
            let progress = Progress(verb: "encrypting", total: source.size)
            try withOutput(output) { fd in
                if record {
                    guard let plaintext = try Files.readAll(source.fd, limit: Envelope.maxRecordBytes, path: source.name) else {
                        throw CLIError(.malformedInput, "the record form holds at most \(Envelope.maxRecordBytes) bytes; drop --record to use the stream form")
                    }
                    try Files.writeAll(fd, try Envelope.seal(plaintext, kek: kek, context: context), path: output)
                } else {
                    var encryptor = try EnvelopeStreamEncryptor(kek: kek, context: context, chunkSize: chunkSize)
                    try EnvelopeFiles.encrypt(input: source.fd, encryptor: &encryptor, chunkSize: chunkSize, output: fd, progress: progress.update)
                }
            }
            progress.finish()
        }
    }
}

struct Decrypt: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Decrypt a ShadowKeys envelope (either form).",
        discussion: """
            Nothing is written to the destination until the whole envelope has authenticated: a file
            appears by rename, stdout receives the plaintext after the last chunk verified.
            Exit 20 for any authentication failure (wrong key or passphrase, wrong context,
            tampering, truncation), 65 for input that is not an envelope, 66 when the input
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

    func validate() throws {
        if key.usesStdin && input == "-" { throw ValidationError("the passphrase and the input cannot both come from stdin") }
        _ = try parseContext(context)
    }

    func run() async throws {
        try await reportingFailures(json: false) {
            let kek = try key.kek()
            let context = try parseContext(self.context)
            let source = try InputFile(input)
            defer { source.close() }
            let progress = Progress(verb: "decrypting", total: source.size)
            let stagingDirectory = output == "-" ? (ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp") : Files.parentDirectory(output)
            if output == "-" && isatty(1) == 1 { throw CLIError(.usage, "refusing to write decrypted data to a terminal; use -o FILE or a pipe") }
            // Both forms go through the stream reader, which knows a record by its header.
            let writer = try AtomicFileWriter(path: output == "-" ? stagingDirectory + "/.shadow-keys-decrypt" : output)
            defer { writer.abort() }
            // A regular file is peeked at with pread, so the stream path can map it whole.
            let seekable = source.size != nil
            let head = seekable ? try Files.peek(source.fd, count: 512, path: source.name) : try Files.readFull(source.fd, count: 512, path: source.name)
            if (try? Envelope.describe(head))?.form == .record {
                guard let whole = try Files.readAll(source.fd, limit: Envelope.maxRecordBytes + 1024, path: source.name) else {
                    throw CLIError(.malformedInput, "a record envelope holds at most \(Envelope.maxRecordBytes) bytes")
                }
                try writer.write(try Envelope.open(seekable ? whole : head + whole, kek: kek, context: context))
            } else {
                var decryptor = EnvelopeStreamDecryptor(kek: kek, context: context)
                try EnvelopeFiles.decrypt(input: source.fd, decryptor: &decryptor, initial: seekable ? [] : head, output: writer.fd, progress: progress.update)
            }
            progress.finish()
            if output == "-" { try writer.copyContents(to: 1) } else { try writer.commit() }
        }
    }
}

struct Rewrap: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Re-wrap an envelope's data key under a new key-encryption key; the payload is copied untouched.",
        discussion: "Old key: --from-key-file or --from-passphrase-file/--from-passphrase-env. New key: --to-… likewise. Exit codes as for decrypt."
    )

    @Argument(help: "The envelope file.")
    var input: String

    @Option(name: .short, help: "The output file (written atomically); may equal the input.")
    var output: String

    @Option(name: .customLong("from-key-file")) var fromKeyFile: String?
    @Option(name: .customLong("from-passphrase-file")) var fromPassphraseFile: String?
    @Option(name: .customLong("from-passphrase-env")) var fromPassphraseEnv: String?
    @Option(name: .customLong("to-key-file")) var toKeyFile: String?
    @Option(name: .customLong("to-passphrase-file")) var toPassphraseFile: String?
    @Option(name: .customLong("to-passphrase-env")) var toPassphraseEnv: String?
    @Option(name: .customLong("to-key-id"), help: "The new key id.") var toKeyID: String = ""
    @Option(help: "PBKDF2 iterations for a new passphrase.") var iterations: Int = PBKDF2.defaultIterations
    @Option(name: .customLong("context"), help: "The envelope's context pairs, key=value, in order.") var context: [String] = []

    func validate() throws {
        guard [fromKeyFile, fromPassphraseFile, fromPassphraseEnv].compactMap({ $0 }).count == 1 else { throw ValidationError("give exactly one --from-… key") }
        guard [toKeyFile, toPassphraseFile, toPassphraseEnv].compactMap({ $0 }).count == 1 else { throw ValidationError("give exactly one --to-… key") }
        try checkEnvelopeIterations(iterations)
        _ = try parseContext(context)
    }

    private func kek(keyFile: String?, passphraseFile: String?, passphraseEnv: String?, id: String) throws -> KeyEncryptionKey {
        if let keyFile { return try .raw(try readKeyFile(keyFile), id: id) }
        let options = try PassphraseOptions.parse(passphraseFile.map { ["--passphrase-file", $0] } ?? ["--passphrase-env", passphraseEnv ?? ""])
        guard let secret = try options.read() else { throw CLIError(.usage, "no passphrase given") }
        return try .passphrase(secret, id: id, iterations: iterations)
    }

    func run() async throws {
        try await reportingFailures(json: false) {
            let old = try kek(keyFile: fromKeyFile, passphraseFile: fromPassphraseFile, passphraseEnv: fromPassphraseEnv, id: "")
            let new = try kek(keyFile: toKeyFile, passphraseFile: toPassphraseFile, passphraseEnv: toPassphraseEnv, id: toKeyID)
            let source = try InputFile(input)
            defer { source.close() }
            let head = try Files.readFull(source.fd, count: 512, path: source.name)
            let (header, replaced) = try Envelope.rewrapHeader(head, from: old, to: new, context: try parseContext(context))
            let writer = try AtomicFileWriter(path: output)
            try writer.write(header)
            try writer.write(head[replaced...])
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while true {
                let count = try buffer.withUnsafeMutableBytes { try Files.readFull(source.fd, into: $0, path: source.name) }
                if count == 0 { break }
                try writer.write(buffer[0..<count])
            }
            try writer.commit()
        }
    }
}
