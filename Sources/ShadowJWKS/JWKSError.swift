public import ShadowCore

/// The error ShadowJWKS throws when fetching and caching key sets. (An unusable key set itself
/// is a `JOSEError` with code `keys_unavailable`, as for a local set.) Equal by code.
public typealias JWKSError = ModuleError<JWKSErrorCode>

/// The codes of `JWKSError`: what went wrong. New codes may be added; switch with a `default`.
public struct JWKSErrorCode: ShadowKeysErrorCode {
    public let name: String
    private init(_ name: String) { self.name = name }

    /// A fetch failed: transport error, unexpected status, oversized or invalid body, no usable key.
    public static let fetchFailed = JWKSErrorCode("fetch_failed")
    /// The on-disk cache cannot be used: no cache folder (neither `XDG_CACHE_HOME` nor `HOME`
    /// is an absolute path), a folder another user controls, or a file over the size limit.
    public static let cacheUnavailable = JWKSErrorCode("cache_unavailable")
    /// The provider was shut down.
    public static let shutDown = JWKSErrorCode("shut_down")
}
