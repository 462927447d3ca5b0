import Crypto
import Foundation
import ShadowCore
import ShadowDPoP
import ShadowHTTP
import ShadowJWKS
import ShadowTestSupport
import ShadowTokenSource
import ShadowVault
import Testing

/// The token source against a loopback token endpoint: refresh near expiry, rotation saved,
/// single flight, invalid_grant, retries, presets.
@Suite struct TokenSourceTests {
    let directory: TemporaryDirectory
    let vault: TokenVault
    let fake: FakeOAuthServer
    let clock: ManualClock

    init() async throws {
        directory = try TemporaryDirectory()
        clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        vault = try await TokenVault.create(
            at: directory.path + "/vault.skv", unlock: .key(SecretBytes((0..<32).map { UInt8($0) })),
            clock: clock.clock)
        fake = try FakeOAuthServer()
    }

    func login(
        preset: OAuthClient.Preset = .generic, clientID: String = "client-1",
        authentication: OAuthClient.Authentication? = nil, issuedAt: Date? = nil
    ) async throws {
        let client = try OAuthClient(
            preset: preset, tokenEndpoint: fake.url, clientID: clientID, authentication: authentication)
        try await vault.put(contentsOf: [
            VaultEntry(
                name: "drive", secret: SecretBytes(utf8: "rt-0"), provider: .google, kind: .refreshToken,
                labels: TokenSourceEntries.labels(
                    client: client, scope: "drive.file", issuedAt: issuedAt ?? clock.now)),
            VaultEntry(
                name: TokenSourceEntries.clientSecret("drive"), secret: SecretBytes(utf8: "client-secret-1"),
                provider: .google, kind: .other),
        ])
    }

    func source(skew: Duration = .seconds(60)) throws -> TokenSource {
        var policy = OAuthTokenEndpoint.Policy()
        policy.allowLoopbackHTTP = true
        policy.backoff = .milliseconds(10)
        return try TokenSource(
            vault: vault, name: "drive",
            transport: try AsyncHTTPClientTransport(options: .init(allowLoopbackHTTP: true)),
            skew: skew, policy: policy, clock: clock.clock)
    }

    func text(_ secret: SecretBytes) -> String { secret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }

    @Test func refreshesOnlyNearExpiryAndSavesTheRotatedToken() async throws {
        try await login()
        let source = try source()
        let first = try await source.token()
        #expect(text(first.token) == "at-1" && first.refreshed && first.scope == "drive.file")
        #expect(text(try await vault.entry(named: "drive").secret) == "rt-1")
        #expect(try await vault.entry(named: "drive.access").expiresAt == clock.now.addingTimeInterval(3600))
        // Still valid: no request.
        clock.advance(by: 3000)
        let second = try await source.token()
        #expect(text(second.token) == "at-1" && !second.refreshed)
        #expect(fake.withState { $0.refreshes } == 1)
        // Within the skew: refreshed, with the rotated token.
        clock.advance(by: 560)
        #expect(text(try await source.token().token) == "at-2")
        #expect(text(try await vault.entry(named: "drive").secret) == "rt-2")
        #expect(!fake.accepts("rt-0"), "the server ended rt-0 once rt-2 was issued from rt-1")
    }

