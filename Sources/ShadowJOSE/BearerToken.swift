/// The `Authorization: Bearer <token>` header (RFC 6750 §2.1), read as bytes: the scheme in any
/// case, one space, then the token. Counting a kilobyte header's Characters would cost more than
/// the rest of the check.
package enum BearerToken {
    /// The token after `Bearer `, or nil when the header is another scheme or has no token.
    package static func from(header: String) -> String? {
        let bytes = header.utf8
        guard bytes.count > 7 else { return nil }
        let scheme = bytes.prefix(7).map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }
        guard scheme.elementsEqual("bearer ".utf8) else { return nil }
        return String(decoding: bytes.dropFirst(7), as: UTF8.self)
    }
}
