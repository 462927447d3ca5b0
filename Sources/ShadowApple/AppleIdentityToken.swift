#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import ShadowCore
public import ShadowJOSE
import Crypto

/// The claims of a verified Sign in with Apple identity token, typed.
///
/// Apple sends `email_verified`, `is_private_email` and `nonce_supported` as JSON strings
/// ("true"/"false") in older tokens and as booleans in newer ones; both read as `Bool`.
public struct AppleIdentityToken: Sendable {
    /// Apple's `real_user_status`.
    public enum RealUserStatus: String, Sendable {
        /// 0: not supported on the platform.
        case unsupported
        /// 1, or any value Apple has not defined.
        case unknown
        /// 2: very likely a real person.
        case likelyReal

        init(_ value: JSONValue?) {
            switch value?.numberValue?.int64Value {
            case 0?: self = .unsupported
            case 2?: self = .likelyReal
            default: self = .unknown
            }
        }
    }

    /// `sub`: the user's stable identifier for this team.
    public let subject: String
    /// `aud`: the client ID (App ID or Services ID) the token was issued to.
    public let audience: String
    /// `iat`.
    public let issuedAt: Date
    /// `exp`.
    public let expiresAt: Date
    /// `email`, when shared.
    public let email: String?
    /// `email_verified`.
    public let emailVerified: Bool?
    /// `is_private_email`: the address is a private relay address.
    public let isPrivateEmail: Bool?
    /// `real_user_status`, when present.
    public let realUserStatus: RealUserStatus?
    /// `nonce`.
    public let nonce: String?
    /// `nonce_supported`.
    public let nonceSupported: Bool?
    /// `transfer_sub`: the user's identifier under the team that transferred the app.
    public let transferSubject: String?
    /// `c_hash`.
    public let codeHash: String?
    /// `at_hash`.
    public let accessTokenHash: String?
    /// `auth_time`.
    public let authTime: Date?
    /// `org_id`, for managed Apple Accounts.
    public let organizationID: String?
    /// The verified token: header, claims, algorithm and the key that verified it.
    public let jwt: VerifiedJWT
    /// Every claim, as verified.
    public var claims: JWTClaims { jwt.claims }

    /// How long the token was issued for (`exp - iat`): 600 s in tokens up to 2020, 86400 s since.
    public var lifetime: TimeInterval { expiresAt.timeIntervalSince(issuedAt) }

    /// Reads the typed claims; ``AppleIdentityTokenValidator`` has already checked their types,
    /// that `aud` is one string (the accepted client ID) and that every time is in range.
    package init(_ jwt: VerifiedJWT) throws {
        let claims = jwt.claims
        let json = claims.json
        guard let subject = claims.subject, let issuedAt = claims.issuedAt, let expiresAt = claims.expiresAt,
            let audience = json["aud"]?.stringValue
        else { throw JOSEError(.claimsRejected, "identity token lacks sub, a single-string aud, iat or exp") }
        self.jwt = jwt
        self.subject = subject
        self.audience = audience
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        email = json["email"]?.stringValue
        emailVerified = Self.flexibleBool(json["email_verified"]) ?? nil
        isPrivateEmail = Self.flexibleBool(json["is_private_email"]) ?? nil
        realUserStatus = json["real_user_status"].map { RealUserStatus($0) }
        nonce = claims.nonce
        nonceSupported = Self.flexibleBool(json["nonce_supported"]) ?? nil
        transferSubject = json["transfer_sub"]?.stringValue
        codeHash = json["c_hash"]?.stringValue
        accessTokenHash = json["at_hash"]?.stringValue
        authTime = claims.date("auth_time")
        organizationID = json["org_id"]?.stringValue
    }

    /// A boolean sent as JSON `true`/`false` or as the string "true"/"false": `.some(nil)` when
    /// absent, `nil` when present in any other form.
    static func flexibleBool(_ value: JSONValue?) -> Bool?? {
        switch value {
        case .none: return .some(nil)
        case .bool(let flag)?: return flag
        case .string(let text)? where text.exactlyEquals("true"): return true
        case .string(let text)? where text.exactlyEquals("false"): return false
        default: return nil
        }
    }