    /// A source under a name whose companions the vault cannot hold (NAME.access, or for a client
    /// with a secret NAME.client-secret, over 255 bytes) is refused before any request: a refresh
    /// would spend rt-0, and its answer, rt-1 with it, would then be refused by the vault. The
    /// longest names that fit work, companions and all.
    @Test func aNameTooLongForItsCompanionsIsRefusedBeforeAnyRequest() async throws {
        var policy = OAuthTokenEndpoint.Policy()
        policy.allowLoopbackHTTP = true
        let transport = try AsyncHTTPClientTransport(options: .init(allowLoopbackHTTP: true))
        for (authentication, longest) in [(OAuthClient.Authentication.none, 248), (.clientSecretBasic, 241)] {
            let client = try OAuthClient(
                preset: .generic, tokenEndpoint: fake.url,
                clientID: authentication == .none ? "public-client" : "client-1", authentication: authentication)
            #expect(TokenSourceEntries.maxNameBytes(for: client) == longest)
            func source(_ name: String) async throws -> TokenSource {
                fake.withState { $0.valid.insert("rt-0") }
                var entries = [
                    VaultEntry(
                        name: name, secret: SecretBytes(utf8: "rt-0"), provider: .google, kind: .refreshToken,
                        labels: TokenSourceEntries.labels(client: client, scope: nil, issuedAt: clock.now))
                ]
                if authentication != .none, name.utf8.count < 242 {
                    entries.append(
                        VaultEntry(
                            name: TokenSourceEntries.clientSecret(name), secret: SecretBytes(utf8: "client-secret-1"),
                            provider: .google, kind: .other))
                }
                try await vault.put(contentsOf: entries)
                return try TokenSource(
                    vault: vault, name: name, transport: transport, policy: policy, clock: clock.clock)
            }
            let tooLong = String(repeating: "n", count: longest + 1)
            let requests = fake.server.requestCount
            await #expect(throws: TokenError(.notConfigured, "")) { try await source(tooLong).token() }
            #expect(fake.server.requestCount == requests, "\(authentication)")
            #expect(text(try await vault.entry(named: tooLong).secret) == "rt-0")

            let name = String(repeating: "m", count: longest)
            let token = try await source(name).token()
            #expect(token.refreshed && text(token.token).hasPrefix("at-"))
            #expect(text(try await vault.entry(named: name).secret).hasPrefix("rt-"))
            #expect(text(try await vault.entry(named: TokenSourceEntries.access(name)).secret) == text(token.token))
            try await vault.remove(named: TokenSourceEntries.access(name))
            try await vault.remove(named: name)
        }
        let generic = try OAuthClient(preset: .generic, tokenEndpoint: fake.url, clientID: "c", authentication: .none)
        #expect(TokenSourceEntries.nameProblem("", client: generic) != nil)
        #expect(TokenSourceEntries.nameProblem("a\u{7}b", client: generic) != nil)
    }

