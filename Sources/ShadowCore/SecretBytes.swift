public import Crypto

/// Secret bytes (a passphrase, a key, a token) that never print themselves and whose storage is
/// zeroed when released (it lives in a swift-crypto `SymmetricKey`).
public struct SecretBytes: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    private let storage: SymmetricKey

    /// Wraps `bytes`. The caller's copy is the caller's to clear.
    public init(_ bytes: some Sequence<UInt8>) {
        // Through contiguous storage when there is one: copying a generic sequence into an array
        // builds its types at run time, at the cost of a scan of every conformance in the binary.
        storage =
            bytes.withContiguousStorageIfAvailable { SymmetricKey(data: UnsafeRawBufferPointer($0)) }
            ?? SymmetricKey(data: Array(bytes))
    }

    /// Wraps the UTF-8 of `text`.
    public init(utf8 text: String) {
        self.init(Array(text.utf8))
    }

    /// Holds a key's bytes (the key keeps zeroing its own storage).
    public init(_ key: SymmetricKey) {
        storage = key
    }

    /// `count` bytes from the system's secure random generator (through swift-crypto).
    public static func random(count: Int) -> SecretBytes {
        precondition(count > 0, "SecretBytes.random needs a positive count")
        return SecretBytes(SymmetricKey(size: SymmetricKeySize(bitCount: count * 8)))
    }

    /// The number of bytes.
    public var count: Int { storage.bitCount / 8 }

    /// Calls `body` with the bytes; do not let them escape.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try storage.withUnsafeBytes(body)
    }

    /// The bytes as a symmetric key.
    public var symmetricKey: SymmetricKey { storage }

    public var description: String { "SecretBytes(\(count) bytes, redacted)" }
    public var debugDescription: String { description }
}
