import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore

/// The random values one envelope needs. Sealing draws them from swift-crypto's generator;
/// vector generation supplies fixed ones.
package struct EnvelopeRandomness: Sendable {
    package var dataKey: [UInt8]
    package var objectID: [UInt8]
    package var wrapNonce: [UInt8]
    package var salt: [UInt8]

    package init(dataKey: [UInt8], objectID: [UInt8], wrapNonce: [UInt8], salt: [UInt8]) {
        self.dataKey = dataKey
        self.objectID = objectID
        self.wrapNonce = wrapNonce
        self.salt = salt
    }

    /// Fresh values from the system generator (through swift-crypto).
    package static func fresh() -> EnvelopeRandomness {
        EnvelopeRandomness(
            dataKey: randomBytes(32), objectID: randomBytes(16), wrapNonce: randomBytes(12), salt: randomBytes(16))
    }
}

/// Random bytes from swift-crypto's generator (BoringSSL's RAND_bytes).
package func randomBytes(_ count: Int) -> [UInt8] {
    SymmetricKey(size: SymmetricKeySize(bitCount: count * 8)).withUnsafeBytes { Array($0) }
}

/// What an envelope's header says, readable without any key.
public struct EnvelopeDescription: Sendable, Equatable {
    public enum Form: String, Sendable { case record, stream }
    public enum KeyKind: String, Sendable { case raw, passphrase }
    public let form: Form
    public let keyKind: KeyKind
    public let keyID: String
    /// PBKDF2 iterations, for a passphrase.
    public let iterations: Int?
    /// Chunk size, for a stream.
    public let chunkSize: Int?
    /// Header length in bytes.
    public let headerBytes: Int
}

/// Envelope encryption, format version 1 (Docs/envelope-format.md): a fresh 256-bit data key per
/// object encrypts the payload with AES-256-GCM and is wrapped by a key-encryption key; a
/// caller-supplied context is authenticated with both; an HMAC tag over the header commits to
/// the data key and is checked before any plaintext is released.
public enum Envelope {
    /// The largest record (single-shot) plaintext; larger data uses the stream form.
    public static let maxRecordBytes = 1 << 20
    /// The default chunk size of the stream form.
    public static let defaultChunkSize = EnvelopeHeader.defaultChunkSize
    /// The most PBKDF2 iterations a passphrase envelope may carry (readers refuse more).
    public static let maxIterations = EnvelopeHeader.maxEnvelopeIterations

    /// Seals a record (up to 1 MiB) in one piece.
    public static func seal(
        _ plaintext: some Collection<UInt8>, kek: KeyEncryptionKey, context: EnvelopeContext = .none
    ) throws -> [UInt8] {
        try seal(plaintext, kek: kek, context: context, randomness: .fresh())
    }

    package static func seal(
        _ plaintext: some Collection<UInt8>, kek: KeyEncryptionKey, context: EnvelopeContext,
        randomness: EnvelopeRandomness
    ) throws -> [UInt8] {
        guard plaintext.count <= maxRecordBytes else {
            throw ShadowCryptoError(
                .invalidParameter,
                "a record holds at most \(maxRecordBytes) bytes; use the stream form for \(plaintext.count)")
        }
        let sealer = try EnvelopeSealer(form: .record, chunkSize: 0, kek: kek, context: context, randomness: randomness)
        return sealer.header.serialized + (try sealer.seal(Array(plaintext), counter: 0, last: true))
    }

    /// Opens a record. Any key, context or integrity problem is ``ShadowCryptoError/Code/authenticationFailed``.
    public static func open(
        _ envelope: some Collection<UInt8>, kek: KeyEncryptionKey, context: EnvelopeContext = .none
    ) throws -> [UInt8] {
        let bytes = Array(envelope)
        guard let (header, length) = try EnvelopeHeader.parse(bytes) else {
            throw ShadowCryptoError(.malformedInput, "the envelope is shorter than its header")
        }
        guard header.form == .record else {
            throw ShadowCryptoError(.invalidParameter, "this is a stream envelope; open it with the stream decryptor")
        }
        guard bytes.count - length <= maxRecordBytes + AES256GCM.tagBytes else {
            throw ShadowCryptoError(.malformedInput, "a record holds at most \(maxRecordBytes) bytes")
        }
        let opener = try EnvelopeOpener(header: header, kek: kek, context: context)
        return try opener.open(bytes[length...], counter: 0, last: true)
    }