    /// The typed fields as JSON (`--json` output of `verify-token --apple`).
    public var json: JSONObject {
        func date(_ value: Date?) -> JSONValue {
            value.map { .number(JSONNumber($0.timeIntervalSince1970) ?? JSONNumber(0)) } ?? .null
        }
        func text(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
        func flag(_ value: Bool?) -> JSONValue { value.map(JSONValue.bool) ?? .null }
        return [
            "sub": .string(subject), "aud": .string(audience), "iat": date(issuedAt), "exp": date(expiresAt),
            "lifetimeSeconds": .number(JSONNumber(lifetime) ?? JSONNumber(0)),
            "email": text(email), "emailVerified": flag(emailVerified), "isPrivateEmail": flag(isPrivateEmail),
            "realUserStatus": realUserStatus.map { .string($0.rawValue) } ?? .null, "nonce": text(nonce),
            "nonceSupported": flag(nonceSupported),
            "transferSub": text(transferSubject), "cHash": text(codeHash), "atHash": text(accessTokenHash),
            "authTime": date(authTime),
            "orgId": text(organizationID),
        ]
    }
}

/// Verifies Sign in with Apple identity tokens: RS256 only, `iss` Apple, `aud` among the
/// caller's client IDs, `exp`/`iat`/`sub` present, claim types as Apple documents them, and the
/// `nonce` rules of native and web sign-in.
public struct AppleIdentityTokenValidator: Sendable {
    /// Accepted audiences: the app's bundle IDs and Services IDs.
    public var clientIDs: [String]
    /// The raw nonce the client sent, if any; the token must carry it or its SHA-256 hex (or
    /// only the hex, with ``nonceMustBeHashed``).
    public var nonce: String?
    /// When true, the token's `nonce` must be the SHA-256 hex of ``nonce`` (native sign-in's
    /// form); by default the raw value is accepted too.
    public var nonceMustBeHashed = false
    /// When set, the header's `typ` must name this media type.
    public var expectedType: String?
    /// Largest accepted token, in bytes. Default 16 KiB.
    public var maxTokenBytes = CompactJWS.defaultMaxBytes
    /// Clock skew allowed, in seconds. Default 60.
    public var leeway: TimeInterval
    /// Largest accepted age since `iat`, if any.
    public var maxAge: TimeInterval?
    /// Further claims that must be present.
    public var requiredClaims: [String]
    /// Where "now" comes from.
    public var clock: WallClock

    /// A validator for tokens issued to `clientIDs`.
    public init(
        clientIDs: [String], nonce: String? = nil, leeway: TimeInterval = 60, maxAge: TimeInterval? = nil,
        requiredClaims: [String] = [], clock: WallClock = .system
    ) {
        self.clientIDs = clientIDs
        self.nonce = nonce
        self.leeway = leeway
        self.maxAge = maxAge
        self.requiredClaims = requiredClaims
        self.clock = clock
    }

    /// The JWT verifier with Apple's rules.
    public var verifier: JWTVerifier {
        var policy = ClaimPolicy(
            issuer: Apple.issuer, audiences: clientIDs, requireExpiration: true, leeway: leeway, maxAge: maxAge,
            requiredClaims: ["sub", "iat"] + requiredClaims)
        policy.additionalRules =
            [Self.claimTypes] + (nonce.map { [Self.nonceRule($0, hashedOnly: nonceMustBeHashed)] } ?? [])
        return JWTVerifier(
            algorithms: [.rs256], policy: policy, expectedType: expectedType, maxTokenBytes: maxTokenBytes, clock: clock
        )
    }

    /// Verifies `token` against a local key set, synchronously.
    /// - Throws: ``ShadowJOSE/JOSEError``, naming every Apple rule that failed.
    public func validate(_ token: String, keys: JWKSet) throws -> AppleIdentityToken {
        try AppleIdentityToken(verifier.verify(token, keys: keys))
    }

    /// Verifies `token` against any key source, normally Apple's fetched key set (``Apple/keysURL``).
    /// - Throws: ``ShadowJOSE/JOSEError``, naming every Apple rule that failed.
    public func validate(_ token: String, keys: some JWKSource) async throws -> AppleIdentityToken {
        try AppleIdentityToken(await verifier.verify(token, keys: keys))
    }

