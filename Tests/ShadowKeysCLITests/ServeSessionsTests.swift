import Crypto
import Foundation
import Synchronization
import ShadowCore
import ShadowJOSE
import ShadowTestSupport
import Testing

/// `shadow-keys-server serve --sessions-issuer …` against a loopback fake of Apple: sign-in,
/// refresh, reuse, the device list, the JWKS, bad requests, and Apple's consent-revoked ending
/// every session.
@Suite(.tags(.multiProcess), .ownThreads) struct ServeSessionsTests {
    func json(_ text: String) throws -> JSONObject {
        guard case .object(let object) = try StrictJSON.parse(text) else { throw CLIRunnerError("not JSON: \(text)") }
        return object
    }

    /// A user is named by the canonical text of its UUID, nothing looser: a stray sign, which a
    /// scanf-based reader takes for part of a byte ("-b" as 0xF5), names no user, so `revoke`
    /// never ends another user's sessions. Refused before any store is opened.
    @Test func sessionCommandsTakeOnlyCanonicalUserIDs() throws {
        for (action, user) in [
            ("list", "-ba7b810-9dad-11d1-80b4-00c04fd430c8"), ("revoke", "+ba7b810-9dad-11d1-80b4-00c04fd430c8"),
            ("list", "6ba7b810-9dad-11d1-80b4-00c04fd430c8 "),
        ] {
            let refused = try CLIRunner.runServer(
                [
                    "sessions", action, "--store", "sqlite:/nonexistent/state.sqlite", "--key-file", "/nonexistent",
                    "--", user,
                ])
            #expect(refused.status == 64, "\(action) \(user): \(refused.status) \(refused.stderr)")
            #expect(refused.stderr.contains("UUID"), "\(refused.stderr)")
        }
    }

    /// The introspection clients file is read as bytes: CR LF lines are lines (a client on the
    /// second line authenticates), and an ID given twice is refused before the store is opened
    /// (none is made). The .p8 key is read once for the code exchange and the revocation worker:
    /// one warning.
    @Test func serveReadsItsClientFileAndItsKeyOnce() throws {
        let directory = try TemporaryDirectory()
        let apple = try FakeAppleServer(clientKey: TestKeys.p256.publicKey)
        let keyFile = try directory.write(
            "state.key", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n", mode: 0o600)
        let p8 = try directory.write("apple.p8", TestKeys.p256.pemRepresentation, mode: 0o644)
        let store = "sqlite:\(directory.path)/state.sqlite"
        func serve(_ clients: String, port: Int) throws -> ChildProcess {
            try SessionServer.start(
                port: port, store: store, keyFile: keyFile, p8: p8, apple: apple,
                extra: ["--introspection-clients", try directory.write("clients", clients, mode: 0o600)],
                cacheHome: directory.path + "/cache")
        }

        let twice = try serve("c1:one-secret\nc2:two-secret\nc1:three-secret\n", port: 1).wait(timeout: 60)
        #expect(twice.status == 64 && twice.stderr.contains(#"the client ID "c1" is given twice"#), "\(twice.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/state.sqlite"), "a store was made")

        let port = try PostgresCluster.freePortForTests()
        let process = try serve("c1:one-secret\r\n\r\nc2:two-secret\r\n", port: port)
        defer { process.kill() }
        var healthy = false
        for _ in 0..<600 where !process.hasExited {
            if (try? ServeCLITests.http("GET", port: port, path: "/healthz"))?.status == 200 {
                healthy = true
                break
            }
            usleep(100_000)
        }
        try #require(healthy)
        for (credentials, status) in [("c2:two-secret", 200), ("c1:one-secret", 200), ("c2:two-secret\r", 401)] {
            let answer = try ServeCLITests.exchange(
                "POST", port: port, path: "/auth/introspect", body: Array("token=x".utf8),
                contentType: "application/x-www-form-urlencoded",
                headers: ["Authorization: Basic " + Data(credentials.utf8).base64EncodedString()])
            #expect(answer.status == status, "\(credentials.debugDescription): \(answer.body)")
        }
        process.kill(SIGTERM)
        let stopped = try process.wait(timeout: 60)
        #expect(stopped.stderr.components(separatedBy: ".p8 key file").count == 2, "\(stopped.stderr)")
    }

    @Test func signInRefreshReuseDevicesAndRevocation() async throws {
        let server = try SessionServer(extra: ["--refresh-grace", "0"])
        let (port, apple, directory, keyFile) = (server.port, server.apple, server.directory, server.keyFile)

        // Sign in: the identity token is checked, the code exchanged with Apple.
        let body = JSONValue.object([
            "identityToken": .string(try server.identityToken(subject: "001234.user.0042", extra: ["nonce": "n-1"])),
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
        let verified = try await JWTVerifier(expectedType: "at+jwt").verify(
            accessToken, keys: JWKSet(jsonText: jwks.body))
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
                    "identityToken": .string(try server.identityToken(subject: "001234.user.0042")),
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
        let notified = try server.notify("consent-revoked", subject: "001234.user.0042")
        #expect(notified.status == 200, "\(notified.body)")
        let afterRevoke = try ServeCLITests.exchange(
            "POST", port: port, path: "/auth/refresh",
            body: Array(
                JSONValue.object(["refreshToken": .string(secondTokens["refreshToken"]?.stringValue ?? "")])
                    .serialized().utf8))
        #expect(afterRevoke.status == 401)

        // The authentication log, in the same store: a verifiable operation log.
        let log = try CLIRunner.run(
            ["log", "show", "--log", "sqlite:\(directory.path)/state.sqlite", "--key-file", keyFile])
        #expect(log.status == 0, "\(log.stderr)")
        for kind in ["sign-in", "refresh", "reuse-detected", "revoke-all"] {
            #expect(log.stdout.contains(#""operation":"\#(kind)""#), "no \(kind) in the authentication log")
        }
        #expect(
            try CLIRunner.run([
                "log", "verify", "--log", "sqlite:\(directory.path)/state.sqlite", "--key-file", keyFile,
            ])
            .status == 0)

        // The CLI sees the same tables.
        let keys = try CLIRunner.runServer(
            ["sessions", "keys", "list", "--store", "sqlite:\(directory.path)/state.sqlite", "--key-file", keyFile])
        #expect(keys.status == 0 && keys.stdout.contains("ES256"), "\(keys.stderr)")
    }

    func refresh(_ token: String, port: Int) -> (status: Int, token: String?) {
        let body = Array(JSONValue.object(["refreshToken": .string(token)]).serialized().utf8)
        guard let answer = try? ServeCLITests.exchange("POST", port: port, path: "/auth/refresh", body: body) else {
            return (0, nil)
        }
        guard answer.status == 200, case .object(let object)? = try? StrictJSON.parse(answer.body) else {
            return (answer.status, nil)
        }
        return (200, object["refreshToken"]?.stringValue)
    }

    /// Two `serve` instances on one PostgreSQL: sign-ins on one, a refresh storm across both, one
    /// instance killed with SIGKILL in the middle. Afterwards every client's last token refreshes,
    /// no spent token does, and no session was revoked as a false reuse.
    @Test(.tags(.postgres, .stress), .alone, .enabled(if: postgresWanted)) func aRefreshStormSurvivesAKilledInstance()
        async throws
    {
        let url = try PostgresCluster.shared.get().freshDatabase()
        let limits = ["--rate-limit-ip", "100000", "--rate-limit-user", "100000"]
        let first = try SessionServer(store: url, extra: limits)
        let second = try SessionServer(store: url, extra: limits, apple: first.apple, directory: first.directory)
        let ports = [first.port, second.port]

        // Eight devices sign in on the first instance.
        var tokens: [String] = []
        for device in 0..<8 {
            let answer = try first.signIn(subject: "user-\(device)", device: "phone")
            guard answer.status == 200, let token = answer.json["refreshToken"]?.stringValue else {
                throw CLIRunnerError("sign-in failed: \(answer.status) \(answer.body)")
            }
            tokens.append(token)
        }

        // The storm: each device refreshes through both instances in turn; the second dies early.
        let results = Mutex<[Int: (last: String, spent: [String], failures: [Int])]>([:])
        let killer = Thread {
            Thread.sleep(forTimeInterval: 1.0)
            second.process.kill()
        }
        killer.start()
        let starting = tokens
        let refreshOn: @Sendable (String, Int) -> (status: Int, token: String?) = { self.refresh($0, port: $1) }
        DispatchQueue.concurrentPerform(iterations: starting.count) { device in
            var token = starting[device]
            var spent: [String] = []
            var failures: [Int] = []
            let deadline = Date().addingTimeInterval(3)
            var turn = device
            while Date() < deadline {
                turn += 1
                var answer = refreshOn(token, ports[turn % 2])
                if answer.status == 0 {
                    // The instance died, maybe after it rotated: the same token again, on the other,
                    // within the grace interval, gets the successor.
                    answer = refreshOn(token, ports[0])
                }
                guard answer.status == 200, let next = answer.token else {
                    failures.append(answer.status)
                    break
                }
                if next != token { spent.append(token) }
                token = next
            }
            results.withLock { $0[device] = (token, spent, failures) }
        }
        _ = try? second.process.wait(timeout: 10)
        // Past the grace interval, nothing spent may refresh, and every last token must.
        try await Task.sleep(for: .seconds(11))
        for (device, result) in results.withLock({ $0 }).sorted(by: { $0.key < $1.key }) {
            #expect(result.failures.isEmpty, "device \(device) failed: \(result.failures)")
            #expect(result.spent.count > 3, "device \(device) refreshed \(result.spent.count) times")
            // One spent token (an old generation) must be refused: and it revokes the session,
            // so check it after the last token.
            let last = refresh(result.last, port: ports[0])
            #expect(last.status == 200, "device \(device)'s last token was refused")
            if let old = result.spent.first {
                #expect(refresh(old, port: ports[0]).status == 401, "device \(device)'s spent token worked")
            }
        }
    }
}
