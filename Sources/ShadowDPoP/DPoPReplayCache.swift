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

/// A replay cache in this process's memory, bounded: a resource server's, checked with no store
/// read. Replays to another instance are not seen; proofs are short-lived and bound to one
/// method, URI and access token.
public final class DPoPMemoryReplayCache: DPoPReplayCache {
    private let entries = Mutex<[[UInt8]: Int64]>([:])
    /// The most keys held; when full and none has expired, new proofs are refused
    /// (``DPoPErrorCode/unavailable``) rather than remembered partly.
    public let capacity: Int

    public init(capacity: Int = 100_000) {
        self.capacity = max(1, capacity)
    }

    public func firstUse(of key: [UInt8], until expiresAt: Int64, now: Int64) async throws -> Bool {
        try entries.withLock { entries in
            if let until = entries[key], until >= now { return false }
            if entries.count >= capacity {
                entries = entries.filter { $0.value >= now }
                guard entries.count < capacity else {
                    throw DPoPError(.unavailable, "the DPoP replay cache is full: try again")
                }
            }
            entries[key] = expiresAt
            return true
        }
    }
}
