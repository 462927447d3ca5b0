import Crypto
import Foundation
import ShadowCore
import ShadowJOSE
import ShadowTestSupport
import Testing

/// `shadow-keys-server serve --sessions-issuer …` against a loopback fake of Apple: sign-in,
/// refresh, reuse, the device list, the JWKS, bad requests, and Apple's consent-revoked ending
/// every session.
@Suite(.tags(.multiProcess)) struct ServeSessionsTests {
    static let client = "com.example.app"
    let directory: TemporaryDirectory
    let keyFile: String
    let p8: String
    let apple: FakeAppleServer

    init() throws {
        directory = try TemporaryDirectory()
        keyFile = try directory.write(
            "state.key", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n", mode: 0o600)
        p8 = try directory.write("apple.p8", TestKeys.p256.pemRepresentation, mode: 0o600)
        apple = try FakeAppleServer(clientKey: TestKeys.p256.publicKey)
    }

    func identityToken(subject: String, nonce: String? = nil) throws -> String {
        let now = Int64(Date().timeIntervalSince1970)
        var claims: JSONObject = [
            "iss": "https://appleid.apple.com", "aud": .string(Self.client), "sub": .string(subject),
            "iat": .int(now - 1), "exp": .int(now + 600),
        ]
        if let nonce { claims.set("nonce", .string(nonce)) }
        return try apple.identitySigner.sign(claims: claims)
    }

    func notification(_ type: String, subject: String) throws -> [UInt8] {
        let now = Int64(Date().timeIntervalSince1970)
        let events: JSONObject = ["type": .string(type), "sub": .string(subject), "event_time": .int((now - 1) * 1000)]
        let claims: JSONObject = [
            "iss": "https://appleid.apple.com", "aud": .string(Self.client), "iat": .int(now - 1),
            "exp": .int(now + 600), "jti": .string(UUID().uuidString),
            "events": .string(JSONValue.object(events).serialized()),
        ]
        return Array(
            JSONValue.object(["payload": .string(try apple.identitySigner.sign(claims: claims))]).serialized().utf8)
    }

    func json(_ text: String) throws -> JSONObject {
        guard case .object(let object) = try StrictJSON.parse(text) else { throw CLIRunnerError("not JSON: \(text)") }
        return object
    }

    @Test func signInRefreshReuseDevicesAndRevocation() throws {
        let port = try PostgresCluster.freePortForTests()
        let server = try ChildProcess(
            CLIRunner.serverExecutable.path,
            [
                "serve", "--listen", "127.0.0.1:\(port)", "--client-id", Self.client, "--jwks",
                apple.baseURL + "/auth/keys", "--allow-http-loopback", "--base-url", apple.baseURL, "--p8", p8,
                "--team-id", apple.teamID, "--key-id", apple.keyID, "--store", "sqlite:\(directory.path)/state.sqlite",
                "--key-file", keyFile, "--sessions-issuer", "https://api.example.com", "--refresh-grace", "0",
            ], environment: [:], removing: ["SHADOW_KEYS_STATE_STORE"])
        defer {
            server.kill()
            _ = try? server.wait(timeout: 10)
        }
        var ready = false
        for _ in 0..<300 where !ready {
            if (try? ServeCLITests.http("GET", port: port, path: "/healthz"))?.status == 200 {
                ready = true
            } else {
                usleep(100_000)
            }
        }
        try #require(ready, "serve never answered /healthz")

        // Sign in: the identity token is checked, the code exchanged with Apple.
        let body = JSONValue.object([
            "identityToken": .string(try identityToken(subject: "001234.user.0042", nonce: "n-1")),
            "authorizationCode": .string(apple.issueCode(for: "001234.user.0042", nonce: "n-1")), "nonce": "n-1",
            "deviceName": "Ada's iPhone",
        ]).serialized()
        let signIn = try ServeCLITests.exchange("POST", port: port, path: "/auth/apple", body: Array(body.utf8))
        #expect(signIn.status == 200, "\(signIn.body)")
        let issued = try json(signIn.body)
        let refreshToken = try #require(issued["refreshToken"]?.stringValue)
        let accessToken = try #require(issued["accessToken"]?.stringValue)
        #expect(issued["expiresIn"] == .int(3600) && issued["userId"]?.stringValue?.count == 36)
        #expect(signIn.headers.lowercased().contains("cache-control: no-store"))

        // The JWKS verifies the access token (what verify-token --jwks URL does).
        let jwks = try ServeCLITests.exchange("GET", port: port, path: "/.well-known/jwks.json")
        #expect(jwks.status == 200 && jwks.headers.lowercased().contains("cache-control: public, max-age=300"))
        let verified = try JWTVerifier(expectedType: "at+jwt").verify(accessToken, keys: JWKSet(jsonText: jwks.body))
        #expect(verified.claims["sid"]?.stringValue != nil)

        // Refresh, then reuse of the old token (grace 0) revokes the session.
        let refreshed = try ServeCLITests.exchange(
            "POST", port: port, path: "/auth/refresh",
            body: Array(JSONValue.object(["refreshToken": .string(refreshToken)]).serialized().utf8))
        #expect(refreshed.status == 200)
        let next = try #require(try json(refreshed.body)["refreshToken"]?.stringValue)
        usleep(20_000)
        let reused = try ServeCLITests.exchange(
            "POST", port: port, path: "/auth/refresh",
            body: Array(JSONValue.object(["refreshToken": .string(refreshToken)]).serialized().utf8))
        #expect(reused.status == 401 && reused.body.contains("refresh_token_reused"))
        let afterReuse = try ServeCLITests.exchange(
            "POST", port: port, path: "/auth/refresh",
            body: Array(JSONValue.object(["refreshToken": .string(next)]).serialized().utf8))
        #expect(afterReuse.status == 401)

        // A second device, its list, and bad requests.
        let second = try ServeCLITests.exchange(
            "POST", port: port, path: "/auth/apple",
            body: Array(
                JSONValue.object([
                    "identityToken": .string(try identityToken(subject: "001234.user.0042")),
                    "authorizationCode": .string(apple.issueCode(for: "001234.user.0042")), "deviceName": "iPad",
                ]).serialized().utf8))
        #expect(second.status == 200)
        let secondTokens = try json(second.body)
        let bearer = "Authorization: Bearer " + (secondTokens["accessToken"]?.stringValue ?? "")
        let devices = try ServeCLITests.exchange("GET", port: port, path: "/auth/sessions", headers: [bearer])
        #expect(devices.status == 200 && devices.body.contains("iPad"))
        let anonymous = try ServeCLITests.exchange("GET", port: port, path: "/auth/sessions")
        #expect(anonymous.status == 401 && anonymous.headers.lowercased().contains("www-authenticate: bearer"))
        let garbage = try ServeCLITests.exchange(
            "GET", port: port, path: "/auth/sessions", headers: ["Authorization: Bearer not.a.token"])
        #expect(garbage.status == 401 && garbage.headers.contains(#"error="invalid_token""#))
        #expect(
            try ServeCLITests.exchange(
                "POST", port: port, path: "/auth/refresh", body: Array("refreshToken=x".utf8), contentType: "text/plain"
            ).status == 415)
        #expect(
            try ServeCLITests.exchange(
                "POST", port: port, path: "/auth/refresh", body: [UInt8](repeating: 0x20, count: 20_000)
            ).status == 413)
        #expect(
            try ServeCLITests.exchange("POST", port: port, path: "/auth/refresh", body: Array("{".utf8)).status == 400)
        let forged = try ServeCLITests.exchange(
            "POST", port: port, path: "/auth/apple",
            body: Array(
                JSONValue.object([
                    "identityToken": .string(try JWSSigner.rs256(TestKeys.rsa, keyID: "x").sign(claims: ["sub": "a"])),
                    "authorizationCode": "c",
                ]).serialized().utf8))
        #expect(forged.status == 401)

        // Apple's consent-revoked ends every session of the user.
        let notified = try ServeCLITests.exchange(
            "POST", port: port, path: "/apple/notifications",
            body: try notification("consent-revoked", subject: "001234.user.0042"))
        #expect(notified.status == 200, "\(notified.body)")
        let afterRevoke = try ServeCLITests.exchange(
            "POST", port: port, path: "/auth/refresh",
            body: Array(
                JSONValue.object(["refreshToken": .string(secondTokens["refreshToken"]?.stringValue ?? "")])
                    .serialized().utf8))
        #expect(afterRevoke.status == 401)

        // The CLI sees the same tables.
        let keys = try CLIRunner.runServer(
            ["sessions", "keys", "list", "--store", "sqlite:\(directory.path)/state.sqlite", "--key-file", keyFile])
        #expect(keys.status == 0 && keys.stdout.contains("ES256"), "\(keys.stderr)")
    }
}
