import Crypto
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import ShadowCore

/// One claim rule that a token failed: which claim, what was expected, what was found.
public struct ClaimFailure: Sendable, Hashable, CustomStringConvertible {
    /// The kind of rule that failed.
    public struct Rule: Hashable, Sendable, CustomStringConvertible {
        /// Stable name, as printed in `--json` output.
        public let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// A required claim is absent.
        public static let missing = Rule("missing")
        /// The claim has the wrong JSON type.
        public static let wrongType = Rule("wrong_type")
        /// The claim's value is not the expected one.
        public static let mismatch = Rule("mismatch")
        /// `exp` has passed.
        public static let expired = Rule("expired")
        /// `nbf` is still in the future.
        public static let notYetValid = Rule("not_yet_valid")
        /// `iat` is in the future.
        public static let issuedInFuture = Rule("issued_in_future")
        /// `iat` is older than the maximum age.
        public static let tooOld = Rule("too_old")
        /// A time claim lies outside the years 0001 to 9999.
        public static let outOfRange = Rule("out_of_range")
    }

    /// The claim's name; header parameters are prefixed `header.` (as in `header.typ`).
    public let claim: String
    /// The rule that failed.
    public let rule: Rule
    /// What the policy expected.
    public let expected: String
    /// What the token had, or `nil` when the claim was absent.
    public let actual: String?
    /// A sentence saying all of the above.
    public let message: String

    /// A failure; custom ``ClaimRule``s make these.
    public init(claim: String, rule: Rule, expected: String, actual: String?, message: String) {
        self.claim = claim
        self.rule = rule
        self.expected = expected
        self.actual = actual
        self.message = message
    }

    public var description: String { message }
}

/// Registered claim names with their lookup fingerprints.
private enum Claim {
    static let iss = MemberKey("iss")
    static let aud = MemberKey("aud")
    static let exp = MemberKey("exp")
    static let nbf = MemberKey("nbf")
    static let iat = MemberKey("iat")
    static let nonce = MemberKey("nonce")
}

/// A rule beyond the registered claims, such as a provider's own claim formats.
public struct ClaimRule: Sendable {
    /// What the rule checks, for diagnostics.
    public let name: String
    private let check: @Sendable (JWTClaims, Date) -> [ClaimFailure]

    /// A rule that returns the failures it finds (none when the claims pass).
    public init(_ name: String, _ check: @escaping @Sendable (JWTClaims, Date) -> [ClaimFailure]) {
        self.name = name
        self.check = check
    }

    func evaluate(_ claims: JWTClaims, now: Date) -> [ClaimFailure] { check(claims, now) }
}

/// The rules a JWT claims set must satisfy (RFC 7519 §4.1), evaluated all at once so a
/// rejection lists every rule that failed, not only the first.
public struct ClaimPolicy: Sendable {
    /// How `nonce` must relate to the value the caller expects.
    public enum NonceRule: Sendable, Hashable {
        /// `nonce` equals this value exactly.
        case equals(String)
        /// `nonce` equals the lower-case hex SHA-256 of this value (as native Sign in with Apple sends it).
        case sha256HexOf(String)
        /// Either of the above.
        case equalsOrSHA256HexOf(String)
    }

    /// Exact `iss` to require; `nil` skips the check.
    public var issuer: String?
    /// Accepted audiences; when not empty, at least one `aud` value must be among them.
    public var audiences: [String]
    /// When true, every `aud` value must be an accepted audience, not only one.
    public var requireEveryAudienceAccepted: Bool
    /// Whether `exp` must be present. Default true.
    public var requireExpiration: Bool
    /// Clock skew allowed for `exp`, `nbf`, `iat` and the maximum age, in seconds. Default 60.
    public var leeway: TimeInterval
    /// Largest accepted age since `iat`, in seconds; when set, `iat` is required.
    public var maxAge: TimeInterval?
    /// Claims that must be present (and not null), such as `sub`.
    public var requiredClaims: [String]
    /// The `nonce` rule; when set, `nonce` is required.
    public var nonce: NonceRule? {
        didSet { nonceCandidates = Self.candidates(for: nonce) }
    }
    private var nonceCandidates: [String]
    /// Further rules, evaluated after the registered-claim rules.
    public var additionalRules: [ClaimRule] = []

    /// A policy; with no arguments it requires an unexpired `exp` and checks `nbf` and `iat`.
    public init(
        issuer: String? = nil,
        audiences: [String] = [],
        requireEveryAudienceAccepted: Bool = false,
        requireExpiration: Bool = true,
        leeway: TimeInterval = 60,
        maxAge: TimeInterval? = nil,
        requiredClaims: [String] = [],
        nonce: NonceRule? = nil
    ) {
        self.issuer = issuer
        self.audiences = audiences
        self.requireEveryAudienceAccepted = requireEveryAudienceAccepted
        self.requireExpiration = requireExpiration
        self.leeway = leeway
        self.maxAge = maxAge
        self.requiredClaims = requiredClaims
        self.nonce = nonce
        self.nonceCandidates = Self.candidates(for: nonce)
    }

