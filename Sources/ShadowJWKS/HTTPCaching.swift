#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
package import HTTPTypes
package import ShadowCore

/// Freshness rules read from response headers (RFC 9111), parsed defensively: any value a server
/// sends, however long or malformed, gives a number or nothing, never a trap.
package enum HTTPCaching {
    /// The value RFC 9111 §1.2.2 says a cache uses for a delta-seconds that overflows.
    package static let deltaSecondsCap = 2_147_483_648.0

    /// Seconds the response may be reused: `Cache-Control: max-age` first, else `Expires`
    /// relative to `Date` (or to `now`); `no-cache`/`no-store` and a malformed `max-age` or
    /// `Expires` mean zero. `nil` when the server says nothing usable.
    package static func freshnessLifetime(_ headers: HTTPFields, now: Date) -> Double? {
        // Repeated Cache-Control fields are one list (RFC 9110 §5.3): the subscript joins them.
        if let control = headers[.cacheControl] {
            var maxAge: Double?
            for directive in directives(control) {
                switch directive.name {
                case "no-cache", "no-store": return 0
                case "max-age" where maxAge == nil:
                    // The first max-age counts; a malformed one makes the response stale.
                    maxAge = directive.value.flatMap(deltaSeconds) ?? 0
                default: break
                }
            }
            if let maxAge { return maxAge }
        }
        if let expires = headers.first(.expires) {
            guard let expiry = parseHTTPDate(expires) else { return 0 }
            let reference = headers.first(.date).flatMap(parseHTTPDate) ?? Timestamp(now) ?? expiry
            return max(0, Double(expiry.milliseconds - reference.milliseconds) / 1000)
        }
        return nil
    }

    /// `Retry-After` as seconds from now: delta-seconds or an HTTP-date; nil when absent or malformed.
    package static func retryAfter(_ headers: HTTPFields, now: Date) -> Double? {
        guard let value = headers.first(.retryAfter) else { return nil }
        let trimmed = value.trimmedSpaces
        if let seconds = deltaSeconds(trimmed) { return seconds }
        guard let date = parseHTTPDate(trimmed), let current = Timestamp(now) else { return nil }
        return max(0, Double(date.milliseconds - current.milliseconds) / 1000)
    }

    /// One `Cache-Control` directive: a lower-cased name and its value, unquoted.
    package struct Directive: Equatable {
        package let name: String
        package let value: String?
    }

    /// The directives of a `Cache-Control` value (RFC 9111 §5.2): comma-separated
    /// `token [ "=" ( token / quoted-string ) ]`. Empty and nameless entries are skipped.
    package static func directives(_ field: String) -> [Directive] {
        var result: [Directive] = []
        var bytes = Array(field.utf8)[...]
        while !bytes.isEmpty {
            // Up to the next comma outside a quoted string.
            var end = bytes.startIndex
            var quoted = false
            var escaped = false
            while end < bytes.endIndex {
                let byte = bytes[end]
                if escaped {
                    escaped = false
                } else if quoted && byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    quoted.toggle()
                } else if byte == UInt8(ascii: ","), !quoted {
                    break
                }
                end += 1
            }
            let entry = bytes[bytes.startIndex..<end]
            bytes = end < bytes.endIndex ? bytes[(end + 1)...] : []
            let equals = entry.firstIndex(of: UInt8(ascii: "="))
            let name = String(decoding: entry[..<(equals ?? entry.endIndex)], as: UTF8.self).trimmedSpaces.lowercased()
            guard !name.isEmpty else { continue }
            var value = equals.map { String(decoding: entry[($0 + 1)...], as: UTF8.self).trimmedSpaces }
            if let text = value, text.utf8.count >= 2, text.utf8.first == UInt8(ascii: "\""),
                text.utf8.last == UInt8(ascii: "\"")
            {
                value = unquote(text)
            }
            result.append(Directive(name: name, value: value))
        }
        return result
    }

    /// A quoted-string's content with its backslash escapes removed.
    private static func unquote(_ text: String) -> String {
        var out: [UInt8] = []
        var escaped = false
        for byte in text.utf8.dropFirst().dropLast() {
            if !escaped && byte == UInt8(ascii: "\\") {
                escaped = true
                continue
            }
            escaped = false
            out.append(byte)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// RFC 9111 delta-seconds: one or more digits; a value past 2^31 reads as 2^31.
    package static func deltaSeconds(_ text: String) -> Double? {
        let bytes = text.utf8
        guard !bytes.isEmpty, bytes.allSatisfy({ $0 &- UInt8(ascii: "0") < 10 }) else { return nil }
        var value = 0.0
        for byte in bytes {
            value = value * 10 + Double(byte - UInt8(ascii: "0"))
            if value >= deltaSecondsCap { return deltaSecondsCap }
        }
        return value
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    private static let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let longWeekdays = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]

    /// Parses an HTTP-date (RFC 9110 §5.6.7): the IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`,
    /// and the obsolete `Sunday, 06-Nov-94 08:49:37 GMT` and `Sun Nov  6 08:49:37 1994` that
    /// recipients must accept. Years outside 1 to 9999, and anything else, give nil.
    package static func parseHTTPDate(_ text: String) -> Timestamp? {
        guard text.utf8.count <= 64 else { return nil }
        let parts = text.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        if parts.count == 6, parts[5] == "GMT", parts[0].hasSuffix(",") {
            let weekday = String(parts[0].dropLast())
            if weekdays.contains(weekday) {
                // IMF-fixdate: day, month, 4-digit year.
                guard parts[1].utf8.count == 2, parts[3].utf8.count == 4, let day = number(parts[1]),
                    let year = number(parts[3]),
                    let month = months.firstIndex(of: parts[2])
                else { return nil }
                return time(parts[4], year: year, month: month + 1, day: day)
            }
        }
        if parts.count == 4, parts[3] == "GMT", parts[0].hasSuffix(","),
            longWeekdays.contains(String(parts[0].dropLast()))
        {
            // RFC 850: dd-Mon-yy, the century chosen as RFC 9110 §5.6.7 advises (within 50 years).
            let date = parts[1].split(separator: "-", omittingEmptySubsequences: false).map(String.init)
            guard date.count == 3, date[0].utf8.count == 2, date[2].utf8.count == 2, let day = number(date[0]),
                let short = number(date[2]),
                let month = months.firstIndex(of: date[1])
            else { return nil }
            return time(parts[2], year: short < 70 ? 2000 + short : 1900 + short, month: month + 1, day: day)
        }
        if parts.count == 5, weekdays.contains(parts[0]), let month = months.firstIndex(of: parts[1]) {
            // asctime: Mon d hh:mm:ss yyyy (the day padded with a space, which the split absorbs).
            guard (1...2).contains(parts[2].utf8.count), parts[4].utf8.count == 4, let day = number(parts[2]),
                let year = number(parts[4])
            else { return nil }
            return time(parts[3], year: year, month: month + 1, day: day)
        }
        return nil
    }

    private static func time(_ text: String, year: Int, month: Int, day: Int) -> Timestamp? {
        let fields = text.split(separator: ":", omittingEmptySubsequences: false)
        guard fields.count == 3, fields.allSatisfy({ $0.utf8.count == 2 }), let hour = number(fields[0]),
            let minute = number(fields[1]),
            let second = number(fields[2])
        else { return nil }
        return Timestamp.utc(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
    }

    /// A short run of ASCII digits (at most 4) as a number.
    private static func number(_ text: some StringProtocol) -> Int? {
        let bytes = text.utf8
        guard (1...4).contains(bytes.count), bytes.allSatisfy({ $0 &- UInt8(ascii: "0") < 10 }) else { return nil }
        return bytes.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
    }

    /// Formats an IMF-fixdate.
    package static func formatHTTPDate(_ time: Timestamp) -> String {
        let f = time.fields
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : String(value) }
        let year = String(repeating: "0", count: max(0, 4 - String(f.year).count)) + String(f.year)
        return
            """
            \(weekdays[f.weekday]), \(two(f.day)) \(months[f.month - 1]) \(year) \
            \(two(f.hour)):\(two(f.minute)):\(two(f.second)) GMT
            """
    }

    /// True for a header value that may be sent back in a request: visible ASCII, spaces and
    /// tabs only (no CR, LF or other controls), at most 1 KiB.
    package static func isSafeToEcho(_ value: String) -> Bool {
        value.utf8.count <= 1024 && value.utf8.allSatisfy { ($0 >= 0x20 && $0 < 0x7F) || $0 == 0x09 }
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces and tabs.
    var trimmedSpaces: String {
        var slice = Substring(self)
        while let first = slice.first, first == " " || first == "\t" { slice.removeFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice.removeLast() }
        return String(slice)
    }
}
