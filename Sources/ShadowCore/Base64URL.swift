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

    private static let invalid: UInt8 = 0xFF

    /// Maps an ASCII byte to its 6-bit value, or 0xFF.
    private static let decodeTable: [UInt8] = {
        var table = [UInt8](repeating: invalid, count: 256)
        for (value, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(value) }
        return table
    }()

    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Decodes unpadded base64url.
    package static func decode(_ string: some StringProtocol) throws -> [UInt8] {
        var string = String(string)
        return try string.withUTF8 { try decode($0) }
    }

    /// Decodes unpadded base64url from ASCII bytes.
    package static func decode(_ input: UnsafeBufferPointer<UInt8>) throws -> [UInt8] {
        let count = input.count
        let remainder = count & 3
        if remainder == 1 { throw firstInvalid(input, from: 0) }  // a stray character explains more than the length
        let outputCount = (count >> 2) * 3 + (remainder == 0 ? 0 : remainder - 1)
        var failure: DecodeError?
        let table = decodeTable
        let output = table.withUnsafeBufferPointer { table in
            [UInt8](unsafeUninitializedCapacity: outputCount) { out, initialized in
                var i = 0
                var o = 0
                let whole = count - remainder
                while i < whole {
                    let a = table[Int(input[i])], b = table[Int(input[i + 1])]
                    let c = table[Int(input[i + 2])], d = table[Int(input[i + 3])]
                    if (a | b | c | d) & 0xC0 != 0 {
                        failure = firstInvalid(input, from: i)
                        initialized = 0
                        return
                    }
                    out[o] = a << 2 | b >> 4
                    out[o + 1] = b << 4 | c >> 2
                    out[o + 2] = c << 6 | d
                    i += 4
                    o += 3
                }
                if remainder > 0 {
                    var values: (UInt8, UInt8, UInt8) = (0, 0, 0)
                    values.0 = table[Int(input[i])]
                    values.1 = table[Int(input[i + 1])]
                    if remainder == 3 { values.2 = table[Int(input[i + 2])] }
                    if (values.0 | values.1 | values.2) & 0xC0 != 0 {
                        failure = firstInvalid(input, from: i)
                        initialized = 0
                        return
                    }
                    out[o] = values.0 << 2 | values.1 >> 4
                    if remainder == 2 {
                        if values.1 & 0x0F != 0 { failure = .nonCanonicalTrailingBits }
                    } else {
                        out[o + 1] = values.1 << 4 | values.2 >> 2
                        if values.2 & 0x03 != 0 { failure = .nonCanonicalTrailingBits }
                    }
                }
                initialized = failure == nil ? outputCount : 0
            }
        }
        if let failure { throw failure }
        return output
    }

    private static func firstInvalid(_ input: UnsafeBufferPointer<UInt8>, from start: Int) -> DecodeError {
        for offset in start..<input.count where decodeTable[Int(input[offset])] == invalid {
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
