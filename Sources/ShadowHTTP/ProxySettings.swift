#if canImport(Darwin)
import Darwin
#else
import Glibc
#endif
import ShadowCore
public import ShadowJWKS

/// Which proxy an `https://` request goes through, read from the environment the way curl reads it.
///
/// - The proxy is `https_proxy`, else `HTTPS_PROXY`, else `all_proxy`, else `ALL_PROXY`; an empty
///   value counts as unset. Its form is `[http://][user:password@]host[:port]`; the port defaults
///   to 1080, as in curl; user and password are percent-decoded and sent as Basic authorization.
///   `https://` and `socks*://` proxies are refused with a message naming the variable.
/// - `no_proxy`, else `NO_PROXY`, lists hosts that go direct, separated by commas: `*` alone means
///   every host; an entry (a leading `.` is ignored) matches that host and every name under it;
///   an IPv4 entry with a `/bits` suffix matches that range. Matching ignores case and a trailing `.`.
/// - Plain `http://` requests (loopback only, see ``URLPolicy``) never use a proxy.
public struct ProxySettings: Sendable, Hashable {
    /// A proxy server reached over plain HTTP (CONNECT for https targets).
    public struct Server: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
        public var host: String
        public var port: Int
        public var username: String?
        public var password: String?

        public init(host: String, port: Int, username: String? = nil, password: String? = nil) {
            self.host = host
            self.port = port
            self.username = username
            self.password = password
        }

        /// `host:port`, with `user:***@` when credentials are set: the password is never printed.
        public var description: String {
            (username.map { "\($0):***@" } ?? "") + (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
        }

        public var debugDescription: String { description }
    }

    /// The proxy for https requests, or the reason the configured one cannot be used.
    public var https: Result<Server, HTTPTransportError>?
    /// Hosts that go direct (already split and normalized).
    public var noProxy: [String]

    /// No proxy at all.
    public static let none = ProxySettings(https: nil, noProxy: [])

    public init(https: Result<Server, HTTPTransportError>?, noProxy: [String]) {
        self.https = https
        self.noProxy = noProxy
    }

    /// The settings in `environment` (by default, this process's environment).
    public static func fromEnvironment(_ environment: [String: String]? = nil) -> ProxySettings {
        func value(_ name: String) -> (name: String, value: String)? {
            let found: String?
            if let environment {
                found = environment[name]
            } else {
                found = getenv(name).map { String(cString: $0) }
            }
            guard let found, !found.isEmpty else { return nil }
            return (name, found)
        }
        let proxy = ["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"].lazy.compactMap(value).first
        let exceptions = value("no_proxy") ?? value("NO_PROXY")
        let noProxy = (exceptions?.value ?? "").split(separator: ",").compactMap { entry -> String? in
            var name = entry.trimmingWhitespace().lowercased()
            if name.hasPrefix("[") && name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
            while name.hasPrefix(".") { name.removeFirst() }
            if name.hasSuffix(".") { name.removeLast() }
            return name.isEmpty ? nil : name
        }
        return ProxySettings(https: proxy.map { parse($0.value, variable: $0.name) }, noProxy: noProxy)
    }

    /// The proxy for an https request to `host`, nil to go direct; throws when the configured proxy is unusable.
    public func server(forHost host: String) throws -> Server? {
        guard let https else { return nil }
        if bypasses(host) { return nil }
        return try https.get()
    }

    /// True when `host` is on the no-proxy list.
    public func bypasses(_ host: String) -> Bool {
        var name = host.lowercased()
        if name.hasPrefix("[") && name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name.hasSuffix(".") { name.removeLast() }
        for entry in noProxy {
            if entry == "*" || entry == name || name.hasSuffix("." + entry) { return true }
            if let range = IPv4Range(entry), let address = IPv4Range.address(name), range.contains(address) {
                return true
            }
        }
        return false
    }

    /// Parses a proxy variable's value.
    static func parse(_ text: String, variable: String) -> Result<Server, HTTPTransportError> {
        func failure(_ why: String) -> Result<Server, HTTPTransportError> {
            .failure(HTTPTransportError(.other, "\(variable) \(why)"))
        }
        var rest = Substring(text.trimmingWhitespace())
        if let schemeEnd = rest.firstRange(of: "://") {
            let scheme = rest[..<schemeEnd.lowerBound].lowercased()
            guard scheme == "http" else {
                return failure("names a \(scheme):// proxy; only http:// proxies are supported")
            }
            rest = rest[schemeEnd.upperBound...]
        }
        if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        var username: String?, password: String?
        if let at = rest.lastIndex(of: "@") {
            let userinfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let parts = userinfo.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            guard let user = percentDecoded(parts[0]), let pass = parts.count > 1 ? percentDecoded(parts[1]) : "" else {
                return failure("has a malformed percent-encoding in its user or password")
            }
            (username, password) = (user, pass)
        }
        var host: Substring, portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return failure("has an unclosed [ in its host") }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":") {
                portText = after.dropFirst()
            } else if !after.isEmpty {
                return failure("has text after its [host]")
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        guard !host.isEmpty, host.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else {
            return failure("names no proxy host")
        }
        var port = 1080
        if let portText {
            guard let number = portText.asciiDigitsValue(maxDigits: 5), (1...65535).contains(number) else {
                return failure("has a port outside 1-65535")
            }
            port = number
        }
        return .success(Server(host: String(host), port: port, username: username, password: password))
    }

    private static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var index = text.utf8.startIndex
        let utf8 = text.utf8
        while index < utf8.endIndex {
            let byte = utf8[index]
            if byte == UInt8(ascii: "%") {
                let high = utf8.index(after: index)
                guard high < utf8.endIndex, utf8.index(after: high) < utf8.endIndex,
                    let value = UInt8(
                        String(decoding: [utf8[high], utf8[utf8.index(after: high)]], as: UTF8.self), radix: 16)
                else { return nil }
                bytes.append(value)
                index = utf8.index(high, offsetBy: 2)
            } else {
                bytes.append(byte)
                index = utf8.index(after: index)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}

/// An IPv4 address range written `a.b.c.d/bits`.
struct IPv4Range: Hashable {
    let base: UInt32
    let mask: UInt32

    init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, let base = Self.address(parts[0]), parts[1].count <= 2, let bits = Int(parts[1]),
            (0...32).contains(bits)
        else { return nil }
        mask = bits == 0 ? 0 : UInt32.max << UInt32(32 - bits)
        self.base = base & mask
    }

    func contains(_ address: UInt32) -> Bool { address & mask == base }

    /// A dotted-quad IPv4 address, or nil.
    static func address(_ text: some StringProtocol) -> UInt32? {
        let octets = text.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4 else { return nil }
        var value: UInt32 = 0
        for octet in octets {
            guard (1...3).contains(octet.count), octet.allSatisfy(\.isASCII), let number = UInt8(octet) else {
                return nil
            }
            value = value << 8 | UInt32(number)
        }
        return value
    }
}

extension StringProtocol {
    func trimmingWhitespace() -> String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
