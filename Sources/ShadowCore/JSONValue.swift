/// A JSON value as read by the strict reader: member order kept, numbers kept as written. Token
/// headers and claims (`JOSEHeader.json`, `JWTClaims.json`) are exposed as these.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// `{"code":…,"message":…}`: the error object of every JSON answer ShadowKeys gives, on the
    /// command line and over HTTP, always as the member `"error"` (Docs/cli.md, "JSON errors").
    package static func error(code: String, message: String) -> JSONValue {
        .object(["code": .string(code), "message": .string(message)])
    }

    /// The string, if this is a string.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The boolean, if this is `true` or `false`.
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The number, if this is a number.
    public var numberValue: JSONNumber? {
        if case .number(let value) = self { return value }
        return nil
    }

    /// The elements, if this is an array.
    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The members, if this is an object.
    public var objectValue: JSONObject? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// The JSON type name, for error messages.
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .number: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }
}

/// A JSON number: the literal exactly as it appeared, and its value.
public struct JSONNumber: Sendable, Hashable, CustomStringConvertible {
    /// The literal text, which follows the JSON number grammar (RFC 8259 §6).
    public let literal: String
    /// The value as an IEEE 754 double; always finite.
    public let doubleValue: Double
    /// The value as an integer, when the literal is an integer that fits in 64 bits.
    public let int64Value: Int64?

    package init(literal: String, doubleValue: Double, int64Value: Int64?) {
        self.literal = literal
        self.doubleValue = doubleValue
        self.int64Value = int64Value
    }

    /// A number from an integer.
    public init(_ value: Int64) {
        self.init(literal: String(value), doubleValue: Double(value), int64Value: value)
    }

    /// A number from a double; must be finite.
    public init?(_ value: Double) {
        guard value.isFinite else { return nil }
        if value == value.rounded(), let exact = Int64(exactly: value) {
            self.init(exact)
        } else {
            self.init(literal: "\(value)", doubleValue: value, int64Value: nil)
        }
    }

    public var description: String { literal }

    public static func == (lhs: JSONNumber, rhs: JSONNumber) -> Bool { lhs.literal == rhs.literal }
    public func hash(into hasher: inout Hasher) { hasher.combine(literal) }
}

/// A JSON object whose member names are unique (compared code point by code point) and whose
/// member order is kept.
public struct JSONObject: Sendable, Hashable, RandomAccessCollection, ExpressibleByDictionaryLiteral {
    /// One name/value pair.
    public struct Member: Sendable, Hashable {
        /// The member's name, compared code point by code point.
        public let name: String
        /// The member's value.
        public let value: JSONValue
        /// Length, first and last byte of `name`: one integer compare rules out most names.
        let fingerprint: UInt32

        /// A member.
        public init(name: String, value: JSONValue) {
            self.init(name: name, value: value, fingerprint: ExactName.fingerprint(name))
        }

        init(name: String, value: JSONValue, fingerprint: UInt32) {
            self.name = name
            self.value = value
            self.fingerprint = fingerprint
        }

        public static func == (lhs: Member, rhs: Member) -> Bool {
            lhs.name.exactlyEquals(rhs.name) && lhs.value == rhs.value
        }
        public func hash(into hasher: inout Hasher) {
            hasher.combine(ExactName(name))
            hasher.combine(value)
        }
    }

    /// The members, in document order.
    public private(set) var members: [Member]

    /// An empty object.
    public init() { members = [] }

    package init(uniqueMembers: [Member]) { members = uniqueMembers }

    /// An object from literal pairs; a repeated name is a programming error.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        members = []
        for (name, value) in elements {
            precondition(self[name] == nil, "duplicate member in JSONObject literal")
            members.append(Member(name: name, value: value))
        }
    }

    /// The first member's position.
    public var startIndex: Int { members.startIndex }
    /// The position after the last member.
    public var endIndex: Int { members.endIndex }
    /// The member at `position`, in document order.
    public subscript(position: Int) -> Member { members[position] }

    /// The value of the member named exactly `name`, if any.
    public subscript(name: String) -> JSONValue? {
        index(of: name, fingerprint: ExactName.fingerprint(name)).map { members[$0].value }
    }

    /// The position of the member named exactly `name`. Reads only fingerprints until one
    /// matches, without copying members.
    func index(of name: String, fingerprint: UInt32) -> Int? {
        var position = 0
        let count = members.count
        while position < count {
            if members[position].fingerprint == fingerprint && members[position].name.exactlyEquals(name) {
                return position
            }
            position += 1
        }
        return nil
    }

    /// Sets `name` to `value`, replacing an existing member in place or appending a new one;
    /// `nil` removes the member.
    public mutating func set(_ name: String, _ value: JSONValue?) {
        if let index = index(of: name, fingerprint: ExactName.fingerprint(name)) {
            if let value { members[index] = Member(name: name, value: value) } else { members.remove(at: index) }
        } else if let value {
            members.append(Member(name: name, value: value))
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByArrayLiteral, ExpressibleByNilLiteral, ExpressibleByDictionaryLiteral
{
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        var object = JSONObject()
        for (name, value) in elements {
            precondition(object[name] == nil, "duplicate member in JSONValue literal")
            object.set(name, value)
        }
        self = .object(object)
    }

    public init(stringLiteral value: String) { self = .string(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .number(JSONNumber(value)) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(nilLiteral: ()) { self = .null }

    /// A number value from an integer.
    public static func int(_ value: some BinaryInteger) -> JSONValue {
        .number(JSONNumber(Int64(clamping: value)))
    }
}