    /// Every rule the claims fail at time `now`; empty when all pass.
    public func evaluate(_ claims: JWTClaims, now: Date) -> [ClaimFailure] {
        var failures: [ClaimFailure] = []
        let now = now.timeIntervalSince1970
        let json = claims.json

        if let issuer {
            checkString(json, Claim.iss, expected: issuer, &failures) { $0.exactlyEquals(issuer) }
        }
        if !audiences.isEmpty { checkAudience(json, &failures) }

        switch numericDate(json, Claim.exp, &failures) {
        case .some(let exp):
            if now >= exp + leeway {
                failures.append(
                    failure(
                        "exp", .expired, expected: "after now \(format(now)) - leeway \(format(leeway)) s",
                        actual: format(exp),
                        """
                        exp \(format(exp)) is \(format(now - exp)) s before now \(format(now)), leeway \
                        \(format(leeway)) s
                        """
                    ))
            }
        case .none where requireExpiration && json[Claim.exp] == nil:
            failures.append(
                failure("exp", .missing, expected: "a NumericDate", actual: nil, "exp is required but absent"))
        case .none: break
        }
        if let nbf = numericDate(json, Claim.nbf, &failures), now < nbf - leeway {
            failures.append(
                failure(
                    "nbf", .notYetValid, expected: "at most now \(format(now)) + leeway \(format(leeway)) s",
                    actual: format(nbf),
                    "nbf \(format(nbf)) is \(format(nbf - now)) s after now \(format(now)), leeway \(format(leeway)) s")
            )
        }
        let iat = numericDate(json, Claim.iat, &failures)
        if let iat, iat > now + leeway {
            failures.append(
                failure(
                    "iat", .issuedInFuture, expected: "at most now \(format(now)) + leeway \(format(leeway)) s",
                    actual: format(iat),
                    "iat \(format(iat)) is \(format(iat - now)) s after now \(format(now)), leeway \(format(leeway)) s")
            )
        }
        if let maxAge {
            if let iat {
                if now - iat > maxAge + leeway {
                    failures.append(
                        failure(
                            "iat", .tooOld, expected: "age at most \(format(maxAge)) s + leeway \(format(leeway)) s",
                            actual: format(iat),
                            """
                            token issued at \(format(iat)) is \(format(now - iat)) s old; maximum age \
                            \(format(maxAge)) s, leeway \(format(leeway)) s
                            """
                        ))
                }
            } else if json[Claim.iat] == nil {
                failures.append(
                    failure(
                        "iat", .missing, expected: "a NumericDate (a maximum age is set)", actual: nil,
                        "iat is required by the maximum age but absent"))
            }
        }
        for name in requiredClaims {
            switch json[name] {
            case nil, .null?:
                failures.append(
                    failure(name, .missing, expected: "present", actual: nil, "\(name) is required but absent"))
            default: break
            }
        }
        if let nonce { checkNonce(json, nonce, &failures) }
        for rule in additionalRules { failures += rule.evaluate(claims, now: Date(timeIntervalSince1970: now)) }
        return failures
    }

    // MARK: - Rules

    private func checkString(
        _ json: JSONObject, _ key: MemberKey, expected: String, _ failures: inout [ClaimFailure],
        _ matches: (String) -> Bool
    ) {
        let name = key.name
        guard let value = json[key] else {
            failures.append(
                failure(
                    name, .missing, expected: expected.quotedForMessage, actual: nil,
                    "\(name) is required to be \(expected.quotedForMessage) but absent"))
            return
        }
        guard let string = value.stringValue else {
            failures.append(
                failure(
                    name, .wrongType, expected: "a string", actual: value.typeName,
                    "\(name) must be a string, found \(value.typeName)"))
            return
        }
        if !matches(string) {
            failures.append(
                failure(
                    name, .mismatch, expected: expected.quotedForMessage, actual: string.quotedForMessage,
                    "\(name) is \(string.quotedForMessage); expected \(expected.quotedForMessage)"))
        }
    }

