#if canImport(AsyncHTTPClient)
public import AsyncHTTPClient
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import NIOCore
import NIOHTTP1
import NIOSSL
import ShadowCore
public import ShadowJWKS
import HTTPTypes
import Synchronization

/// An ``HTTPTransport`` over AsyncHTTPClient (SwiftNIO): the default on Linux.
///
/// Whatever the server does, one request costs at most `request.timeout` seconds and
/// `request.maxResponseBytes` of body:
/// - one deadline covers the whole exchange (connect, TLS, head and body), enforced on a NIO event
///   loop so that it fires even when Swift's cooperative pool is busy;
/// - a `Content-Length` above the cap fails at once, and a body without one (read until close,
///   or chunked) fails as soon as the bytes received pass the cap;
/// - redirects are never followed: a 3xx is the answer;
/// - TLS goes through the system trust store, plus the PEM certificates of `additionalTrustRootsFile`;
/// - https requests go through the proxy that ``ProxySettings`` names (by default curl's
///   environment variables).
///
/// It can run on a caller's `HTTPClient` (sharing its event loops and connection pool); that
/// client should be configured with `redirectConfiguration: .disallow`, and a response that came
/// through a redirect all the same is refused.
public final class AsyncHTTPClientTransport: HTTPTransport {
    /// How a transport that owns its clients makes them.
    public struct Options: Sendable {
        /// Whether plain `http://` to a literal loopback address is allowed.
        public var allowLoopbackHTTP: Bool
        /// A PEM file of CA certificates trusted besides the system's.
        public var additionalTrustRootsFile: String?
        /// The proxy for https requests.
        public var proxy: ProxySettings
        /// The event loops the clients run on; nil for `HTTPClient.defaultEventLoopGroup`, started
        /// on the first request (so a process that never fetches starts no threads).
        public var eventLoopGroup: (any EventLoopGroup)?

        public init(
            allowLoopbackHTTP: Bool = false, additionalTrustRootsFile: String? = nil,
            proxy: ProxySettings = .fromEnvironment(),
            eventLoopGroup: (any EventLoopGroup)? = nil
        ) {
            self.allowLoopbackHTTP = allowLoopbackHTTP
            self.additionalTrustRootsFile = additionalTrustRootsFile
            self.proxy = proxy
            self.eventLoopGroup = eventLoopGroup
        }
    }

    /// The caller's client, used as it is; the caller shuts it down.
    private let borrowed: HTTPClient?
    /// For clients of its own: how to make them.
    private let options: Options
    private let tls: TLSConfiguration
    /// The clients this transport made on first use, keyed by "through the proxy" and "TLS 1.3
    /// only"; it shuts them down.
    private let owned = Mutex<[ClientKey: HTTPClient]>([:])

    private struct ClientKey: Hashable {
        let proxied: Bool
        let tls13: Bool
    }
    /// Whether plain `http://` to a literal loopback address is allowed.
    public let allowLoopbackHTTP: Bool

    /// A transport with clients of its own: no redirects, no decompression, the system's trust store.
    /// Throws when `additionalTrustRootsFile` cannot be read as PEM certificates.
    public convenience init(options: Options = Options()) throws {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let path = options.additionalTrustRootsFile {
            do {
                let certificates = try NIOSSLCertificate.fromPEMFile(path)
                guard !certificates.isEmpty else {
                    throw HTTPTransportError(.other, "\(path) holds no PEM certificate")
                }
                tls.additionalTrustRoots = [.certificates(certificates)]
            } catch let error as HTTPTransportError {
                throw error
            } catch {
                throw HTTPTransportError(.other, "cannot read CA certificates from \(path): \(error)")
            }
        }
        self.init(options: options, tls: tls)
    }

    private init(options: Options, tls: TLSConfiguration) {
        borrowed = nil
        self.options = options
        self.tls = tls
        allowLoopbackHTTP = options.allowLoopbackHTTP
    }

