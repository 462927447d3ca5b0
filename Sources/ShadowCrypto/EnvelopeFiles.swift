#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore

/// Stream-form envelope encryption between file descriptors and files, in memory bounded by
/// the chunk size. Output files appear only when complete; a decrypted file appears only after
/// the whole stream has authenticated.
///
/// Inputs are read with read(2), never mapped: a regular file that shrinks or grows while it is
/// read fails with ``ShadowCryptoError/Code/inputChanged`` (a mapping would die with SIGBUS).
public enum EnvelopeFiles {
    /// Encrypts everything readable from `input` and writes the envelope to `output`.
    /// - Parameter progress: called with the plaintext bytes consumed so far.
    public static func encrypt(
        input: Int32, output: Int32, kek: KeyEncryptionKey, context: EnvelopeContext = .none,
        chunkSize: Int = Envelope.defaultChunkSize,
        progress: ((Int) -> Void)? = nil
    ) throws {
        var encryptor = try EnvelopeStreamEncryptor(kek: kek, context: context, chunkSize: chunkSize)
        try encrypt(input: input, encryptor: &encryptor, chunkSize: chunkSize, output: output, progress: progress)
    }

    /// Encrypts `input` into a new file at `path` (mode 0600), atomically.
    public static func encrypt(
        input: Int32, toFile path: String, kek: KeyEncryptionKey, context: EnvelopeContext = .none,
        chunkSize: Int = Envelope.defaultChunkSize,
        progress: ((Int) -> Void)? = nil
    ) throws {
        let writer = try staging(path)
        var encryptor = try EnvelopeStreamEncryptor(kek: kek, context: context, chunkSize: chunkSize)
        try encrypt(input: input, encryptor: &encryptor, chunkSize: chunkSize, output: writer.fd, progress: progress)
        try commit(writer)
    }

    /// Bytes read and written per system call: 256 KiB keeps a stream's buffers (the read batch,
    /// its sealed pieces, and two batches queued for the writer) near 1 MiB, at the same speed as
    /// larger batches.
    static let batchBytes = 1 << 18

    /// Reads `input` in large batches, seals them, and writes the envelope to `output` on a
    /// background thread, so that sealing and the kernel's copying overlap.
    package static func encrypt(
        input: Int32, encryptor: inout EnvelopeStreamEncryptor, chunkSize: Int, output: Int32,
        progress: ((Int) -> Void)?
    ) throws {
        try pump(input: input, batch: max(batchBytes, chunkSize), output: output, progress: progress) { bytes, emit in
            try encryptor.update(bytes, emit: emit)
        } finish: {
            try encryptor.finish()
        }
    }

    /// Decrypts `input` into a new file at `path` (mode 0600). Nothing appears at `path` unless the
    /// whole stream authenticates, and the staging file never has a name of its own before then
    /// (see `AtomicFileWriter`).
    public static func decrypt(
        input: Int32, toFile path: String, kek: KeyEncryptionKey, context: EnvelopeContext = .none,
        progress: ((Int) -> Void)? = nil
    ) throws {
        let writer = try staging(path)
        var decryptor = EnvelopeStreamDecryptor(kek: kek, context: context)
        try decrypt(input: input, decryptor: &decryptor, output: writer.fd, progress: progress)
        try commit(writer)
    }

    /// Decrypts `input` and, only after the whole stream has authenticated, copies the
    /// plaintext to `output` (staged in a file in `stagingDirectory` that has no name on Linux).
    public static func decrypt(
        input: Int32, output: Int32, stagingDirectory: String, kek: KeyEncryptionKey, context: EnvelopeContext = .none,
        progress: ((Int) -> Void)? = nil
    ) throws {
        let writer = try staging(stagingDirectory + "/.shadow-keys-decrypt")
        defer { writer.abort() }
        var decryptor = EnvelopeStreamDecryptor(kek: kek, context: context)
        try decrypt(input: input, decryptor: &decryptor, output: writer.fd, progress: progress)
        do { try writer.copyContents(to: output) } catch let error as FileError {
            throw ShadowCryptoError(.io, error.description)
        }
    }

    /// Feeds `input` (after `initial`, bytes already read from it) to `decryptor` in large reads;
    /// released plaintext goes to `output` on a background thread. `output` must be a staging
    /// file: plaintext lands there chunk by chunk and is authentic as a whole only when this returns.
    package static func decrypt(
        input: Int32, decryptor: inout EnvelopeStreamDecryptor, initial: [UInt8] = [], output: Int32,
        progress: ((Int) -> Void)?
    ) throws {
        var pending = initial
        try pump(input: input, batch: batchBytes, output: output, progress: progress) { bytes, emit in
            if !pending.isEmpty {
                let head = pending
                pending = []
                try head.withUnsafeBytes { try decryptor.update($0, emit: emit) }
            }
            try decryptor.update(bytes, emit: emit)
        } finish: {
            if !pending.isEmpty {
                var pieces: [UInt8] = []
                try pending.withUnsafeBytes {
                    try decryptor.update($0) { piece in piece.withUnsafeBytes { pieces.append(contentsOf: $0) } }
                }
                pending = []
                return pieces + (try decryptor.finish())
            }
            return try decryptor.finish()
        }
    }

    /// The read-transform-write loop both directions share: batches from `input` go through
    /// `transform`, whose pieces a background writer puts on `output`; `finish` gives the tail.
    /// Any failure is reported after the writer has drained, so no write is left in flight.
    private static func pump(
        input: Int32, batch: Int, output: Int32, progress: ((Int) -> Void)?,
        _ transform: (UnsafeRawBufferPointer, (Data) throws -> Void) throws -> Void, finish: () throws -> [UInt8]
    ) throws {
        let writer = PipelinedWriter(fd: output, path: "output")
        var reader = InputReader(fd: input, name: "the input")
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: batch, alignment: 64)
        defer { buffer.deallocate() }
        do {
            while true {
                let count = try reader.read(into: buffer)
                if count == 0 { break }
                var pieces: [Data] = []
                try transform(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) { pieces.append($0) }
                try writer.submit(pieces)
                progress?(reader.consumed)
                if count < batch { break }
            }
            try writer.submit(try finish())
        } catch {
            try? writer.drain()
            throw translated(error)
        }
        do { try writer.drain() } catch { throw translated(error) }
    }

    /// File-level failures as this module's error.
    private static func translated(_ error: any Error) -> any Error {
        switch error {
        case let changed as InputReader.ChangedError: return ShadowCryptoError(.inputChanged, changed.description)
        case let file as FileError: return ShadowCryptoError(.io, file.description)
        default: return error
        }
    }

    private static func staging(_ path: String) throws -> AtomicFileWriter {
        do { return try AtomicFileWriter(path: path) } catch let error as FileError {
            throw ShadowCryptoError(.io, error.description)
        }
    }

    private static func commit(_ writer: AtomicFileWriter) throws {
        do { try writer.commit() } catch let error as FileError { throw ShadowCryptoError(.io, error.description) }
    }
}
