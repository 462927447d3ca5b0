import Crypto
import Foundation
import ShadowApple
import ShadowCore
import ShadowCrypto
import ShadowJOSE
import ShadowJWKS
import ShadowTestSupport
import ShadowHTTP
import Testing

/// Every Apple flow against the loopback fake, through the real URLSession transport.
@Suite struct AuthClientTests {
    let key = P256.Signing.PrivateKey()
    let fake: FakeAppleServer
    let client: AppleAuthClient

    init() throws {
        fake = try FakeAppleServer(clientKey: key.publicKey)
        client = try Self.client(fake: fake, key: key)
    }

    static func client(
        fake: FakeAppleServer, key: P256.Signing.PrivateKey, clientID: String = "com.example.app", keyID: String? = nil
    ) throws -> AppleAuthClient {
        let builder = try ClientSecretBuilder(
            key: AppleSigningKey(key), teamID: fake.teamID, keyID: keyID ?? fake.keyID, clientID: clientID)
        var configuration = AppleAuthClient.Configuration()
        configuration.baseURL = fake.baseURL
        configuration.allowLoopbackHTTP = true
        configuration.backoff = .milliseconds(10)
        // Generous: on a loaded machine a slow answer must not become a timeout, whose retry
        // would miss a reply injected for one request. The timeout test sets its own.
        configuration.timeout = .seconds(30)
        var keysConfiguration = JWKSProvider.Configuration(url: fake.baseURL + "/auth/keys")
        keysConfiguration.allowLoopbackHTTP = true
        let transport = DefaultHTTPTransport(allowLoopbackHTTP: true)
        return try AppleAuthClient(
            configuration: configuration, secrets: ClientSecretProvider(builder: builder), transport: transport,
            identityTokenKeys: try JWKSProvider(configuration: keysConfiguration, transport: transport))
    }

