import ShadowCore

/// The `sha256sum` manifest format (GNU coreutils): one line per file, `<64 hex digits>  <name>`
/// (or ` *<name>` for binary mode). A name holding a backslash, newline or carriage return is
/// escaped (`\\`, `\n`, `\r`) and its line starts with a backslash.
///
/// Names are bytes: a manifest may name files whose names are not UTF-8, and must never have a
/// name changed (cut at a NUL, or decoded and re-encoded) into another file's.
public enum ChecksumManifest {
    /// One parsed line.
    public struct Line: Sendable, Equatable {
        /// The 32-byte digest.
        public let digest: [UInt8]
        /// The file name, exactly as the manifest gives it once unescaped.
        public let name: [UInt8]

        public init(digest: [UInt8], name: [UInt8]) {
            self.digest = digest
            self.name = name
        }

        /// True when the name can name a file: not empty and without a NUL byte.
        public var isUsableName: Bool { !name.isEmpty && !name.contains(0) }
    }

    /// Parses one line, without its newline (a trailing carriage return is dropped); nil when it
    /// is not a well-formed checksum line.
    public static func parse(_ line: some Collection<UInt8>) -> Line? {
        var text = Array(line)[...]
        if text.last == 0x0D { text = text.dropLast() }
        var escaped = false
        if text.first == UInt8(ascii: "\\") {
            escaped = true
            text = text.dropFirst()
        }
        guard text.count > 66 else { return nil }
        let hex = text.prefix(64)
        let separator = Array(text.dropFirst(64).prefix(2))
        guard separator == Array("  ".utf8) || separator == Array(" *".utf8), hex.allSatisfy({ $0 < 0x80 }),
            let digest = try? Hex.decode(String(decoding: hex, as: UTF8.self))
        else { return nil }
        var name = Array(text.dropFirst(66))
        if escaped {
            guard let unescaped = unescape(name) else { return nil }
            name = unescaped
        }
        return name.isEmpty ? nil : Line(digest: digest, name: name)
    }

    /// Every line of a manifest: the parsed ones, and how many were not well formed.
    public static func parse(manifest bytes: some Collection<UInt8>) -> (lines: [Line], malformed: Int) {
        var lines: [Line] = []
        var malformed = 0
        for line in Array(bytes).split(separator: 0x0A, omittingEmptySubsequences: true) {
            if let parsed = parse(line) { lines.append(parsed) } else { malformed += 1 }
        }
        return (lines, malformed)
    }

    /// A manifest line for `digest` and `name` (no newline), escaped as GNU sha256sum escapes it.
    public static func format(digest: [UInt8], name: [UInt8]) -> [UInt8] {
        let hex = Array(Integrity.hex(digest).utf8)
        guard name.contains(where: { $0 == UInt8(ascii: "\\") || $0 == 0x0A || $0 == 0x0D }) else {
            return hex + Array("  ".utf8) + name
        }
        var escaped: [UInt8] = []
        for byte in name {
            switch byte {
            case UInt8(ascii: "\\"): escaped += Array("\\\\".utf8)
            case 0x0A: escaped += Array("\\n".utf8)
            case 0x0D: escaped += Array("\\r".utf8)
            default: escaped.append(byte)
            }
        }
        return [UInt8(ascii: "\\")] + hex + Array("  ".utf8) + escaped
    }

    private static func unescape(_ name: [UInt8]) -> [UInt8]? {
        var out: [UInt8] = []
        var index = 0
        while index < name.count {
            guard name[index] == UInt8(ascii: "\\") else {
                out.append(name[index])
                index += 1
                continue
            }
            guard index + 1 < name.count else { return nil }
            switch name[index + 1] {
            case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\"))
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            default: return nil
            }
            index += 2
        }
        return out
    }
}
