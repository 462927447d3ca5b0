/// `application/x-www-form-urlencoded` values and URL query values read back, by their bytes as
/// the WHATWG URL standard's parser reads them: `+` as a space, `%` and two ASCII hex digits as
/// that byte; any other `%` stays as it is.
package enum FormDecoding {
    package static func value(_ text: some StringProtocol) -> String {
        var bytes: [UInt8] = []
        var input = Array(text.utf8)[...]
        while let byte = input.popFirst() {
            if byte == UInt8(ascii: "+") {
                bytes.append(UInt8(ascii: " "))
            } else if byte == UInt8(ascii: "%"), input.count >= 2, let high = Hex.value(input[input.startIndex]),
                let low = Hex.value(input[input.startIndex + 1])
            {
                bytes.append(high << 4 | low)
                input = input.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The fields of a form or query string, in order, decoded: split at every `&` byte (empty
    /// parts skipped), then at each part's first `=` byte (a part without one is a name with an
    /// empty value).
    package static func pairs(in form: some StringProtocol) -> [(name: String, value: String)] {
        form.split(byte: UInt8(ascii: "&")).map { part in
            let halves = part.split(byte: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            return (value(halves[0]), halves.count == 2 ? value(halves[1]) : "")
        }
    }

    /// Every field named `name` in a form or query string, decoded, in order, its name compared
    /// by bytes (a request that gives one more than once is refused by its reader: RFC 6749, 3.1).
    package static func fields(_ name: String, in form: some StringProtocol) -> [String] {
        pairs(in: form).compactMap { $0.name.utf8.elementsEqual(name.utf8) ? $0.value : nil }
    }
}
