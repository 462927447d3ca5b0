import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
package import ShadowApple
import ShadowCore
import ShadowCrypto
import ShadowJOSE
import ShadowJWKS

/// Where Apple's endpoints are, and how to reach them.
package struct AppleEndpointOptions: ParsableArguments {
    package init() {}

    @Option(name: .customLong("base-url"), help: "Apple's auth base URL (for mirrors and tests).")
    var baseURL: String = Apple.baseURL

    @Option(
        name: .customLong("jwks"),
        help: "Key set for id_token verification: URL or file. Default: <base-url>/auth/keys.")
    var jwks: String?

    @OptionGroup var network: NetworkOptions

    package func validate() throws {
        try network.check(baseURL + "/auth/token", option: "--base-url")
    }

    package func client(_ credentials: ClientSecretOptions) throws -> AppleAuthClient {
        var configuration = AppleAuthClient.Configuration()
        configuration.baseURL = baseURL
        configuration.allowLoopbackHTTP = network.allowHTTPLoopback
        let keysURL = jwks ?? baseURL + "/auth/keys"
        let keys: any JWKSource =
            KeySourceOptions.isURL(keysURL)
            ? try keySetProvider(url: keysURL, network: network, offline: false, tls13: true) : try readKeySet(keysURL)
        return try AppleAuthClient(
            configuration: configuration, secrets: ClientSecretProvider(builder: try credentials.builder()),
            transport: try network.transport(), identityTokenKeys: keys)
    }
}

func tokenJSON(_ response: AppleTokenResponse) -> JSONValue {
    func reveal(_ secret: SecretBytes?) -> JSONValue {
        secret.map { .string($0.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }) } ?? .null
    }
    return [
        "access_token": reveal(response.accessToken), "token_type": .string(response.tokenType),
        "expires_in": .int(response.expiresIn),
        "refresh_token": reveal(response.refreshToken), "id_token": response.idToken.map(JSONValue.string) ?? .null,
        "identity": response.identity.map { .object($0.json) } ?? .null,
    ]
}

/// Reads a notification POST body from stdin and verifies it against `keySource` (Apple's key
/// set by default).
func readNotification(
    keySource: KeySourceOptions, audiences: [String], leeway: Double, now: String?
) async throws -> AppleNotification {
    guard let body = try Files.readAll(0, limit: AppleNotificationVerifier.maxBodyBytes, path: "stdin") else {
        throw CLIError(.malformedToken, "notification body exceeds \(AppleNotificationVerifier.maxBodyBytes) bytes")
    }
    let verifier = AppleNotificationVerifier(clientIDs: audiences, leeway: leeway, clock: try parseNow(now))
    return try await verifier.verify(body: trimWhitespace(body), keys: keySource.appleKeys())
}
