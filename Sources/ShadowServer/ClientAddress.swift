import ShadowCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The proxies whose forwarding headers are believed (Docs/server.md, "Behind a proxy"): single
/// addresses and CIDR ranges, IPv4 and IPv6.
public struct TrustedProxies: Sendable, Hashable {
    struct Range: Sendable, Hashable {
        let network: [UInt8]
        let prefix: Int

        func contains(_ address: [UInt8]) -> Bool {
            guard address.count == network.count else { return false }
            var bits = prefix
            for (a, b) in zip(address, network) {
                guard bits > 0 else { return true }
                let mask: UInt8 = bits >= 8 ? 0xFF : ~(0xFF >> UInt8(bits))
                if a & mask != b & mask { return false }
                bits -= 8
            }
            return true
        }
    }

    let ranges: [Range]

    /// No proxy: forwarding headers are never believed.
    public static let none = TrustedProxies(ranges: [])

    init(ranges: [Range]) { self.ranges = ranges }

    /// Parses `192.0.2.10`, `10.0.0.0/8`, `2001:db8::1` or `2001:db8::/32` entries.
    /// - Throws: ``InvalidProxy`` naming the first entry that is none of these.
    public init(_ entries: [String]) throws {
        ranges = try entries.map { entry in
            let parts = entry.split(byte: UInt8(ascii: "/"), maxSplits: 1, omittingEmptySubsequences: false)
            guard let address = ClientAddress.bytes(String(parts[0])) else { throw InvalidProxy(entry: entry) }
            let bits = address.count * 8
            var prefix = bits
            if parts.count == 2 {
                guard let value = parts[1].asciiDigitsValue(maxDigits: 3), (0...bits).contains(value) else {
                    throw InvalidProxy(entry: entry)
                }
                prefix = value
            }
            return Range(network: address, prefix: prefix)
        }
    }

    /// Whether `address` (text) is one of the trusted proxies.
    public func contains(_ address: String) -> Bool {
        guard let bytes = ClientAddress.bytes(address) else { return false }
        return ranges.contains { $0.contains(bytes) }
    }

    public var isEmpty: Bool { ranges.isEmpty }

    /// An entry that is not an address or a CIDR range.
    public struct InvalidProxy: Error, CustomStringConvertible {
        public let entry: String
        public var description: String {
            """
            \(entry.quotedForMessage) is not an IPv4 or IPv6 address or CIDR range (such as 10.0.0.0/8 or \
            2001:db8::/32)
            """
        }
    }
}

/// The client a request comes from, for rate limits: the peer, or, when the peer is a trusted
/// proxy, the right-most address in its forwarding header that is not a trusted proxy.
public enum ClientAddress {
    /// The client of a request from `peer` carrying these `Forwarded` (RFC 7239) and
    /// `X-Forwarded-For` field values (each as received, all fields of that name in order).
    /// `Forwarded` wins when it names any `for`. Headers from a peer that is not trusted are ignored.
    /// When every forwarded address is a trusted proxy, the left-most is the client; a value that
    /// is not an address (RFC 7239's `unknown` or an obfuscated identifier) stops the walk and is
    /// the client's key as given.
    public static func resolve(
        peer: String, forwarded: [String], xForwardedFor: [String], trusted: TrustedProxies
    ) -> String {
        guard !trusted.isEmpty, trusted.contains(peer) else { return peer }
        var chain = forwarded.flatMap(forwardedFor)
        if chain.isEmpty {
            chain = xForwardedFor.flatMap { $0.split(byte: UInt8(ascii: ",")) }.map {
                String($0.trimmingSpacesAndTabs())
            }
            .filter { !$0.isEmpty }
        }
        guard !chain.isEmpty else { return peer }
        for entry in chain.reversed() {
            let address = hostPart(entry)
            // Not an address (`unknown`, an obfuscated name): its first 64 bytes are its key.
            guard bytes(address) != nil else { return String(decoding: entry.utf8.prefix(64), as: UTF8.self) }
            if !trusted.contains(address) { return canonical(address) }
        }
        return canonical(hostPart(chain[0]))
    }

    /// The `for` values of one `Forwarded` field value, in order (RFC 7239, section 4). Every
    /// delimiter is found by its byte, as the proxy that wrote it and any other reader find it.
    static func forwardedFor(_ value: String) -> [String] {
        var result: [String] = []
        for element in value.split(byte: UInt8(ascii: ",")) {
            for pair in element.split(byte: UInt8(ascii: ";")) {
                let parts = pair.split(byte: UInt8(ascii: "="), maxSplits: 1)
                guard parts.count == 2, parts[0].trimmingSpacesAndTabs().equalsASCIIIgnoringCase("for") else {
                    continue
                }
                var token = parts[1].trimmingSpacesAndTabs().utf8[...]
                if token.count >= 2, token.first == UInt8(ascii: "\""), token.last == UInt8(ascii: "\"") {
                    token = token.dropFirst().dropLast()
                }
                result.append(String(Substring(token)))
            }
        }
        return result
    }

    /// An address without its port and IPv6 brackets: `[2001:db8::1]:4711` → `2001:db8::1`,
    /// `192.0.2.43:47011` → `192.0.2.43`.
    static func hostPart(_ entry: String) -> String {
        let bytes = entry.utf8
        if bytes.first == UInt8(ascii: "["), let close = bytes.firstIndex(of: UInt8(ascii: "]")) {
            return String(Substring(bytes[bytes.index(after: bytes.startIndex)..<close]))
        }
        let colons = entry.split(byte: UInt8(ascii: ":"), omittingEmptySubsequences: false)
        return colons.count == 2 ? String(colons[0]) : entry
    }

    /// The address's 4 or 16 bytes, or nil when it is not an IPv4 or IPv6 address in text.
    static func bytes(_ text: String) -> [UInt8]? {
        guard text.utf8.count <= 45, !text.isEmpty else { return nil }
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }

    /// One text per address (`2001:DB8::0:1` and `2001:db8::1` are one client).
    static func canonical(_ text: String) -> String {
        guard let bytes = bytes(text) else { return text }
        var buffer = [CChar](repeating: 0, count: 64)
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        let done = bytes.withUnsafeBytes { raw in
            inet_ntop(family, raw.baseAddress, &buffer, socklen_t(buffer.count)) != nil
        }
        return done ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : text
    }
}
