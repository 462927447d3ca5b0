public import Crypto

extension SHA256 {
    /// The digest of contiguous bytes through `update(bufferPointer:)`: `hash(data:)` takes any
    /// `DataProtocol` through its regions, which costs more than the compression of a token's
    /// few hundred bytes.
    package static func hash(contiguous bytes: UnsafeRawBufferPointer) -> SHA256Digest {
        var hasher = SHA256()
        hasher.update(bufferPointer: bytes)
        return hasher.finalize()
    }

    /// The digest of a string's UTF-8 (``hash(contiguous:)``).
    package static func hash(utf8 text: String) -> SHA256Digest {
        var text = text
        return text.withUTF8 { hash(contiguous: UnsafeRawBufferPointer($0)) }
    }
}

/// A SHA-256 digest as a dictionary key. `SHA256Digest`'s own `==` is a constant-time compare
/// through generic byte views, and its hash feeds the hasher one byte at a time. Here the 32
/// bytes are four words: `==` reads all four whatever they hold (constant time), and the hash
/// takes them whole.
package struct DigestKey: Hashable, Sendable {
    private let words: (UInt64, UInt64, UInt64, UInt64)

    package init(_ digest: SHA256Digest) {
        self = digest.withUnsafeBytes { DigestKey(raw: $0) }
    }

    /// The key of 32 bytes of a digest.
    package init(raw: UnsafeRawBufferPointer) {
        precondition(raw.count == 32, "a SHA-256 digest is 32 bytes")
        words = (
            raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self),
            raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
            raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self),
            raw.loadUnaligned(fromByteOffset: 24, as: UInt64.self)
        )
    }

    package static func == (lhs: DigestKey, rhs: DigestKey) -> Bool {
        let difference =
            (lhs.words.0 ^ rhs.words.0) | (lhs.words.1 ^ rhs.words.1) | (lhs.words.2 ^ rhs.words.2)
            | (lhs.words.3 ^ rhs.words.3)
        return difference == 0
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }
}
