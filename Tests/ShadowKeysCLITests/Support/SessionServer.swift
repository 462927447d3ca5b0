import Crypto
import Foundation
import ShadowCore
import ShadowJOSE
import ShadowTestSupport

/// One `shadow-keys-server serve --sessions-issuer` on a port, a folder and a store of its own,
/// against a loopback fake of Apple: what the suites that try sessions, notifications and the
/// state commands together share. Stopped (SIGKILL) when it goes away, even when a test fails.
final class SessionServer: @unchecked Sendable {
    static let client = "com.example.app"
    static let issuer = "https://api.example.com"

    let directory: TemporaryDirectory
    let keyFile: String
    let p8: String
    let apple: FakeAppleServer
    /// `sqlite:PATH`, or a PostgreSQL URL.
    let store: String
    let port: Int
    private(set) var process: ChildProcess

    /// Starts serve on `store` (default: a SQLite file in its folder) with `extra` options, and
    /// waits for `/healthz`. Several servers may share one `apple` and `store`.
    init(
        store: String? = nil, extra: [String] = [], apple: FakeAppleServer? = nil, directory: TemporaryDirectory? = nil,
        waitForHealth: Bool = true
    ) throws {
        let directory = try directory ?? TemporaryDirectory()
        self.directory = directory
        keyFile = try directory.write(
            "state.key", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n", mode: 0o600)
        p8 = try directory.write("apple.p8", TestKeys.p256.pemRepresentation, mode: 0o600)
        self.apple = try apple ?? FakeAppleServer(clientKey: TestKeys.p256.publicKey)
        self.store = store ?? "sqlite:\(directory.path)/state.sqlite"
        port = try PostgresCluster.freePortForTests()
        process = try Self.start(
            port: port, store: self.store, keyFile: keyFile, p8: p8, apple: self.apple, extra: extra,
            cacheHome: directory.path + "/cache")
        if waitForHealth { try waitHealthy() }
    }

    deinit { process.kill() }

    /// Starts serve; its key-set cache is under `cacheHome` (`XDG_CACHE_HOME`), never the user's:
    /// a fake Apple's key set is cached by its URL, and the fake's key is made anew by each test
    /// run under the same `kid`, so a later run's fake on a port an earlier one used would meet
    /// the earlier key there, still fresh.
    static func start(
        port: Int, store: String, keyFile: String, p8: String, apple: FakeAppleServer, extra: [String],
        cacheHome: String
    ) throws -> ChildProcess {
        try ChildProcess(
            CLIRunner.serverExecutable.path,
            [
                "serve", "--listen", "127.0.0.1:\(port)", "--client-id", client, "--jwks", apple.baseURL + "/auth/keys",
                "--allow-http-loopback", "--base-url", apple.baseURL, "--p8", p8, "--team-id", apple.teamID,
                "--key-id", apple.keyID, "--store", store, "--key-file", keyFile, "--sessions-issuer", issuer,
            ] + extra, environment: ["XDG_CACHE_HOME": cacheHome], removing: ["SHADOW_KEYS_STATE_STORE"])
    }

    /// Waits (up to 60 s) for `/healthz` to answer 200.
    func waitHealthy() throws {
        for _ in 0..<600 where !process.hasExited {
            if (try? ServeCLITests.http("GET", port: port, path: "/healthz"))?.status == 200 { return }
            usleep(100_000)
        }
        process.kill()
        throw CLIRunnerError("serve never answered /healthz: \(try process.wait(timeout: 10).stderr.suffix(2000))")
    }

    /// SIGTERM, and what it printed.
    @discardableResult
    func stop() throws -> CLIResult {
        process.kill(SIGTERM)
        return try process.wait(timeout: 60)
    }

    /// The arguments that name this server's store and key to a command.
    var storeOptions: [String] { ["--store", store, "--key-file", keyFile] }

    // MARK: Requests

    struct Answer {
        let status: Int
        let headers: String
        let body: String
        var json: JSONObject { (try? StrictJSON.parse(body))?.objectValue ?? [:] }
    }

    func request(
        _ method: String, _ path: String, json: JSONValue? = nil, headers: [String] = []
    ) throws -> Answer {
        let body = json.map { Array($0.serialized().utf8) } ?? []
        let answer = try ServeCLITests.exchange(method, port: port, path: path, body: body, headers: headers)
        return Answer(status: answer.status, headers: answer.headers, body: answer.body)
    }

    /// An identity token from the fake Apple, issued a second ago (or at `issuedAt`).
    func identityToken(subject: String, issuedAt: Int64? = nil, extra: JSONObject = [:]) throws -> String {
        let now = issuedAt ?? Int64(Date().timeIntervalSince1970) - 1
        var claims: JSONObject = [
            "iss": "https://appleid.apple.com", "aud": .string(Self.client), "sub": .string(subject),
            "iat": .int(now), "exp": .int(now + 600),
        ]
        for member in extra { claims.set(member.name, member.value) }
        return try apple.identitySigner.sign(claims: claims)
    }

    /// `POST /auth/apple` for `subject`, with a fresh code from the fake.
    func signIn(subject: String, device: String = "iPhone", identityToken: String? = nil) throws -> Answer {
        try request(
            "POST", "/auth/apple",
            json: [
                "identityToken": .string(try identityToken ?? self.identityToken(subject: subject)),
                "authorizationCode": .string(apple.issueCode(for: subject)), "deviceName": .string(device),
            ])
    }

    /// `POST /auth/refresh`.
    func refresh(_ token: String) throws -> Answer {
        try request("POST", "/auth/refresh", json: ["refreshToken": .string(token)])
    }

    /// Apple's notification body of `type` for `subject`, an event `ago` seconds ago.
    func notificationBody(
        _ type: String, subject: String, jti: String = UUID().uuidString, ago: Int64 = 1
    ) throws -> JSONValue {
        let now = Int64(Date().timeIntervalSince1970)
        let events: JSONObject = [
            "type": .string(type), "sub": .string(subject), "event_time": .int((now - ago) * 1000),
        ]
        let claims: JSONObject = [
            "iss": "https://appleid.apple.com", "aud": .string(Self.client), "iat": .int(now - 1),
            "exp": .int(now + 600), "jti": .string(jti), "events": .string(JSONValue.object(events).serialized()),
        ]
        return .object(["payload": .string(try apple.identitySigner.sign(claims: claims))])
    }

    /// `POST /apple/notifications`.
    func notify(_ type: String, subject: String, jti: String = UUID().uuidString, ago: Int64 = 1) throws -> Answer {
        try request(
            "POST", "/apple/notifications", json: try notificationBody(type, subject: subject, jti: jti, ago: ago))
    }
}
