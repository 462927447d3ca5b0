#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Crypto
import ShadowApple
import ShadowCore
import ShadowJWKS
import HTTPTypes

/// Where and how to refresh: an OAuth 2.0 token endpoint (RFC 6749, section 6) and the client's
/// credentials.
public struct OAuthClient: Sendable, Hashable {
    /// How the client authenticates at the token endpoint (RFC 6749, section 2.3.1).
    public enum Authentication: String, Sendable, Hashable, CaseIterable {
        /// HTTP Basic with the form-encoded client ID and secret.
        case clientSecretBasic = "client_secret_basic"
        /// `client_id` and `client_secret` in the form.
        case clientSecretPost = "client_secret_post"
        /// A public client: `client_id` only (PKCE clients, RFC 7636).
        case none
    }

    /// The presets: which endpoint and authentication a provider uses.
    public enum Preset: String, Sendable, Hashable, CaseIterable {
        /// Google's OAuth 2.0 endpoint; refresh tokens live 90 days (the integration's policy).
        case google
        /// Sign in with Apple: the client secret is a JWT made from the `.p8` key.
        case apple
        /// Any RFC 6749 server.
        case generic

        public var tokenEndpoint: String? {
            switch self {
            case .google: return "https://oauth2.googleapis.com/token"
            case .apple: return "https://appleid.apple.com/auth/token"
            case .generic: return nil
            }
        }

        public var authorizationEndpoint: String? {
            switch self {
            case .google: return "https://accounts.google.com/o/oauth2/v2/auth"
            case .apple: return "https://appleid.apple.com/auth/authorize"
            case .generic: return nil
            }
        }

        /// How long a refresh token lives, when the provider says so: Google's 90 days.
        public var refreshTokenLifetime: TimeInterval? { self == .google ? 90 * 86_400 : nil }
    }

    public var preset: Preset
    public var tokenEndpoint: String
    public var clientID: String
    public var authentication: Authentication

    public init(
        preset: Preset, tokenEndpoint: String? = nil, clientID: String, authentication: Authentication? = nil
    )
        throws
    {
        guard let endpoint = tokenEndpoint ?? preset.tokenEndpoint else {
            throw TokenError(.notConfigured, "a generic client needs its token endpoint")
        }
        guard !clientID.isEmpty, clientID.utf8.count <= 255,
            clientID.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F })
        else { throw TokenError(.notConfigured, "a client ID is 1 to 255 printable characters") }
        self.preset = preset
        self.tokenEndpoint = endpoint
        self.clientID = clientID
        self.authentication = authentication ?? (preset == .apple ? .clientSecretPost : .clientSecretBasic)
    }
}
