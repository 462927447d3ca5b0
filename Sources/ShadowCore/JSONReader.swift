/// Why a document was refused by ``StrictJSON``.
package struct JSONParseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What was wrong.
    package enum Reason: Equatable, Sendable {
        case tooLarge(size: Int, limit: Int)
        case tooDeep(limit: Int)
        case unexpectedEnd
        case unexpectedByte(UInt8, expected: String)
        case duplicateMember(String)
        case controlCharacterInString
        case invalidEscape
        case loneSurrogate
        case invalidUTF8
        case noncharacter(UInt32)
        case invalidNumber
        case numberOutOfRange
        case trailingData
    }

    package let reason: Reason
    /// Byte offset in the document where the problem was found.
    package let offset: Int

    package init(reason: Reason, offset: Int) {
        self.reason = reason
        self.offset = offset
    }

    package var description: String {
        let what: String
        switch reason {
        case .tooLarge(let size, let limit): return "JSON document of \(size) bytes exceeds the limit of \(limit) bytes"
        case .tooDeep(let limit): what = "nesting deeper than \(limit) levels"
        case .unexpectedEnd: what = "unexpected end of document"
        case .unexpectedByte(let byte, let expected):
            let shown =
                (0x21...0x7E).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(Hex.encode([byte]))"
            what = "expected \(expected), found \(shown)"
        case .duplicateMember(let name): what = "duplicate member name \(name.quotedForMessage) (RFC 7493 §2.3)"
        case .controlCharacterInString: what = "unescaped control character in string"
        case .invalidEscape: what = "invalid escape sequence in string"
        case .loneSurrogate: what = "unpaired UTF-16 surrogate escape (RFC 7493 §2.1)"
        case .invalidUTF8: what = "string is not valid UTF-8"
        case .noncharacter(let scalar):
            what = "Unicode noncharacter U+\(String(scalar, radix: 16, uppercase: true)) (RFC 7493 §2.1)"
        case .invalidNumber: what = "malformed number"
        case .numberOutOfRange: what = "number outside the IEEE 754 double range (RFC 7493 §2.2)"
        case .trailingData: what = "data after the end of the JSON value"
        }
        return "\(what) at offset \(offset)"
    }
}

/// Why bytes are not a JSON object (``StrictJSON/object(_:limits:)``), worded to follow "the body is".
package struct NotAJSONObject: Error, CustomStringConvertible {
    package let description: String
}

extension StrictJSON {
    /// `bytes` as a JSON object, or what they are instead: "not valid JSON: " and the parser's
    /// reason, or "a JSON array, not an object".
    package static func object(_ bytes: some Collection<UInt8>, limits: Limits) -> Result<JSONObject, NotAJSONObject> {
        let value: JSONValue
        do {
            value = try parse(bytes, limits: limits)
        } catch {
            return .failure(NotAJSONObject(description: "not valid JSON: \(error)"))
        }
        guard case .object(let object) = value else {
            return .failure(NotAJSONObject(description: "a JSON \(value.typeName), not an object"))
        }
        return .success(object)
    }
}

