/// `application/x-www-form-urlencoded` values and URL query values read back: `+` as a space,
/// `%XX` as its byte; a malformed escape stays as it is.
package enum FormDecoding {
    package static func value(_ text: some StringProtocol) -> String {
        var bytes: [UInt8] = []
        var input = Array(text.utf8)[...]
        while let byte = input.popFirst() {
            if byte == UInt8(ascii: "+") {
                bytes.append(UInt8(ascii: " "))
            } else if byte == UInt8(ascii: "%"), input.count >= 2,
                let value = UInt8(String(decoding: input.prefix(2), as: UTF8.self), radix: 16)
            {
                bytes.append(value)
                input = input.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Every field named `name` in a form or query string, decoded, in order (a request that
    /// gives one more than once is refused by its reader: RFC 6749, 3.1).
    package static func fields(_ name: String, in form: some StringProtocol) -> [String] {
        form.split(separator: "&").compactMap { pair in
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, value(parts[0]) == name else { return nil }
            return value(parts[1])
        }
    }
}
