#if canImport(AsyncHTTPClient)
/// The platform's HTTP transport: ``AsyncHTTPClientTransport`` on Linux, `URLSessionTransport` on
/// Apple platforms. Both take `init(allowLoopbackHTTP:)`.
public typealias DefaultHTTPTransport = AsyncHTTPClientTransport
#elseif canImport(Darwin)
/// The platform's HTTP transport: ``AsyncHTTPClientTransport`` on Linux, `URLSessionTransport` on
/// Apple platforms. Both take `init(allowLoopbackHTTP:)`.
public typealias DefaultHTTPTransport = URLSessionTransport
#endif