/// A strict JSON reader (RFC 8259 restricted to I-JSON, RFC 7493).
///
/// It refuses duplicate member names, invalid UTF-8, unpaired surrogates, noncharacters, numbers
/// that overflow a double, trailing data, and documents beyond a size or depth limit.
package enum StrictJSON {
    /// Bounds on what a document may cost to read.
    package struct Limits: Sendable {
        /// Largest document, in bytes.
        package var maxBytes: Int
        /// Deepest nesting of arrays and objects.
        package var maxDepth: Int

        package init(maxBytes: Int, maxDepth: Int) {
            self.maxBytes = maxBytes
            self.maxDepth = maxDepth
        }

        /// Limits suited to a JOSE header or claims set.
        package static let jose = Limits(maxBytes: 64 * 1024, maxDepth: 16)
        /// Limits suited to a key set or a larger document.
        package static let document = Limits(maxBytes: 1024 * 1024, maxDepth: 32)
    }

    /// Parses one JSON value.
    package static func parse(_ bytes: some Collection<UInt8>, limits: Limits = .document) throws -> JSONValue {
        if let result = try bytes.withContiguousStorageIfAvailable({ try parse(buffer: $0, limits: limits) }) {
            return result
        }
        return try Array(bytes).withUnsafeBufferPointer { try parse(buffer: $0, limits: limits) }
    }

    /// Parses one JSON value from a string's UTF-8.
    package static func parse(_ string: String, limits: Limits = .document) throws -> JSONValue {
        var string = string
        return try string.withUTF8 { try parse(buffer: $0, limits: limits) }
    }

    /// Parses one JSON value from a buffer.
    package static func parse(buffer: UnsafeBufferPointer<UInt8>, limits: Limits) throws -> JSONValue {
        guard buffer.count <= limits.maxBytes else {
            throw JSONParseError(reason: .tooLarge(size: buffer.count, limit: limits.maxBytes), offset: 0)
        }
        var reader = Reader(buffer: buffer, maxDepth: limits.maxDepth)
        reader.skipWhitespace()
        let value = try reader.parseValue(depth: 0)
        reader.skipWhitespace()
        guard reader.index == buffer.count else { throw reader.error(.trailingData) }
        return value
    }
}

private struct Reader {
    let buffer: UnsafeBufferPointer<UInt8>
    let maxDepth: Int
    var index = 0

    init(buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.buffer = buffer
        self.maxDepth = maxDepth
    }

    func error(_ reason: JSONParseError.Reason) -> JSONParseError {
        JSONParseError(reason: reason, offset: index)
    }

    @inline(__always)
    mutating func skipWhitespace() {
        var i = index
        let end = buffer.count
        while i < end {
            switch buffer[i] {
            case 0x20, 0x09, 0x0A, 0x0D: i += 1
            default:
                index = i
                return
            }
        }
        index = i
    }

    func peek() throws -> UInt8 {
        guard index < buffer.count else { throw error(.unexpectedEnd) }
        return buffer[index]
    }

    mutating func expectLiteral(_ literal: StaticString, value: JSONValue) throws -> JSONValue {
        let count = literal.utf8CodeUnitCount
        guard index + count <= buffer.count else { throw error(.unexpectedEnd) }
        let bytes = literal.utf8Start
        for k in 0..<count where buffer[index + k] != bytes[k] {
            index += k
            throw error(.unexpectedByte(buffer[index], expected: "'\(literal)'"))
        }
        index += count
        return value
    }

    mutating func parseValue(depth: Int) throws -> JSONValue {
        switch try peek() {
        case UInt8(ascii: "{"): return .object(try parseObject(depth: depth + 1))
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): return try expectLiteral("true", value: .bool(true))
        case UInt8(ascii: "f"): return try expectLiteral("false", value: .bool(false))
        case UInt8(ascii: "n"): return try expectLiteral("null", value: .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        case let byte: throw error(.unexpectedByte(byte, expected: "a JSON value"))
        }
    }

