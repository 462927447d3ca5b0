import Crypto
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import ShadowCore
public import ShadowDPoP

/// A GCRA limit (the generic cell rate algorithm): `requests` per `period`, with bursts of up to
/// `burst` requests at once. Each key's whole state is one number, its theoretical arrival time,
/// updated in one statement in the store, so the limit holds across instances.
public struct RateLimit: Sendable, Hashable {
    public var requests: Int
    public var period: TimeInterval
    public var burst: Int

    public init(requests: Int, per period: TimeInterval, burst: Int? = nil) throws {
        guard (1...1_000_000).contains(requests), (1...86_400).contains(period) else {
            throw SessionError(.invalidParameter, "a rate limit is 1 to 1000000 requests per 1 s to 1 day")
        }
        let burst = burst ?? requests
        guard (1...1_000_000).contains(burst) else { throw SessionError(.invalidParameter, "a burst is 1 to 1000000") }
        self.requests = requests
        self.period = period
        self.burst = burst
    }

    /// `requests` (1 to 100,000) a minute, with bursts of max(1, requests / 3): the session routes'
    /// limits (Docs/sessions.md, "Rate limits"); out of range is a programming error.
    public static func perMinute(_ requests: Int) -> RateLimit {
        precondition((1...100_000).contains(requests), "1 to 100000 requests a minute")
        return RateLimit(checked: requests, period: 60, burst: max(1, requests / 3))
    }

    private init(checked requests: Int, period: TimeInterval, burst: Int) {
        (self.requests, self.period, self.burst) = (requests, period, burst)
    }

    /// The emission interval T = period / requests, in milliseconds (at least 1).
    var interval: Int64 { max(1, Int64(period * 1000) / Int64(requests)) }
    /// The burst tolerance τ = T × (burst − 1).
    var tolerance: Int64 { interval * Int64(burst - 1) }
}

extension SessionAuthority {
    /// Counts a request against `limit` for `key` (`ip:…`, `user:…`); nil when it is allowed,
    /// else the seconds to wait (for `Retry-After`, at least 1).
    public func admit(_ key: String, limit: RateLimit) async throws -> Int? {
        let step = self.step(key, limit)
        return wait(
            try await store.rateLimit(key: step.key, now: step.now, interval: step.interval, tolerance: step.tolerance),
            now: step.now)
    }

    /// Counts a request against each of `limits` and, with `replay`, spends a DPoP proof, in one
    /// hand-over to the store (one group commit in SQLite). Each answer is what ``admit(_:limit:)``
    /// or the replay check alone would give: every step counts whatever the others answer.
    public func admit(
        _ limits: [(key: String, limit: RateLimit)], replay: DPoPReplayEntry?
    ) async -> (waits: [Result<Int?, any Error>], replay: Result<Bool, any Error>?) {
        let steps = limits.map { step($0.key, $0.limit) }
        let answers = await store.admit(steps, replay: replay)
        return (waits(steps, answers.limits), answers.replay)
    }

    /// ``admit(_:replay:)`` with the read of the session `family` in the same hand-over: the
    /// refresh's first trip to the store, whose row ``refresh(_:proof:read:)`` then starts from.
    package func admit(
        _ limits: [(key: String, limit: RateLimit)], replay: DPoPReplayEntry?, reading family: SessionID
    ) async -> (
        waits: [Result<Int?, any Error>], replay: Result<Bool, any Error>?, session: Result<SessionRow?, any Error>
    ) {
        let steps = limits.map { step($0.key, $0.limit) }
        let answers = await store.admit(steps, replay: replay, reading: family)
        return (waits(steps, answers.limits), answers.replay, answers.session)
    }

    /// Each step's answer as seconds to wait (nil when allowed).
    private func waits(_ steps: [RateLimitStep], _ answers: [Result<Int64?, any Error>]) -> [Result<Int?, any Error>] {
        zip(steps, answers).map { step, answer in answer.map { wait($0, now: step.now) } }
    }

    private func step(_ key: String, _ limit: RateLimit) -> RateLimitStep {
        // Keys are hashed: the table holds no address or user ID in clear, and every key is 16 bytes.
        RateLimitStep(
            key: Array(SHA256.hash(data: Array("shadow-keys rate v1\u{0}\(key)".utf8)).prefix(16)), now: now,
            interval: limit.interval, tolerance: limit.tolerance)
    }

    /// Nil when allowed, else the whole seconds until `next`, at least 1.
    private func wait(_ next: Int64?, now: Int64) -> Int? {
        next.map { max(1, Int(($0 - now + 999) / 1000)) }
    }
}
