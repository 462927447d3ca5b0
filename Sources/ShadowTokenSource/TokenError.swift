public import ShadowCore

/// The error ShadowTokenSource throws. Equal by code.
public typealias TokenError = ModuleError<TokenErrorCode>

/// The codes of `TokenError`. New codes may be added; switch with a `default`.
public struct TokenErrorCode: ShadowKeysErrorCode {
    public let name: String
    private init(_ name: String) { self.name = name }

    /// The provider answered `invalid_grant`: the refresh token is revoked or expired, and the
    /// user must sign in again (`vault login`). The entry is marked; nothing retries it.
    public static let reauthenticationRequired = TokenErrorCode("reauthentication_required")
    /// The provider answered 5xx or could not be reached, after every retry.
    public static let providerUnavailable = TokenErrorCode("provider_unavailable")
    /// The provider refused the request for another reason (its `error` is in the reason).
    public static let rejected = TokenErrorCode("provider_rejected")
    /// The provider's answer is not a token response.
    public static let invalidResponse = TokenErrorCode("invalid_response")
    /// The vault entry is not set up for refreshing (no `vault login`), or a setting is invalid.
    public static let notConfigured = TokenErrorCode("not_configured")
    /// Another process held the refresh lock past the timeout.
    public static let lockTimeout = TokenErrorCode("lock_timeout")
}