    mutating func parseObject(depth: Int) throws -> JSONObject {
        guard depth <= maxDepth else { throw error(.tooDeep(limit: maxDepth)) }
        index += 1  // '{'
        var members: [JSONObject.Member] = []
        // Duplicate detection compares fingerprints first, bytes only when they match. Past 15
        // members a set takes over, so a hostile object stays linear.
        var seen: Set<ExactName>? = nil
        skipWhitespace()
        if try peek() == UInt8(ascii: "}") {
            index += 1
            return JSONObject(uniqueMembers: members)
        }
        members.reserveCapacity(16)
        while true {
            skipWhitespace()
            let nameOffset = index
            let byte = try peek()
            guard byte == UInt8(ascii: "\"") else { throw error(.unexpectedByte(byte, expected: "a member name")) }
            let (name, fingerprint) = try parseName()
            if var names = seen {
                guard names.insert(ExactName(name)).inserted else {
                    throw JSONParseError(reason: .duplicateMember(name), offset: nameOffset)
                }
                seen = names
            } else {
                var position = 0
                while position < members.count {
                    if members[position].fingerprint == fingerprint && members[position].name.exactlyEquals(name) {
                        throw JSONParseError(reason: .duplicateMember(name), offset: nameOffset)
                    }
                    position += 1
                }
                if members.count == 15 { seen = Set(members.map { ExactName($0.name) } + [ExactName(name)]) }
            }
            skipWhitespace()
            let colon = try peek()
            guard colon == UInt8(ascii: ":") else { throw error(.unexpectedByte(colon, expected: "':'")) }
            index += 1
            skipWhitespace()
            let value = try parseValue(depth: depth)
            members.append(JSONObject.Member(name: name, value: value, fingerprint: fingerprint))
            skipWhitespace()
            switch try peek() {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                return JSONObject(uniqueMembers: members)
            case let other: throw error(.unexpectedByte(other, expected: "',' or '}'"))
            }
        }
    }

