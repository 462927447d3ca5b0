import ShadowCore
import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The envelope header, version 1. Layout in Docs/envelope-format.md.
package struct EnvelopeHeader: Equatable {
    static let magic: [UInt8] = Array("SKEV".utf8)
    static let version: UInt8 = 1
    /// Bytes 0..<26: magic, version, form, chunk size, object id. They never change on rewrap.
    static let stableBytes = 26
    static let objectIDBytes = 16
    static let tagBytes = 32
    static let wrappedKeyBytes = 48
    /// The largest header: stable part, KEK section with a 255-byte id and a 64-byte salt, wrap, tag.
    static let maxBytes = stableBytes + 2 + 255 + 4 + 1 + 64 + 12 + wrappedKeyBytes + tagBytes
    static let chunkSizes: ClosedRange<Int> = 64...(16 << 20)
    static let defaultChunkSize = 64 * 1024
    static let maxEnvelopeIterations = 10_000_000

    /// True for a chunk size the stream form allows.
    package static func validChunkSize(_ size: Int) -> Bool { chunkSizes.contains(size) && size.nonzeroBitCount == 1 }

    enum Form: UInt8 {
        case record = 1
        case stream = 2
    }

    enum KEKKind: UInt8 {
        case raw = 1
        case passphrase = 2
    }

    var form: Form
    var chunkSize: UInt32
    var objectID: [UInt8]
    var kekKind: KEKKind
    var kekID: [UInt8]
    var iterations: UInt32 = 0
    var salt: [UInt8] = []
    var wrapNonce: [UInt8]
    var wrappedKey: [UInt8]
    var tag: [UInt8]

    /// Magic, version, form, chunk size, object id.
    var stable: [UInt8] {
        var out = Self.magic
        out.append(Self.version)
        out.append(form.rawValue)
        out.appendBigEndian(chunkSize)
        out += objectID
        return out
    }

    /// Everything before the wrap nonce: the stable part and the KEK section.
    var beforeWrap: [UInt8] {
        var out = stable
        out.append(kekKind.rawValue)
        out.append(UInt8(kekID.count))
        out += kekID
        if kekKind == .passphrase {
            out.appendBigEndian(iterations)
            out.append(UInt8(salt.count))
            out += salt
        }
        return out
    }

    /// Everything before the header tag.
    var beforeTag: [UInt8] { beforeWrap + wrapNonce + wrappedKey }

    /// The whole header.
    package var serialized: [UInt8] { beforeTag + tag }

    /// Parses a header from the start of `bytes`; `nil` when more bytes are needed.
    package static func parse(_ bytes: some Collection<UInt8>) throws -> (EnvelopeHeader, length: Int)? {
        var reader = ByteReader(Array(bytes.prefix(maxBytes)))
        func need(_ count: Int) throws -> [UInt8]? { reader.take(count) }
        guard let magic = reader.take(4) else { return nil }
        guard magic == Self.magic else {
            throw ShadowCryptoError(.malformedInput, "not a ShadowKeys envelope (bad magic)")
        }
        guard let version = reader.byte() else { return nil }
        guard version == Self.version else {
            throw ShadowCryptoError(
                .malformedInput, "unsupported envelope version \(version) (this reader handles version 1)")
        }
        guard let formByte = reader.byte() else { return nil }
        guard let form = Form(rawValue: formByte) else {
            throw ShadowCryptoError(.malformedInput, "unknown envelope form \(formByte)")
        }
        guard let chunkSize = reader.uint32() else { return nil }
        switch form {
        case .record where chunkSize != 0:
            throw ShadowCryptoError(.malformedInput, "a record envelope has chunk size 0, not \(chunkSize)")
        case .stream where !chunkSizes.contains(Int(chunkSize)) || chunkSize.nonzeroBitCount != 1:
            throw ShadowCryptoError(
                .malformedInput, "chunk size \(chunkSize) is not a power of two between 64 bytes and 16 MiB")
        default: break
        }
        guard let objectID = reader.take(objectIDBytes), let kindByte = reader.byte() else { return nil }
        guard let kind = KEKKind(rawValue: kindByte) else {
            throw ShadowCryptoError(.malformedInput, "unknown key-encryption kind \(kindByte)")
        }
        guard let idLength = reader.byte(), let kekID = reader.take(Int(idLength)) else { return nil }
        guard String(validating: kekID, as: UTF8.self) != nil else {
            throw ShadowCryptoError(.malformedInput, "the key id is not UTF-8")
        }
        var header = EnvelopeHeader(
            form: form, chunkSize: chunkSize, objectID: objectID, kekKind: kind, kekID: kekID, wrapNonce: [],
            wrappedKey: [], tag: [])
        if kind == .passphrase {
            guard let iterations = reader.uint32(), let saltLength = reader.byte() else { return nil }
            guard Int(iterations) >= PBKDF2.minimumIterations, Int(iterations) <= maxEnvelopeIterations else {
                throw ShadowCryptoError(
                    .malformedInput,
                    "PBKDF2 iterations \(iterations) outside \(PBKDF2.minimumIterations)...\(maxEnvelopeIterations)")
            }
            guard (16...64).contains(Int(saltLength)) else {
                throw ShadowCryptoError(.malformedInput, "salt length \(saltLength) outside 16...64")
            }
            guard let salt = reader.take(Int(saltLength)) else { return nil }
            header.iterations = iterations
            header.salt = salt
        }
        guard let wrapNonce = reader.take(12), let wrapped = reader.take(wrappedKeyBytes),
            let tag = reader.take(tagBytes)
        else { return nil }
        header.wrapNonce = wrapNonce
        header.wrappedKey = wrapped
        header.tag = tag
        return (header, reader.offset)
    }
}

