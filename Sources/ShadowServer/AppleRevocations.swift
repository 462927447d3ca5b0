public import ShadowApple
public import ShadowCredentials
import ShadowCore

extension RevocationWorker {
    /// Revokes through Apple's `/auth/revoke`, with the client of the token's client ID: a token of
    /// kind `access` as `access_token`, any other as `refresh_token`.
    public static func apple(_ clients: [String: AppleAuthClient]) -> Revoke {
        { token in
            guard let client = clients[token.clientID] else {
                throw AppleError(
                    .invalidParameter,
                    "no Apple client is configured for the client ID \(token.clientID.quotedForMessage)")
            }
            try await client.revoke(token.value, kind: token.kind == .access ? .accessToken : .refreshToken)
        }
    }
}