    /// Apple's boolean claims are booleans or "true"/"false"; `sub` and `aud` must be single strings.
    static let claimTypes = ClaimRule("apple claim types") { claims, _ in
        var failures: [ClaimFailure] = []
        for name in ["email_verified", "is_private_email", "nonce_supported"]
        where AppleIdentityToken.flexibleBool(claims[name]) == nil {
            let actual = claims[name]?.serialized() ?? "absent"
            failures.append(
                ClaimFailure(
                    claim: name, rule: .wrongType, expected: "true, false, \"true\" or \"false\"", actual: actual,
                    message: "\(name) must be a boolean or \"true\"/\"false\", found \(actual)"))
        }
        for name in ["email", "transfer_sub", "c_hash", "at_hash", "org_id"] {
            if let value = claims[name], value.stringValue == nil {
                failures.append(
                    ClaimFailure(
                        claim: name, rule: .wrongType, expected: "a string", actual: value.typeName,
                        message: "\(name) must be a string, found \(value.typeName)"))
            }
        }
        if let value = claims["auth_time"] {
            if let number = value.numberValue {
                if Timestamp(seconds: number.doubleValue) == nil {
                    failures.append(
                        ClaimFailure(
                            claim: "auth_time", rule: .outOfRange,
                            expected: "a NumericDate within \(Timestamp.rangeDescription)",
                            actual: String(number.literal.prefix(32)),
                            message: "auth_time lies outside \(Timestamp.rangeDescription)"))
                }
            } else {
                failures.append(
                    ClaimFailure(
                        claim: "auth_time", rule: .wrongType, expected: "a NumericDate", actual: value.typeName,
                        message: "auth_time must be a number, found \(value.typeName)"))
            }
        }
        // A transfer_sub names the subject before an app transfer, which a credential record
        // holds as it holds sub (Docs/credential-state.md).
        if let subject = claims["transfer_sub"]?.stringValue, !(1...255).contains(subject.utf8.count) {
            failures.append(
                ClaimFailure(
                    claim: "transfer_sub", rule: .mismatch, expected: "1 to 255 bytes",
                    actual: "\(subject.utf8.count) bytes",
                    message: "transfer_sub is \(subject.utf8.count) bytes; Apple's are 1 to 255"))
        }
        if let value = claims["sub"] {
            if let subject = value.stringValue {
                if !(1...255).contains(subject.utf8.count) {
                    failures.append(
                        ClaimFailure(
                            claim: "sub", rule: .mismatch, expected: "1 to 255 bytes",
                            actual: "\(subject.utf8.count) bytes",
                            message: "sub is \(subject.utf8.count) bytes; Apple's are 1 to 255"))
                }
            } else {
                failures.append(
                    ClaimFailure(
                        claim: "sub", rule: .wrongType, expected: "a string", actual: value.typeName,
                        message: "sub must be a string, found \(value.typeName)"))
            }
        }
        // Apple issues tokens now, not before 1970: an earlier iat is no token of theirs (and
        // could not be recorded as a sign-in, whose times start at 1970).
        if let iat = claims["iat"]?.numberValue, iat.doubleValue < 0 {
            failures.append(
                ClaimFailure(
                    claim: "iat", rule: .outOfRange, expected: "a NumericDate from 1970 on",
                    actual: String(iat.literal.prefix(32)),
                    message: "iat \(iat.literal.prefix(32)) is before 1970"))
        }
        failures += singleAudience(claims)
        return failures
    }

    /// Apple issues `aud` as one string: the client ID. An array is refused, so that the client
    /// ID a token was accepted for, and under which its state is looked up, is never ambiguous.
    static func singleAudience(_ claims: JWTClaims) -> [ClaimFailure] {
        guard let value = claims["aud"], value.stringValue == nil else { return [] }
        return [
            ClaimFailure(
                claim: "aud", rule: .wrongType, expected: "a single string (Apple's form)", actual: value.typeName,
                message: "aud must be a single string as Apple issues it, found \(value.typeName)")
        ]
    }

    /// `nonce` equals the raw nonce or its SHA-256 hex (only the hex with `hashedOnly`). A token
    /// without `nonce` passes only when it says `nonce_supported: false` (platforms that cannot
    /// carry one).
    static func nonceRule(_ raw: String, hashedOnly: Bool) -> ClaimRule {
        let hash = Hex.encode(SHA256.hash(data: Array(raw.utf8)))
        let candidates = hashedOnly ? [hash] : [raw, hash]
        return ClaimRule("apple nonce") { claims, _ in
            // The nonce may be a session secret: neither value appears in a failure.
            let expected =
                hashedOnly ? "the SHA-256 hex of the expected nonce" : "the expected nonce or its SHA-256 hex"
            guard let value = claims["nonce"] else {
                if AppleIdentityToken.flexibleBool(claims["nonce_supported"]) == .some(false) { return [] }
                return [
                    ClaimFailure(
                        claim: "nonce", rule: .missing, expected: expected, actual: nil,
                        message: "nonce is required (the token does not say nonce_supported: false) but absent")
                ]
            }
            guard let actual = value.stringValue else {
                return [
                    ClaimFailure(
                        claim: "nonce", rule: .wrongType, expected: "a string", actual: value.typeName,
                        message: "nonce must be a string, found \(value.typeName)")
                ]
            }
            let matches = candidates.contains { ConstantTime.equals(Array($0.utf8), Array(actual.utf8)) }
            return matches
                ? []
                : [
                    ClaimFailure(
                        claim: "nonce", rule: .mismatch, expected: expected, actual: "(not shown)",
                        message: "nonce is not \(expected) (values not shown)")
                ]
        }
    }
}
