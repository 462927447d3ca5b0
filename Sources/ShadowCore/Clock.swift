#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// A source of the current time. Verification reads the time only through a clock, so tests and
/// `--now` can pin it.
public struct Clock: Sendable {
    private let read: @Sendable () -> Date

    /// A clock that reads time from `read`.
    public init(_ read: @escaping @Sendable () -> Date) {
        self.read = read
    }

    /// The current time.
    public var now: Date { read() }

    /// The system's wall clock.
    public static let system = Clock { Date() }

    /// A clock stopped at `date`.
    public static func fixed(_ date: Date) -> Clock {
        Clock { date }
    }
}
