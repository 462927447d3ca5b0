#if canImport(FoundationEssentials)
import ShadowCore
package import FoundationEssentials
#else
package import Foundation
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
    public init(
        kek: KeyEncryptionKey, context: EnvelopeContext = .none, chunkSize: Int = Envelope.defaultChunkSize
    ) throws {
        try self.init(kek: kek, context: context, chunkSize: chunkSize, randomness: .fresh())
    }

    package init(kek: KeyEncryptionKey, context: EnvelopeContext, chunkSize: Int, randomness: EnvelopeRandomness) throws
    {
        guard EnvelopeHeader.chunkSizes.contains(chunkSize), chunkSize.nonzeroBitCount == 1 else {
            throw ShadowCryptoError(
                .invalidParameter, "chunk size \(chunkSize) is not a power of two between 64 bytes and 16 MiB")
        }
        sealer = try EnvelopeSealer(
            form: .stream, chunkSize: chunkSize, kek: kek, context: context, randomness: randomness)
        self.chunkSize = chunkSize
        pending.reserveCapacity(chunkSize)
    }

    /// The header bytes.
    public var header: [UInt8] { sealer.header.serialized }

    /// Takes more plaintext; returns the header (first time) and every chunk now known not to be the last.
    public mutating func update(_ data: some Collection<UInt8>) throws -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(data.count + (data.count / chunkSize + 2) * AES256GCM.tagBytes + EnvelopeHeader.maxBytes)
        let emit: (Data) -> Void = { piece in piece.withUnsafeBytes { out.append(contentsOf: $0) } }
        if try data.withContiguousStorageIfAvailable({ try update(UnsafeRawBufferPointer($0), emit: emit) }) == nil {
            try Array(data).withUnsafeBytes { try update($0, emit: emit) }
        }
        return out
    }

    /// Takes more plaintext, handing the header (first time) and every sealed chunk now known
    /// not to be the last to `emit`. Whole chunks are sealed straight from `data`.
    package mutating func update(_ data: UnsafeRawBufferPointer, emit: (Data) throws -> Void) throws {
        precondition(!finished, "update after finish")
        let header = takeHeader()
        if !header.isEmpty { try emit(Data(header)) }
        var offset = 0
        while offset < data.count {
            if pending.count == chunkSize {
                try pending.withUnsafeBytes { try sealer.seal($0, counter: try nextCounter(), last: false, emit: emit) }
                pending.removeAll(keepingCapacity: true)
            }
            // With nothing pending, whole chunks that are surely not last are sealed in place.
            if pending.isEmpty {
                while data.count - offset > chunkSize {
                    try sealer.seal(
                        UnsafeRawBufferPointer(rebasing: data[offset..<offset + chunkSize]), counter: try nextCounter(),
                        last: false, emit: emit)
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
        try pending.withUnsafeBytes {
            try sealer.seal($0, counter: try nextCounter(), last: true) { piece in
                piece.withUnsafeBytes { out.append(contentsOf: $0) }
            }
        }
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
        out.reserveCapacity(data.count)
        let emit: (Data) -> Void = { piece in piece.withUnsafeBytes { out.append(contentsOf: $0) } }
        if try data.withContiguousStorageIfAvailable({ try update(UnsafeRawBufferPointer($0), emit: emit) }) == nil {
            try Array(data).withUnsafeBytes { try update($0, emit: emit) }
        }
        return out
    }

    /// Takes more ciphertext, handing to `emit` the plaintext of every chunk now known not to be
    /// the last. Sealed chunks are opened straight from `data` when nothing is buffered; at most
    /// one sealed chunk (plus a header) is ever buffered.
    package mutating func update(_ data: UnsafeRawBufferPointer, emit: (Data) throws -> Void) throws {
        var offset = 0
        if opener == nil {
            // Buffer only what the header can need, then continue from `data` itself.
            let before = buffer.count
            let take = min(data.count, EnvelopeHeader.maxBytes - before)
            buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: data[0..<take]))
            guard let (header, length) = try EnvelopeHeader.parse(buffer) else {
                if buffer.count >= EnvelopeHeader.maxBytes {
                    throw ShadowCryptoError(.malformedInput, "the envelope header is malformed")
                }
                return
            }
            guard header.form == .stream else {
                throw ShadowCryptoError(.invalidParameter, "this is a record envelope; open it with Envelope.open")
            }
            opener = try EnvelopeOpener(header: header, kek: kek, context: context)
            buffer.removeAll()
            offset = length - before
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
            let counter = try nextCounter()
            try buffer.withUnsafeBytes {
                try opener.open(
                    UnsafeRawBufferPointer(rebasing: $0[..<sealedChunk]), counter: counter, last: false, emit: emit)
            }
            buffer.removeFirst(sealedChunk)
        }
        while data.count - offset + buffer.count > sealedChunk {
            if buffer.isEmpty {
                try opener.open(
                    UnsafeRawBufferPointer(rebasing: data[offset..<offset + sealedChunk]), counter: try nextCounter(),
                    last: false, emit: emit)
                offset += sealedChunk
            } else {
                // One byte carried over from above: finish that chunk from `data`.
                let take = sealedChunk - buffer.count
                buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: data[offset..<offset + take]))
                offset += take
                let counter = try nextCounter()
                try buffer.withUnsafeBytes { try opener.open($0, counter: counter, last: false, emit: emit) }
                buffer.removeAll(keepingCapacity: true)
            }
        }
        buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: data[offset...]))
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
        // An empty final chunk is valid only as the whole stream's one chunk: after full chunks,
        // the last full chunk is the final one, so each plaintext has one encoding.
        guard counter == 0 || buffer.count > AES256GCM.tagBytes else { throw ShadowCryptoError.authenticationFailure }
        defer { buffer.removeAll() }
        var out: [UInt8] = []
        let counter = try nextCounter()
        try buffer.withUnsafeBytes {
            try opener.open($0, counter: counter, last: true) { piece in
                piece.withUnsafeBytes { out.append(contentsOf: $0) }
            }
        }
        return out
    }

    private mutating func nextCounter() throws -> UInt32 {
        guard counter < UInt32.max else { throw ShadowCryptoError.authenticationFailure }
        defer { counter += 1 }
        return counter
    }
}
