import ShadowCore
import Synchronization

/// Where the `jti`s of accepted proofs are kept for as long as the proofs would be accepted
/// (RFC 9449 §11.1): a database shared by every instance (the session store), or this process
/// alone (``DPoPMemoryReplayCache``).
public protocol DPoPReplayCache: Sendable {
    /// Records `key` until `expiresAt` (ms since 1970) and returns true; returns false, changing
    /// nothing, when `key` is recorded already and not yet expired at `now`: a replay.
    func firstUse(of key: [UInt8], until expiresAt: Int64, now: Int64) async throws -> Bool
}

/// One proof's replay check: its key (``DPoPProof/replayKey``), kept until `expiresAt`, checked
/// at `now` (ms since 1970).
public struct DPoPReplayEntry: Sendable {
    public var key: [UInt8]
    public var expiresAt: Int64
    public var now: Int64

    public init(key: [UInt8], expiresAt: Int64, now: Int64) {
        (self.key, self.expiresAt, self.now) = (key, expiresAt, now)
    }
}

/// A replay cache in this process's memory, bounded: a resource server's, checked with no store
/// read. Replays to another instance are not seen; proofs are short-lived and bound to one
/// method, URI and access token.
public final class DPoPMemoryReplayCache: DPoPReplayCache {
    private struct State {
        var entries: [[UInt8]: Int64] = [:]
        /// When a full cache may next look for expired keys (ms since 1970).
        var nextSweep = Int64.min
    }

    private let state = Mutex(State())
    /// The most keys held; when full and none has expired, new proofs are refused
    /// (``DPoPErrorCode/unavailable``) rather than remembered partly. A full cache looks for
    /// expired keys at most once a second, so a flood of proofs while it is full costs one pass
    /// over the keys a second, not one a request.
    public let capacity: Int
    /// How long a full cache waits between looks for expired keys, in ms.
    static let sweepInterval: Int64 = 1000

    public init(capacity: Int = 100_000) {
        self.capacity = max(1, capacity)
    }

    public func firstUse(of key: [UInt8], until expiresAt: Int64, now: Int64) async throws -> Bool {
        try state.withLock { state in
            if let until = state.entries[key], until >= now { return false }
            if state.entries.count >= capacity, state.entries[key] == nil {
                if now >= state.nextSweep {
                    state.entries = state.entries.filter { $0.value >= now }
                    let (later, overflow) = now.addingReportingOverflow(Self.sweepInterval)
                    state.nextSweep = overflow ? Int64.max : later
                }
                guard state.entries.count < capacity else {
                    throw DPoPError(.unavailable, "the DPoP replay cache is full: try again")
                }
            }
            state.entries[key] = expiresAt
            return true
        }
    }
}
