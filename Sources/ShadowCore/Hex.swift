#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif

/// Lower-case hexadecimal encoding.
package enum Hex {
    /// Why a string is not hexadecimal.
    package enum DecodeError: Error, Equatable, Sendable, CustomStringConvertible {
        /// An odd number of digits.
        case oddLength(Int)
        /// A character that is not a hex digit, at this offset.
        case invalidCharacter(offset: Int)

        package var description: String {
            switch self {
            case .oddLength(let count): return "hex string has an odd number of digits (\(count))"
            case .invalidCharacter(let offset): return "character at offset \(offset) is not a hex digit"
            }
        }
    }

    private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Encodes bytes as lower-case hex.
    package static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let bytes = Array(bytes)
        return String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            for (i, byte) in bytes.enumerated() {
                out[2 * i] = digits[Int(byte >> 4)]
                out[2 * i + 1] = digits[Int(byte & 0x0F)]
            }
            return bytes.count * 2
        }
    }

    /// Decodes hex digits (either case).
    package static func decode(_ string: some StringProtocol) throws -> [UInt8] {
        try decode(utf8: Array(string.utf8)[...])
    }

    /// Decodes hex digits (either case) given as ASCII bytes: a secret read from a file is decoded
    /// without a `String` copy of its text (which cannot be zeroed).
    package static func decode(utf8: ArraySlice<UInt8>) throws -> [UInt8] {
        guard utf8.count % 2 == 0 else { throw DecodeError.oddLength(utf8.count) }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count / 2)
        var i = utf8.startIndex
        while i < utf8.endIndex {
            let offset = i - utf8.startIndex
            guard let high = value(utf8[i]) else { throw DecodeError.invalidCharacter(offset: offset) }
            guard let low = value(utf8[i + 1]) else { throw DecodeError.invalidCharacter(offset: offset + 1) }
            out.append(high << 4 | low)
            i += 2
        }
        return out
    }

    /// The value of one ASCII hex digit, either case; nil for any other byte.
    package static func value(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

extension UUID {
    /// A UUID in its canonical text: 32 hex digits (either case) in groups of 8, 4, 4, 4 and 12
    /// split by hyphens, and nothing else. `UUID(uuidString:)` here reads each byte with a
    /// formatted-input scan, which also takes a sign (`-b` as 0xF5) and costs a share of every
    /// access token's check.
    package init?(text: String) {
        var text = text
        let parsed = text.withUTF8 { bytes -> uuid_t? in
            guard bytes.count == 36 else { return nil }
            var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            let complete = withUnsafeMutableBytes(of: &value) { out -> Bool in
                var offset = 0
                for index in 0..<16 {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        guard bytes[offset] == UInt8(ascii: "-") else { return false }
                        offset += 1
                    }
                    guard let high = Hex.value(bytes[offset]), let low = Hex.value(bytes[offset + 1]) else {
                        return false
                    }
                    out[index] = high << 4 | low
                    offset += 2
                }
                return true
            }
            return complete ? value : nil
        }
        guard let parsed else { return nil }
        self.init(uuid: parsed)
    }
}
