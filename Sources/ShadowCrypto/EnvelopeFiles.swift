#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore

/// Stream-form envelope encryption between file descriptors and files, in memory bounded by
/// the chunk size. Output files appear only when complete; a decrypted file appears only after
/// the whole stream has authenticated.
public enum EnvelopeFiles {
    /// Encrypts everything readable from `input` and writes the envelope to `output`.
    /// - Parameter progress: called with the plaintext bytes consumed so far.
    public static func encrypt(
        input: Int32, output: Int32, kek: KeyEncryptionKey, context: EnvelopeContext = .none, chunkSize: Int = Envelope.defaultChunkSize,
        progress: ((Int) -> Void)? = nil
    ) throws {
        var encryptor = try EnvelopeStreamEncryptor(kek: kek, context: context, chunkSize: chunkSize)
        try encrypt(input: input, encryptor: &encryptor, chunkSize: chunkSize, output: output, progress: progress)
    }

    /// Encrypts `input` into a new file at `path` (mode 0600), atomically.
    public static func encrypt(
        input: Int32, toFile path: String, kek: KeyEncryptionKey, context: EnvelopeContext = .none, chunkSize: Int = Envelope.defaultChunkSize,
        progress: ((Int) -> Void)? = nil
    ) throws {
        let writer = try AtomicFileWriter(path: path)
        var encryptor = try EnvelopeStreamEncryptor(kek: kek, context: context, chunkSize: chunkSize)
        try encrypt(input: input, encryptor: &encryptor, chunkSize: chunkSize, output: writer.fd, progress: progress)
        try writer.commit()
    }

    /// Bytes read and written per system call.
    static let batchBytes = 1 << 20

    /// Reads `input` in large batches, seals them, and writes the envelope to `output` on a
    /// background thread, so that reading, sealing and the kernel's copying overlap.
    package static func encrypt(
        input: Int32, encryptor: inout EnvelopeStreamEncryptor, chunkSize: Int, output: Int32, progress: ((Int) -> Void)?
    ) throws {
        let batch = max(batchBytes, chunkSize)
        let writer = PipelinedWriter(fd: output, path: "output")
        // A regular file is sealed straight from a read-only mapping, batch by batch.
        if let mapped = MappedInput(fd: input) {
            do {
                var offset = 0
                while offset < mapped.bytes.count {
                    let end = min(offset + batch, mapped.bytes.count)
                    var pieces: [Data] = []
                    try encryptor.update(UnsafeRawBufferPointer(rebasing: mapped.bytes[offset..<end])) { pieces.append($0) }
                    try writer.submit(pieces)
                    mapped.release(max(0, offset - batch)..<offset)
                    offset = end
                    progress?(offset)
                }
                try writer.submit(try encryptor.finish())
            } catch {
                try? writer.drain()
                throw error
            }
            try writer.drain()
            return
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: batch, alignment: 64)
        defer { buffer.deallocate() }
        var consumed = 0
        do {
            while true {
                let count = try Files.readFull(input, into: buffer)
                if count == 0 { break }
                var pieces: [Data] = []
                try encryptor.update(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) { pieces.append($0) }
                try writer.submit(pieces)
                consumed += count
                progress?(consumed)
                if count < batch { break }
            }
            try writer.submit(try encryptor.finish())
        } catch {
            try? writer.drain()
            throw error
        }
        try writer.drain()
    }

    /// Decrypts `input` into a new file at `path` (mode 0600). Nothing appears at `path` unless the
    /// whole stream authenticates; the temporary file is removed on failure.
    public static func decrypt(
        input: Int32, toFile path: String, kek: KeyEncryptionKey, context: EnvelopeContext = .none, progress: ((Int) -> Void)? = nil
    ) throws {
        let writer = try AtomicFileWriter(path: path)
        var decryptor = EnvelopeStreamDecryptor(kek: kek, context: context)
        try decrypt(input: input, decryptor: &decryptor, output: writer.fd, progress: progress)
        try writer.commit()
    }

    /// Decrypts `input` and, only after the whole stream has authenticated, copies the
    /// plaintext to `output` (staged in a temporary file beside `stagingDirectory`).
    public static func decrypt(
        input: Int32, output: Int32, stagingDirectory: String, kek: KeyEncryptionKey, context: EnvelopeContext = .none, progress: ((Int) -> Void)? = nil
    ) throws {
        let writer = try AtomicFileWriter(path: stagingDirectory + "/.shadow-keys-decrypt")
        defer { writer.abort() }
        var decryptor = EnvelopeStreamDecryptor(kek: kek, context: context)
        try decrypt(input: input, decryptor: &decryptor, output: writer.fd, progress: progress)
        try writer.copyContents(to: output)
    }

    /// Feeds `input` to `decryptor` in large reads; released plaintext goes to `output` on a
    /// background thread. `output` must be a staging file: plaintext lands there chunk by chunk
    /// and is authentic as a whole only when this returns.
    package static func decrypt(input: Int32, decryptor: inout EnvelopeStreamDecryptor, initial: [UInt8] = [], output: Int32, progress: ((Int) -> Void)?) throws {
        let writer = PipelinedWriter(fd: output, path: "output")
        if initial.isEmpty, let mapped = MappedInput(fd: input) {
            do {
                var offset = 0
                while offset < mapped.bytes.count {
                    let end = min(offset + batchBytes, mapped.bytes.count)
                    var pieces: [Data] = []
                    try decryptor.update(UnsafeRawBufferPointer(rebasing: mapped.bytes[offset..<end])) { pieces.append($0) }
                    try writer.submit(pieces)
                    mapped.release(max(0, offset - batchBytes)..<offset)
                    offset = end
                    progress?(offset)
                }
                try writer.submit(try decryptor.finish())
            } catch {
                try? writer.drain()
                throw error
            }
            try writer.drain()
            return
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: batchBytes, alignment: 64)
        defer { buffer.deallocate() }
        var consumed = initial.count
        do {
            if !initial.isEmpty {
                var pieces: [Data] = []
                try initial.withUnsafeBytes { try decryptor.update($0) { pieces.append($0) } }
                try writer.submit(pieces)
            }
            while true {
                let count = try Files.readFull(input, into: buffer)
                if count == 0 { break }
                var pieces: [Data] = []
                try decryptor.update(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) { pieces.append($0) }
                try writer.submit(pieces)
                consumed += count
                progress?(consumed)
                if count < batchBytes { break }
            }
            try writer.submit(try decryptor.finish())
        } catch {
            try? writer.drain()
            throw error
        }
        try writer.drain()
    }
}
