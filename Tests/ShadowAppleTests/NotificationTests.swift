import Foundation
import ShadowApple
import ShadowCore
import ShadowJOSE
import ShadowTestSupport
import Testing

@Suite struct NotificationTests {
    let now: Int64 = 1_700_000_000
    let signer: JWSSigner
    let keys: JWKSet
    let verifier: AppleNotificationVerifier

    init() throws {
        signer = try JWSSigner.rs256(TestKeys.rsa, keyID: "apple-1")
        keys = try JWKSet(keys: [signer.publicJWK()])
        verifier = AppleNotificationVerifier(
            clientIDs: ["com.example.app", "com.example.web"],
            clock: .fixed(Date(timeIntervalSince1970: TimeInterval(now))))
    }

    private func body(events: JSONValue, extra: JSONObject = [:]) throws -> [UInt8] {
        var claims: JSONObject = [
            "iss": "https://appleid.apple.com", "aud": "com.example.app", "iat": .int(now), "exp": .int(now + 86400),
            "jti": "jti-42", "events": events,
        ]
        for member in extra { claims.set(member.name, member.value) }
        return Array(JSONValue.object(["payload": .string(try signer.sign(claims: claims))]).serialized().utf8)
    }

    private func events(_ object: JSONObject) -> JSONValue { .string(object.serialized()) }

    @Test(arguments: [
        ("email-disabled", "email-disabled"), ("email-enabled", "email-enabled"),
        ("consent-revoked", "consent-revoked"),
        ("account-delete", "account-deleted"), ("account-deleted", "account-deleted"),
    ])
    func knownTypes(raw: String, normalized: String) throws {
        let notification = try verifier.verify(
            body: body(events: events(["type": .string(raw), "sub": "001.abc.1", "event_time": 1_699_999_999_123])),
            keys: keys)
        #expect(notification.type.description == normalized && notification.rawType == raw && notification.isKnownType)
        #expect(
            notification.jwtID == "jti-42" && notification.audience == "com.example.app"
                && notification.subject == "001.abc.1")
        #expect(notification.eventTime == Date(timeIntervalSince1970: 1_699_999_999.123))
    }

    @Test func emailFieldsInBothForms() throws {
        for flag: JSONValue in ["true", true] {
            let n = try verifier.verify(
                body: body(
                    events: events([
                        "type": "email-disabled", "sub": "s", "event_time": 1, "email": "x@privaterelay.appleid.com",
                        "is_private_email": flag,
                    ])), keys: keys)
            #expect(n.email == "x@privaterelay.appleid.com" && n.isPrivateEmail == true)
        }
    }

    @Test func unknownTypesAreReportedNotFatal() throws {
        let n = try verifier.verify(
            body: body(events: events(["type": "account-renamed", "sub": "s", "event_time": 1])), keys: keys)
        #expect(!n.isKnownType && n.rawType == "account-renamed" && n.json["knownType"] == false)
    }

    @Test func malformedBodiesAndEvents() throws {
        for raw in ["", "[]", #"{"payload":1}"#, #"{"token":"x"}"#, "not json"] {
            #expect(throws: JOSEError(.malformedToken, ""), "\(raw)") {
                try verifier.verify(body: Array(raw.utf8), keys: keys)
            }
        }
        // The refusal says what is wrong with the body.
        for (raw, reason) in [
            (
                #"{"payload":"a","payload":"b"}"#,
                #"notification body is not valid JSON: duplicate member name "payload""#
            ),
            ("[]", "notification body is a JSON array, not an object"),
            (#"{"payload":1}"#, #"notification body has no "payload" string"#),
        ] {
            let error = #expect(throws: JOSEError.self) {
                try AppleNotificationVerifier.payload(fromBody: Array(raw.utf8))
            }
            #expect(error?.reason.hasPrefix(reason) == true, "\(error?.reason ?? "")")
        }
        for bad: JSONValue in [
            "not json", .string("[1,2]"), .string(#"{"sub":"s","event_time":1}"#),
            .string(#"{"type":"x","event_time":1}"#), .string(#"{"type":"x","sub":"s"}"#), 5,
            events(["type": "email-enabled", "sub": "s", "event_time": 1, "is_private_email": "yes"]),
        ] {
            #expect(throws: JOSEError(.claimsRejected, ""), "\(bad)") {
                try verifier.verify(body: body(events: bad), keys: keys)
            }
        }
        // The events object itself (not a string) is accepted too.
        #expect(throws: Never.self) {
            try verifier.verify(
                body: body(events: ["type": "consent-revoked", "sub": "s", "event_time": 1]), keys: keys)
        }
    }

    @Test func appleRulesApply() throws {
        let ok = events(["type": "consent-revoked", "sub": "s", "event_time": 1])
        #expect(throws: JOSEError(.claimsRejected, "")) {
            try verifier.verify(body: body(events: ok, extra: ["aud": "com.other.app"]), keys: keys)
        }
        #expect(throws: JOSEError(.claimsRejected, "")) {
            try verifier.verify(body: body(events: ok, extra: ["iss": "https://evil.example"]), keys: keys)
        }
        #expect(throws: JOSEError(.claimsRejected, "")) {
            try verifier.verify(body: body(events: ok, extra: ["exp": .int(now - 3600)]), keys: keys)
        }
        #expect(throws: JOSEError(.claimsRejected, "")) {
            try verifier.verify(body: body(events: ok, extra: ["jti": .null]), keys: keys)
        }
        #expect(
            try verifier.verify(body: body(events: ok, extra: ["aud": "com.example.web"]), keys: keys).audience
                == "com.example.web")
    }
}
