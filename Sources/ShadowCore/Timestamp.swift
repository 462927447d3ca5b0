#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif

/// Parsing of the times a user types: epoch seconds or RFC 3339.
package enum Timestamp {
    /// Why a string is not a time.
    package struct ParseError: Error, CustomStringConvertible {
        package let input: String
        package var description: String {
            "\(input.quotedForMessage) is neither epoch seconds nor an RFC 3339 date-time (e.g. 2026-01-31T12:00:00Z)"
        }
    }

    /// Parses `1700000000`, `1700000000.5`, or an RFC 3339 date-time such as
    /// `2023-11-14T22:13:20Z` or `2023-11-14T23:13:20.250+01:00`.
    package static func parse(_ input: String) throws -> Date {
        if let seconds = parseEpoch(input) { return Date(timeIntervalSince1970: seconds) }
        if let seconds = parseRFC3339(Array(input.utf8)) { return Date(timeIntervalSince1970: seconds) }
        throw ParseError(input: input)
    }

    private static func parseEpoch(_ input: String) -> Double? {
        guard !input.isEmpty, input.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") }),
            let value = Double(input), value.isFinite
        else { return nil }
        return value
    }

    /// RFC 3339 §5.6 `date-time`, with `T`/`t`/space as separator and `Z`/`z`/offset.
    private static func parseRFC3339(_ s: [UInt8]) -> Double? {
        var i = 0
        func digits(_ n: Int) -> Int? {
            guard i + n <= s.count else { return nil }
            var value = 0
            for k in 0..<n {
                let d = Int(s[i + k]) - 48
                guard d >= 0 && d <= 9 else { return nil }
                value = value * 10 + d
            }
            i += n
            return value
        }
        func expect(_ c: Character) -> Bool {
            guard i < s.count, s[i] == c.asciiValue else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), expect("-"), let month = digits(2), expect("-"), let day = digits(2) else { return nil }
        guard i < s.count, s[i] == UInt8(ascii: "T") || s[i] == UInt8(ascii: "t") || s[i] == UInt8(ascii: " ") else { return nil }
        i += 1
        guard let hour = digits(2), expect(":"), let minute = digits(2), expect(":"), let second = digits(2) else { return nil }
        var fraction = 0.0
        if i < s.count, s[i] == UInt8(ascii: ".") {
            i += 1
            var scale = 0.1
            let start = i
            while i < s.count, s[i] >= 48, s[i] <= 57 {
                fraction += Double(s[i] - 48) * scale
                scale /= 10
                i += 1
            }
            guard i > start else { return nil }
        }
        var offset = 0
        guard i < s.count else { return nil }
        switch s[i] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"): i += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            let sign = s[i] == UInt8(ascii: "-") ? -1 : 1
            i += 1
            guard let oh = digits(2), expect(":"), let om = digits(2), oh < 24, om < 60 else { return nil }
            offset = sign * (oh * 3600 + om * 60)
        default: return nil
        }
        guard i == s.count, (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
            hour < 24, minute < 60, second <= 60
        else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86400 + hour * 3600 + minute * 60 + min(second, 59) - offset
        return Double(seconds) + fraction
    }

    /// Seconds since the epoch for a UTC calendar date and time, or nil when out of range.
    package static func utc(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) -> Date? {
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year), (0..<24).contains(hour),
            (0..<60).contains(minute), (0...60).contains(second)
        else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: Double(days * 86400 + hour * 3600 + minute * 60 + min(second, 59)))
    }

    /// UTC calendar fields of a date: (year, month, day, hour, minute, second, weekday 0 = Sunday).
    package static func utcFields(_ date: Date) -> (year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, weekday: Int) {
        let total = Int(date.timeIntervalSince1970.rounded(.down))
        let days = total >= 0 ? total / 86400 : (total - 86399) / 86400
        let secs = total - days * 86400
        let (y, m, d) = civilFromDays(days)
        return (y, m, d, secs / 3600, secs % 3600 / 60, secs % 60, ((days + 4) % 7 + 7) % 7)
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 in the proleptic Gregorian calendar (H. Hinnant's `days_from_civil`).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }

    /// Formats a time as RFC 3339 in UTC with whole seconds, e.g. `2023-11-14T22:13:20Z`.
    package static func rfc3339(_ date: Date) -> String {
        let total = Int(date.timeIntervalSince1970.rounded(.down))
        let days = total >= 0 ? total / 86400 : (total - 86399) / 86400
        let secs = total - days * 86400
        let (y, m, d) = civilFromDays(days)
        func pad(_ v: Int, _ n: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, n - s.count)) + s
        }
        return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(secs / 3600, 2)):\(pad(secs % 3600 / 60, 2)):\(pad(secs % 60, 2))Z"
    }

    private static func civilFromDays(_ z0: Int) -> (Int, Int, Int) {
        let z = z0 + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }
}
