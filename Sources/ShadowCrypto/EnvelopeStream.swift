#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
/// Encrypts a stream in fixed-size chunks, in memory bounded by the chunk size.
///
/// Feed plaintext with ``update(_:)`` and write out what it returns; ``finish()`` seals the last
/// chunk. The first bytes returned are the header.
public struct EnvelopeStreamEncryptor {
    private let sealer: EnvelopeSealer
    private let chunkSize: Int
    private var pending: [UInt8] = []
    private var counter: UInt32 = 0
    private var headerWritten = false
    private var finished = false

    /// An encryptor; `chunkSize` must be a power of two from 64 bytes to 16 MiB (default 64 KiB).
    public init(kek: KeyEncryptionKey, context: EnvelopeContext = .none, chunkSize: Int = Envelope.defaultChunkSize) throws {
        try self.init(kek: kek, context: context, chunkSize: chunkSize, randomness: .fresh())
    }

    package init(kek: KeyEncryptionKey, context: EnvelopeContext, chunkSize: Int, randomness: EnvelopeRandomness) throws {
        guard EnvelopeHeader.chunkSizes.contains(chunkSize), chunkSize.nonzeroBitCount == 1 else {
            throw ShadowCryptoError(.invalidParameter, "chunk size \(chunkSize) is not a power of two between 64 bytes and 16 MiB")
        }
        sealer = try EnvelopeSealer(form: .stream, chunkSize: chunkSize, kek: kek, context: context, randomness: randomness)
        self.chunkSize = chunkSize
        pending.reserveCapacity(chunkSize)
    }

    /// The header bytes.
    public var header: [UInt8] { sealer.header.serialized }

    /// Takes more plaintext; returns the header (first time) and every chunk now known not to be the last.
    public mutating func update(_ data: some Collection<UInt8>) throws -> [UInt8] {
        precondition(!finished, "update after finish")
        var out = takeHeader()
        var remaining = data[...]
        while !remaining.isEmpty {
            if pending.count == chunkSize {
                out += try sealer.seal(pending, counter: try nextCounter(), last: false)
                pending.removeAll(keepingCapacity: true)
            }
            let take = min(chunkSize - pending.count, remaining.count)
            pending += remaining.prefix(take)
            remaining = remaining.dropFirst(take)
        }
        return out
    }

    /// Seals the final chunk (possibly empty, possibly full).
    public mutating func finish() throws -> [UInt8] {
        precondition(!finished, "finish twice")
        finished = true
        return takeHeader() + (try sealer.seal(pending, counter: try nextCounter(), last: true))
    }

    private mutating func takeHeader() -> [UInt8] {
        guard !headerWritten else { return [] }
        headerWritten = true
        return header
    }

    private mutating func nextCounter() throws -> UInt32 {
        guard counter < UInt32.max else { throw ShadowCryptoError(.invalidParameter, "stream exceeds 2^32 chunks") }
        defer { counter += 1 }
        return counter
    }
}

/// Decrypts a stream, releasing plaintext only chunk by authenticated chunk, in memory bounded
/// by the chunk size. Truncation, reordering, duplication and extension all fail authentication;
/// the whole stream is authentic only once ``finish()`` returns.
public struct EnvelopeStreamDecryptor {
    private let kek: KeyEncryptionKey
    private let context: EnvelopeContext
    private var opener: EnvelopeOpener?
    private var buffer: [UInt8] = []
    private var counter: UInt32 = 0

    /// A decryptor for envelopes sealed with `kek` and `context`.
    public init(kek: KeyEncryptionKey, context: EnvelopeContext = .none) {
        self.kek = kek
        self.context = context
    }

    /// What the header says, once it has arrived.
    public var description: EnvelopeDescription? {
        guard let opener else { return nil }
        return try? Envelope.describe(opener.header.serialized)
    }

    /// Takes more ciphertext; returns plaintext of every chunk now known not to be the last.
    public mutating func update(_ data: some Collection<UInt8>) throws -> [UInt8] {
        buffer += data
        if opener == nil {
            guard let (header, length) = try EnvelopeHeader.parse(buffer) else { return [] }
            guard header.form == .stream else { throw ShadowCryptoError(.invalidParameter, "this is a record envelope; open it with Envelope.open") }
            opener = try EnvelopeOpener(header: header, kek: kek, context: context)
            buffer.removeFirst(length)
        }
        guard let opener else { return [] }
        let sealedChunk = Int(opener.header.chunkSize) + AES256GCM.tagBytes
        var out: [UInt8] = []
        var start = 0
        // A full chunk followed by at least one more byte cannot be the last.
        while buffer.count - start > sealedChunk {
            out += try opener.open(buffer[start..<start + sealedChunk], counter: try nextCounter(), last: false)
            start += sealedChunk
        }
        if start > 0 { buffer.removeFirst(start) }
        return out
    }

    /// Opens the final chunk; fails if the stream was cut short.
    public mutating func finish() throws -> [UInt8] {
        guard let opener else {
            if buffer.isEmpty { throw ShadowCryptoError(.malformedInput, "the input is empty") }
            if buffer.count < 4 || Array(buffer.prefix(4)) == EnvelopeHeader.magic {
                throw ShadowCryptoError(.malformedInput, "the input ends inside the envelope header")
            }
            throw ShadowCryptoError(.malformedInput, "not a ShadowKeys envelope (bad magic)")
        }
        guard buffer.count >= AES256GCM.tagBytes else { throw ShadowCryptoError.authenticationFailure }
        defer { buffer.removeAll() }
        return try opener.open(buffer, counter: try nextCounter(), last: true)
    }

    private mutating func nextCounter() throws -> UInt32 {
        guard counter < UInt32.max else { throw ShadowCryptoError.authenticationFailure }
        defer { counter += 1 }
        return counter
    }
}
