import Foundation
import HTTPTypes
import ShadowApple
import ShadowCore
import ShadowCredentials
import ShadowServer
import ShadowJOSE
import ShadowSQLite
import ShadowTestSupport
import ShadowVault
import Testing

/// The notification endpoint's core, with Apple-shaped notifications signed by a test key and a
/// real SQLite store: every event type, both `account-delete` spellings, and every refusal.
@Suite struct NotificationReceiverTests {
    static let client = "com.example.app"
    static let now: Int64 = 1_800_000_000
    let directory: TemporaryDirectory
    let signer: JWSSigner
    let keys: JWKSet
    let clock = ManualClock(Date(timeIntervalSince1970: TimeInterval(now)))

    init() throws {
        directory = try TemporaryDirectory()
        signer = try JWSSigner.rs256(TestKeys.rsa, keyID: "apple-1")
        keys = try JWKSet(json: Array(TestKeys.jwksJSON([try signer.publicJWK()]).utf8))
    }

    func body(
        _ type: String, subject: String = "001.aaa.1", jti: String, issuedAt: Int64 = now - 5,
        eventTimeMs: Int64 = now * 1000 - 5000, audience: String = client,
        expiresAt: Int64? = nil, signer: JWSSigner? = nil, extra: JSONObject = [:]
    ) throws -> [UInt8] {
        var events: JSONObject = ["type": .string(type), "sub": .string(subject), "event_time": .int(eventTimeMs)]
        for member in extra { events.set(member.name, member.value) }
        let claims: JSONObject = [
            "iss": "https://appleid.apple.com", "aud": .string(audience), "iat": .int(issuedAt),
            "exp": .int(expiresAt ?? issuedAt + 86400), "jti": .string(jti),
            "events": .string(JSONValue.object(events).serialized()),
        ]
        return Array(
            JSONValue.object(["payload": .string(try (signer ?? self.signer).sign(claims: claims))]).serialized().utf8)
    }

    func receiver(_ store: any CredentialStateStore) -> AppleNotificationReceiver {
        AppleNotificationReceiver(clientIDs: [Self.client], keys: keys, store: store, clock: clock.clock)
    }

    @Test func everyEventTypeIsAppliedOnceAndRepeatsAreDuplicates() async throws {
        let store = try await SQLiteCredentialStore.open(
            path: directory.path + "/state.sqlite", unlock: .key(SecretBytes((0..<32).map { UInt8($0) })))
        defer { Task { await store.close() } }
        let receiver = receiver(store)
        let cases: [(type: String, subject: String, extra: JSONObject, state: CredentialState, forwarding: Bool?)] = [
            ("consent-revoked", "u.consent", [:], .revoked, nil),
            ("account-delete", "u.delete", [:], .revoked, nil),
            ("account-deleted", "u.deleted", [:], .revoked, nil),
            (
                "email-disabled", "u.mail", ["email": "x@privaterelay.appleid.com", "is_private_email": "true"],
                .notFound, false
            ),
            (
                "email-enabled", "u.mail2", ["email": "y@privaterelay.appleid.com", "is_private_email": true],
                .notFound, true
            ),
        ]
        for (index, item) in cases.enumerated() {
            let request = try body(item.type, subject: item.subject, jti: "jti-\(index)", extra: item.extra)
            let first = await receiver.receive(request)
            #expect(
                first.status == 200 && first.outcome == .applied,
                "\(item.type): \(first.outcome) \(String(decoding: first.body, as: UTF8.self))")
            let status = try await store.status(clientID: Self.client, subject: item.subject)
            #expect(status.state == item.state && status.emailForwarding == item.forwarding, "\(item.type)")
            let again = await receiver.receive(request)
            #expect(again.status == 200 && again.outcome == .duplicate, "\(item.type) repeated: \(again.outcome)")
            #expect(String(decoding: again.body, as: UTF8.self) == #"{"outcome":"duplicate"}"#)
        }
        // Each transition logged exactly once.
        #expect(try await store.verifyAudit().entries == cases.count)
        // A second receiver on the same store (another instance) also sees the repeat as a duplicate.
        let other = try await SQLiteCredentialStore.open(
            path: directory.path + "/state.sqlite", unlock: .key(SecretBytes((0..<32).map { UInt8($0) })))
        defer { Task { await other.close() } }
        #expect(
            await self.receiver(other).receive(try body("consent-revoked", subject: "u.consent", jti: "jti-0")).outcome
                == .duplicate)
        // An undocumented type: 200, nothing applied.
        let unknown = await receiver.receive(try body("account-paused", subject: "u.unknown", jti: "jti-u"))
        #expect(unknown.status == 200 && unknown.outcome == .ignored)
        #expect(try await store.status(clientID: Self.client, subject: "u.unknown") == .notFound)
        #expect(try await store.verifyAudit().entries == cases.count)
    }

    @Test func refusalsCarryTheirStatusAndChangeNothing() async throws {
        let store = try await SQLiteCredentialStore.open(
            path: directory.path + "/state.sqlite", unlock: .key(SecretBytes((0..<32).map { UInt8($0) })))
        defer { Task { await store.close() } }
        let receiver = receiver(store)
        let forger = try JWSSigner.rs256(TestKeys.rsa2, keyID: "apple-1")
        let cases: [(String, [UInt8], HTTPResponse.Status, String)] = [
            ("forged signature", try body("consent-revoked", jti: "f", signer: forger), 401, "invalid_signature"),
            ("expired", try body("consent-revoked", jti: "e", issuedAt: Self.now - 3 * 86400), 401, "claims_rejected"),
            ("wrong aud", try body("consent-revoked", jti: "a", audience: "com.other.app"), 401, "claims_rejected"),
            (
                "stale iat, unexpired",
                try body("consent-revoked", jti: "s", issuedAt: Self.now - 3 * 86400, expiresAt: Self.now + 3600), 401,
                "stale"
            ),
            ("not JSON", Array("payload=abc".utf8), 400, "malformed_token"),
            ("no payload", Array(#"{"payloads":"x"}"#.utf8), 400, "malformed_token"),
            ("malformed token", Array(#"{"payload":"a.b"}"#.utf8), 400, "malformed_token"),
            ("over 64 KiB", Array(repeating: 0x20, count: 64 * 1024 + 1), 413, "too_large"),
        ]
        for (name, request, status, code) in cases {
            let response = await receiver.receive(request)
            #expect(response.status == status, "\(name): \(response.status)")
            let json = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
            #expect((json["error"] as? [String: Any])?["code"] as? String == code, "\(name): \(json)")
        }
        #expect(try await store.status(clientID: Self.client, subject: "001.aaa.1") == .notFound)
        #expect(try await store.verifyAudit().entries == 0)
        // The store gone: 503, so Apple retries.
        await store.close()
        let unavailable = await receiver.receive(try body("consent-revoked", jti: "late"))
        #expect(unavailable.status == 503 && unavailable.outcome == .unavailable)
    }
}
