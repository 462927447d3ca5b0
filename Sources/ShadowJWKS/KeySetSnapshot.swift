#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// Everything a provider knows about one key-set URL: the last good document and its
/// freshness, plus the fetch history that rate-limits refreshes. Stores persist it.
public struct KeySetSnapshot: Sendable, Equatable {
    /// The last good JWK Set document, as fetched.
    public var body: [UInt8]?
    /// When `body` was fetched.
    public var fetchedAt: Date?
    /// Until when `body` is fresh (a 304 moves it forward).
    public var expiresAt: Date?
    /// The `ETag` that came with `body`.
    public var etag: String?
    /// The `Last-Modified` that came with `body`.
    public var lastModified: String?
    /// When the last fetch attempt started (success or not).
    public var lastAttempt: Date?
    /// Why the last attempt failed, if it did.
    public var lastFailure: String?
    /// No fetch before this time (after a failure, or a `Retry-After`).
    public var retryNotBefore: Date?
    /// `kid`s found unknown after a refresh, with the time they were.
    public var unknownKeyIDs: [UnknownKeyID]

    /// One negative-cache entry.
    public struct UnknownKeyID: Sendable, Equatable {
        public var keyID: String
        public var at: Date
        public init(keyID: String, at: Date) {
            self.keyID = keyID
            self.at = at
        }
    }

    /// An empty snapshot: nothing fetched yet.
    public init() { unknownKeyIDs = [] }
}

/// Persists a provider's snapshot, so that separate processes (the CLI) share one cache, one
/// refresh cooldown and one negative cache.
public protocol KeySetStore: Sendable {
    /// The stored snapshot, or nil when there is none (or it is unusable).
    func load() -> KeySetSnapshot?
    /// Replaces the stored snapshot.
    func save(_ snapshot: KeySetSnapshot) throws
    /// Serialises refreshes across processes: returns a held lock (released by calling it), or
    /// nil when none could be taken in time.
    func lockForRefresh(timeout: Duration) -> (@Sendable () -> Void)?
}