/// The keys an envelope derives from its data key (HKDF-SHA256, salted with the object id).
struct EnvelopeKeys {
    let payloadKey: SymmetricKey
    let tagKey: SymmetricKey
    let noncePrefix: [UInt8]

    static let payloadInfo = Array("shadow-keys envelope v1 payload key".utf8)
    static let tagInfo = Array("shadow-keys envelope v1 header tag key".utf8)
    static let nonceInfo = Array("shadow-keys envelope v1 nonce prefix".utf8)

    init(dataKey: SymmetricKey, objectID: [UInt8]) {
        let prk = HKDF<SHA256>.extract(inputKeyMaterial: dataKey, salt: objectID)
        payloadKey = HKDF<SHA256>.expand(pseudoRandomKey: prk, info: Self.payloadInfo, outputByteCount: 32)
        tagKey = HKDF<SHA256>.expand(pseudoRandomKey: prk, info: Self.tagInfo, outputByteCount: 32)
        noncePrefix = HKDF<SHA256>.expand(pseudoRandomKey: prk, info: Self.nonceInfo, outputByteCount: 7)
            .withUnsafeBytes { Array($0) }
    }

    /// The nonce of chunk `counter`: prefix ‖ counter (big-endian u32) ‖ 1 for the last chunk, else 0.
    func nonce(counter: UInt32, last: Bool) -> [UInt8] {
        var nonce = noncePrefix
        nonce.appendBigEndian(counter)
        nonce.append(last ? 1 : 0)
        return nonce
    }

    /// HMAC-SHA256 over the header before its tag and the context: key commitment and header authentication.
    func headerTag(_ header: EnvelopeHeader, context: [UInt8]) -> [UInt8] {
        var mac = HMAC<SHA256>(key: tagKey)
        mac.update(data: header.beforeTag)
        mac.update(data: context)
        return Array(mac.finalize())
    }

    /// The AAD of every chunk: SHA-256 of the stable header bytes and the context.
    static func chunkAAD(_ header: EnvelopeHeader, context: [UInt8]) -> [UInt8] {
        var hash = SHA256()
        hash.update(data: header.stable)
        hash.update(data: context)
        return Array(hash.finalize())
    }
}

/// Reads big-endian fields from bytes.
struct ByteReader {
    let bytes: [UInt8]
    private(set) var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func take(_ count: Int) -> [UInt8]? {
        guard count >= 0, offset + count <= bytes.count else { return nil }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    mutating func byte() -> UInt8? { take(1)?.first }

    mutating func uint32() -> UInt32? {
        take(4).map { $0.reduce(0) { $0 << 8 | UInt32($1) } }
    }
}
