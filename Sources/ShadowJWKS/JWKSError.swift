/// Errors from fetching and caching key sets.
public struct JWKSError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong. New codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// The URL is not allowed (not HTTPS, or HTTP to a non-loopback host).
        public static let forbiddenURL = Code("forbidden_url")
        /// A fetch failed: transport error, unexpected status, oversized or invalid body, no usable key.
        public static let fetchFailed = Code("fetch_failed")
        /// No key set can be served: nothing fetched yet, or the last good one is too stale.
        public static let keysUnavailable = Code("keys_unavailable")
        /// The on-disk cache cannot be used: no cache folder (neither `XDG_CACHE_HOME` nor `HOME`
        /// is an absolute path), a folder another user controls, or a file over the size limit.
        public static let cacheUnavailable = Code("cache_unavailable")
        /// The provider was shut down.
        public static let shutDown = Code("shut_down")
    }

    public let code: Code
    public let reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { "\(code.name): \(reason)" }
    public static func == (lhs: JWKSError, rhs: JWKSError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
