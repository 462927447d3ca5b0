#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// A source of the current wall-clock time. Verification reads the time only through one, so
/// tests and `--now` can pin it. (Named apart from the standard library's `Clock` protocol,
/// which measures durations.)
public struct WallClock: Sendable {
    private let read: @Sendable () -> Date

    /// A clock that reads time from `read`.
    public init(_ read: @escaping @Sendable () -> Date) {
        self.read = read
    }

    /// The current time.
    public var now: Date { read() }

    /// The system's wall clock.
    public static let system = WallClock { Date() }

    /// A clock stopped at `date`.
    public static func fixed(_ date: Date) -> WallClock {
        WallClock { date }
    }
}