    /// A transport with clients of its own, defaults but for `allowLoopbackHTTP` (no trust-roots
    /// file to read, so nothing can fail).
    public convenience init(allowLoopbackHTTP: Bool) {
        self.init(options: Options(allowLoopbackHTTP: allowLoopbackHTTP), tls: .makeClientConfiguration())
    }

    /// A transport on the caller's client.
    public init(client: HTTPClient, allowLoopbackHTTP: Bool = false) {
        borrowed = client
        options = Options(allowLoopbackHTTP: allowLoopbackHTTP, proxy: .none)
        tls = TLSConfiguration.makeClientConfiguration()
        self.allowLoopbackHTTP = allowLoopbackHTTP
    }

    deinit {
        for client in owned.withLock({ Array($0.values) }) {
            client.shutdown { _ in }
        }
    }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        try URLPolicy.check(request.url, allowLoopbackHTTP: allowLoopbackHTTP)
        guard request.timeout > .zero, request.timeout <= .seconds(86_400) else {
            throw HTTPTransportError(.other, "the timeout must be more than 0 and at most 86400 seconds")
        }
        guard request.maxResponseBytes >= 0 else {
            throw HTTPTransportError(.other, "the body cap must not be negative")
        }
        let client = try client(for: request.url, tls13: request.requiresTLS13)

        var outgoing = HTTPClientRequest(url: request.url)
        outgoing.method = HTTPMethod(rawValue: request.method.rawValue)
        for field in request.headerFields { outgoing.headers.add(name: field.name.rawName, value: field.value) }
        if let body = request.body { outgoing.body = .bytes(ByteBuffer(bytes: body)) }

