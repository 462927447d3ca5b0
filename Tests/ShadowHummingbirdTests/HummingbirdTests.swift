import Foundation
import Hummingbird
import HTTPTypes
import HummingbirdTesting
import NIOCore
import ShadowApple
import ShadowCore
import ShadowCredentials
import ShadowServer
import ShadowHummingbird
import ShadowJOSE
import ShadowSQLite
import ShadowTestSupport
import ShadowVault
import Testing

/// The Hummingbird product over a real SQLite store: the notification route and the bearer
/// middleware, through Hummingbird's router test client.
@Suite struct HummingbirdTests {
    static let client = "com.example.app"
    let directory: TemporaryDirectory
    let signer: JWSSigner
    let keys: JWKSet
    let now = Int64(Date().timeIntervalSince1970)

    init() throws {
        directory = try TemporaryDirectory()
        signer = try JWSSigner.rs256(TestKeys.rsa, keyID: "apple-1")
        keys = try JWKSet(json: Array(TestKeys.jwksJSON([try signer.publicJWK()]).utf8))
    }

    func identityToken(subject: String, issuedAt: Int64) throws -> String {
        try signer.sign(claims: [
            "iss": "https://appleid.apple.com", "aud": .string(Self.client), "sub": .string(subject),
            "iat": .int(issuedAt), "exp": .int(issuedAt + 600),
        ])
    }

    func notification(_ type: String, subject: String, jti: String) throws -> ByteBuffer {
        let events: JSONObject = ["type": .string(type), "sub": .string(subject), "event_time": .int((now - 1) * 1000)]
        let claims: JSONObject = [
            "iss": "https://appleid.apple.com", "aud": .string(Self.client), "iat": .int(now - 1),
            "exp": .int(now + 600), "jti": .string(jti),
            "events": .string(JSONValue.object(events).serialized()),
        ]
        return ByteBuffer(string: JSONValue.object(["payload": .string(try signer.sign(claims: claims))]).serialized())
    }

    @Test func notificationsRevokeAndTheMiddlewareRefusesRevokedUsers() async throws {
        let store = try await SQLiteCredentialStore.open(
            path: directory.path + "/state.sqlite", unlock: .key(SecretBytes((0..<32).map { UInt8($0) })))
        try await closing({ await store.close() }) {
            let router = Router(context: AppleIdentityContext.self)
            router.addAppleNotifications(
                receiver: AppleNotificationReceiver(clientIDs: [Self.client], keys: keys, store: store))
            let validator = AppleIdentityTokenValidator(clientIDs: [Self.client])
            router.group("api").add(
                middleware: AppleIdentityMiddleware(validator: validator, keys: keys, states: store)
            )
            .get("me") { _, context -> String in
                """
                \(context.appleIdentity?.token.subject ?? "-") \
                \(context.appleIdentity?.status?.state.description ?? "-")
                """
            }
            let app = Application(router: router)
            let subject = "001.hb.1"
            _ = try await store.apply([
                try CredentialEvent(
                    kind: .signIn, clientID: Self.client, subject: subject, timeMilliseconds: (now - 100) * 1000,
                    id: "s1")
            ])
            let token = try identityToken(subject: subject, issuedAt: now - 50)
            try await app.test(.router) { client in
                try await client.execute(uri: "/api/me", method: .get, headers: [.authorization: "Bearer \(token)"]) {
                    response in
                    #expect(response.status == .ok)
                    #expect(String(buffer: response.body) == "\(subject) authorized")
                }
                try await client.execute(uri: "/api/me", method: .get) { response in
                    #expect(response.status == .unauthorized && response.headers[.wwwAuthenticate] == "Bearer")
                    #expect(String(buffer: response.body).contains("missing_token"))
                }
                try await client.execute(uri: "/api/me", method: .get, headers: [.authorization: "Bearer x.y.z"]) {
                    response in
                    #expect(response.status == .unauthorized)
                }
                // The scheme in any case; anything else is no bearer token at all.
                try await client.execute(uri: "/api/me", method: .get, headers: [.authorization: "bEARER \(token)"]) {
                    response in
                    #expect(response.status == .ok)
                }
                for header in ["Basic \(token)", "Bearer", "Bearer ", "Bearer\t\(token)", "Bearér \(token)"] {
                    try await client.execute(uri: "/api/me", method: .get, headers: [.authorization: header]) {
                        response in
                        #expect(
                            response.status == .unauthorized && String(buffer: response.body).contains("missing_token"),
                            "\(header.prefix(10))")
                    }
                }
                // Not one token (two credentials, two headers joined, a stray space): 400 invalid_request.
                for header in ["Bearer \(token), Bearer \(token)", "Bearer  \(token)", "Bearer \(token) x"] {
                    try await client.execute(uri: "/api/me", method: .get, headers: [.authorization: header]) {
                        response in
                        #expect(
                            response.status == .badRequest && String(buffer: response.body).contains("invalid_request"))
                        #expect(response.headers[.wwwAuthenticate] == #"Bearer error="invalid_request""#)
                    }
                }
                // Apple revokes consent: 200 applied, then 200 duplicate; the token is refused from then on.
                let body = try notification("consent-revoked", subject: subject, jti: "hb-1")
                try await client.execute(uri: "/apple/notifications", method: .post, body: body) { response in
                    #expect(response.status == .ok && String(buffer: response.body) == #"{"outcome":"applied"}"#)
                }
                try await client.execute(uri: "/apple/notifications", method: .post, body: body) { response in
                    #expect(response.status == .ok && String(buffer: response.body) == #"{"outcome":"duplicate"}"#)
                }
                try await client.execute(uri: "/api/me", method: .get, headers: [.authorization: "Bearer \(token)"]) {
                    response in
                    #expect(response.status == .unauthorized)
                    #expect(String(buffer: response.body).contains("credential_revoked"))
                }
                // The one enforcement rule: a token issued after the revocation (the user signed in
                // with Apple again) passes, as it does for verify-token --state; the state shows why.
                let later = try identityToken(subject: subject, issuedAt: now + 1)
                try await client.execute(uri: "/api/me", method: .get, headers: [.authorization: "Bearer \(later)"]) {
                    response in
                    #expect(response.status == .ok)
                    #expect(String(buffer: response.body) == "\(subject) revoked")
                }
                try await client.execute(
                    uri: "/apple/notifications", method: .post, body: ByteBuffer(string: "not json")
                ) {
                    response in
                    #expect(response.status == .badRequest)
                }
                try await client.execute(
                    uri: "/apple/notifications", method: .post, body: ByteBuffer(repeating: 0x20, count: 64 * 1024 + 10)
                ) { response in
                    #expect(response.status == .contentTooLarge)
                }
            }
            #expect(try await store.verifyAudit().entries == 2)
        }
    }
}
