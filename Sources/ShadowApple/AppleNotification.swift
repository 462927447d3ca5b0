#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import ShadowCore
public import ShadowJOSE

/// A verified Sign in with Apple server-to-server notification.
public struct AppleNotification: Sendable {
    /// The event's `type`.
    public enum EventType: Sendable, Hashable, CustomStringConvertible {
        /// `email-disabled`: the user stopped forwarding from their private relay address.
        case emailDisabled
        /// `email-enabled`: the user resumed forwarding.
        case emailEnabled
        /// `consent-revoked`: the user stopped using their Apple Account with the app.
        case consentRevoked
        /// `account-delete` (older pages) or `account-deleted` (current pages): the Apple Account is gone.
        case accountDeleted
        /// A type Apple has not documented yet; reported, not fatal.
        case unknown(String)

        init(_ raw: String) {
            switch raw {
            case "email-disabled": self = .emailDisabled
            case "email-enabled": self = .emailEnabled
            case "consent-revoked": self = .consentRevoked
            case "account-delete", "account-deleted": self = .accountDeleted
            default: self = .unknown(raw)
            }
        }

        public var description: String {
            switch self {
            case .emailDisabled: return "email-disabled"
            case .emailEnabled: return "email-enabled"
            case .consentRevoked: return "consent-revoked"
            case .accountDeleted: return "account-deleted"
            case .unknown(let raw): return raw
            }
        }
    }

    /// `jti`: Apple retries, so the same notification can arrive twice; use this to drop duplicates.
    public let jwtID: String
    /// `aud`: the client ID the event is for.
    public let audience: String
    /// `iat`.
    public let issuedAt: Date
    public let type: EventType
    /// The `type` as Apple wrote it.
    public let rawType: String
    /// The user's `sub`.
    public let subject: String
    /// `event_time` (Apple sends milliseconds).
    public let eventTime: Date
    /// `email`, on email events.
    public let email: String?
    /// `is_private_email`, on email events ("true"/"false" or a boolean).
    public let isPrivateEmail: Bool?
    /// The verified claims.
    public let claims: JWTClaims
    /// The decoded `events` object.
    public let event: JSONObject

    /// False for a type Apple has not documented.
    public var isKnownType: Bool {
        if case .unknown = type { return false }
        return true
    }

    /// The typed fields as JSON (`shadow-keys apple notification` output).
    public var json: JSONObject {
        [
            "jti": .string(jwtID), "aud": .string(audience),
            "iat": .number(JSONNumber(issuedAt.timeIntervalSince1970) ?? JSONNumber(0)),
            "type": .string(rawType), "knownType": .bool(isKnownType),
            "sub": .string(subject), "eventTimeMs": .int(Timestamp(eventTime)?.milliseconds ?? 0),
            "eventTime": .string(Timestamp.rfc3339(eventTime)), "email": email.map(JSONValue.string) ?? .null,
            "isPrivateEmail": isPrivateEmail.map(JSONValue.bool) ?? .null,
        ]
    }
}

/// Verifies the body Apple POSTs to a notification endpoint: `{"payload": "<JWS>"}`, signed by
/// Apple (RS256), `iss` Apple, `aud` one of the configured client IDs, unexpired.
public struct AppleNotificationVerifier: Sendable {
    public var clientIDs: [String]
    public var leeway: TimeInterval
    public var clock: WallClock

    /// The largest notification body read.
    public static let maxBodyBytes = 64 * 1024

    public init(clientIDs: [String], leeway: TimeInterval = 60, clock: WallClock = .system) {
        self.clientIDs = clientIDs
        self.leeway = leeway
        self.clock = clock
    }

