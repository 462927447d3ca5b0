public import ShadowJWKS
import ShadowJOSE

extension AppleIdentityTokenValidator {
    /// Verifies `token` against a fetched key set (normally Apple's, ``Apple/keysURL``).
    public func validate(_ token: String, keys provider: JWKSProvider) async throws -> AppleIdentityToken {
        try AppleIdentityToken(claims: await verifier.verify(token, keys: provider).claims)
    }
}
