#if canImport(Darwin)
import Darwin
#else
import Glibc
#endif
import ShadowCore
import ShadowJWKS

/// The CLI's ``HTTPTransport``: runs `shadow-keys-fetch` (URLSession) for each request, so that
/// the CLI itself never links FoundationNetworking and starts fast when no fetch is needed.
struct HelperTransport: HTTPTransport {
    let allowLoopbackHTTP: Bool

    /// `$SHADOW_KEYS_FETCH`, else `shadow-keys-fetch` beside this executable.
    static var helperPath: String {
        if let path = getenv("SHADOW_KEYS_FETCH") { return String(cString: path) }
        return Files.parentDirectory(Console.executablePath ?? "shadow-keys") + "/shadow-keys-fetch"
    }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        try URLPolicy.check(request.url, allowLoopbackHTTP: allowLoopbackHTTP)
        let path = Self.helperPath
        guard access(path, X_OK) == 0 else {
            throw HTTPTransportError(.other, "the fetch helper \(path) is missing; build it with `swift build --product shadow-keys-fetch`")
        }
        let input = Array(HTTPWire.encode(request, allowLoopbackHTTP: allowLoopbackHTTP).utf8)
        let limit = request.maxResponseBytes * 2 + 64 * 1024
        let output = try Subprocess.run(path, stdin: input, outputLimit: limit, deadline: request.timeout + 2)
        return try HTTPWire.decodeResponse(output)
    }
}

/// Runs a child process with piped stdin and stdout and a deadline.
enum Subprocess {
    static func run(_ path: String, stdin input: [UInt8], outputLimit: Int, deadline seconds: Double) throws -> [UInt8] {
        var toChild: [Int32] = [0, 0], fromChild: [Int32] = [0, 0]
        guard pipe(&toChild) == 0, pipe(&fromChild) == 0 else { throw HTTPTransportError(.other, "cannot create pipes for the fetch helper") }
        for fd in toChild + fromChild { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }

        #if os(Linux)
        var actions = posix_spawn_file_actions_t()
        #else
        var actions: posix_spawn_file_actions_t?
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)

        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup(path), nil]
        defer { for pointer in argv { free(pointer) } }
        let spawned = posix_spawn(&pid, path, &actions, nil, argv, environ)
        close(toChild[0])
        close(fromChild[1])
        guard spawned == 0 else {
            close(toChild[1])
            close(fromChild[0])
            throw HTTPTransportError(.other, "cannot start the fetch helper \(path): \(String(cString: strerror(spawned)))")
        }
        try? Files.writeAll(toChild[1], input, path: "fetch helper stdin")
        close(toChild[1])

        defer { close(fromChild[0]) }
        let end = monotonicSeconds() + seconds
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var timedOut = false
        while true {
            let remaining = end - monotonicSeconds()
            if remaining <= 0 {
                timedOut = true
                break
            }
            var poller = pollfd(fd: fromChild[0], events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(min(remaining, 3600) * 1000) + 1)
            if ready < 0 && errno == EINTR { continue }
            if ready <= 0 { continue }
            let count = chunk.withUnsafeMutableBytes { read(fromChild[0], $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            output += chunk[0..<count]
            if output.count > outputLimit { break }
        }
        if timedOut || output.count > outputLimit { kill(pid, SIGKILL) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        if timedOut { throw HTTPTransportError(.timeout, "the fetch did not finish within \(seconds) s") }
        if output.count > outputLimit { throw HTTPTransportError(.bodyTooLarge, "the fetch helper's answer exceeded \(outputLimit) bytes") }
        return output
    }
}
