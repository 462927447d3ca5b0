import Crypto
import Foundation
import Synchronization
import ShadowCore
import ShadowJOSE
import ShadowTestSupport
import Testing

/// Two `serve` instances on one PostgreSQL: sign-ins on one, a refresh storm across both, one
/// instance killed with SIGKILL in the middle. Afterwards every client's last token refreshes,
/// no spent token does, and no session was revoked as a false reuse.
@Suite(.tags(.multiProcess, .postgres, .stress), .enabled(if: postgresWanted)) struct ServeSessionsClusterTests {
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

    func serve(port: Int, store: String) throws -> ChildProcess {
        try ChildProcess(
            CLIRunner.serverExecutable.path,
            [
                "serve", "--listen", "127.0.0.1:\(port)", "--client-id", Self.client, "--jwks",
                apple.baseURL + "/auth/keys", "--allow-http-loopback", "--base-url", apple.baseURL, "--p8", p8,
                "--team-id", apple.teamID, "--key-id", apple.keyID, "--store", store, "--key-file", keyFile,
                "--sessions-issuer", "https://api.example.com", "--rate-limit-ip", "100000",
                "--rate-limit-user", "100000",
            ], environment: [:], removing: ["SHADOW_KEYS_STATE_STORE"])
    }

    func waitReady(_ port: Int) -> Bool {
        for _ in 0..<300 {
            if (try? ServeCLITests.http("GET", port: port, path: "/healthz"))?.status == 200 { return true }
            usleep(100_000)
        }
        return false
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

    @Test func aRefreshStormSurvivesAKilledInstance() throws {
        let url = try PostgresCluster.shared.get().freshDatabase()
        let ports = [try PostgresCluster.freePortForTests(), try PostgresCluster.freePortForTests()]
        let first = try serve(port: ports[0], store: url)
        defer {
            first.kill()
            _ = try? first.wait(timeout: 10)
        }
        try #require(waitReady(ports[0]), "the first instance never answered")
        let second = try serve(port: ports[1], store: url)
        try #require(waitReady(ports[1]), "the second instance never answered")

        // Eight devices sign in on the first instance.
        var tokens: [String] = []
        for device in 0..<8 {
            let now = Int64(Date().timeIntervalSince1970)
            let identity = try apple.identitySigner.sign(claims: [
                "iss": "https://appleid.apple.com", "aud": .string(Self.client), "sub": .string("user-\(device)"),
                "iat": .int(now - 1), "exp": .int(now + 600),
            ])
            let body = JSONValue.object([
                "identityToken": .string(identity),
                "authorizationCode": .string(apple.issueCode(for: "user-\(device)")), "deviceName": "phone",
            ]).serialized()
            let answer = try ServeCLITests.exchange("POST", port: ports[0], path: "/auth/apple", body: Array(body.utf8))
            guard answer.status == 200, case .object(let object) = try StrictJSON.parse(answer.body),
                let token = object["refreshToken"]?.stringValue
            else { throw CLIRunnerError("sign-in failed: \(answer.status) \(answer.body)") }
            tokens.append(token)
        }

        // The storm: each device refreshes through both instances in turn; the second dies early.
        let results = Mutex<[Int: (last: String, spent: [String], failures: [Int])]>([:])
        let killer = Thread {
            Thread.sleep(forTimeInterval: 1.0)
            second.kill()
        }
        killer.start()
        let starting = tokens
        DispatchQueue.concurrentPerform(iterations: starting.count) { device in
            var token = starting[device]
            var spent: [String] = []
            var failures: [Int] = []
            let deadline = Date().addingTimeInterval(3)
            var turn = device
            while Date() < deadline {
                turn += 1
                var answer = refresh(token, port: ports[turn % 2])
                if answer.status == 0 {
                    // The instance died, maybe after it rotated: the same token again, on the other,
                    // within the grace interval, gets the successor.
                    answer = refresh(token, port: ports[0])
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
        _ = try? second.wait(timeout: 10)
        // Past the grace interval, nothing spent may refresh, and every last token must.
        Thread.sleep(forTimeInterval: 11)
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
