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
///   an IPv4 entry with a `/bits` suffix matches that range. Matching is by bytes, ignoring ASCII
///   case and a trailing `.`: an internationalized name is written in its `xn--` form, the form
///   the request's host has once its URL is parsed.
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
            // The user name is percent-decoded from the environment: its terminal controls are escaped.
            (username.map { "\($0.terminalSafe):***@" } ?? "") + (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
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
        let noProxy = (exceptions?.value ?? "").split(byte: UInt8(ascii: ",")).compactMap { entry -> String? in
            let lowered = entry.trimmingASCIIWhitespace().asciiLowercased()
            let name = lowered.unwrapping(UInt8(ascii: "["), UInt8(ascii: "]"))
                .dropping(UInt8(ascii: "."), leading: .max, trailing: 1)
            return name.isEmpty ? nil : String(name)
        }
        return ProxySettings(https: proxy.map { parse($0.value, variable: $0.name) }, noProxy: noProxy)
    }

    /// The proxy for an https request to `host`, nil to go direct; throws when the configured proxy is unusable.
    public func server(forHost host: String) throws -> Server? {
        guard let https else { return nil }
        if bypasses(host) { return nil }
        return try https.get()
    }

    /// True when `host` is on the no-proxy list (compared by bytes, ignoring ASCII case).
    public func bypasses(_ host: String) -> Bool {
        let name = host.asciiLowercased().unwrapping(UInt8(ascii: "["), UInt8(ascii: "]"))
            .dropping(UInt8(ascii: "."), trailing: 1)
        let bytes = name.utf8
        for entry in noProxy {
            let wanted = entry.utf8
            if wanted.elementsEqual("*".utf8) || bytes.elementsEqual(wanted) { return true }
            // A name under the entry: the entry's bytes at the end, after a dot.
            if bytes.count > wanted.count, bytes.suffix(wanted.count).elementsEqual(wanted),
                bytes[bytes.index(bytes.endIndex, offsetBy: -wanted.count - 1)] == UInt8(ascii: ".")
            {
                return true
            }
            if let range = IPv4Range(entry), let address = IPv4Range.address(name), range.contains(address) {
                return true
            }
        }
        return false
    }

    /// Parses a proxy variable's value, by bytes.
    static func parse(_ text: String, variable: String) -> Result<Server, HTTPTransportError> {
        func failure(_ why: String) -> Result<Server, HTTPTransportError> {
            .failure(HTTPTransportError(.other, "\(variable) \(why)"))
        }
        var rest = text.trimmingASCIIWhitespace().utf8[...]
        if let schemeEnd = rest.firstRange(of: "://".utf8) {
            let scheme = Substring(rest[..<schemeEnd.lowerBound])
            guard scheme.equalsASCIIIgnoringCase("http") else {
                return failure(
                    "names a \(scheme.asciiLowercased().terminalSafe):// proxy; only http:// proxies are supported")
            }
            rest = rest[schemeEnd.upperBound...]
        }
        if let slash = rest.firstIndex(of: UInt8(ascii: "/")) { rest = rest[..<slash] }
        var username: String?, password: String?
        if let at = rest.lastIndex(of: UInt8(ascii: "@")) {
            let userinfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let colon = userinfo.firstIndex(of: UInt8(ascii: ":"))
            let user = percentDecoded(userinfo[..<(colon ?? userinfo.endIndex)])
            let pass = colon.map { percentDecoded(userinfo[userinfo.index(after: $0)...]) } ?? ""
            guard let user, let pass else { return failure("has a malformed percent-encoding in its user or password") }
            (username, password) = (user, pass)
        }
        var host: Substring.UTF8View.SubSequence, portText: Substring.UTF8View.SubSequence?
        if rest.first == UInt8(ascii: "[") {
            guard let close = rest.firstIndex(of: UInt8(ascii: "]")) else {
                return failure("has an unclosed [ in its host")
            }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if after.first == UInt8(ascii: ":") {
                portText = after.dropFirst()
            } else if !after.isEmpty {
                return failure("has text after its [host]")
            }
        } else if let colon = rest.lastIndex(of: UInt8(ascii: ":")) {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        // A host name or address is printable ASCII, without spaces.
        guard !host.isEmpty, host.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            return failure("names no proxy host (a host is printable ASCII without spaces)")
        }
        var port = 1080
        if let portText {
            guard let number = Substring(portText).asciiDigitsValue(maxDigits: 5), (1...65535).contains(number) else {
                return failure("has a port outside 1-65535")
            }
            port = number
        }
        return .success(Server(host: String(Substring(host)), port: port, username: username, password: password))
    }

    /// The text with its `%XX` escapes decoded, when they are well formed and the result is UTF-8.
    private static func percentDecoded(_ text: Substring.UTF8View.SubSequence) -> String? {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let byte = text[index]
            index = text.index(after: index)
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard index < text.endIndex, text.index(after: index) < text.endIndex,
                let high = Hex.value(text[index]), let low = Hex.value(text[text.index(after: index)])
            else { return nil }
            bytes.append(high << 4 | low)
            index = text.index(index, offsetBy: 2)
        }
        return String(validating: bytes, as: UTF8.self)
    }
}

/// An IPv4 address range written `a.b.c.d/bits`.
struct IPv4Range: Hashable {
    let base: UInt32
    let mask: UInt32

    init?(_ text: String) {
        let parts = text.split(byte: UInt8(ascii: "/"), maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, let base = Self.address(parts[0]), let bits = parts[1].asciiDigitsValue(maxDigits: 2),
            (0...32).contains(bits)
        else { return nil }
        mask = bits == 0 ? 0 : UInt32.max << UInt32(32 - bits)
        self.base = base & mask
    }

    func contains(_ address: UInt32) -> Bool { address & mask == base }

    /// A dotted-quad IPv4 address (four parts of 1 to 3 ASCII digits, each at most 255), or nil.
    static func address(_ text: some StringProtocol) -> UInt32? {
        let octets = text.split(byte: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard octets.count == 4 else { return nil }
        var value: UInt32 = 0
        for octet in octets {
            guard let number = octet.asciiDigitsValue(maxDigits: 3), number <= 255 else { return nil }
            value = value << 8 | UInt32(number)
        }
        return value
    }
}
