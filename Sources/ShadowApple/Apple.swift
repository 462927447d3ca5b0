/// Sign in with Apple endpoints and constants.
public enum Apple {
    /// The `iss` of Apple identity tokens and the `aud` of client secrets.
    public static let issuer = "https://appleid.apple.com"
    /// Apple's public JWK Set for identity tokens and notifications.
    public static let keysURL = "https://appleid.apple.com/auth/keys"
    /// The base URL of Apple's auth endpoints.
    public static let baseURL = "https://appleid.apple.com"
}