    private func checkAudience(_ json: JSONObject, _ failures: inout [ClaimFailure]) {
        func isAccepted(_ value: String) -> Bool { audiences.contains { $0.exactlyEquals(value) } }
        var expected: String { audiences.map(\.quotedForMessage).joined(separator: ", ") }
        let values: [String]
        switch json[Claim.aud] {
        case .none:
            failures.append(
                failure(
                    "aud", .missing, expected: "one of \(expected)", actual: nil,
                    "aud is required (one of \(expected)) but absent"))
            return
        case .string(let single)?:
            if isAccepted(single) { return }
            values = [single]
        case .array(let array)? where array.allSatisfy({ $0.stringValue != nil }):
            values = array.compactMap(\.stringValue)
            let acceptedCount = values.reduce(0) { $0 + (isAccepted($1) ? 1 : 0) }
            if acceptedCount == values.count && !values.isEmpty { return }
            if acceptedCount > 0 && !requireEveryAudienceAccepted { return }
        case let other?:
            failures.append(
                failure(
                    "aud", .wrongType, expected: "a string or an array of strings", actual: other.typeName,
                    "aud must be a string or an array of strings, found \(other.typeName)"))
            return
        }
        let actual = "[" + values.map(\.quotedForMessage).joined(separator: ", ") + "]"
        if let rejected = values.first(where: { !isAccepted($0) }), values.contains(where: isAccepted) {
            failures.append(
                failure(
                    "aud", .mismatch, expected: "only \(expected)", actual: actual,
                    """
                    aud value \(rejected.quotedForMessage) is not an accepted audience (every value must be one of \
                    \(expected))
                    """
                ))
        } else {
            failures.append(
                failure(
                    "aud", .mismatch, expected: "one of \(expected)", actual: actual,
                    "aud \(actual) contains none of the accepted audiences \(expected)"))
        }
    }

    /// The nonce may be a session secret, so neither the expected value nor the token's appears
    /// in a failure (which ends up in logs and `--json` output).
    private func checkNonce(_ json: JSONObject, _ rule: NonceRule, _ failures: inout [ClaimFailure]) {
        let expected: String
        switch rule {
        case .equals: expected = "the expected nonce"
        case .sha256HexOf: expected = "the SHA-256 hex of the expected nonce"
        case .equalsOrSHA256HexOf: expected = "the expected nonce or its SHA-256 hex"
        }
        guard let value = json[Claim.nonce] else {
            failures.append(failure("nonce", .missing, expected: expected, actual: nil, "nonce is required but absent"))
            return
        }
        guard let nonce = value.stringValue else {
            failures.append(
                failure(
                    "nonce", .wrongType, expected: "a string", actual: value.typeName,
                    "nonce must be a string, found \(value.typeName)"))
            return
        }
        if !nonceCandidates.contains(where: { ConstantTime.equals($0.utf8, nonce.utf8) }) {
            failures.append(
                failure(
                    "nonce", .mismatch, expected: expected, actual: "(not shown)",
                    "nonce is not \(expected) (values not shown)"))
        }
    }

    /// The accepted `nonce` values, worked out once when the rule is set.
    private static func candidates(for rule: NonceRule?) -> [String] {
        switch rule {
        case .none: return []
        case .equals(let raw)?: return [raw]
        case .sha256HexOf(let raw)?: return [sha256Hex(raw)]
        case .equalsOrSHA256HexOf(let raw)?: return [raw, sha256Hex(raw)]
        }
    }

    static func sha256Hex(_ raw: String) -> String {
        Hex.encode(SHA256.hash(data: Array(raw.utf8)))
    }

    /// The claim as seconds since the epoch; records a failure when present but not a number,
    /// or a number outside the years 0001 to 9999.
    private func numericDate(_ json: JSONObject, _ key: MemberKey, _ failures: inout [ClaimFailure]) -> Double? {
        let name = key.name
        guard let value = json[key] else { return nil }
        guard let number = value.numberValue else {
            failures.append(
                failure(
                    name, .wrongType, expected: "a NumericDate (number)", actual: value.typeName,
                    "\(name) must be a NumericDate (a number of seconds), found \(value.typeName)"))
            return nil
        }
        guard Timestamp(seconds: number.doubleValue) != nil else {
            let shown = number.literal.utf8.count <= 32 ? number.literal : String(number.literal.prefix(32)) + "…"
            failures.append(
                failure(
                    name, .outOfRange, expected: "a NumericDate within \(Timestamp.rangeDescription)", actual: shown,
                    "\(name) \(shown) lies outside \(Timestamp.rangeDescription)"))
            return nil
        }
        return number.doubleValue
    }

    private func failure(
        _ claim: String, _ rule: ClaimFailure.Rule, expected: String, actual: String?, _ message: String
    ) -> ClaimFailure {
        ClaimFailure(claim: claim, rule: rule, expected: expected, actual: actual, message: message)
    }

    /// Seconds for a message: whole ones as an integer, others to the millisecond (`422.606`,
    /// not the seventeen digits a Double prints).
    package static func format(_ seconds: Double) -> String {
        if seconds == seconds.rounded(), abs(seconds) < 1e15 { return String(Int64(seconds)) }
        let milliseconds = (seconds * 1000).rounded()
        guard abs(milliseconds) < 1e15 else { return String(seconds) }
        let magnitude = Int64(milliseconds).magnitude
        let fraction = String(magnitude % 1000)
        return (milliseconds < 0 ? "-" : "") + String(magnitude / 1000) + "."
            + String(repeating: "0", count: 3 - fraction.count) + fraction
    }

    private func format(_ seconds: Double) -> String { Self.format(seconds) }
}
