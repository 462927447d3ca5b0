public import ShadowJWKS

/// Sign in with Apple endpoints and constants.
public enum Apple {
    /// The `iss` of Apple identity tokens and the `aud` of client secrets.
    public static let issuer = "https://appleid.apple.com"
    /// Apple's public JWK Set for identity tokens and notifications.
    public static let keysURL = "https://appleid.apple.com/auth/keys"
    /// The base URL of Apple's auth endpoints.
    public static let baseURL = "https://appleid.apple.com"
}

extension JWKSProvider.Configuration {
    /// Apple's key set, or a mirror of it at `url`, fetched over TLS 1.3 only (Apple requires
    /// TLS 1.3 for its APIs), every other setting at its default.
    public static func apple(url: String = Apple.keysURL) -> Self {
        var configuration = Self(url: url)
        configuration.requiresTLS13 = true
        return configuration
    }
}
