import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A real HTTP/1.1 server on 127.0.0.1 for tests: it serves whatever its handler says, and can
/// misbehave on purpose (hang, reset the connection, close without answering).
public final class LoopbackHTTPServer: Sendable {
    /// A request as the server read it.
    public struct Request: Sendable {
        public let method: String
        public let path: String
        /// Header fields, names lower-cased.
        public let headers: [String: String]
        public let body: [UInt8]

        /// The form fields of an `application/x-www-form-urlencoded` body.
        public var form: [String: String] {
            var fields: [String: String] = [:]
            for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1).map {
                    String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
                }
                fields[parts[0]] = parts.count > 1 ? parts[1] : ""
            }
            return fields
        }
    }

    /// What to do with a request.
    public enum Reply: Sendable {
        /// Answer with this status, headers and body.
        case respond(status: Int, headers: [(String, String)], body: [UInt8])
        /// Read the request, then send nothing for this long (or until the server stops), then close.
        case hang(seconds: Double)
        /// Reset the connection (RST) without answering.
        case reset
        /// Close the connection without answering.
        case close
        /// Write `next(n)` for n = 0, 1, … with `interval` seconds between writes, until it returns
        /// nil, the client stops reading, `limit` seconds pass, or the server stops; then close.
        /// For hostile servers: endless bodies, lying lengths, one byte a second.
        case stream(interval: Double, limit: Double, next: @Sendable (Int) -> [UInt8]?)

        /// A JSON answer.
        public static func json(_ text: String, status: Int = 200, headers: [(String, String)] = []) -> Reply {
            .respond(status: status, headers: [("Content-Type", "application/json")] + headers, body: Array(text.utf8))
        }
    }

    public typealias Handler = @Sendable (Request) -> Reply

    private struct State {
        var handler: Handler
        var requests: [Request] = []
        var stopped = false
        var bytesStreamed = 0
    }

    private let listener: Int32
    public let port: Int
    private let state: Mutex<State>
    private let stopSignal = DispatchSemaphore(value: 0)
    private let acceptThreadDone = DispatchSemaphore(value: 0)

    /// Starts a server on an ephemeral loopback port.
    public init(handler: @escaping Handler) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw CLIRunnerError("socket failed") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 128) == 0 else {
            close(fd)
            throw CLIRunnerError("bind/listen failed")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        state = Mutex(State(handler: handler))
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    deinit { stop() }

    /// `http://127.0.0.1:<port><path>`.
    public func url(_ path: String = "/") -> String { "http://127.0.0.1:\(port)\(path)" }

    /// Replaces the handler.
    public func setHandler(_ handler: @escaping Handler) { state.withLock { $0.handler = handler } }

    /// Every request received so far, in order.
    public var requests: [Request] { state.withLock { $0.requests } }

    /// How many bytes `.stream` replies have written so far.
    public var bytesStreamed: Int { state.withLock { $0.bytesStreamed } }

    /// How many requests have arrived.
    public var requestCount: Int { state.withLock { $0.requests.count } }

    /// Stops accepting, releases hanging connections, and closes the listening socket.
    public func stop() {
        let already = state.withLock { state -> Bool in
            defer { state.stopped = true }
            return state.stopped
        }
        guard !already else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for _ in 0..<1024 { stopSignal.signal() }
        _ = acceptThreadDone.wait(timeout: .now() + 5)
    }

    private func acceptLoop() {
        defer { acceptThreadDone.signal() }
        while true {
            let connection = accept(listener, nil, nil)
            if connection < 0 {
                if errno == EINTR { continue }
                return
            }
            let thread = Thread { [self] in serve(connection) }
            thread.start()
        }
    }

    private func serve(_ fd: Int32) {
        guard let request = readRequest(fd) else {
            close(fd)
            return
        }
        let handler = state.withLock { state -> Handler in
            state.requests.append(request)
            return state.handler
        }
        switch handler(request) {
        case .respond(let status, let headers, let body):
            var head = "HTTP/1.1 \(status) \(Self.reason(status))\r\n"
            for (name, value) in headers { head += "\(name): \(value)\r\n" }
            head += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
            writeAll(fd, Array(head.utf8) + body)
            shutdown(fd, Int32(SHUT_WR))
            close(fd)
        case .hang(let seconds):
            _ = stopSignal.wait(timeout: .now() + seconds)
            close(fd)
        case .reset:
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            close(fd)
        case .close:
            close(fd)
        case .stream(let interval, let limit, let next):
            let end = Date().addingTimeInterval(limit)
            var index = 0
            while Date() < end, !state.withLock({ $0.stopped }), let bytes = next(index) {
                guard writeAll(fd, bytes) else { break }
                state.withLock { $0.bytesStreamed += bytes.count }
                index += 1
                if interval > 0, stopSignal.wait(timeout: .now() + interval) == .success { break }
            }
            close(fd)
        }
    }

    private func readRequest(_ fd: Int32) -> Request? {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var headerEnd: Int?
        while headerEnd == nil {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return nil }
            data += buffer[0..<count]
            if let range = Self.find([13, 10, 13, 10], in: data) { headerEnd = range }
            if data.count > 1 << 20 { return nil }
        }
        guard let end = headerEnd else { return nil }
        let head = String(decoding: data[0..<end], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n")
        let requestLine = lines.removeFirst().split(separator: " ")
        guard requestLine.count >= 2 else { return nil }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        var body = Array(data[(end + 4)...])
        let length = Int(headers["content-length"] ?? "0") ?? 0
        while body.count < length {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            body += buffer[0..<count]
        }
        return Request(method: String(requestLine[0]), path: String(requestLine[1]), headers: headers, body: body)
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for index in 0...(haystack.count - needle.count) where Array(haystack[index..<index + needle.count]) == needle {
            return index
        }
        return nil
    }

    @discardableResult
    private func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes {
                send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            }
            if written < 0 && errno == EINTR { continue }
            if written <= 0 { return false }
            offset += written
        }
        return true
    }

    private static func reason(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 302: return "Found"
        case 304: return "Not Modified"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 404: return "Not Found"
        case 429: return "Too Many Requests"
        case 500: return "Internal Server Error"
        case 503: return "Service Unavailable"
        default: return "Status"
        }
    }
}
