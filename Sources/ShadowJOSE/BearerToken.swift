/// The `Authorization: <scheme> <token>` header (RFC 6750 §2.1; RFC 9449 §7.1 for `DPoP`), read
/// as bytes: the scheme in any case, one space, then the token. Counting a kilobyte header's
/// Characters would cost more than the rest of the check.
package enum BearerToken {
    /// The token after `Bearer `, or nil when the header is another scheme or has no token.
    package static func from(header: String) -> String? { token(in: header, scheme: "bearer") }

    /// The token after `<scheme> ` (`scheme` in lowercase), or nil for another scheme or no token.
    package static func token(in header: String, scheme: String) -> String? {
        let bytes = header.utf8
        let prefix = scheme.utf8.count + 1
        guard bytes.count > prefix else { return nil }
        let lowered = bytes.prefix(prefix).map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }
        guard lowered.dropLast().elementsEqual(scheme.utf8), lowered.last == UInt8(ascii: " ") else { return nil }
        return String(decoding: bytes.dropFirst(prefix), as: UTF8.self)
    }

    /// Whether `token` is a `b64token` (RFC 6750 §2.1; `token68` of RFC 9110 §11.2): one or more
    /// letters, digits, `-._~+/`, then any `=`. Two credentials in one header (or two headers
    /// joined with ", ") are not one.
    package static func isToken68(_ token: String) -> Bool {
        // Over the contiguous UTF-8 buffer, one table load per byte: a per-byte walk of the
        // String's views, or a range test per byte, costs more than the rest of a cached token's
        // check.
        var token = token
        return token.withUTF8 { bytes in
            var end = bytes.count
            while end > 0, bytes[end - 1] == UInt8(ascii: "=") { end -= 1 }
            guard end > 0 else { return false }
            return token68Bytes.withUnsafeBufferPointer { allowed in
                var index = 0
                while index < end, allowed[Int(bytes[index])] { index += 1 }
                return index == end
            }
        }
    }

    /// Which bytes a `b64token` holds before its `=` padding, indexed by byte.
    private static let token68Bytes: [Bool] = (0...255).map { byte in
        switch UInt8(byte) {
        case 0x41...0x5A, 0x61...0x7A, 0x30...0x39, UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"), UInt8(ascii: "+"), UInt8(ascii: "/"):
            true
        default: false
        }
    }
}