    @Test func concurrentCallersShareOneRefresh() async throws {
        try await login()
        fake.withState { $0.delay = 0.2 }
        let source = try source()
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<20 { group.addTask { self.text(try await source.token().token) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(Set(tokens) == ["at-1"])
        #expect(fake.withState { $0.refreshes } == 1)
    }

    @Test func invalidGrantMarksTheEntryAndIsNotRetried() async throws {
        try await login()
        fake.withState { $0.revoked = ["rt-0"] }
        let source = try source()
        await #expect(throws: TokenError(.reauthenticationRequired, "")) { try await source.token() }
        let requests = fake.server.requestCount
        #expect(requests == 1)
        await #expect(throws: TokenError(.reauthenticationRequired, "")) { try await source.token() }
        #expect(fake.server.requestCount == requests, "a marked entry asks nothing")
        #expect(try await vault.entry(named: "drive").labels["oauth.reauthentication"] == "required")
    }

    @Test func unavailableProvidersAreRetriedHonouringRetryAfter() async throws {
        try await login()
        fake.withState { $0.failures = [(503, "1"), (500, nil)] }
        let source = try source()
        let began = Date()
        #expect(text(try await source.token().token) == "at-1")
        #expect(Date().timeIntervalSince(began) >= 1, "Retry-After: 1 was waited for")
        #expect(fake.server.requestCount == 3)
        // Past the retries: provider unavailable, and the stored tokens are untouched.
        clock.advance(by: 7200)
        fake.withState { $0.failures = Array(repeating: (503, nil), count: 10) }
        await #expect(throws: TokenError(.providerUnavailable, "")) { try await source.token() }
        #expect(text(try await vault.entry(named: "drive").secret) == "rt-1")
        // A Retry-After longer than the policy allows ends the retries at once.
        fake.withState { $0.failures = [(429, "3600")] }
        var before = fake.server.requestCount
        await #expect(throws: TokenError(.providerUnavailable, "")) { try await source.token() }
        #expect(fake.server.requestCount == before + 1)
        // So does one as an HTTP-date an hour ahead, and delay-seconds too large to count.
        let hourAhead = try #require(Timestamp(Date().addingTimeInterval(3600)))
        for asked in [HTTPCaching.formatHTTPDate(hourAhead), "99999999999"] {
            fake.withState { $0.failures = [(503, asked)] }
            before = fake.server.requestCount
            await #expect(throws: TokenError(.providerUnavailable, "")) { try await source.token() }
            #expect(fake.server.requestCount == before + 1, "Retry-After: \(asked)")
        }
    }

    @Test func clientAuthenticationMethods() async throws {
        for method in [OAuthClient.Authentication.clientSecretBasic, .clientSecretPost] {
            fake.withState { $0.valid.insert("rt-0") }
            try await login(authentication: method)
            try? await vault.remove(named: "drive.access")
            _ = try await source().token()
            let last = try #require(fake.server.requests.last)
            if method == .clientSecretBasic {
                #expect(last.headers["authorization"]?.hasPrefix("Basic ") == true)
                #expect(last.form["client_secret"] == nil)
            } else {
                #expect(last.headers["authorization"] == nil)
                #expect(last.form["client_secret"] == "client-secret-1")
            }
        }
        // A wrong secret is the provider's refusal, not a reauthentication.
        fake.withState { $0.clientSecret = "rotated" }
        try await vault.remove(named: "drive.access")
        await #expect(throws: TokenError(.rejected, "")) { try await source().token() }
    }

    @Test func googleWarnsBeforeTheNinetyDayEnd() async throws {
        try await login(preset: .google, issuedAt: clock.now.addingTimeInterval(-80 * 86_400))
        fake.withState { $0.rotates = false }
        let token = try await source().token()
        #expect(token.warnings.count == 1)
        #expect(token.warnings.first?.contains("90-day") == true)
        // A rotated token starts a new 90 days.
        fake.withState { $0.rotates = true }
        clock.advance(by: 7200)
        #expect(try await source().token().warnings.isEmpty)
    }

    @Test func appleMakesItsClientSecretFromTheKeyAndKeepsIt() async throws {
        let client = try OAuthClient(preset: .apple, tokenEndpoint: fake.url, clientID: "com.example.app")
        try await vault.put(contentsOf: [
            VaultEntry(
                name: "apple", secret: SecretBytes(utf8: "rt-0"), provider: .apple, kind: .refreshToken,
                labels: TokenSourceEntries.labels(client: client, scope: nil, issuedAt: clock.now)),
            VaultEntry(
                name: TokenSourceEntries.p8("apple"), secret: SecretBytes(utf8: TestKeys.p256.pemRepresentation),
                provider: .apple,
                kind: .key, labels: TokenSourceEntries.appleKeyLabels(teamID: "ABCDE12345", keyID: "KEY1234567")),
        ])
        var policy = OAuthTokenEndpoint.Policy()
        policy.allowLoopbackHTTP = true
        let source = try TokenSource(
            vault: vault, name: "apple",
            transport: try AsyncHTTPClientTransport(options: .init(allowLoopbackHTTP: true)),
            policy: policy, clock: clock.clock)
        #expect(text(try await source.token().token) == "at-1")
        let made = try await vault.entry(named: "apple.client-secret")
        #expect(made.expiresAt != nil)
        let sent = try #require(fake.server.requests.last?.form["client_secret"])
        #expect(sent == text(made.secret))
        clock.advance(by: 3600)
        _ = try await source.token()
        #expect(fake.server.requests.last?.form["client_secret"] == sent, "kept while it has time left")
    }

    @Test func pkceChallengeAndRedirectState() throws {
        let pkce = PKCE()
        #expect(pkce.verifier.count == 43)
        #expect(!"\(pkce)".contains(pkce.verifier), "the verifier never prints")
        // RFC 7636, appendix B.
        #expect(
            PKCE.challenge(for: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
                == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        let client = try OAuthClient(preset: .google, clientID: "client-1")
        let url = pkce.authorizationURL(
            endpoint: "https://accounts.google.com/o/oauth2/v2/auth", client: client,
            redirectURI: "http://127.0.0.1:8080/cb", scope: "openid drive.file")
        #expect(url.contains("code_challenge=\(pkce.challenge)") && url.contains("code_challenge_method=S256"))
        #expect(url.contains("scope=openid%20drive.file") && url.contains("access_type=offline"))
        #expect(
            text(try pkce.code(fromPasted: "http://127.0.0.1:8080/cb?state=\(pkce.state)&code=4%2F0Ab\n")) == "4/0Ab")
        #expect(text(try pkce.code(fromPasted: "plain-code\n")) == "plain-code")
        // A terminal's CR LF is one Character in a String, neither "\r" nor "\n": trimmed by bytes.
        #expect(text(try pkce.code(fromPasted: " plain-code\r\n")) == "plain-code")
        #expect(
            text(try pkce.code(fromPasted: "http://127.0.0.1:8080/cb?code=c1&state=\(pkce.state)\r\n")) == "c1")
        #expect(throws: TokenError.self) { try pkce.code(fromPasted: "http://127.0.0.1:8080/cb?state=forged&code=x") }
        #expect(throws: TokenError.self) { try pkce.code(fromPasted: "http://127.0.0.1:8080/cb?error=access_denied") }
    }

    @Test func malformedAnswersAreInvalidResponses() async throws {
        try await login()
        for body in [
            "not json", #"{"token_type":"Bearer","expires_in":3600}"#,
            #"{"access_token":"a","token_type":"mac","expires_in":3600}"#,
            #"{"access_token":"a","token_type":"Bearer","expires_in":0}"#,
            #"{"access_token":"a","token_type":"Bearer","expires_in":99999999999}"#,
            #"{"access_token":"a","token_type":"Bearer","expires_in":60,"refresh_token":5}"#,
        ] {
            fake.server.setHandler { _ in .json(body) }
            await #expect(throws: TokenError(.invalidResponse, ""), "\(body)") { try await source().token() }
        }
        #expect(text(try await vault.entry(named: "drive").secret) == "rt-0")
    }

    /// An answer over the 256 KiB cap is a wrong answer, asked once: never retried as an outage.
    @Test func anAnswerOverTheCapIsInvalidAndNotRetried() async throws {
        try await login()
        let huge = #"{"access_token":""# + String(repeating: "a", count: OAuthTokenEndpoint.maxResponseBytes) + #""}"#
        fake.server.setHandler { _ in .json(huge) }
        let before = fake.server.requestCount
        let error = await #expect(throws: TokenError.self) { try await source().token() }
        #expect(
            error?.code == .invalidResponse && error?.reason.contains("256 KiB") == true, "\(String(describing: error))"
        )
        #expect(fake.server.requestCount == before + 1)
        #expect(text(try await vault.entry(named: "drive").secret) == "rt-0")
    }
}

