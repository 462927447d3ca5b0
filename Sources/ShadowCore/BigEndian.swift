#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif

/// Big-endian integers, as every format ShadowKeys owns writes them.
package enum BigEndian {
    package static func bytes(_ value: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * $0)) }
    }
    package static func bytes(_ value: UInt32) -> [UInt8] {
        (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) }
    }
    package static func bytes(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(truncatingIfNeeded: value)] }
    // Concrete, not generic over collections: a generic reader runs unspecialized from other
    // modules, a witness call per byte, and the record readers call these for every field.
    package static func uint64(_ bytes: ArraySlice<UInt8>) -> UInt64 { integer(bytes) }
    package static func uint32(_ bytes: ArraySlice<UInt8>) -> UInt32 { UInt32(truncatingIfNeeded: integer(bytes)) }
    package static func uint16(_ bytes: ArraySlice<UInt8>) -> UInt16 { UInt16(truncatingIfNeeded: integer(bytes)) }

    private static func integer(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        var value: UInt64 = 0
        for byte in bytes { value = value << 8 | UInt64(byte) }
        return value
    }
}

extension UUID {
    /// The UUID's 16 bytes, as the session tables and tokens store it.
    package var bytes16: [UInt8] { withUnsafeBytes(of: uuid) { Array($0) } }

    /// The UUID of 16 bytes; nil for any other length.
    package init?(bytes16 bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        self.init(uuid: bytes.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) })
    }
}
