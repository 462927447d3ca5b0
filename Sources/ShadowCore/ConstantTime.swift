#if canImport(Darwin)
import Darwin
#else
import Glibc
#endif

/// Comparison whose running time depends only on the lengths of its inputs.
package enum ConstantTime {
    /// True when both byte sequences are equal. Lengths are not secret; contents are.
    @inline(never)
    package static func equals(_ lhs: some Collection<UInt8>, _ rhs: some Collection<UInt8>) -> Bool {
        guard lhs.count == rhs.count else { return false }
        // Arrays, slices and buffers are compared in place: this generic function runs
        // unspecialized from other modules, where each index step below is a witness call.
        if let result = lhs.withContiguousStorageIfAvailable({ left in
            rhs.withContiguousStorageIfAvailable { right in equals(left, right) }
        }), let result {
            return result
        }
        // Index by index rather than through zip: a Zip2Sequence of two generic collections is
        // built at run time, at the cost of a scan of every protocol conformance in the binary.
        var difference: UInt8 = 0
        var left = lhs.startIndex, right = rhs.startIndex
        while left != lhs.endIndex {
            difference |= lhs[left] ^ rhs[right]
            lhs.formIndex(after: &left)
            rhs.formIndex(after: &right)
        }
        return difference == 0
    }

    /// Two buffers of the same length, byte by byte, every byte read.
    @inline(never)
    static func equals(_ lhs: UnsafeBufferPointer<UInt8>, _ rhs: UnsafeBufferPointer<UInt8>) -> Bool {
        guard lhs.count == rhs.count else { return false }
        var difference: UInt8 = 0
        for index in 0..<lhs.count { difference |= lhs[index] ^ rhs[index] }
        return difference == 0
    }
}

extension String {
    /// Exact equality of the UTF-8 bytes. Swift's `==` treats canonically equivalent strings as
    /// equal (U+212A KELVIN SIGN equals "K"), which is wrong for identifiers such as `iss`, `aud`,
    /// `kid` and `alg` (RFC 7519 §2 "StringOrURI" comparison is code point by code point).
    package func exactlyEquals(_ other: String) -> Bool {
        // Identical representations (the same literal or storage, or equal small strings) are
        // equal without reading the bytes.
        let identical = withUnsafeBytes(of: self) { a in
            withUnsafeBytes(of: other) { b in a.elementsEqual(b) }
        }
        if identical { return true }
        var lhs = self, rhs = other
        let count = lhs.utf8.count
        guard count == rhs.utf8.count else { return false }
        guard count > 0 else { return true }
        return lhs.withUTF8 { a in
            rhs.withUTF8 { b in
                guard let a = a.baseAddress, let b = b.baseAddress else { return false }
                return memcmp(a, b, count) == 0
            }
        }
    }
}