/// The token source against a provider that binds its tokens with DPoP and demands nonces
/// (RFC 9449 §5, §8): proofs by the vault's key, the nonce learnt and followed, DPoP tokens.
@Suite struct TokenSourceDPoPTests {
    let base: TokenSourceTests

    init() async throws {
        base = try await TokenSourceTests()
        base.fake.withState {
            $0.dpop = true
            $0.dpopNonce = "nonce-1"
        }
    }

    /// A source whose refresh token `rt-0` is bound to a key kept in the vault.
    func loginBound() async throws -> DPoPSigner {
        try await base.login()
        let (keyEntry, signer) = try TokenSourceEntries.newDPoPKey(for: "drive", provider: .google)
        var refresh = try await base.vault.entry(named: "drive")
        refresh.labels[TokenSourceEntries.dpopLabel] = "ES256"
        try await base.vault.put(contentsOf: [refresh, keyEntry])
        base.fake.withState { $0.boundKeys["rt-0"] = signer.thumbprint }
        return signer
    }

    @Test func proofsByTheVaultsKeyFollowTheNonce() async throws {
        let signer = try await loginBound()
        let source = try base.source()
        let first = try await source.token()
        #expect(first.tokenType == "DPoP" && base.text(first.token) == "at-1")
        #expect(base.fake.withState { ($0.nonceChallenges, $0.proofKeys) } == (1, [signer.thumbprint]))
        #expect(try await source.dpopSigner()?.thumbprint == signer.thumbprint)
        // The stored token keeps its type.
        #expect(try await source.token().tokenType == "DPoP")
        // The provider rotates its nonce: one more challenge, then the refresh goes through.
        base.fake.withState { $0.dpopNonce = "nonce-2" }
        base.clock.advance(by: 3600)
        let second = try await source.token()
        #expect(base.text(second.token) == "at-2")
        #expect(base.fake.withState { $0.nonceChallenges } == 2)
    }

    /// Without the key (a copied refresh token) the provider refuses, and nothing is stored.
    @Test func aRefreshTokenWithoutItsKeyIsRefused() async throws {
        _ = try await loginBound()
        var refresh = try await base.vault.entry(named: "drive")
        refresh.labels[TokenSourceEntries.dpopLabel] = nil
        try await base.vault.put(refresh)
        try await base.vault.remove(named: TokenSourceEntries.dpop("drive"))
        let error = await #expect(throws: TokenError.self) { _ = try await base.source().token() }
        #expect(error?.code == .rejected)
        // With another key it is refused the same way.
        let (other, _) = try TokenSourceEntries.newDPoPKey(for: "drive", provider: .google)
        refresh.labels[TokenSourceEntries.dpopLabel] = "ES256"
        try await base.vault.put(contentsOf: [refresh, other])
        let again = await #expect(throws: TokenError.self) { _ = try await base.source().token() }
        #expect(again?.code == .rejected)
        #expect(base.fake.withState { $0.refreshes } == 0)
    }
}