    /// Reads a header without any key.
    public static func describe(_ prefix: some Collection<UInt8>) throws -> EnvelopeDescription {
        guard let (header, length) = try EnvelopeHeader.parse(prefix) else {
            throw ShadowCryptoError(.malformedInput, "the input is shorter than an envelope header")
        }
        return EnvelopeDescription(
            form: header.form == .record ? .record : .stream, keyKind: header.kekKind == .raw ? .raw : .passphrase,
            keyID: String(decoding: header.kekID, as: UTF8.self),
            iterations: header.kekKind == .passphrase ? Int(header.iterations) : nil,
            chunkSize: header.form == .stream ? Int(header.chunkSize) : nil, headerBytes: length)
    }

    /// Re-wraps the data key under a new key-encryption key. Returns the new header and the
    /// length of the old one: the bytes after the old header are kept as they are.
    public static func rewrapHeader(
        _ prefix: some Collection<UInt8>, from old: KeyEncryptionKey, to new: KeyEncryptionKey,
        context: EnvelopeContext = .none
    ) throws -> (header: [UInt8], replacedBytes: Int) {
        guard let (header, length) = try EnvelopeHeader.parse(prefix) else {
            throw ShadowCryptoError(.malformedInput, "the input is shorter than an envelope header")
        }
        let opener = try EnvelopeOpener(header: header, kek: old, context: context)
        var rewrapped = header
        let fresh = EnvelopeRandomness.fresh()
        try EnvelopeSealer.wrap(
            &rewrapped, dataKey: opener.dataKey, kek: new, context: context.encoded, wrapNonce: fresh.wrapNonce,
            salt: fresh.salt)
        rewrapped.tag = opener.keys.headerTag(rewrapped, context: context.encoded)
        return (rewrapped.serialized, length)
    }

    /// Re-wraps a whole envelope held in memory (record or stream).
    public static func rewrap(
        _ envelope: [UInt8], from old: KeyEncryptionKey, to new: KeyEncryptionKey, context: EnvelopeContext = .none
    ) throws -> [UInt8] {
        let (header, replaced) = try rewrapHeader(envelope, from: old, to: new, context: context)
        return header + envelope[replaced...]
    }
}

/// Builds a header and seals chunks.
struct EnvelopeSealer {
    var header: EnvelopeHeader
    let keys: EnvelopeKeys
    let chunkAAD: [UInt8]

    init(
        form: EnvelopeHeader.Form, chunkSize: Int, kek: KeyEncryptionKey, context: EnvelopeContext,
        randomness: EnvelopeRandomness
    ) throws {
        let encodedContext = context.encoded
        var header = EnvelopeHeader(
            form: form, chunkSize: UInt32(chunkSize), objectID: randomness.objectID, kekKind: .raw,
            kekID: Array(kek.id.utf8),
            wrapNonce: [], wrappedKey: [], tag: [])
        let dataKey = SymmetricKey(data: randomness.dataKey)
        try Self.wrap(
            &header, dataKey: dataKey, kek: kek, context: encodedContext, wrapNonce: randomness.wrapNonce,
            salt: randomness.salt)
        keys = EnvelopeKeys(dataKey: dataKey, objectID: header.objectID)
        header.tag = keys.headerTag(header, context: encodedContext)
        chunkAAD = EnvelopeKeys.chunkAAD(header, context: encodedContext)
        self.header = header
    }

    /// Fills the KEK section and wraps the data key.
    static func wrap(
        _ header: inout EnvelopeHeader, dataKey: SymmetricKey, kek: KeyEncryptionKey, context: [UInt8],
        wrapNonce: [UInt8], salt: [UInt8]
    ) throws {
        header.kekID = Array(kek.id.utf8)
        let wrappingKey: SymmetricKey
        switch kek.material {
        case .raw(let key):
            header.kekKind = .raw
            header.iterations = 0
            header.salt = []
            wrappingKey = key
        case .passphrase(let passphrase, let iterations):
            header.kekKind = .passphrase
            header.iterations = UInt32(iterations)
            header.salt = salt
            wrappingKey = try PBKDF2.deriveKey(passphrase: passphrase, salt: salt, iterations: iterations).symmetricKey
        }
        header.wrapNonce = wrapNonce
        header.wrappedKey = try dataKey.withUnsafeBytes { key in
            try AES256GCM.seal(key, key: wrappingKey, nonce: wrapNonce, aad: header.beforeWrap + context)
        }
    }

