import Foundation
import ShadowCore
import ShadowJOSE
import ShadowTestSupport
import Testing

/// `shadow-keys-server serve` as a process: the notification endpoint, /healthz, and SIGTERM.
@Suite(.tags(.multiProcess), .ownThreads) struct ServeCLITests {
    static let client = "com.example.app"
    let directory: TemporaryDirectory
    let keyFile: String
    let jwks: String
    let signer: JWSSigner

    init() throws {
        directory = try TemporaryDirectory()
        keyFile = try directory.write(
            "state.key", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n", mode: 0o600)
        signer = try JWSSigner.rs256(TestKeys.rsa, keyID: "apple-1")
        jwks = try directory.write("apple-keys.json", TestKeys.jwksJSON([try signer.publicJWK()]))
    }

    func notification(_ type: String, subject: String, jti: String, signer: JWSSigner? = nil) throws -> String {
        let now = Int64(Date().timeIntervalSince1970)
        let events: JSONObject = ["type": .string(type), "sub": .string(subject), "event_time": .int((now - 1) * 1000)]
        let claims: JSONObject = [
            "iss": "https://appleid.apple.com", "aud": .string(Self.client), "iat": .int(now - 1),
            "exp": .int(now + 600), "jti": .string(jti),
            "events": .string(JSONValue.object(events).serialized()),
        ]
        return JSONValue.object(["payload": .string(try (signer ?? self.signer).sign(claims: claims))]).serialized()
    }

    /// One HTTP/1.1 exchange over a plain socket: the status code and the body.
    static func http(
        _ method: String, port: Int, path: String, body: [UInt8] = []
    ) throws -> (status: Int, body: String) {
        let answer = try exchange(method, port: port, path: path, body: body)
        return (answer.status, answer.body)
    }

    /// One HTTP/1.1 exchange over a plain socket, with a content type and extra header lines:
    /// the status code, the header block, and the body.
    static func exchange(
        _ method: String, port: Int, path: String, body: [UInt8] = [], contentType: String = "application/json",
        headers: [String] = []
    ) throws -> (status: Int, headers: String, body: String) {
        let fd = try ServeSlowClientTests.connectSocket(port)
        defer { close(fd) }
        let extra = headers.map { $0 + "\r\n" }.joined()
        let request =
            Array(
                """
                \(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: \(contentType)\r\nContent-Length: \
                \(body.count)\r\n\(extra)Connection: close\r\n\r\n
                """
                .utf8) + body
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { break }
            sent += n
        }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            response += buffer[..<n]
        }
        let text = String(decoding: response, as: UTF8.self)
        let status = Int(text.split(separator: " ", maxSplits: 2).dropFirst().first ?? "") ?? 0
        let split = text.range(of: "\r\n\r\n")
        let head = split.map { String(text[..<$0.lowerBound]) } ?? text
        let payload = split.map { String(text[$0.upperBound...]) } ?? ""
        return (status, head, payload)
    }

    @Test func notificationsOverHTTPAndAGracefulStop() async throws {
        let port = try PostgresCluster.freePortForTests()
        let store = "sqlite:\(directory.path)/state.sqlite"
        let server = try ChildProcess(
            CLIRunner.serverExecutable.path,
            [
                "serve", "--listen", "127.0.0.1:\(port)", "--client-id", Self.client, "--jwks", jwks,
                "--store", store, "--key-file", keyFile,
            ], environment: [:], removing: ["SHADOW_KEYS_STATE_STORE"])
        var healthy = false
        for _ in 0..<300 where !healthy {
            if let (status, body) = try? Self.http("GET", port: port, path: "/healthz"), status == 200 {
                healthy = body.contains("ok")
            } else {
                usleep(100_000)
            }
        }
        guard healthy else {
            server.kill()
            let result = try server.wait(timeout: 10)
            Issue.record("serve never answered /healthz: \(result.stderr.suffix(2000))")
            return
        }
        let body = Array(try notification("consent-revoked", subject: "u.serve", jti: "s-1").utf8)
        #expect(
            try Self.http("POST", port: port, path: "/apple/notifications", body: body) == (
                200, #"{"outcome":"applied"}"#
            ))
        #expect(
            try Self.http("POST", port: port, path: "/apple/notifications", body: body) == (
                200, #"{"outcome":"duplicate"}"#
            ))
        #expect(try Self.http("POST", port: port, path: "/apple/notifications", body: Array("nope".utf8)).status == 400)
        let forged = Array(
            try notification(
                "consent-revoked", subject: "u.serve", jti: "s-2",
                signer: try JWSSigner.rs256(TestKeys.rsa2, keyID: "apple-1")
            ).utf8)
        #expect(try Self.http("POST", port: port, path: "/apple/notifications", body: forged).status == 401)
        #expect(
            try Self.http(
                "POST", port: port, path: "/apple/notifications", body: [UInt8](repeating: 0x20, count: 70_000)
            ).status == 413)
        // What no route takes is answered in the JSON error shape, and HEAD wherever GET.
        let unrouted = try Self.exchange("GET", port: port, path: "/apple/notification")
        #expect(unrouted.status == 404)
        #expect(unrouted.body == #"{"error":{"code":"not_found","message":"no route takes this path"}}"#)
        let wrongMethod = try Self.exchange("GET", port: port, path: "/apple/notifications")
        #expect(wrongMethod.status == 405)
        #expect(wrongMethod.headers.lowercased().contains("\r\nallow: post\r\n"), "\(wrongMethod.headers)")
        #expect(wrongMethod.body.contains(#""code":"method_not_allowed""#))
        let head = try Self.exchange("HEAD", port: port, path: "/healthz")
        #expect(head.status == 200 && head.body.isEmpty)
        server.kill(SIGTERM)
        let result = try server.wait(timeout: 30)
        #expect(result.status == 0, "serve exited \(result.status): \(result.stderr.suffix(1000))")
        let shown = try CLIRunner.run([
            "state", "show", "--client-id", Self.client, "--sub", "u.serve", "--store", store, "--key-file", keyFile,
            "--json",
        ])
        #expect(try shown.json()["state"] as? String == "revoked")
    }

    @Test func serveChecksItsOptions() throws {
        for (arguments, needle) in [
            (["--listen", "127.0.0.1", "--client-id", "c"], "--listen"),
            (["--listen", "127.0.0.1:0", "--client-id", "c"], "--listen"),
            (["--listen", "127.0.0.1:8080"], "--client-id"),
            (["--client-id", "c", "--max-age", "5"], "--max-age"),
            (["--client-id", "c", "--p8", "AuthKey.p8"], "--p8, --team-id and --key-id together"),
            (["--client-id", "c", "--p8", "k.p8", "--team-id", "short", "--key-id", "KEY1234567"], "--team-id"),
            (
                [
                    "--client-id", "c", "--p8", "k.p8", "--team-id", "TEAM123456", "--key-id", "KEY1234567",
                    "--base-url", "http://example.com",
                ], "--base-url"
            ),
            (["--client-id", "c", "--revocation-retry", "0"], "--revocation-retry"),
            (["--client-id", "c", "--revocation-lease", "4000"], "--revocation-lease"),
        ] {
            let result = try CLIRunner.runServer(["serve"] + arguments + ["--jwks", jwks, "--key-file", keyFile])
            #expect(
                result.status == 64 && result.stderr.contains(needle), "\(arguments): \(result.status) \(result.stderr)"
            )
        }
    }
}
