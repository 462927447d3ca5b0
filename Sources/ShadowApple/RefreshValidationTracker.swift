import Crypto
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import ShadowCore

import Synchronization

/// Remembers when each refresh token was last validated with Apple, and says when the next
/// validation is allowed: Apple throttles `grant_type=refresh_token` above about once a day per
/// token. Tokens are remembered by their SHA-256, never as themselves.
public final class RefreshValidationTracker: Sendable {
    /// The least time between two validations of one token. Default one day.
    public let interval: TimeInterval
    private let clock: WallClock
    private let validated = Mutex<[String: Date]>([:])

    public init(interval: TimeInterval = 86400, clock: WallClock = .system) {
        self.interval = interval
        self.clock = clock
    }

    /// When `token` may next be validated; `nil` when it may be now.
    public func nextAllowed(for token: SecretBytes) -> Date? {
        let key = Self.key(token)
        let now = clock.now
        guard let last = validated.withLock({ $0[key] }) else { return nil }
        let next = last.addingTimeInterval(interval)
        return next > now ? next : nil
    }

    /// Records a validation of `token` now (call it after Apple answered, successfully or with `invalid_grant`).
    public func recordValidation(of token: SecretBytes) {
        let key = Self.key(token)
        let now = clock.now
        validated.withLock { $0[key] = now }
    }

    /// The validations on record, by token hash, for persisting elsewhere.
    public var records: [String: Date] { validated.withLock { $0 } }

    /// Restores records saved from ``records``.
    public func restore(_ records: [String: Date]) { validated.withLock { $0.merge(records) { max($0, $1) } } }

    static func key(_ token: SecretBytes) -> String {
        token.withUnsafeBytes { Hex.encode(SHA256.hash(data: $0)) }
    }
}
