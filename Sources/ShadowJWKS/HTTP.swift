#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import HTTPTypes
import ShadowCore

/// An HTTP request as a transport sends it: the method and header fields are swift-http-types'
/// (`HTTPRequest.Method`, `HTTPFields`); the URL is absolute text, checked by ``URLPolicy``.
public struct TransportRequest: Sendable {
    public var method: HTTPRequest.Method
    public var url: String
    public var headerFields: HTTPFields
    public var body: [UInt8]?
    /// Whole-exchange deadline: more than zero, at most 24 hours.
    public var timeout: Duration
    /// Largest response body accepted; a larger one fails the request.
    public var maxResponseBytes: Int
    /// An https request must negotiate TLS 1.3 or fail before anything is sent (Apple requires it
    /// for its APIs). Plain `http://` to loopback, where a transport allows it, has no TLS.
    public var requiresTLS13: Bool

    public init(
        method: HTTPRequest.Method = .get, url: String, headerFields: HTTPFields = [:], body: [UInt8]? = nil,
        timeout: Duration = .seconds(5), maxResponseBytes: Int = 256 * 1024, requiresTLS13: Bool = false
    ) {
        self.method = method
        self.url = url
        self.headerFields = headerFields
        self.body = body
        self.timeout = timeout
        self.maxResponseBytes = maxResponseBytes
        self.requiresTLS13 = requiresTLS13
    }
}

extension TransportRequest: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The method, the URL and the sizes: never a header value or the body, which carry bearer
    /// tokens, client secrets and refresh tokens.
    public var description: String {
        "\(method.rawValue) \(url) (\(headerFields.count) header fields, \(body?.count ?? 0)-byte body)"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["description": description]) }
}

/// An HTTP response as a transport returns it: swift-http-types' status and header fields, and
/// the whole body.
public struct TransportResponse: Sendable {
    public var status: HTTPResponse.Status
    public var headerFields: HTTPFields
    public var body: [UInt8]

    public init(status: HTTPResponse.Status, headerFields: HTTPFields = [:], body: [UInt8] = []) {
        self.status = status
        self.headerFields = headerFields
        self.body = body
    }
}

extension TransportResponse {
    /// A response from what an HTTP client received: a status code outside 100...599 fails with
    /// ``HTTPTransportError/Kind/other``, and a field whose name is not an HTTP token is dropped.
    public init(
        code: Int, fields: some Sequence<(name: String, value: String)>, body: [UInt8]
    ) throws(HTTPTransportError) {
        guard (100...599).contains(code) else {
            throw HTTPTransportError(.other, "the server answered with status code \(code), outside 100...599")
        }
        var headerFields = HTTPFields()
        for (name, value) in fields {
            if let name = HTTPField.Name(name) { headerFields.append(HTTPField(name: name, value: value)) }
        }
        self.init(status: HTTPResponse.Status(code: code), headerFields: headerFields, body: body)
    }
}

extension HTTPFields {
    /// The first value of the field `name`, for fields that hold one value (`ETag`, `Expires`,
    /// `Retry-After`); the subscript by name joins repeated fields with commas.
    package func first(_ name: HTTPField.Name) -> String? {
        self[values: name].first
    }
}

/// Sends HTTP requests. Module ShadowHTTP has the platform's default, `DefaultHTTPTransport`
/// (AsyncHTTPClient on Linux, URLSession on Apple platforms); any other client can conform.
///
/// Implementations must not follow redirects, must enforce `timeout` over the whole exchange,
/// and must stop reading and fail with ``HTTPTransportError/Kind/bodyTooLarge`` once the body
/// exceeds `maxResponseBytes`.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the response, whatever its status.
    func send(_ request: TransportRequest) async throws -> TransportResponse
}

/// Why a request got no response.
public struct HTTPTransportError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable {
        /// The exchange did not finish within the timeout.
        case timeout
        /// The connection could not be made or was dropped.
        case connection
        /// The response body exceeded the cap.
        case bodyTooLarge = "body_too_large"
        /// The TLS handshake failed, or could not meet the request's minimum TLS version.
        case tls
        /// The URL is not allowed (scheme, host) or not valid.
        case forbiddenURL = "forbidden_url"
        /// Anything else.
        case other
    }

    public let kind: Kind
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}

/// Which URLs ShadowKeys fetches: HTTPS anywhere; plain HTTP only to a loopback address
/// (127.0.0.0/8 or ::1), and only when explicitly allowed (for tests and local mirrors).
public enum URLPolicy {
    /// Checks `url`, throwing ``HTTPTransportError/Kind/forbiddenURL`` with the reason.
    public static func check(_ url: String, allowLoopbackHTTP: Bool) throws {
        guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(), let host = parsed.host,
            !host.isEmpty
        else {
            throw HTTPTransportError(.forbiddenURL, "\(url) is not an absolute http(s) URL")
        }
        if parsed.user != nil || parsed.password != nil {
            throw HTTPTransportError(.forbiddenURL, "URLs with credentials are not accepted")
        }
        switch scheme {
        case "https":
            return
        case "http":
            guard isLoopback(host) else {
                throw HTTPTransportError(
                    .forbiddenURL, "plain http is only allowed to 127.0.0.1 or ::1, not \(host); use https")
            }
            guard allowLoopbackHTTP else {
                throw HTTPTransportError(
                    .forbiddenURL, "plain http to \(host) needs an explicit opt-in (--allow-http-loopback)")
            }
        default:
            throw HTTPTransportError(.forbiddenURL, "scheme \(scheme) is not allowed; use https")
        }
    }

    /// True for a literal loopback address (names such as `localhost` are not trusted).
    public static func isLoopback(_ host: String) -> Bool {
        let bare = host.unwrapping(UInt8(ascii: "["), UInt8(ascii: "]"))
        if bare.utf8.elementsEqual("::1".utf8) { return true }
        // Four parts of 1 to 3 ASCII digits, each at most 255, the first 127 (`UInt8("+0")` is 0).
        let parts = bare.split(byte: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0].utf8.elementsEqual("127".utf8) else { return false }
        return parts.allSatisfy { part in part.asciiDigitsValue(maxDigits: 3).map { $0 <= 255 } ?? false }
    }
}
