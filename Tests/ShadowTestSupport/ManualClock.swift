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

/// Runs `body`, then awaits `close`, whether `body` returned or threw: the close finishes before
/// the test does (a `defer { Task { … } }` would leave it running after).
public func closing<R>(_ close: () async -> Void, _ body: () async throws -> R) async rethrows -> R {
    do {
        let result = try await body()
        await close()
        return result
    } catch {
        await close()
        throw error
    }
}
