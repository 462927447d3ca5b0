/// Base64url without padding (RFC 4648 §5, as JOSE uses it in RFC 7515 §2).
///
/// Decoding is strict: padding, characters outside the alphabet, a length that leaves a single
/// dangling character, and non-zero trailing bits are all rejected, so every byte string has
/// exactly one accepted encoding.
package enum Base64URL {
    /// Why a string is not canonical unpadded base64url.
    package enum DecodeError: Error, Equatable, Sendable, CustomStringConvertible {
        /// A byte outside `A-Z a-z 0-9 - _` at this offset (`=` included: padding is not allowed).
        case invalidCharacter(offset: Int, byte: UInt8)
        /// The length modulo 4 is 1, which no byte string encodes to.
        case invalidLength(Int)
        /// The last character carries bits that a canonical encoder sets to zero.
        case nonCanonicalTrailingBits

        package var description: String {
            switch self {
            case .invalidCharacter(let offset, let byte):
                let shown = byte == UInt8(ascii: "=") ? "padding '='" : "byte 0x\(Hex.encode([byte]))"
                return "\(shown) at offset \(offset) is not in the base64url alphabet"
            case .invalidLength(let length):
                return "length \(length) is not a valid unpadded base64url length"
            case .nonCanonicalTrailingBits:
                return "the last character has non-zero trailing bits (non-canonical encoding)"
            }
        }
    }

    private static let alphabet: [UInt8] = Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Four 256-entry tables, one per position in a 4-character group, holding each character's
    /// six bits already shifted into place in a 24-bit group; invalid characters set bit 24.
    private static let groupTables: [UInt32] = {
        var tables = [UInt32](repeating: invalidFlag, count: 1024)
        for (value, byte) in alphabet.enumerated() {
            for position in 0..<4 {
                tables[position * 256 + Int(byte)] = UInt32(value) << (18 - 6 * UInt32(position))
            }
        }
        return tables
    }()

    private static let invalidFlag: UInt32 = 0x0100_0000

    /// Decodes unpadded base64url.
    package static func decode(_ string: some StringProtocol) throws -> [UInt8] {
        var string = String(string)
        return try string.withUTF8 { try decode($0) }
    }

    /// The number of bytes `count` base64url characters decode to, or `nil` for an impossible length.
    package static func decodedCount(_ count: Int) -> Int? {
        let remainder = count & 3
        return remainder == 1 ? nil : (count >> 2) * 3 + (remainder == 0 ? 0 : remainder - 1)
    }

    /// Decodes unpadded base64url from ASCII bytes.
    package static func decode(_ input: UnsafeBufferPointer<UInt8>) throws -> [UInt8] {
        guard let outputCount = decodedCount(input.count) else { throw firstInvalid(input, from: 0) }
        var failure: DecodeError?
        let output = [UInt8](unsafeUninitializedCapacity: outputCount) { out, initialized in
            do {
                try decode(input, into: out)
                initialized = outputCount
            } catch {
                failure = error as? DecodeError
                initialized = 0
            }
        }
        if let failure { throw failure }
        return output
    }

    /// Decodes unpadded base64url into `output`, which must hold exactly `decodedCount(input.count)` bytes.
    package static func decode(
        _ input: UnsafeBufferPointer<UInt8>, into output: UnsafeMutableBufferPointer<UInt8>
    ) throws {
        let count = input.count
        guard decodedCount(count) == output.count else { throw firstInvalid(input, from: 0) }
        guard count > 0, let source = input.baseAddress, let target = output.baseAddress else { return }
        let remainder = count & 3
        let whole = count - remainder
        try groupTables.withUnsafeBufferPointer { tables in
            // The tables are never empty; the pointer is there.
            let t = tables.baseAddress.unsafelyUnwrapped
            var i = 0
            var o = 0
            var flags: UInt32 = 0
            while i < whole {
                let group =
                    t[Int(source[i])] | t[256 + Int(source[i + 1])] | t[512 + Int(source[i + 2])]
                    | t[768 + Int(source[i + 3])]
                flags |= group
                target[o] = UInt8(truncatingIfNeeded: group >> 16)
                target[o + 1] = UInt8(truncatingIfNeeded: group >> 8)
                target[o + 2] = UInt8(truncatingIfNeeded: group)
                i += 4
                o += 3
            }
            if flags & invalidFlag != 0 { throw firstInvalid(input, from: 0) }
            guard remainder > 0 else { return }
            var group = t[Int(source[i])] | t[256 + Int(source[i + 1])]
            if remainder == 3 { group |= t[512 + Int(source[i + 2])] }
            if group & invalidFlag != 0 { throw firstInvalid(input, from: i) }
            target[o] = UInt8(truncatingIfNeeded: group >> 16)
            if remainder == 3 { target[o + 1] = UInt8(truncatingIfNeeded: group >> 8) }
            // A canonical encoder leaves the unused low bits of the last character zero.
            let unused: UInt32 = remainder == 2 ? 0xFFFF : 0xFF
            if group & unused != 0 { throw DecodeError.nonCanonicalTrailingBits }
        }
    }

    private static func firstInvalid(_ input: UnsafeBufferPointer<UInt8>, from start: Int) -> DecodeError {
        for offset in start..<input.count where groupTables[768 + Int(input[offset])] == invalidFlag {
            return .invalidCharacter(offset: offset, byte: input[offset])
        }
        return .invalidLength(input.count)
    }

    /// Encodes bytes as unpadded base64url.
    package static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let bytes = Array(bytes)
        let count = bytes.count
        let outputCount = (count / 3) * 4 + [0, 2, 3][count % 3]
        return alphabet.withUnsafeBufferPointer { alphabet in
            String(unsafeUninitializedCapacity: outputCount) { out in
                var i = 0
                var o = 0
                while i + 3 <= count {
                    let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
                    out[o] = alphabet[Int(n >> 18 & 63)]
                    out[o + 1] = alphabet[Int(n >> 12 & 63)]
                    out[o + 2] = alphabet[Int(n >> 6 & 63)]
                    out[o + 3] = alphabet[Int(n & 63)]
                    i += 3
                    o += 4
                }
                switch count - i {
                case 1:
                    let n = UInt32(bytes[i]) << 16
                    out[o] = alphabet[Int(n >> 18 & 63)]
                    out[o + 1] = alphabet[Int(n >> 12 & 63)]
                case 2:
                    let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
                    out[o] = alphabet[Int(n >> 18 & 63)]
                    out[o + 1] = alphabet[Int(n >> 12 & 63)]
                    out[o + 2] = alphabet[Int(n >> 6 & 63)]
                default:
                    break
                }
                return outputCount
            }
        }
    }
}
