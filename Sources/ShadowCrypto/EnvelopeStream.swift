#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Crypto
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
        var out: [UInt8] = []
        if try data.withContiguousStorageIfAvailable({ try update(UnsafeRawBufferPointer($0), appendingTo: &out) }) == nil {
            try Array(data).withUnsafeBytes { try update($0, appendingTo: &out) }
        }
        return out
    }

    /// Takes more plaintext, appending the header (first time) and every sealed chunk now known
    /// not to be the last to `out`. Whole chunks are sealed straight from `data`.
    package mutating func update(_ data: UnsafeRawBufferPointer, appendingTo out: inout [UInt8]) throws {
        precondition(!finished, "update after finish")
        out += takeHeader()
        var offset = 0
        while offset < data.count {
            if pending.count == chunkSize {
                try pending.withUnsafeBytes { try sealer.seal($0, counter: try nextCounter(), last: false, appendingTo: &out) }
                pending.removeAll(keepingCapacity: true)
            }
            // With nothing pending, whole chunks that are surely not last are sealed in place.
            if pending.isEmpty {
                while data.count - offset > chunkSize {
                    try sealer.seal(UnsafeRawBufferPointer(rebasing: data[offset..<offset + chunkSize]), counter: try nextCounter(), last: false, appendingTo: &out)
                    offset += chunkSize
                }
            }
            let take = min(chunkSize - pending.count, data.count - offset)
            pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: data[offset..<offset + take]))
            offset += take
        }
    }

    /// Seals the final chunk (possibly empty, possibly full).
    public mutating func finish() throws -> [UInt8] {
        precondition(!finished, "finish twice")
        finished = true
        var out = takeHeader()
        try pending.withUnsafeBytes { try sealer.seal($0, counter: try nextCounter(), last: true, appendingTo: &out) }
        return out
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
        var out: [UInt8] = []
        if try data.withContiguousStorageIfAvailable({ try update(UnsafeRawBufferPointer($0), appendingTo: &out) }) == nil {
            try Array(data).withUnsafeBytes { try update($0, appendingTo: &out) }
        }
        return out
    }

    /// Takes more ciphertext, appending to `out` the plaintext of every chunk now known not to be
    /// the last. Sealed chunks are opened straight from `data` when nothing is buffered.
    package mutating func update(_ data: UnsafeRawBufferPointer, appendingTo out: inout [UInt8]) throws {
        var offset = 0
        if opener == nil {
            buffer.append(contentsOf: data)
            offset = data.count
            guard let (header, length) = try EnvelopeHeader.parse(buffer) else { return }
            guard header.form == .stream else { throw ShadowCryptoError(.invalidParameter, "this is a record envelope; open it with Envelope.open") }
            opener = try EnvelopeOpener(header: header, kek: kek, context: context)
            buffer.removeFirst(length)
        }
        guard let opener else { return }
        let sealedChunk = Int(opener.header.chunkSize) + AES256GCM.tagBytes
        // Complete a partly buffered chunk first.
        if !buffer.isEmpty {
            let take = min(sealedChunk + 1 - buffer.count, data.count - offset)
            if take > 0 {
                buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: data[offset..<offset + take]))
                offset += take
            }
            // A full chunk followed by at least one more byte cannot be the last.
            guard buffer.count > sealedChunk else { return }
            try buffer.withUnsafeBytes { try opener.open(UnsafeRawBufferPointer(rebasing: $0[..<sealedChunk]), counter: try nextCounter(), last: false, appendingTo: &out) }
            buffer.removeFirst(sealedChunk)
        }
        while buffer.isEmpty && data.count - offset > sealedChunk {
            try opener.open(UnsafeRawBufferPointer(rebasing: data[offset..<offset + sealedChunk]), counter: try nextCounter(), last: false, appendingTo: &out)
            offset += sealedChunk
        }
        buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: data[offset...]))
        while buffer.count > sealedChunk {
            try buffer.withUnsafeBytes { try opener.open(UnsafeRawBufferPointer(rebasing: $0[..<sealedChunk]), counter: try nextCounter(), last: false, appendingTo: &out) }
            buffer.removeFirst(sealedChunk)
        }
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
        var out: [UInt8] = []
        let counter = try nextCounter()
        try buffer.withUnsafeBytes { try opener.open($0, counter: counter, last: true, appendingTo: &out) }
        return out
    }

    private mutating func nextCounter() throws -> UInt32 {
        guard counter < UInt32.max else { throw ShadowCryptoError.authenticationFailure }
        defer { counter += 1 }
        return counter
    }
}
