#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore

/// Freshness rules read from response headers (RFC 9111).
enum HTTPCaching {
    /// Seconds the response may be reused: `Cache-Control: max-age` first, else `Expires`
    /// relative to `Date` (or to `now`); `no-cache`/`no-store` mean zero. `nil` when the server
    /// says nothing usable.
    static func freshnessLifetime(_ headers: HTTPHeaders, now: Date) -> Double? {
        if let control = headers["Cache-Control"] {
            var maxAge: Double?
            for directive in control.split(separator: ",") {
                let parts = directive.split(separator: "=", maxSplits: 1).map { $0.trimmedSpaces.lowercased() }
                switch parts[0] {
                case "no-cache", "no-store": return 0
                case "max-age" where parts.count == 2:
                    let value = parts[1].filter { $0 != "\"" }
                    if let seconds = Int(value), seconds >= 0 { maxAge = Double(seconds) }
                default: break
                }
            }
            if let maxAge { return maxAge }
        }
        if let expires = headers["Expires"] {
            guard let expiry = parseHTTPDate(expires) else { return 0 }  // an invalid Expires means "already expired"
            let reference = headers["Date"].flatMap(parseHTTPDate) ?? now
            return max(0, expiry.timeIntervalSince(reference))
        }
        return nil
    }

    /// `Retry-After` as seconds from now: delta-seconds or an HTTP-date.
    static func retryAfter(_ headers: HTTPHeaders, now: Date) -> Double? {
        guard let value = headers["Retry-After"]?.trimmedSpaces else { return nil }
        if let seconds = Int(value), seconds >= 0 { return Double(seconds) }
        return parseHTTPDate(value).map { max(0, $0.timeIntervalSince(now)) }
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    private static let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]

    /// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, RFC 9110 §5.6.7).
    static func parseHTTPDate(_ text: String) -> Date? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[0].hasSuffix(","), parts[5] == "GMT", let day = Int(parts[1]), let year = Int(parts[3]),
            let month = months.firstIndex(of: String(parts[2]))
        else { return nil }
        let time = parts[4].split(separator: ":")
        guard time.count == 3, let hour = Int(time[0]), let minute = Int(time[1]), let second = Int(time[2]) else { return nil }
        return Timestamp.utc(year: year, month: month + 1, day: day, hour: hour, minute: minute, second: second)
    }

    /// Formats an IMF-fixdate for `If-Modified-Since`.
    static func formatHTTPDate(_ date: Date) -> String {
        let f = Timestamp.utcFields(date)
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : String(value) }
        return "\(weekdays[f.weekday]), \(two(f.day)) \(months[f.month - 1]) \(f.year) \(two(f.hour)):\(two(f.minute)):\(two(f.second)) GMT"
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