    /// The JWT verifier with Apple's rules for notifications: RS256, `iss` Apple, `aud` one
    /// string among the client IDs, `jti`, `events` and `iat` present.
    public var verifier: JWTVerifier {
        var policy = ClaimPolicy(
            issuer: Apple.issuer, audiences: clientIDs, requireExpiration: true, leeway: leeway,
            requiredClaims: ["jti", "events", "iat"])
        policy.additionalRules = [
            ClaimRule("apple single aud") { claims, _ in AppleIdentityTokenValidator.singleAudience(claims) }
        ]
        return JWTVerifier(algorithms: [.rs256], policy: policy, clock: clock)
    }

    /// The JWS in a notification body.
    /// - Throws: ``JOSEError/Code/malformedToken`` when the body is not `{"payload": "<string>"}`.
    public static func payload(fromBody body: some Collection<UInt8>) throws -> String {
        guard body.count <= maxBodyBytes else {
            throw JOSEError(.malformedToken, "notification body exceeds \(maxBodyBytes) bytes")
        }
        let object: JSONObject
        switch StrictJSON.object(body, limits: .jose) {
        case .success(let value): object = value
        case .failure(let what): throw JOSEError(.malformedToken, "notification body is \(what)")
        }
        guard let payload = object["payload"]?.stringValue else {
            throw JOSEError(.malformedToken, "notification body has no \"payload\" string")
        }
        return payload
    }

    /// Verifies a body against a local key set, synchronously.
    public func verify(body: some Collection<UInt8>, keys: JWKSet) throws -> AppleNotification {
        try notification(from: verifier.verify(Self.payload(fromBody: body), keys: keys))
    }

    /// Verifies a body against any key source, normally Apple's fetched key set.
    public func verify(body: some Collection<UInt8>, keys: some JWKSource) async throws -> AppleNotification {
        try notification(from: await verifier.verify(Self.payload(fromBody: body), keys: keys))
    }

    /// Reads the event from verified claims. `events` is a JSON string (an object is accepted too).
    /// - Throws: ``JOSEError/Code/claimsRejected`` naming what is wrong with `events`.
    public func notification(from verified: VerifiedJWT) throws -> AppleNotification {
        let claims = verified.claims
        func reject(_ message: String) -> JOSEError {
            JOSEError(
                .claimsRejected, message,
                claimFailures: [
                    ClaimFailure(
                        claim: "events", rule: .wrongType,
                        expected: "a JSON object (as a string) with type, sub and event_time", actual: nil,
                        message: message)
                ])
        }
        let event: JSONObject
        switch claims["events"] {
        case .string(let text)?:
            switch StrictJSON.object(Array(text.utf8), limits: .jose) {
            case .success(let object): event = object
            case .failure(let what): throw reject("events is \(what)")
            }
        case .object(let object)?:
            event = object
        default:
            throw reject("events is missing or neither a string nor an object")
        }
        guard let rawType = event["type"]?.stringValue else { throw reject("events has no type") }
        guard let subject = event["sub"]?.stringValue, !subject.isEmpty else { throw reject("events has no sub") }
        guard let milliseconds = event["event_time"]?.numberValue?.doubleValue else {
            throw reject("events has no numeric event_time")
        }
        // Milliseconds since 1970, from 1970 (event times never precede it) to 9999.
        guard milliseconds >= 0, let eventTime = Timestamp(seconds: milliseconds / 1000) else {
            throw reject("event_time \(milliseconds) ms lies outside 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z")
        }
        guard let jti = claims.jwtID, let issuedAt = claims.issuedAt, let audience = claims["aud"]?.stringValue else {
            throw reject("the notification lacks jti, iat or a single-string aud")
        }
        let privateEmail = AppleIdentityToken.flexibleBool(event["is_private_email"])
        guard let isPrivateEmail = privateEmail else {
            throw reject("is_private_email must be a boolean or \"true\"/\"false\"")
        }
        return AppleNotification(
            jwtID: jti, audience: audience, issuedAt: issuedAt, type: .init(rawType), rawType: rawType,
            subject: subject,
            eventTime: eventTime.date, email: event["email"]?.stringValue, isPrivateEmail: isPrivateEmail,
            claims: claims, event: event)
    }
}
