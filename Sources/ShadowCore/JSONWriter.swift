extension JSONValue {
    /// The value as JSON text: compact by default, or indented by two spaces. Member order and
    /// number literals are kept as they are.
    public func serialized(pretty: Bool = false) -> String {
        var out = ""
        write(to: &out, indent: pretty ? 0 : nil, terminal: false)
        return out
    }

    /// The value as JSON text for a terminal: as ``serialized(pretty:)``, but DEL, C1 controls and
    /// the bidirectional and line-separator characters are escaped as `\uXXXX` too, so text from
    /// outside cannot drive the terminal. The result parses to the same value.
    package func serializedForTerminal(pretty: Bool = false) -> String {
        var out = ""
        write(to: &out, indent: pretty ? 0 : nil, terminal: true)
        return out
    }

    private func write(to out: inout String, indent: Int?, terminal: Bool) {
        switch self {
        case .null: out += "null"
        case .bool(let value): out += value ? "true" : "false"
        case .number(let number): out += number.literal
        case .string(let string): JSONValue.writeString(string, to: &out, terminal: terminal)
        case .array(let elements):
            if elements.isEmpty {
                out += "[]"
                return
            }
            out += "["
            for (i, element) in elements.enumerated() {
                if i > 0 { out += "," }
                JSONValue.newline(&out, indent.map { $0 + 1 })
                element.write(to: &out, indent: indent.map { $0 + 1 }, terminal: terminal)
            }
            JSONValue.newline(&out, indent)
            out += "]"
        case .object(let object):
            if object.isEmpty {
                out += "{}"
                return
            }
            out += "{"
            for (i, member) in object.enumerated() {
                if i > 0 { out += "," }
                JSONValue.newline(&out, indent.map { $0 + 1 })
                JSONValue.writeString(member.name, to: &out, terminal: terminal)
                out += indent == nil ? ":" : ": "
                member.value.write(to: &out, indent: indent.map { $0 + 1 }, terminal: terminal)
            }
            JSONValue.newline(&out, indent)
            out += "}"
        }
    }

    private static func newline(_ out: inout String, _ indent: Int?) {
        guard let indent else { return }
        out += "\n"
        out += String(repeating: "  ", count: indent)
    }

    /// Strings are escaped as RFC 8785 (JCS) and ECMAScript `JSON.stringify` do: the two-character
    /// escapes for `"` `\\` and `\\b \\f \\n \\r \\t`, `\\u00xx` for other control characters,
    /// everything else as is (unless `terminal`, which escapes every terminal control).
    private static func writeString(_ string: String, to out: inout String, terminal: Bool = false) {
        out += "\""
        for scalar in string.unicodeScalars {
            switch scalar.value {
            case 0x22: out += "\\\""
            case 0x5C: out += "\\\\"
            case 0x08: out += "\\b"
            case 0x0C: out += "\\f"
            case 0x0A: out += "\\n"
            case 0x0D: out += "\\r"
            case 0x09: out += "\\t"
            case _ where scalar.value < 0x20 || (terminal && scalar.isTerminalControl):
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}

extension JSONObject {
    /// The object as JSON text.
    public func serialized(pretty: Bool = false) -> String {
        JSONValue.object(self).serialized(pretty: pretty)
    }
}
