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
        try encrypt(input: input, encryptor: &encryptor, chunkSize: chunkSize, progress: progress) { try Files.writeAll(output, $0, path: "output") }
    }

    /// Encrypts `input` into a new file at `path` (mode 0600), atomically.
    public static func encrypt(
        input: Int32, toFile path: String, kek: KeyEncryptionKey, context: EnvelopeContext = .none, chunkSize: Int = Envelope.defaultChunkSize,
        progress: ((Int) -> Void)? = nil
    ) throws {
        let writer = try AtomicFileWriter(path: path)
        var encryptor = try EnvelopeStreamEncryptor(kek: kek, context: context, chunkSize: chunkSize)
        try encrypt(input: input, encryptor: &encryptor, chunkSize: chunkSize, progress: progress) { try writer.write($0) }
        try writer.commit()
    }

    package static func encrypt(
        input: Int32, encryptor: inout EnvelopeStreamEncryptor, chunkSize: Int, progress: ((Int) -> Void)?, write: ([UInt8]) throws -> Void
    ) throws {
        var buffer = [UInt8](repeating: 0, count: chunkSize)
        var consumed = 0
        while true {
            let count = try buffer.withUnsafeMutableBytes { try Files.readFull(input, into: $0) }
            if count == 0 { break }
            try write(try encryptor.update(buffer[0..<count]))
            consumed += count
            progress?(consumed)
            if count < chunkSize { break }
        }
        try write(try encryptor.finish())
    }

    /// Decrypts `input` into a new file at `path` (mode 0600). Nothing appears at `path` unless the
    /// whole stream authenticates; the temporary file is removed on failure.
    public static func decrypt(
        input: Int32, toFile path: String, kek: KeyEncryptionKey, context: EnvelopeContext = .none, progress: ((Int) -> Void)? = nil
    ) throws {
        let writer = try AtomicFileWriter(path: path)
        try decrypt(input: input, kek: kek, context: context, progress: progress) { try writer.write($0) }
        try writer.commit()
    }

    /// Decrypts `input` and, only after the whole stream has authenticated, copies the
    /// plaintext to `output` (staged in a temporary file beside `stagingDirectory`).
    public static func decrypt(
        input: Int32, output: Int32, stagingDirectory: String, kek: KeyEncryptionKey, context: EnvelopeContext = .none, progress: ((Int) -> Void)? = nil
    ) throws {
        let writer = try AtomicFileWriter(path: stagingDirectory + "/.shadow-keys-decrypt")
        defer { writer.abort() }
        try decrypt(input: input, kek: kek, context: context, progress: progress) { try writer.write($0) }
        try writer.copyContents(to: output)
    }

    private static func decrypt(input: Int32, kek: KeyEncryptionKey, context: EnvelopeContext, progress: ((Int) -> Void)?, write: ([UInt8]) throws -> Void) throws {
        var decryptor = EnvelopeStreamDecryptor(kek: kek, context: context)
        var buffer = [UInt8](repeating: 0, count: Envelope.defaultChunkSize + AES256GCM.tagBytes)
        var consumed = 0
        while true {
            let count = try buffer.withUnsafeMutableBytes { try Files.readFull(input, into: $0) }
            if count == 0 { break }
            let plaintext = try decryptor.update(buffer[0..<count])
            if !plaintext.isEmpty { try write(plaintext) }
            consumed += count
            progress?(consumed)
            if count < buffer.count { break }
        }
        try write(try decryptor.finish())
    }
}
