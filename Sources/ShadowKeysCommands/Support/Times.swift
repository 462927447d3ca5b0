import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore

/// Parses `--now`: epoch seconds or RFC 3339, within the supported range.
func parseNow(_ value: String?) throws -> WallClock {
    guard let value else { return .system }
    return .fixed(try parseTime(value, option: "--now").date)
}

/// An RFC 3339 or epoch-seconds option value within the supported range; a usage error names the option.
func parseTime(_ value: String, option: String) throws -> Timestamp {
    do { return try Timestamp.parse(value) } catch { throw ValidationError("\(option): \(error)") }
}

/// Now plus `seconds` (an option such as `--expires-in`), within the supported range.
func timeFromNow(seconds: Int, option: String) throws -> Timestamp {
    guard let now = Timestamp(Date()), let later = now.adding(seconds: Double(seconds)) else {
        throw ValidationError("\(option): \(seconds) s from now is outside \(Timestamp.rangeDescription)")
    }
    return later
}

/// `--leeway`: 0 to 86400 seconds (a day of clock skew is already far more than any clock drifts).
func checkLeeway(_ leeway: Double) throws {
    guard (0...86400).contains(leeway) else { throw ValidationError("--leeway: 0 to 86400 seconds, not \(leeway)") }
}
