import ShadowCore

/// Ordered key/value pairs that an envelope is bound to (profile, entity, type, version…).
/// They are authenticated with the payload and the data-key wrap, never stored: decryption must
/// supply the same pairs in the same order, so a ciphertext moved to another record fails.
public struct EnvelopeContext: Sendable, Hashable, ExpressibleByDictionaryLiteral {
    /// One pair.
    public struct Pair: Sendable, Hashable {
        public let key: String
        public let value: String
    }

    /// The pairs, in order.
    public let pairs: [Pair]

    /// Limits: at most 64 pairs, keys of 1 to 255 UTF-8 bytes, values up to 4096 bytes.
    public static let maxPairs = 64
    public static let maxKeyBytes = 255
    public static let maxValueBytes = 4096

    /// A context from ordered pairs. Keys must be unique and within the limits.
    public init(_ pairs: [(String, String)]) throws {
        guard pairs.count <= Self.maxPairs else {
            throw ShadowCryptoError(.invalidParameter, "context has \(pairs.count) pairs; at most \(Self.maxPairs)")
        }
        var seen = Set<[UInt8]>()
        for (key, value) in pairs {
            guard (1...Self.maxKeyBytes).contains(key.utf8.count) else {
                throw ShadowCryptoError(.invalidParameter, "context keys must be 1 to \(Self.maxKeyBytes) bytes")
            }
            guard value.utf8.count <= Self.maxValueBytes else {
                throw ShadowCryptoError(
                    .invalidParameter, "context value for \(key) exceeds \(Self.maxValueBytes) bytes")
            }
            guard seen.insert(Array(key.utf8)).inserted else {
                throw ShadowCryptoError(.invalidParameter, "context key \(key) appears twice")
            }
        }
        self.pairs = pairs.map { Pair(key: $0.0, value: $0.1) }
    }

    /// A context from a literal; a repeated or invalid key is a programming error.
    public init(dictionaryLiteral elements: (String, String)...) {
        do { try self.init(elements) } catch { preconditionFailure("invalid EnvelopeContext literal: \(error)") }
    }

    /// The empty context.
    public static let none: EnvelopeContext = [:]

    /// The encoding bound into the AADs: u16 count, then per pair u16 key length, key,
    /// u32 value length, value (big-endian, UTF-8).
    var encoded: [UInt8] {
        var out: [UInt8] = []
        out.appendBigEndian(UInt16(pairs.count))
        for pair in pairs {
            out.appendBigEndian(UInt16(pair.key.utf8.count))
            out += pair.key.utf8
            out.appendBigEndian(UInt32(pair.value.utf8.count))
            out += pair.value.utf8
        }
        return out
    }
}

extension Array where Element == UInt8 {
    mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.bigEndian) { append(contentsOf: $0) }
    }
}
