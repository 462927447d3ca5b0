import Foundation
import ShadowCore
import ShadowTestSupport
import Testing

@Suite struct TimestampTests {
    @Test(arguments: [
        ("1700000000", 1_700_000_000.0),
        ("1700000000.5", 1_700_000_000.5),
        ("-5", -5),
        ("0001700000000", 1_700_000_000.0),
        ("2023-11-14T22:13:20Z", 1_700_000_000.0),
        ("2023-11-14t22:13:20z", 1_700_000_000.0),
        ("2023-11-14T23:13:20+01:00", 1_700_000_000.0),
        ("2023-11-14T22:13:20.250Z", 1_700_000_000.25),
        ("2023-11-14T22:13:20.2505Z", 1_700_000_000.251),
        ("1970-01-01T00:00:00Z", 0),
        ("2024-02-29T00:00:00Z", 1_709_164_800),
        ("2016-12-31T23:59:60Z", 1_483_228_799),
        ("0001-01-01T00:00:00Z", -62_135_596_800),
        ("9999-12-31T23:59:59.999Z", 253_402_300_799.999),
        ("253402300799", 253_402_300_799),
    ])
    func parses(input: String, seconds: Double) throws {
        #expect(try Timestamp.parse(input).seconds == seconds)
    }

    @Test(arguments: [
        "", "yesterday", "2023-11-14", "2023-02-30T00:00:00Z", "2023-11-14T25:00:00Z", "2023-11-14T22:13:20",
        "2023-11-14T22:13:20+1:00", "1e9x", "1e20", "1.", ".5", "--5", "+5",
    ])
    func rejectsMalformed(input: String) throws {
        let error = try #require(throws: Timestamp.ParseError.self) { try Timestamp.parse(input) }
        #expect(!error.outOfRange)
    }

    /// Times the attack suite sent as options: each must be an error, never a trap.
    @Test(arguments: [
        "99999999999999999999", "100000000000000000000", "253402300800", "-62135596801", "9223372036854775807",
        "-9223372036854775808",
        "0000-12-31T23:59:59Z", "9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+00:01",
    ])
    func rejectsOutOfRange(input: String) throws {
        let error = try #require(throws: Timestamp.ParseError.self) { try Timestamp.parse(input) }
        #expect(error.outOfRange, "\(input)")
    }

    @Test func checkedConversionsRefuseWhatDoesNotFit() {
        #expect(Timestamp(seconds: 1e20) == nil)
        #expect(Timestamp(seconds: -1e17) == nil)
        #expect(Timestamp(seconds: .infinity) == nil)
        #expect(Timestamp(seconds: .nan) == nil)
        #expect(Timestamp(wholeSeconds: Int64.max) == nil)
        #expect(Timestamp(milliseconds: Int64.min) == nil)
        #expect(Timestamp(Date(timeIntervalSince1970: 1e300)) == nil)
        #expect(Timestamp.maximum.adding(milliseconds: 1) == nil)
        #expect(Timestamp.minimum.adding(milliseconds: -1) == nil)
        #expect(Timestamp.maximum.adding(milliseconds: Int64.max) == nil)
        #expect(Timestamp(seconds: 0)?.adding(seconds: 9.2e18) == nil)
        #expect(Timestamp(seconds: 0)?.adding(seconds: 1.5)?.milliseconds == 1500)
    }

    @Test func formatsRFC3339AtBothEnds() throws {
        #expect(try Timestamp.parse("1700000000").rfc3339 == "2023-11-14T22:13:20Z")
        #expect(try Timestamp.parse("0").rfc3339 == "1970-01-01T00:00:00Z")
        #expect(Timestamp.minimum.rfc3339 == "0001-01-01T00:00:00Z")
        #expect(Timestamp.maximum.rfc3339 == "9999-12-31T23:59:59Z")
        #expect(try Timestamp.parse("-0.001").rfc3339 == "1969-12-31T23:59:59Z")
        #expect(Timestamp.rfc3339(Date(timeIntervalSince1970: 1e300)).hasSuffix("s since 1970"))
    }

    /// Every instant formats and parses back to itself (whole seconds), across the range.
    @Test func roundTripsThroughRFC3339() throws {
        var generator = SeededGenerator(seed: 0x5EED_7135)
        for _ in 0..<2000 {
            let seconds = Int64.random(
                in: Timestamp.minimum.wholeSeconds...Timestamp.maximum.wholeSeconds, using: &generator)
            let time = try #require(Timestamp(wholeSeconds: seconds))
            #expect(try Timestamp.parse(time.rfc3339) == time, "seed 0x5EED7135, \(seconds)")
        }
    }

    /// `since` keeps its milliseconds: a fraction of three digits when there is one.
    @Test(arguments: [
        (Int64(1_700_000_000_042), "2023-11-14T22:13:20.042Z"), (1_700_000_000_000, "2023-11-14T22:13:20Z"),
        (1_700_000_000_999, "2023-11-14T22:13:20.999Z"), (-1, "1969-12-31T23:59:59.999Z"),
        (5, "1970-01-01T00:00:00.005Z"),
    ])
    func exactTimesKeepTheirMilliseconds(milliseconds: Int64, text: String) throws {
        let time = try #require(Timestamp(milliseconds: milliseconds))
        #expect(time.rfc3339Exact == text)
        #expect(Timestamp.rfc3339Exact(Date(timeIntervalSince1970: Double(milliseconds) / 1000)) == text)
        #expect(try Timestamp.parse(text).milliseconds == milliseconds)
    }
}
