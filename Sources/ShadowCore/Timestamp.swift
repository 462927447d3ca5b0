#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif

/// A UTC instant in whole milliseconds since 1970-01-01T00:00:00Z, limited to the years 0001
/// to 9999.
///
/// Every time that crosses a trust boundary (an option, a claim, a header, a file field) becomes
/// a `Timestamp` through a checked conversion before anything computes with it, so no later
/// conversion (to milliseconds, whole seconds, calendar fields or RFC 3339 text) can overflow.
package struct Timestamp: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Milliseconds since 1970-01-01T00:00:00Z, within ``range``.
    package let milliseconds: Int64

    /// 0001-01-01T00:00:00.000Z through 9999-12-31T23:59:59.999Z, in milliseconds.
    package static let range: ClosedRange<Int64> = -62_135_596_800_000...253_402_300_799_999
    /// The earliest instant: 0001-01-01T00:00:00Z.
    package static let minimum = Timestamp(checked: range.lowerBound)
    /// The latest instant: 9999-12-31T23:59:59.999Z.
    package static let maximum = Timestamp(checked: range.upperBound)
    /// The range in seconds, as the text of error messages gives it.
    package static let rangeDescription = "0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z"

    private init(checked milliseconds: Int64) { self.milliseconds = milliseconds }

    /// An instant from milliseconds since 1970; nil outside ``range``.
    package init?(milliseconds: Int64) {
        guard Self.range.contains(milliseconds) else { return nil }
        self.milliseconds = milliseconds
    }

    /// An instant from whole seconds since 1970; nil outside ``range``.
    package init?(wholeSeconds seconds: Int64) {
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        guard !overflow else { return nil }
        self.init(milliseconds: product)
    }

    /// An instant from (fractional) seconds since 1970, rounded to the nearest millisecond; nil
    /// for a value that is not finite or lies outside ``range``.
    package init?(seconds: Double) {
        guard seconds.isFinite else { return nil }
        let milliseconds = (seconds * 1000).rounded()
        // The range is far inside Int64, so a value within it converts exactly.
        guard milliseconds >= Double(Self.range.lowerBound), milliseconds <= Double(Self.range.upperBound) else {
            return nil
        }
        self.init(checked: Int64(milliseconds))
    }

    /// The instant of `date`, rounded to the nearest millisecond; nil outside ``range``.
    package init?(_ date: Date) { self.init(seconds: date.timeIntervalSince1970) }

    /// This instant as a `Date`.
    package var date: Date { Date(timeIntervalSince1970: seconds) }

    /// Seconds since 1970, with the milliseconds as a fraction.
    package var seconds: Double { Double(milliseconds) / 1000 }

    /// Whole seconds since 1970, rounded down.
    package var wholeSeconds: Int64 { milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000 }

    /// This instant moved by `milliseconds`; nil when the result leaves ``range``.
    package func adding(milliseconds delta: Int64) -> Timestamp? {
        let (sum, overflow) = milliseconds.addingReportingOverflow(delta)
        return overflow ? nil : Timestamp(milliseconds: sum)
    }

    /// This instant moved by (fractional) `seconds`; nil when the result leaves ``range`` or
    /// `seconds` is not finite.
    package func adding(seconds delta: Double) -> Timestamp? {
        guard delta.isFinite, abs(delta) <= 1e12 else { return nil }
        return adding(milliseconds: Int64((delta * 1000).rounded()))
    }

    package static func < (lhs: Timestamp, rhs: Timestamp) -> Bool { lhs.milliseconds < rhs.milliseconds }

    /// RFC 3339 in UTC with whole seconds, e.g. `2023-11-14T22:13:20Z`.
    package var description: String { rfc3339 }

    /// RFC 3339 in UTC with whole seconds (the milliseconds are dropped), e.g. `2023-11-14T22:13:20Z`.
    package var rfc3339: String {
        let f = fields
        let date = "\(Self.pad(f.year, 4))-\(Self.pad(f.month, 2))-\(Self.pad(f.day, 2))"
        return date + "T\(Self.pad(f.hour, 2)):\(Self.pad(f.minute, 2)):\(Self.pad(f.second, 2))Z"
    }

    /// RFC 3339 in UTC to the millisecond: as ``rfc3339`` for a whole second, else with three
    /// fraction digits, e.g. `2023-11-14T22:13:20.042Z`.
    package var rfc3339Exact: String {
        let fraction = Int(milliseconds - wholeSeconds * 1000)
        guard fraction != 0 else { return rfc3339 }
        return String(rfc3339.dropLast()) + "." + Self.pad(fraction, 3) + "Z"
    }

    /// UTC calendar fields: year 1...9999, month 1...12, day, hour, minute, second, weekday (0 = Sunday).
    package var fields: (year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, weekday: Int) {
        let total = Int(wholeSeconds)
        let days = total >= 0 ? total / 86400 : (total - 86399) / 86400
        let secs = total - days * 86400
        let (y, m, d) = Self.civilFromDays(days)
        return (y, m, d, secs / 3600, secs % 3600 / 60, secs % 60, ((days + 4) % 7 + 7) % 7)
    }

    /// The instant of a UTC calendar date and time; nil for a field out of its range (a leap
    /// second, 60, reads as 59).
    package static func utc(
        year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, milliseconds: Int = 0
    ) -> Timestamp? {
        guard (1...9999).contains(year), (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
            (0..<24).contains(hour),
            (0..<60).contains(minute), (0...60).contains(second), (0..<1000).contains(milliseconds)
        else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = Int64(days) * 86400 + Int64(hour * 3600 + minute * 60 + min(second, 59))
        return Timestamp(milliseconds: seconds * 1000 + Int64(milliseconds))
    }

    // MARK: - Parsing

    /// Why a string is not a time ShadowKeys accepts.
    package struct ParseError: Error, CustomStringConvertible {
        package let input: String
        package let outOfRange: Bool
        package var description: String {
            if outOfRange {
                return "\(input.quotedForMessage) is outside the supported range \(Timestamp.rangeDescription)"
            }
            return
                """
                \(input.quotedForMessage) is neither epoch seconds nor an RFC 3339 date-time (e.g. \
                2026-01-31T12:00:00Z)
                """
        }
    }

    /// Parses epoch seconds (`1700000000`, `1700000000.5`, `-5`) or an RFC 3339 date-time such
    /// as `2023-11-14T22:13:20Z` or `2023-11-14T23:13:20.250+01:00`. Fractions round to the
    /// millisecond.
    ///
    /// - Throws: ``ParseError``, saying whether the text is malformed or out of range.
    package static func parse(_ input: String) throws -> Timestamp {
        let bytes = Array(input.utf8)
        if let epoch = parseEpoch(bytes) {
            guard let value = epoch else { throw ParseError(input: input, outOfRange: true) }
            return value
        }
        if let rfc = parseRFC3339(bytes) {
            guard let value = rfc else { throw ParseError(input: input, outOfRange: true) }
            return value
        }
        throw ParseError(input: input, outOfRange: false)
    }

    /// `-?digits(.digits)?`: nil when the text is not of that form, `.some(nil)` when it is but
    /// lies out of range.
    private static func parseEpoch(_ s: [UInt8]) -> Timestamp?? {
        var i = 0
        let negative = s.first == UInt8(ascii: "-")
        if negative { i = 1 }
        let integerStart = i
        while i < s.count, isDigit(s[i]) { i += 1 }
        let integerDigits = s[integerStart..<i]
        guard !integerDigits.isEmpty else { return nil }
        var fraction: ArraySlice<UInt8> = []
        if i < s.count, s[i] == UInt8(ascii: ".") {
            i += 1
            let start = i
            while i < s.count, isDigit(s[i]) { i += 1 }
            fraction = s[start..<i]
            guard !fraction.isEmpty else { return nil }
        }
        guard i == s.count else { return nil }
        // Twelve digits of whole seconds already exceed the range; more is out of range too.
        let significant = integerDigits.drop { $0 == UInt8(ascii: "0") }
        guard significant.count <= 12 else { return .some(nil) }
        var milliseconds = significant.reduce(Int64(0)) { $0 * 10 + Int64($1 - 48) } * 1000
        let digits = Array(fraction.prefix(4)) + Array(repeating: UInt8(ascii: "0"), count: max(0, 4 - fraction.count))
        let tenths = digits.reduce(Int64(0)) { $0 * 10 + Int64($1 - 48) }
        milliseconds += (tenths + 5) / 10
        return .some(Timestamp(milliseconds: negative ? -milliseconds : milliseconds))
    }

    /// RFC 3339 §5.6 `date-time`, with `T`/`t`/space as separator and `Z`/`z`/offset: nil when
    /// the text is not one, `.some(nil)` when it is but lies out of range.
    private static func parseRFC3339(_ s: [UInt8]) -> Timestamp?? {
        var i = 0
        func digits(_ n: Int) -> Int? {
            guard i + n <= s.count else { return nil }
            var value = 0
            for k in 0..<n {
                guard isDigit(s[i + k]) else { return nil }
                value = value * 10 + Int(s[i + k] - 48)
            }
            i += n
            return value
        }
        func expect(_ c: UInt8) -> Bool {
            guard i < s.count, s[i] == c else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), expect(UInt8(ascii: "-")), let month = digits(2), expect(UInt8(ascii: "-")),
            let day = digits(2)
        else { return nil }
        guard i < s.count, s[i] == UInt8(ascii: "T") || s[i] == UInt8(ascii: "t") || s[i] == UInt8(ascii: " ") else {
            return nil
        }
        i += 1
        guard let hour = digits(2), expect(UInt8(ascii: ":")), let minute = digits(2), expect(UInt8(ascii: ":")),
            let second = digits(2)
        else { return nil }
        var milliseconds = 0
        if expect(UInt8(ascii: ".")) {
            let start = i
            while i < s.count, isDigit(s[i]) { i += 1 }
            guard i > start else { return nil }
            let kept =
                Array(s[start..<min(i, start + 4)])
                + Array(repeating: UInt8(ascii: "0"), count: max(0, 4 - (i - start)))
            milliseconds = (kept.reduce(0) { $0 * 10 + Int($1 - 48) } + 5) / 10
        }
        var offset = 0
        guard i < s.count else { return nil }
        switch s[i] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"): i += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            let sign = s[i] == UInt8(ascii: "-") ? -1 : 1
            i += 1
            guard let oh = digits(2), expect(UInt8(ascii: ":")), let om = digits(2), oh < 24, om < 60 else {
                return nil
            }
            offset = sign * (oh * 3600 + om * 60)
        default: return nil
        }
        guard i == s.count, (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year), hour < 24,
            minute < 60, second <= 60
        else {
            return nil
        }
        // Year 0000, or a time pushed past either end by its offset or a rounded fraction, is out of range.
        guard year >= 1, let local = utc(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        else { return .some(nil) }
        return .some(local.adding(milliseconds: Int64(milliseconds) - Int64(offset) * 1000))
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte &- UInt8(ascii: "0") < 10 }

    // MARK: - Calendar

    private static func pad(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 in the proleptic Gregorian calendar (H. Hinnant's `days_from_civil`);
    /// the caller keeps the year within 1...9999.
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
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

extension Timestamp {
    /// RFC 3339 text for a date already checked to be in range; the epoch seconds for one that
    /// is not (never a crash).
    package static func rfc3339(_ date: Date) -> String {
        Timestamp(date)?.rfc3339 ?? "\(date.timeIntervalSince1970) s since 1970"
    }

    /// ``rfc3339Exact`` of a date (milliseconds kept).
    package static func rfc3339Exact(_ date: Date) -> String {
        Timestamp(date)?.rfc3339Exact ?? "\(date.timeIntervalSince1970) s since 1970"
    }
}
