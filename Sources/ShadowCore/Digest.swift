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
