public import Foundation
public import ShadowCore
import Synchronization

/// A clock that moves only when a test says so.
public final class ManualClock: Sendable {
    private let current: Mutex<Date>

    public init(_ start: Date = Date(timeIntervalSince1970: 1_700_000_000)) { current = Mutex(start) }

    /// The time now.
    public var now: Date { current.withLock { $0 } }

    /// Moves the clock forward.
    public func advance(by seconds: Double) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }

    /// A `Clock` reading this one.
    public var clock: WallClock { WallClock { self.now } }
}