    private func expectCode(_ code: AppleError.Code, _ body: () async throws -> Void) async {
        do {
            try await body()
            Issue.record("expected \(code)")
        } catch let error as AppleError {
            #expect(error.code == code, "\(error)")
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func codeExchangeRefreshAndRevoke() async throws {
        let code = fake.issueCode(for: "001234.abc.1234", nonce: "n-123")
        let tokens = try await client.exchange(
            code: SecretBytes(utf8: code), redirectURI: "https://example.com/callback", nonce: "n-123")
        #expect(tokens.identity?.subject == "001234.abc.1234")
        #expect(tokens.tokenType == "Bearer" && tokens.expiresIn == 3600)
        let refresh = try #require(tokens.refreshToken)
        #expect(!"\(tokens)".contains(refresh.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }))
        let request = try #require(fake.requests.last { $0.path == "/auth/token" })
        #expect(
            request.form["grant_type"] == "authorization_code"
                && request.form["redirect_uri"] == "https://example.com/callback")
        #expect(request.headers["user-agent"]?.contains("shadow-keys") == true)
        // The code is single-use.
        await expectCode(.invalidGrant) { _ = try await client.exchange(code: SecretBytes(utf8: code)) }
        // Refresh validation works until the token is revoked.
        let refreshed = try await client.refresh(refresh)
        #expect(refreshed.refreshToken == nil && refreshed.identity?.subject == "001234.abc.1234")
        try await client.revoke(refresh, kind: .refreshToken)
        #expect(fake.requests.last?.form["token_type_hint"] == "refresh_token")
        await expectCode(.invalidGrant) { _ = try await client.refresh(refresh) }
    }

    @Test func nonceMismatchOnTheIdTokenIsRefused() async throws {
        let code = fake.issueCode(for: "001234.abc.1234", nonce: "other")
        do {
            _ = try await client.exchange(code: SecretBytes(utf8: code), nonce: "expected")
            Issue.record("accepted an id_token with the wrong nonce")
        } catch let error as JOSEError {
            #expect(error.code == .claimsRejected && error.claimFailures.first?.claim == "nonce")
        }
    }

    @Test func migrationBothDirections() async throws {
        let token = try await client.migrationAccessToken()
        let transfer = try await client.transferSubject(for: "001234.abc.1234", to: "RECV123456", accessToken: token)
        #expect(transfer.contains("RECV123456"))
        let request = try #require(fake.requests.last)
        #expect(request.headers["authorization"]?.hasPrefix("Bearer m") == true)
        #expect(request.form["target"] == "RECV123456" && request.form["sub"] == "001234.abc.1234")
        let user = try await client.migratedUser(forTransferSubject: transfer, accessToken: token)
        #expect(user.subject.hasSuffix(".moved") && user.isPrivateEmail == true && user.email != nil)
        await expectCode(.invalidClient) {
            _ = try await client.transferSubject(
                for: "x", to: "RECV123456", accessToken: SecretBytes(utf8: "not-a-migration-token"))
        }
    }

    @Test func appleErrorsAreTyped() async throws {
        for name in [
            "invalid_request", "invalid_client", "invalid_grant", "unauthorized_client", "unsupported_grant_type",
            "invalid_scope", "something_new",
        ] {
            fake.inject("/auth/token", [FakeAppleServer.error(name, description: "as Apple says")])
            do {
                _ = try await client.refresh(SecretBytes(utf8: "r1"))
                Issue.record("\(name) accepted")
            } catch let error as AppleError {
                #expect(error.code.name == (name == "something_new" ? "rejected" : name))
                #expect(error.status == 400)
                #expect(error.reason.contains("as Apple says"))
            }
        }
    }

    /// An answer of the wrong shape is Apple's fault (invalidResponse, exit 42), never the
    /// caller's malformed token (10): a broken id_token, or an expires_in out of range.
    @Test(arguments: [
        #"{"access_token":"a","token_type":"Bearer","expires_in":3600,"refresh_token":"r","id_token":"not-a-jws"}"#,
        #"{"access_token":"a","token_type":"Bearer","expires_in":3600,"refresh_token":"r","id_token":"a.b"}"#,
        #"{"access_token":"a","token_type":"Bearer","expires_in":-1,"refresh_token":"r","id_token":"a.b.c"}"#,
        #"{"access_token":"a","token_type":"Bearer","expires_in":99999999999,"refresh_token":"r"}"#,
    ])
    func anAnswerOfTheWrongShapeIsInvalidResponse(body: String) async throws {
        fake.inject("/auth/token", [.json(body)])
        await expectCode(.invalidResponse) { _ = try await client.exchange(code: SecretBytes(utf8: "c")) }
    }

    @Test func aWrongSigningKeyIsInvalidClient() async throws {
        let stranger = try Self.client(fake: fake, key: P256.Signing.PrivateKey())
        await expectCode(.invalidClient) { _ = try await stranger.refresh(SecretBytes(utf8: "r1")) }
        let wrongKid = try Self.client(fake: fake, key: key, keyID: "OTHER12345")
        await expectCode(.invalidClient) { _ = try await wrongKid.refresh(SecretBytes(utf8: "r1")) }
        let wrongClient = try Self.client(fake: fake, key: key, clientID: "com.other.app")
        await expectCode(.invalidClient) { _ = try await wrongClient.refresh(SecretBytes(utf8: "r1")) }
    }

    @Test func serverErrorsAndTimeoutsAreRetriedButRejectionsAreNot() async throws {
        let code = fake.issueCode(for: "001234.abc.1234")
        fake.inject("/auth/token", [.json("{}", status: 503), .reset])
        _ = try await client.exchange(code: SecretBytes(utf8: code))
        #expect(fake.requests.filter { $0.path == "/auth/token" }.count == 3)

        fake.inject("/auth/token", [.json("{}", status: 500), .json("{}", status: 502), .json("{}", status: 503)])
        await expectCode(.serverError) { _ = try await client.refresh(SecretBytes(utf8: "r")) }
        #expect(fake.requests.filter { $0.path == "/auth/token" }.count == 6)

        fake.inject("/auth/revoke", [FakeAppleServer.error("invalid_request")])
        await expectCode(.invalidRequest) { try await client.revoke(SecretBytes(utf8: "t"), kind: .accessToken) }
        #expect(fake.requests.filter { $0.path == "/auth/revoke" }.count == 1)

        fake.inject("/auth/revoke", [.hang(seconds: 60), .hang(seconds: 60), .hang(seconds: 60)])
        var quick = AppleAuthClient.Configuration()
        quick.baseURL = fake.baseURL
        quick.allowLoopbackHTTP = true
        quick.timeout = .seconds(2)  // against 60 s hangs; shorter can pass before a loaded server reads
        quick.backoff = .milliseconds(10)
        let builder = try ClientSecretBuilder(
            key: AppleSigningKey(key), teamID: fake.teamID, keyID: fake.keyID, clientID: "com.example.app")
        var keys = JWKSProvider.Configuration(url: fake.baseURL + "/auth/keys")
        keys.allowLoopbackHTTP = true
        let impatient = try AppleAuthClient(
            configuration: quick, secrets: ClientSecretProvider(builder: builder),
            transport: DefaultHTTPTransport(allowLoopbackHTTP: true),
            identityTokenKeys: JWKSProvider(configuration: keys, transport: nil))
        await expectCode(.transport) { try await impatient.revoke(SecretBytes(utf8: "t"), kind: .accessToken) }
        #expect(fake.requests.filter { $0.path == "/auth/revoke" }.count == 4)
    }

    @Test func formBodiesAreEscaped() {
        let body = String(
            decoding: FormEncoding.encode([("redirect_uri", "https://example.com/cb?a=1&b=2"), ("x", "a b+c/é")]),
            as: UTF8.self)
        #expect(body == "redirect_uri=https%3A%2F%2Fexample.com%2Fcb%3Fa%3D1%26b%3D2&x=a+b%2Bc%2F%C3%A9")
    }

    @Test func refreshValidationIsThrottled() {
        let clock = ManualClock()
        let tracker = RefreshValidationTracker(clock: clock.clock)
        let token = SecretBytes(utf8: "r.token")
        #expect(tracker.nextAllowed(for: token) == nil)
        tracker.recordValidation(of: token)
        #expect(tracker.nextAllowed(for: token) == clock.now.addingTimeInterval(86400))
        #expect(tracker.nextAllowed(for: SecretBytes(utf8: "another")) == nil)
        #expect(!tracker.records.keys.contains { $0.contains("r.token") })
        clock.advance(by: 86400)
        #expect(tracker.nextAllowed(for: token) == nil)
    }
}