        let deadline = NIODeadline.now() + TimeAmount(request.timeout)
        let limit = request.maxResponseBytes
        let work = Task { try await Self.exchange(outgoing, on: client, deadline: deadline, limit: limit) }
        let expired = Atomic(false)
        let timer = client.eventLoopGroup.any().scheduleTask(deadline: deadline) {
            expired.store(true, ordering: .releasing)
            work.cancel()
        }
        defer { timer.cancel() }
        do {
            return try await withTaskCancellationHandler {
                try await work.value
            } onCancel: {
                work.cancel()
            }
        } catch {
            throw Self.transportError(
                error, url: request.url, timeout: request.timeout.inSeconds,
                expired: expired.load(ordering: .acquiring))
        }
    }

    /// The client for `url`: the borrowed one, or an owned one, direct or through the proxy, and
    /// for https with TLS 1.3 as its minimum when `tls13` is set.
    private func client(for url: String, tls13: Bool) throws -> HTTPClient {
        // URLPolicy has already checked that the URL parses and names a host.
        let (scheme, host) = Self.schemeAndHost(url)
        let tls13 = tls13 && scheme == "https"
        if let borrowed {
            // Its TLS settings are the caller's; a requirement it may not meet fails before sending.
            guard !tls13 else {
                throw HTTPTransportError(
                    .tls, "\(url) requires TLS 1.3, which a borrowed HTTPClient cannot be made to enforce")
            }
            return borrowed
        }
        let proxy = scheme == "https" ? try options.proxy.server(forHost: host) : nil
        let key = ClientKey(proxied: proxy != nil, tls13: tls13)
        return owned.withLock { clients in
            if let client = clients[key] { return client }
            var tls = self.tls
            if tls13 { tls.minimumTLSVersion = .tlsv13 }
            // A refused connection or a certificate that does not verify fails the request at once
            // instead of being retried until the deadline.
            var pool = HTTPClient.Configuration.ConnectionPool(idleTimeout: .seconds(30))
            pool.retryConnectionEstablishment = false
            let configuration = HTTPClient.Configuration(
                tlsConfiguration: tls, redirectConfiguration: .disallow,
                timeout: .init(connect: .seconds(Self.connectTimeoutSeconds)),
                connectionPool: pool, proxy: proxy.map(Self.proxy), ignoreUncleanSSLShutdown: false,
                decompression: .disabled)
            let client = HTTPClient(
                eventLoopGroup: options.eventLoopGroup ?? HTTPClient.defaultEventLoopGroup, configuration: configuration
            )
            clients[key] = client
            return client
        }
    }

    private static func proxy(_ server: ProxySettings.Server) -> HTTPClient.Configuration.Proxy {
        let authorization = server.username.map {
            HTTPClient.Authorization.basic(username: $0, password: server.password ?? "")
        }
        return .server(host: server.host, port: server.port, authorization: authorization)
    }

    /// How long an owned client waits for a connection, whatever the request's deadline.
    private static let connectTimeoutSeconds: Int64 = 30

    /// One exchange: the head within the deadline, then the body up to `limit` bytes.
    private static func exchange(
        _ request: HTTPClientRequest, on client: HTTPClient, deadline: NIODeadline, limit: Int
    ) async throws -> TransportResponse {
        let response = try await client.execute(request, deadline: deadline)
        guard response.history.count <= 1 else {
            throw HTTPTransportError(
                .other,
                "the HTTPClient followed a redirect; give ShadowKeys a client with redirectConfiguration .disallow")
        }
        if let declared = response.headers.first(name: "content-length"), let length = Int(declared), length > limit {
            throw HTTPTransportError(.bodyTooLarge, "response body of \(length) bytes exceeds \(limit) bytes")
        }
        var body: [UInt8] = []
        for try await chunk in response.body {
            guard chunk.readableBytes <= limit - body.count else {
                throw HTTPTransportError(.bodyTooLarge, "response body exceeds \(limit) bytes")
            }
            body.append(contentsOf: chunk.readableBytesView)
        }
        return try TransportResponse(code: Int(response.status.code), fields: response.headers, body: body)
    }

    /// Maps whatever the exchange threw to an ``HTTPTransportError``. `expired` is whether the
    /// deadline timer fired: it tells a cancellation by the deadline from one by the caller. The
    /// client's own deadline errors are the deadline's whichever of the two fired first.
    private static func transportError(
        _ error: any Error, url: String, timeout: Double, expired: Bool
    ) -> HTTPTransportError {
        let late = HTTPTransportError(.timeout, "no complete response from \(url) within \(timeout) s")
        let cancelled = HTTPTransportError(.other, "the request to \(url) was cancelled")
        if let error = error as? HTTPTransportError { return error }
        if error is CancellationError { return expired ? late : cancelled }
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .writeTimeout: return late
            case .connectTimeout:
                let connect = Self.connectTimeoutSeconds
                return expired || timeout <= Double(connect)
                    ? late : HTTPTransportError(.timeout, "no connection to \(url) within \(connect) s")
            case .cancelled: return expired ? late : cancelled
            default: break
            }
        }
        // A connection or TLS failure keeps its own reason even when the deadline passed meanwhile.
        if error is NIOSSLError || error is BoringSSLError {
            return HTTPTransportError(.tls, "\(url): the TLS handshake failed (\(error))")
        }
        return HTTPTransportError(.connection, "\(url): \(error)")
    }

    /// The lower-cased scheme and the host (without brackets) of an absolute URL, as AsyncHTTPClient
    /// connects to it: through Foundation's parse, which percent-decodes the host and writes an
    /// internationalized name in its `xn--` form. The proxy's `NO_PROXY` check sees that host, not
    /// the URL's own spelling of it.
    package static func schemeAndHost(_ url: String) -> (scheme: String, host: String) {
        guard let parsed = URL(string: url), let scheme = parsed.scheme, let host = parsed.host else { return ("", "") }
        return (scheme.asciiLowercased(), String(host.unwrapping(UInt8(ascii: "["), UInt8(ascii: "]"))))
    }
}
#endif