    func seal(_ plaintext: some DataProtocol, counter: UInt32, last: Bool) throws -> [UInt8] {
        try AES256GCM.seal(
            plaintext, key: keys.payloadKey, nonce: keys.nonce(counter: counter, last: last), aad: chunkAAD)
    }

    /// Seals a chunk, handing ciphertext and tag to `emit` as swift-crypto returns them (no copies).
    func seal(_ plaintext: UnsafeRawBufferPointer, counter: UInt32, last: Bool, emit: (Data) throws -> Void) throws {
        let nonce = try AES.GCM.Nonce(data: keys.nonce(counter: counter, last: last))
        let box = try AES.GCM.seal(plaintext, using: keys.payloadKey, nonce: nonce, authenticating: chunkAAD)
        try emit(box.ciphertext)
        try emit(box.tag)
    }
}

/// Unwraps the data key, checks the header tag, and opens chunks.
struct EnvelopeOpener {
    let header: EnvelopeHeader
    let dataKey: SymmetricKey
    let keys: EnvelopeKeys
    let chunkAAD: [UInt8]

    init(header: EnvelopeHeader, kek: KeyEncryptionKey, context: EnvelopeContext) throws {
        let encodedContext = context.encoded
        let wrappingKey: SymmetricKey
        switch (kek.material, header.kekKind) {
        case (.raw(let key), .raw):
            wrappingKey = key
        case (.passphrase(let passphrase, _), .passphrase):
            wrappingKey = try PBKDF2.deriveKey(
                passphrase: passphrase, salt: header.salt, iterations: Int(header.iterations)
            ).symmetricKey
        case (.raw, .passphrase):
            throw ShadowCryptoError(
                .invalidParameter, "this envelope was sealed with a passphrase; give the passphrase, not a key file")
        case (.passphrase, .raw):
            throw ShadowCryptoError(
                .invalidParameter, "this envelope was sealed with a raw key; give the key file, not a passphrase")
        }
        let unwrapped = try AES256GCM.open(
            header.wrappedKey, key: wrappingKey, nonce: header.wrapNonce, aad: header.beforeWrap + encodedContext)
        let dataKey = SymmetricKey(data: unwrapped)
        let keys = EnvelopeKeys(dataKey: dataKey, objectID: header.objectID)
        // Key commitment and header authentication, before any chunk is opened.
        guard ConstantTime.equals(keys.headerTag(header, context: encodedContext), header.tag) else {
            throw ShadowCryptoError.authenticationFailure
        }
        self.header = header
        self.dataKey = dataKey
        self.keys = keys
        self.chunkAAD = EnvelopeKeys.chunkAAD(header, context: encodedContext)
    }

    func open(_ sealed: some DataProtocol, counter: UInt32, last: Bool) throws -> [UInt8] {
        try AES256GCM.open(sealed, key: keys.payloadKey, nonce: keys.nonce(counter: counter, last: last), aad: chunkAAD)
    }

    /// Opens a sealed chunk, handing its plaintext to `emit` as swift-crypto returns it.
    func open(_ sealed: UnsafeRawBufferPointer, counter: UInt32, last: Bool, emit: (Data) throws -> Void) throws {
        guard sealed.count >= AES256GCM.tagBytes else { throw ShadowCryptoError.authenticationFailure }
        do {
            let nonce = try AES.GCM.Nonce(data: keys.nonce(counter: counter, last: last))
            let split = sealed.count - AES256GCM.tagBytes
            let box = try AES.GCM.SealedBox(
                nonce: nonce, ciphertext: UnsafeRawBufferPointer(rebasing: sealed[..<split]),
                tag: UnsafeRawBufferPointer(rebasing: sealed[split...]))
            let plaintext = try AES.GCM.open(box, using: keys.payloadKey, authenticating: chunkAAD)
            try emit(plaintext)
        } catch let error as ShadowCryptoError {
            throw error
        } catch {
            throw ShadowCryptoError.authenticationFailure
        }
    }
}
