extension JSONValue {
    /// The value as JSON text: compact by default, or indented by two spaces. Member order and
    /// number literals are kept as they are.
    public func serialized(pretty: Bool = false) -> String {
        String(decoding: serializedBytes(pretty: pretty), as: UTF8.self)
    }

    /// ``serialized(pretty:)`` as UTF-8 bytes.
    package func serializedBytes(pretty: Bool = false) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        write(to: &out, indent: pretty ? 0 : nil, terminal: false)
        return out
    }

    /// The value as JSON text for a terminal: as ``serialized(pretty:)``, but DEL, C1 controls and
    /// the bidirectional and line-separator characters are escaped as `\uXXXX` too, so text from
    /// outside cannot drive the terminal. The result parses to the same value.
    package func serializedForTerminal(pretty: Bool = false) -> String {
        var out: [UInt8] = []
        write(to: &out, indent: pretty ? 0 : nil, terminal: true)
        return String(decoding: out, as: UTF8.self)
    }

    private func write(to out: inout [UInt8], indent: Int?, terminal: Bool) {
        switch self {
        case .null: out += "null".utf8
        case .bool(let value): out += (value ? "true" : "false").utf8
        case .number(let number): out += number.literal.utf8
        case .string(let string): JSONValue.writeString(string, to: &out, terminal: terminal)
        case .array(let elements):
            if elements.isEmpty {
                out += "[]".utf8
                return
            }
            out.append(UInt8(ascii: "["))
            for (i, element) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.newline(&out, indent.map { $0 + 1 })
                element.write(to: &out, indent: indent.map { $0 + 1 }, terminal: terminal)
            }
            JSONValue.newline(&out, indent)
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            if object.isEmpty {
                out += "{}".utf8
                return
            }
            out.append(UInt8(ascii: "{"))
            for (i, member) in object.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.newline(&out, indent.map { $0 + 1 })
                JSONValue.writeString(member.name, to: &out, terminal: terminal)
                out += (indent == nil ? ":" : ": ").utf8
                member.value.write(to: &out, indent: indent.map { $0 + 1 }, terminal: terminal)
            }
            JSONValue.newline(&out, indent)
            out.append(UInt8(ascii: "}"))
        }
    }

    private static func newline(_ out: inout [UInt8], _ indent: Int?) {
        guard let indent else { return }
        out.append(UInt8(ascii: "\n"))
        out += repeatElement(UInt8(ascii: " "), count: 2 * indent)
    }

    /// Appends `string` as a JSON string, escaped as ``serialized(pretty:)`` escapes it: for
    /// writers of a fixed layout that build their text without a ``JSONObject``.
    package static func appendString(_ string: String, to out: inout [UInt8]) { writeString(string, to: &out) }

    /// Strings are escaped as RFC 8785 (JCS) and ECMAScript `JSON.stringify` do: the two-character
    /// escapes for `"` `\\` and `\\b \\f \\n \\r \\t`, `\\u00xx` for other control characters,
    /// everything else as is (unless `terminal`, which escapes every terminal control). Runs that
    /// need no escape are copied as they are.
    private static func writeString(_ string: String, to out: inout [UInt8], terminal: Bool = false) {
        out.append(UInt8(ascii: "\""))
        if terminal {
            for scalar in string.unicodeScalars {
                if !escape(scalar.value, to: &out, terminal: scalar.isTerminalControl) {
                    UTF8.encode(scalar) { out.append($0) }
                }
            }
        } else {
            var string = string
            string.withUTF8 { bytes in
                var start = 0
                for (i, byte) in bytes.enumerated() where byte < 0x20 || byte == 0x22 || byte == 0x5C {
                    out += bytes[start..<i]
                    _ = escape(UInt32(byte), to: &out, terminal: false)
                    start = i + 1
                }
                out += bytes[start...]
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Appends the escape of `value` when it needs one (a quote, a backslash, a control
    /// character, or with `terminal` any terminal control); false when it needs none.
    private static func escape(_ value: UInt32, to out: inout [UInt8], terminal: Bool) -> Bool {
        let short: String
        switch value {
        case 0x22: short = "\\\""
        case 0x5C: short = "\\\\"
        case 0x08: short = "\\b"
        case 0x0C: short = "\\f"
        case 0x0A: short = "\\n"
        case 0x0D: short = "\\r"
        case 0x09: short = "\\t"
        case _ where value < 0x20 || terminal:
            let hex = String(value, radix: 16)
            short = "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        default: return false
        }
        out += short.utf8
        return true
    }
}

extension JSONObject {
    /// The object as JSON text.
    public func serialized(pretty: Bool = false) -> String {
        JSONValue.object(self).serialized(pretty: pretty)
    }
}
