public import ShadowCore

/// The protected header of a JWS (RFC 7515 §4), with the parameters ShadowKeys reads typed
/// and all of them available raw.
///
/// Keys carried in the header (`jwk`, `jku`, `x5u`, `x5c`) are never used to pick a key.
public struct JOSEHeader: Sendable, Hashable {
    /// The `alg` value as written (checked against the allow-list during verification).
    public let algorithm: String
    /// The `kid` value, if present.
    public let keyID: String?
    /// The `typ` value, if present.
    public let type: String?
    /// The `cty` value, if present.
    public let contentType: String?
    /// The names listed in `crit`, if present.
    public let critical: [String]?
    /// Every header parameter, in document order.
    public let json: JSONObject

    /// Reads the typed parameters of a header object.
    public init(_ json: JSONObject) throws {
        self.json = json
        guard let alg = json[Parameter.alg] else { throw JOSEError(.malformedToken, "header has no \"alg\" parameter") }
        guard let algorithm = alg.stringValue else {
            throw JOSEError(.malformedToken, "header \"alg\" must be a string, found \(alg.typeName)")
        }
        self.algorithm = algorithm
        keyID = try Self.optionalString(json, Parameter.kid)
        type = try Self.optionalString(json, Parameter.typ)
        contentType = try Self.optionalString(json, Parameter.cty)
        if let crit = json[Parameter.crit] {
            // RFC 7515 §4.1.11: a non-empty array of names, each present in the header and none
            // of them a name the specification itself defines.
            guard let names = crit.arrayValue?.compactMap(\.stringValue), names.count == crit.arrayValue?.count,
                !names.isEmpty
            else {
                throw JOSEError(.malformedToken, "header \"crit\" must be a non-empty array of strings")
            }
            for name in names {
                if Self.registeredNames.contains(ExactName(name)) {
                    throw JOSEError(
                        .malformedToken,
                        """
                        header \"crit\" lists \(name.quotedForMessage), which RFC 7515 defines; crit may list only \
                        extensions
                        """
                    )
                }
                if json[name] == nil {
                    throw JOSEError(
                        .malformedToken,
                        "header \"crit\" lists \(name.quotedForMessage), which the header does not contain")
                }
            }
            critical = names
        } else {
            critical = nil
        }
    }

    private static let registeredNames: Set<ExactName> = Set(
        ["alg", "jku", "jwk", "kid", "x5u", "x5c", "x5t", "x5t#S256", "typ", "cty", "crit"].map(ExactName.init)
    )

    private enum Parameter {
        static let alg = MemberKey("alg")
        static let kid = MemberKey("kid")
        static let typ = MemberKey("typ")
        static let cty = MemberKey("cty")
        static let crit = MemberKey("crit")
    }

    private static func optionalString(_ json: JSONObject, _ key: MemberKey) throws -> String? {
        guard let value = json[key] else { return nil }
        guard let string = value.stringValue else {
            throw JOSEError(.malformedToken, "header \"\(key.name)\" must be a string, found \(value.typeName)")
        }
        return string
    }

    /// True when `typ` names `expected`, compared as RFC 7515 §4.1.9 asks: case-insensitively,
    /// with an omitted `application/` prefix allowed on either side.
    public func typeMatches(_ expected: String) -> Bool {
        guard let type else { return false }
        return Self.normalizedMediaType(type) == Self.normalizedMediaType(expected)
    }

    private static func normalizedMediaType(_ value: String) -> String {
        let lower = String(decoding: value.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }, as: UTF8.self)
        if lower.utf8.starts(with: "application/".utf8), !lower.utf8.dropFirst(12).contains(UInt8(ascii: "/")) {
            return String(decoding: lower.utf8.dropFirst(12), as: UTF8.self)
        }
        return lower
    }
}
