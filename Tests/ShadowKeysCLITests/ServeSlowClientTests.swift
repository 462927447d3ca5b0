import Foundation
import ShadowCore
import ShadowTestSupport
import Testing

/// `serve` against slow and vanishing clients: a stalled upload cannot hold up shutdown, idle and
/// half-sent requests are closed, a slow body gets 408, a hang-up is not counted as too large, a
/// declared oversized body is refused from its header, and many slow clients do not starve a
/// valid notification (Docs/server.md, "Slow clients").
@Suite(.tags(.multiProcess), .ownThreads) struct ServeSlowClientTests {
    let base: ServeCLITests

    init() throws { base = try ServeCLITests() }

    /// A connected socket to serve, or an error.
    static func connectSocket(_ port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw CLIRunnerError("socket: \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            throw CLIRunnerError("connect to \(port) failed")
        }
        return fd
    }

    static func send(_ fd: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Everything the server sends until it closes the connection or `seconds` pass; and whether it closed.
    static func receive(_ fd: Int32, seconds: Double) -> (text: String, closed: Bool) {
        var timeout = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n == 0 { return (String(decoding: received, as: UTF8.self), true) }
            if n < 0 { return (String(decoding: received, as: UTF8.self), errno == ECONNRESET) }
            received += buffer[..<n]
        }
    }

    /// Starts serve; with `descriptors`, under that soft and hard descriptor limit (prlimit), as
    /// systemd starts many services.
    func startServe(_ extra: [String], descriptors: Int? = nil) throws -> (ChildProcess, Int) {
        let port = try PostgresCluster.freePortForTests()
        let arguments =
            [
                "serve", "--listen", "127.0.0.1:\(port)", "--client-id", ServeCLITests.client, "--jwks", base.jwks,
                "--store", "sqlite:\(base.directory.path)/state.sqlite", "--key-file", base.keyFile,
            ] + extra
        let server =
            try descriptors.map {
                try ChildProcess(
                    "/usr/bin/prlimit", ["--nofile=\($0):\($0)", "--", CLIRunner.serverExecutable.path] + arguments,
                    environment: [:], removing: ["SHADOW_KEYS_STATE_STORE"])
            }
            ?? ChildProcess(
                CLIRunner.serverExecutable.path, arguments, environment: [:], removing: ["SHADOW_KEYS_STATE_STORE"])
        for _ in 0..<300 {
            if let (status, _) = try? ServeCLITests.http("GET", port: port, path: "/healthz"), status == 200 {
                return (server, port)
            }
            usleep(100_000)
        }
        server.kill(SIGKILL)
        throw CLIRunnerError("serve never answered /healthz: \(try server.wait(timeout: 10).stderr.suffix(2000))")
    }

    static let partialUpload =
        """
        POST /apple/notifications HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: \
        100\r\n\r\n{\"pa
        """

    @Test func aStalledUploadCannotHoldUpShutdown() throws {
        let (server, port) = try startServe(["--shutdown-grace", "1", "--body-timeout", "600"])
        let fd = try Self.connectSocket(port)
        defer { close(fd) }
        Self.send(fd, Self.partialUpload)
        usleep(300_000)
        let started = Date()
        server.kill(SIGTERM)
        let result = try server.wait(timeout: 30)
        let took = Date().timeIntervalSince(started)
        #expect(result.status == 0, "\(result.stderr.suffix(1000))")
        // Without the grace, the stalled body would hold it for the body timeout (600 s).
        #expect(took < 120, "serve took \(took) s to stop with a stalled upload open")
    }

    @Test func idleAndHalfSentRequestsAreClosedAndASlowBodyGets408() throws {
        let (server, port) = try startServe(["--idle-timeout", "2", "--body-timeout", "1"])
        defer { server.kill(SIGKILL) }
        let idle = try Self.connectSocket(port)
        defer { close(idle) }
        let halfHeader = try Self.connectSocket(port)
        defer { close(halfHeader) }
        Self.send(halfHeader, "POST /apple/notifications HTTP/1.1\r\nHost: x\r\n")
        let slowBody = try Self.connectSocket(port)
        defer { close(slowBody) }
        Self.send(slowBody, Self.partialUpload)
        #expect(Self.receive(idle, seconds: 6).closed, "an idle connection stayed open")
        #expect(Self.receive(halfHeader, seconds: 6).closed, "a half-sent header stayed open")
        let answer = Self.receive(slowBody, seconds: 6)
        #expect(answer.text.hasPrefix("HTTP/1.1 408") && answer.text.contains("\"timeout\""), "\(answer.text)")
        #expect(answer.closed)
    }

    /// A client that hangs up mid-body is `incomplete`, not `too_large`; an oversized body
    /// declared with Expect: 100-continue is refused at once from its header.
    @Test func hangUpsAreNotTooLargeAndADeclaredHugeBodyIsRefusedAtOnce() throws {
        let (server, port) = try startServe(["--idle-timeout", "600"])
        defer { server.kill(SIGKILL) }
        for _ in 0..<20 {
            let fd = try Self.connectSocket(port)
            Self.send(fd, Self.partialUpload)
            usleep(20_000)
            close(fd)
        }
        let huge = try Self.connectSocket(port)
        defer { close(huge) }
        Self.send(
            huge,
            """
            POST /apple/notifications HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: \
            1000000000\r\nExpect: 100-continue\r\n\r\n
            """
        )
        // Refused from its header, and the connection closed after the answer: long before the
        // 600 s idle timeout would close it.
        let refused = Self.receive(huge, seconds: 60)
        #expect(refused.text.hasPrefix("HTTP/1.1 413"), "\(refused.text)")
        #expect(refused.text.lowercased().contains("connection: close") && refused.closed, "\(refused.text)")
        var metrics = ""
        for _ in 0..<50 {
            metrics = try ServeCLITests.http("GET", port: port, path: "/metrics").body
            if metrics.contains(#"shadow_keys_notifications_total{outcome="incomplete"} 20"#) { break }
            usleep(100_000)
        }
        #expect(metrics.contains(#"shadow_keys_notifications_total{outcome="incomplete"} 20"#), "\(metrics)")
        #expect(metrics.contains(#"shadow_keys_notifications_total{outcome="too_large"} 1"#), "\(metrics)")
    }

    /// The session routes refuse an oversized or slow body with `no-store` (as every session
    /// answer) and `Connection: close`, and close the connection after the answer, long before
    /// the idle timeout would.
    @Test func sessionRouteRefusalsAreNotStoredAndCloseTheConnection() throws {
        let server = try SessionServer(extra: ["--idle-timeout", "600", "--body-timeout", "1"])
        for (declared, sent, status) in [("1000000", "", "413"), ("100", "{\"refreshToken\":", "408")] {
            let fd = try Self.connectSocket(server.port)
            defer { close(fd) }
            Self.send(
                fd,
                """
                POST /auth/refresh HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: \
                \(declared)\r\n\r\n\(sent)
                """)
            let answer = Self.receive(fd, seconds: 60)
            let head = answer.text.lowercased()
            #expect(answer.text.hasPrefix("HTTP/1.1 \(status)"), "\(answer.text)")
            #expect(head.contains("cache-control: no-store") && head.contains("connection: close"), "\(answer.text)")
            #expect(answer.closed, "the connection stayed open after \(status)")
        }
    }

    /// 1,100 idle clients, past the connection limit of a serve whose descriptors are capped at
    /// 1024 (soft and hard, as systemd sets them), do not keep a valid notification waiting for
    /// their idle timeouts: at the limit, idle connections are closed to make room. The clients
    /// live in a child process (python3), so this process's own sockets keep their descriptor
    /// numbers for the tests running beside it.
    @Test(.alone) func aValidNotificationGetsThroughAThousandSlowClients() throws {
        let python = "/usr/bin/python3"
        guard FileManager.default.isExecutableFile(atPath: python) else {
            Issue.record("\(python) is needed to hold a thousand connections outside this process")
            return
        }
        let (server, port) = try startServe(["--idle-timeout", "600"], descriptors: 1024)
        defer { server.kill(SIGKILL) }
        let script = try base.directory.write(
            "slow_clients.py",
            """
            import resource, socket, sys, time
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
            clients = []
            for index in range(1100):
                connection = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
                if index % 2 == 0:
                    connection.sendall(b"POST /apple/notifications HTTP/1.1\\r\\nHost: x\\r\\n")
                clients.append(connection)
            open(sys.argv[2], "w").write(str(len(clients)))
            time.sleep(120)
            """)
        let marker = base.directory.path + "/slow_clients.count"
        let clients = try ChildProcess(python, [script, String(port), marker], environment: [:])
        defer { clients.kill(SIGKILL) }
        // The child writes its count once every connection is open.
        var connected = false
        for _ in 0..<300 where !connected {
            connected = (try? String(contentsOfFile: marker, encoding: .utf8)) == "1100"
            if !connected { usleep(100_000) }
        }
        try #require(connected, "the slow clients did not all connect")
        let body = Array(try base.notification("consent-revoked", subject: "u.slow", jti: "slow-1").utf8)
        let started = Date()
        let (status, answer) = try ServeCLITests.http("POST", port: port, path: "/apple/notifications", body: body)
        #expect(status == 200 && answer.contains("applied"), "\(status) \(answer)")
        // Without room made, it would wait for the idle timeout (600 s).
        #expect(Date().timeIntervalSince(started) < 120)
        #expect(try ServeCLITests.http("GET", port: port, path: "/healthz").status == 200)
    }
}
