import ShadowCore

/// HTTP target URIs as RFC 9449 §4.3 compares `htu` with the request: the query and fragment
/// dropped, then RFC 3986's syntax- and scheme-based normalization (§6.2.2, §6.2.3). Only
/// absolute `http` and `https` URIs in printable ASCII, with no user information, are accepted.
public enum HTTPTargetURI {
    /// The longest URI read, in bytes.
    public static let maxBytes = 8192

    /// Why a URI has no normal form (``normalized(_:)``), for an error message.
    public enum Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        case empty
        case tooLong
        case notPrintable(offset: Int)
        case noScheme
        case scheme
        case notAbsolute
        case userInformation
        case host
        case ipv6Host
        case port
        case percentEncoding
        case pathCharacter(UInt8)

        public var description: String {
            switch self {
            case .empty: return "the URL is empty"
            case .tooLong: return "the URL is over \(HTTPTargetURI.maxBytes) bytes"
            case .notPrintable(let offset): return "the byte at offset \(offset) is not printable ASCII"
            case .noScheme: return "the URL has no scheme (http: or https:)"
            case .scheme: return "the scheme is not http or https"
            case .notAbsolute: return "the scheme is not followed by //"
            case .userInformation: return "the URL has user information (@ before the path)"
            case .host: return "the host is empty or holds a character other than letters, digits, -, ., _ and ~"
            case .ipv6Host: return "the bracketed host is not hex digits, : and ., closed by ]"
            case .port: return "the port is not 0 to 65535"
            case .percentEncoding: return "a % in the path is not followed by two hex digits"
            case .pathCharacter(let byte):
                return "the path holds \"\(Character(Unicode.Scalar(byte)))\", which RFC 3986 does not allow there"
            }
        }
    }

    /// `uri` normalized: the scheme and host lowercased, the default port (80, 443) and an empty
    /// port dropped, percent-encodings uppercased and those of unreserved characters decoded, dot
    /// segments removed, an empty path made `/`; the query and fragment dropped. Nil for anything
    /// that is not an absolute http(s) URI as above (``normalize(_:)`` says why).
    public static func normalized(_ uri: String) -> String? { try? normalize(uri).get() }

    /// Why `uri` has no normal form; nil when it has one.
    static func refusal(_ uri: String) -> Refusal? {
        if case .failure(let refusal) = normalize(uri) { return refusal }
        return nil
    }

    /// ``normalized(_:)``, or the first reason `uri` has no normal form.
    public static func normalize(_ uri: String) -> Result<String, Refusal> {
        let bytes = Array(uri.utf8)
        guard !bytes.isEmpty else { return .failure(.empty) }
        guard bytes.count <= maxBytes else { return .failure(.tooLong) }
        if let offset = bytes.firstIndex(where: { !(0x21...0x7E).contains($0) }) {
            return .failure(.notPrintable(offset: offset))
        }
        let beforeFragment = bytes.firstIndex(of: UInt8(ascii: "#")) ?? bytes.endIndex
        let end = bytes[..<beforeFragment].firstIndex(of: UInt8(ascii: "?")) ?? beforeFragment
        let main = bytes[..<end]
        guard let colon = main.firstIndex(of: UInt8(ascii: ":")) else { return .failure(.noScheme) }
        let scheme = String(decoding: main[..<colon].map(lowercased), as: UTF8.self)
        guard scheme == "http" || scheme == "https" else { return .failure(.scheme) }
        let rest = main[(colon + 1)...]
        guard rest.starts(with: "//".utf8) else { return .failure(.notAbsolute) }
        let authorityStart = rest.startIndex + 2
        let pathStart = rest[authorityStart...].firstIndex(of: UInt8(ascii: "/")) ?? rest.endIndex
        return authority(rest[authorityStart..<pathStart], scheme: scheme).flatMap { authority in
            path(rest[pathStart...]).map { scheme + "://" + authority + $0 }
        }
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        (0x41...0x5A).contains(byte) ? byte + 0x20 : byte
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x41...0x5A, 0x61...0x7A, 0x30...0x39, UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            return true
        default: return false
        }
    }

    /// Host and port, lowercased, the default port dropped; refused with user information, an
    /// empty or invalid host, or a port that is not 0 to 65535.
    private static func authority(_ bytes: ArraySlice<UInt8>, scheme: String) -> Result<String, Refusal> {
        guard !bytes.contains(UInt8(ascii: "@")) else { return .failure(.userInformation) }
        var host: ArraySlice<UInt8>
        var port: ArraySlice<UInt8> = []
        if bytes.first == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return .failure(.ipv6Host) }
            host = bytes[bytes.startIndex...close]
            let inside = bytes[(bytes.startIndex + 1)..<close]
            guard !inside.isEmpty,
                inside.allSatisfy({ Hex.value($0) != nil || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") })
            else { return .failure(.ipv6Host) }
            let after = bytes[(close + 1)...]
            if !after.isEmpty {
                guard after.first == UInt8(ascii: ":") else { return .failure(.ipv6Host) }
                port = after.dropFirst()
            }
        } else {
            if let colon = bytes.lastIndex(of: UInt8(ascii: ":")) {
                host = bytes[..<colon]
                port = bytes[(colon + 1)...]
            } else {
                host = bytes
            }
            guard !host.isEmpty, host.allSatisfy(isUnreserved) else { return .failure(.host) }
        }
        host = ArraySlice(host.map(lowercased))
        var text = String(decoding: host, as: UTF8.self)
        if !port.isEmpty {
            guard let number = String(decoding: port, as: UTF8.self).asciiDigitsValue(maxDigits: 5), number <= 65535
            else { return .failure(.port) }
            if !(scheme == "http" && number == 80) && !(scheme == "https" && number == 443) {
                text += ":" + String(number)
            }
        }
        return .success(text)
    }

    /// The path with percent-encodings normalized and dot segments removed; `/` for an empty
    /// one. Refused for a character a path may not hold, or a `%` not followed by two hex digits.
    private static func path(_ bytes: ArraySlice<UInt8>) -> Result<String, Refusal> {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.endIndex, let high = Hex.value(bytes[index + 1]),
                    let low = Hex.value(bytes[index + 2])
                else { return .failure(.percentEncoding) }
                let value = high << 4 | low
                if isUnreserved(value) {
                    out.append(value)
                } else {
                    out += [UInt8(ascii: "%"), uppercaseHex(bytes[index + 1]), uppercaseHex(bytes[index + 2])]
                }
                index += 3
                continue
            }
            guard isPathCharacter(byte) else { return .failure(.pathCharacter(byte)) }
            out.append(byte)
            index += 1
        }
        let path = removingDotSegments(out)
        return .success(path.isEmpty ? "/" : String(decoding: path, as: UTF8.self))
    }

    private static func uppercaseHex(_ byte: UInt8) -> UInt8 { (0x61...0x66).contains(byte) ? byte - 0x20 : byte }

    /// pchar (RFC 3986 §3.3) and `/`: unreserved, sub-delims, `:` and `@`.
    private static func isPathCharacter(_ byte: UInt8) -> Bool {
        if isUnreserved(byte) { return true }
        switch byte {
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
            UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"),
            UInt8(ascii: "="), UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "/"):
            return true
        default: return false
        }
    }

    /// RFC 3986 §5.2.4, on segments: `.` dropped, `..` removing the segment before it.
    private static func removingDotSegments(_ path: [UInt8]) -> [UInt8] {
        guard !path.isEmpty else { return path }
        let segments = path.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).dropFirst()
        var kept: [ArraySlice<UInt8>] = []
        var trailingSlash = false
        for segment in segments {
            trailingSlash = false
            if segment.elementsEqual(".".utf8) {
                trailingSlash = true
            } else if segment.elementsEqual("..".utf8) {
                if !kept.isEmpty { kept.removeLast() }
                trailingSlash = true
            } else {
                kept.append(segment)
            }
        }
        var out: [UInt8] = []
        for segment in kept { out += [UInt8(ascii: "/")] + segment }
        if trailingSlash || out.isEmpty { out.append(UInt8(ascii: "/")) }
        return out
    }
}