    mutating func parseArray(depth: Int) throws -> JSONValue {
        guard depth <= maxDepth else { throw error(.tooDeep(limit: maxDepth)) }
        index += 1  // '['
        var elements: [JSONValue] = []
        skipWhitespace()
        if try peek() == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue(depth: depth))
            skipWhitespace()
            switch try peek() {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                return .array(elements)
            case let other: throw error(.unexpectedByte(other, expected: "',' or ']'"))
            }
        }
    }

    /// Reads a member name and its fingerprint; common JOSE names come back as literals.
    mutating func parseName() throws -> (String, UInt32) {
        let start = index + 1
        var i = start
        let end = buffer.count
        while i < end {
            let byte = buffer[i]
            if byte == UInt8(ascii: "\"") {
                let raw = UnsafeBufferPointer(rebasing: buffer[start..<i])
                guard let first = raw.first, let last = raw.last else { break }
                let fingerprint = UInt32(truncatingIfNeeded: raw.count) << 16 | UInt32(first) << 8 | UInt32(last)
                if let known = KnownMemberNames.lookup(raw, fingerprint: fingerprint) {
                    index = i + 1
                    return (known, fingerprint)
                }
                break
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 || byte >= 0x80 { break }
            i += 1
        }
        let name = try parseString()
        return (name, ExactName.fingerprint(name))
    }

    mutating func parseString() throws -> String {
        let start = index + 1  // after the opening quote
        var i = start
        let end = buffer.count
        var high: UInt8 = 0
        while i < end {
            let byte = buffer[i]
            if byte == UInt8(ascii: "\"") {
                index = i + 1
                return try makeString(
                    UnsafeBufferPointer(rebasing: buffer[start..<i]), offset: start, checkScalars: high >= 0x80)
            }
            if byte == UInt8(ascii: "\\") {
                index = i
                return try parseEscapedString(start: start)
            }
            if byte < 0x20 {
                index = i
                throw error(.controlCharacterInString)
            }
            high |= byte
            i += 1
        }
        index = i
        throw error(.unexpectedEnd)
    }

    /// The slow path, taken at the first backslash.
    mutating func parseEscapedString(start: Int) throws -> String {
        var bytes = Array(buffer[start..<index])
        var sawNonASCII = bytes.contains { $0 >= 0x80 }
        while index < buffer.count {
            let byte = buffer[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return try bytes.withUnsafeBufferPointer {
                    try makeString($0, offset: start, checkScalars: sawNonASCII)
                }
            case UInt8(ascii: "\\"):
                index += 1
                let escape = try peek()
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): bytes.append(escape)
                case UInt8(ascii: "b"): bytes.append(0x08)
                case UInt8(ascii: "f"): bytes.append(0x0C)
                case UInt8(ascii: "n"): bytes.append(0x0A)
                case UInt8(ascii: "r"): bytes.append(0x0D)
                case UInt8(ascii: "t"): bytes.append(0x09)
                case UInt8(ascii: "u"):
                    let scalar = try parseUnicodeEscape()
                    if scalar.value >= 0x80 { sawNonASCII = true }
                    bytes.append(contentsOf: String(Character(scalar)).utf8)
                default:
                    index -= 1
                    throw error(.invalidEscape)
                }
            default:
                if byte < 0x20 { throw error(.controlCharacterInString) }
                if byte >= 0x80 { sawNonASCII = true }
                bytes.append(byte)
                index += 1
            }
        }
        throw error(.unexpectedEnd)
    }

    mutating func parseHex4() throws -> UInt32 {
        guard index + 4 <= buffer.count else { throw error(.unexpectedEnd) }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let c = buffer[index]
            let digit: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw error(.invalidEscape)
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    /// Reads the four hex digits after `\u`, and a second escape when the first is a high surrogate.
    mutating func parseUnicodeEscape() throws -> Unicode.Scalar {
        let first = try parseHex4()
        switch first {
        case 0xD800...0xDBFF:
            guard index + 2 <= buffer.count, buffer[index] == UInt8(ascii: "\\"), buffer[index + 1] == UInt8(ascii: "u")
            else { throw error(.loneSurrogate) }
            index += 2
            let second = try parseHex4()
            guard (0xDC00...0xDFFF).contains(second) else { throw error(.loneSurrogate) }
            let combined = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            guard let scalar = Unicode.Scalar(combined) else { throw error(.loneSurrogate) }
            return scalar
        case 0xDC00...0xDFFF:
            throw error(.loneSurrogate)
        default:
            guard let scalar = Unicode.Scalar(first) else { throw error(.loneSurrogate) }
            return scalar
        }
    }

    /// Makes a string from bytes already free of quotes, escapes and control characters.
    /// ASCII needs no validation; otherwise the bytes must survive decoding unchanged, since
    /// decoding replaces every ill-formed sequence with U+FFFD.
    func makeString(_ bytes: UnsafeBufferPointer<UInt8>, offset: Int, checkScalars: Bool) throws -> String {
        let string = String(decoding: bytes, as: UTF8.self)
        if checkScalars {
            guard string.utf8.elementsEqual(bytes) else { throw JSONParseError(reason: .invalidUTF8, offset: offset) }
            for scalar in string.unicodeScalars where Self.isNoncharacter(scalar.value) {
                throw JSONParseError(reason: .noncharacter(scalar.value), offset: offset)
            }
        }
        return string
    }

    static func isNoncharacter(_ value: UInt32) -> Bool {
        (0xFDD0...0xFDEF).contains(value) || value & 0xFFFE == 0xFFFE
    }

    mutating func parseNumber() throws -> JSONNumber {
        let start = index
        let end = buffer.count
        var i = index
        var isInteger = true
        let negative = buffer[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        guard i < end else { throw error(.unexpectedEnd) }
        // Integers of up to 18 digits are accumulated while scanning; longer ones and
        // non-integers are converted from the literal.
        var magnitude: Int64 = 0
        var digits = 0
        if buffer[i] == UInt8(ascii: "0") {
            i += 1
            digits = 1
        } else if isDigit(buffer[i]) {
            while i < end, isDigit(buffer[i]) {
                if digits < 18 { magnitude = magnitude &* 10 &+ Int64(buffer[i] &- UInt8(ascii: "0")) }
                digits += 1
                i += 1
            }
        } else {
            index = i
            throw error(.invalidNumber)
        }
        if i < end, buffer[i] == UInt8(ascii: ".") {
            isInteger = false
            i += 1
            guard i < end, isDigit(buffer[i]) else {
                index = i
                throw error(.invalidNumber)
            }
            while i < end, isDigit(buffer[i]) { i += 1 }
        }
        if i < end, buffer[i] | 0x20 == UInt8(ascii: "e") {
            isInteger = false
            i += 1
            if i < end, buffer[i] == UInt8(ascii: "+") || buffer[i] == UInt8(ascii: "-") { i += 1 }
            guard i < end, isDigit(buffer[i]) else {
                index = i
                throw error(.invalidNumber)
            }
            while i < end, isDigit(buffer[i]) { i += 1 }
        }
        index = i
        let literal = String(decoding: UnsafeBufferPointer(rebasing: buffer[start..<i]), as: UTF8.self)
        if isInteger && digits <= 18 {
            let value = negative ? -magnitude : magnitude
            return JSONNumber(literal: literal, doubleValue: Double(value), int64Value: value)
        }
        if isInteger, let exact = Int64(literal) {
            return JSONNumber(literal: literal, doubleValue: Double(exact), int64Value: exact)
        }
        guard let double = Double(literal), double.isFinite else {
            throw JSONParseError(reason: .numberOutOfRange, offset: start)
        }
        return JSONNumber(literal: literal, doubleValue: double, int64Value: nil)
    }

    @inline(__always)
    func isDigit(_ byte: UInt8) -> Bool { byte &- UInt8(ascii: "0") < 10 }
}

/// A string hashed and compared by its UTF-8 bytes (not by Unicode canonical equivalence), for
/// sets and dictionaries of identifiers such as member names and `kid`s.
package struct ExactName: Hashable, Sendable {
    package let name: String
    package init(_ name: String) { self.name = name }
    package static func == (lhs: ExactName, rhs: ExactName) -> Bool { lhs.name.exactlyEquals(rhs.name) }
    /// Length, first and last byte of a name's UTF-8, as one integer.
    package static func fingerprint(_ name: String) -> UInt32 {
        var name = name
        return name.withUTF8 { bytes in
            guard let first = bytes.first, let last = bytes.last else { return 0 }
            return UInt32(truncatingIfNeeded: bytes.count) << 16 | UInt32(first) << 8 | UInt32(last)
        }
    }

    package func hash(into hasher: inout Hasher) {
        let utf8 = name.utf8
        hasher.combine(utf8.count)
        if utf8.withContiguousStorageIfAvailable({ hasher.combine(bytes: UnsafeRawBufferPointer($0)) }) == nil {
            for byte in utf8 { hasher.combine(byte) }
        }
    }
}

extension Unicode.Scalar {
    /// True for a scalar that can move a terminal's cursor, change its state or reorder text:
    /// C0 and C1 controls, DEL, and the bidirectional overrides, embeddings and isolates
    /// (the "Trojan Source" characters) and line and paragraph separators.
    package var isTerminalControl: Bool {
        switch value {
        case 0..<0x20, 0x7F..<0xA0, 0x200E, 0x200F, 0x2028...0x202E, 0x2066...0x2069: return true
        default: return false
        }
    }
}

extension String {
    /// The string quoted for an error message: at most 64 characters, quotes, backslashes and
    /// terminal controls escaped.
    package var quotedForMessage: String {
        var out = "\""
        for (count, scalar) in unicodeScalars.enumerated() {
            if count == 64 {
                out += "…"
                break
            }
            switch scalar.value {
            case 0x22: out += "\\\""
            case 0x5C: out += "\\\\"
            case _ where scalar.isTerminalControl: out += "\\u{\(String(scalar.value, radix: 16))}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// The string with every terminal control written as `\u{…}`, for printing text that came
    /// from outside (a `kid`, a file name, a claim) to a terminal.
    package var terminalSafe: String {
        guard unicodeScalars.contains(where: \.isTerminalControl) else { return self }
        var out = ""
        for scalar in unicodeScalars {
            if scalar.isTerminalControl {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
