public import ShadowCore

/// The error ShadowJWKS throws when fetching and caching key sets. (An unusable key set itself
/// is a ``ShadowJOSE/JOSEError`` with code `keys_unavailable`, as for a local set.) Equal by code.
public struct JWKSError: ShadowKeysError {
    /// What went wrong. New codes may be added.
    public struct Code: ShadowKeysErrorCode {
        public let name: String
        private init(_ name: String) { self.name = name }

        /// A fetch failed: transport error, unexpected status, oversized or invalid body, no usable key.
        public static let fetchFailed = Code("fetch_failed")
        /// The on-disk cache cannot be used: no cache folder (neither `XDG_CACHE_HOME` nor `HOME`
        /// is an absolute path), a folder another user controls, or a file over the size limit.
        public static let cacheUnavailable = Code("cache_unavailable")
        /// The provider was shut down.
        public static let shutDown = Code("shut_down")
    }

    public let code: Code
    public let reason: String
    public let file: String
    public let line: Int

    public init(_ code: Code, _ reason: String, file: String = #fileID, line: Int = #line) {
        (self.code, self.reason, self.file, self.line) = (code, reason, file, line)
    }
}
