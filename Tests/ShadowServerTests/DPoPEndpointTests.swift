import Crypto
import Foundation
import HTTPTypes
import ShadowApple
import ShadowCore
import ShadowDPoP
import ShadowHTTP
import ShadowJOSE
import ShadowSQLite
import ShadowServer
import ShadowSessions
import ShadowTestSupport
import ShadowVault
import Synchronization
import Testing

/// The session routes with DPoP (Docs/dpop.md, "Sessions"): a sign-in binds, a refresh needs the
/// key, a bound access token is refused as a bearer token, nonces rotate.
@Suite(.serialized) struct DPoPEndpointTests {
    static let client = "com.example.app"
    static let issuer = "https://api.example.com"
    let directory: TemporaryDirectory
    let apple: FakeAppleServer
    let key = SecretBytes((0..<32).map { UInt8($0) })
    /// The server's clock, moved by the tests (nonce periods).
    let seconds = TestClock()

    init() throws {
        directory = try TemporaryDirectory()
        apple = try FakeAppleServer(clientKey: TestKeys.p256.publicKey)
    }

    var clock: WallClock { WallClock { [seconds] in Date(timeIntervalSince1970: seconds.now) } }

    struct Fixture {
        let endpoints: SessionEndpoints
        let store: DatabaseSessionStore
    }

    func fixture(
        nonces: Bool = false, require: Bool = false, limits: SessionEndpoints.Limits = .init()
    ) async throws -> Fixture {
        let store = try await SQLiteSessionStore.open(path: directory.path + "/state.sqlite", unlock: .key(key))
        var configuration = SessionConfiguration(issuer: Self.issuer, audience: Self.issuer, clientID: Self.client)
        configuration.requireDPoP = require
        let authority = try await SessionAuthority(store: store, configuration: configuration, clock: clock)
        var apple = AppleAuthClient.Configuration()
        apple.baseURL = self.apple.baseURL
        apple.allowLoopbackHTTP = true
        let builder = try ClientSecretBuilder(
            key: AppleSigningKey(TestKeys.p256), teamID: self.apple.teamID, keyID: self.apple.keyID,
            clientID: Self.client)
        let keys = try JWKSet(keys: [try self.apple.identitySigner.publicJWK()])
        let client = try AppleAuthClient(
            configuration: apple, secrets: ClientSecretProvider(builder: builder),
            transport: DefaultHTTPTransport(allowLoopbackHTTP: true), identityTokenKeys: keys)
        let policy = DPoPPolicy(
            verifier: DPoPVerifier(clock: clock), nonces: nonces ? try authority.dpopNonces() : nil)
        let endpoints = SessionEndpoints(
            authority: authority, validator: AppleIdentityTokenValidator(clientIDs: [Self.client]), appleKeys: keys,
            appleClients: [Self.client: client], limits: limits,
            introspectionClients: ["rs": SecretBytes(utf8: "rs-secret")], dpop: policy)
        return Fixture(endpoints: endpoints, store: store)
    }

    func signInBody(_ subject: String) throws -> [UInt8] {
        let now = Int64(Date().timeIntervalSince1970) - 1
        let token = try apple.identitySigner.sign(claims: [
            "iss": "https://appleid.apple.com", "aud": .string(Self.client), "sub": .string(subject),
            "iat": .int(now), "exp": .int(now + 600),
        ])
        return Array(
            JSONValue.object([
                "identityToken": .string(token), "authorizationCode": .string(apple.issueCode(for: subject)),
            ]).serialized().utf8)
    }

    func proof(
        _ signer: DPoPSigner, _ method: String, _ path: String, token: String? = nil, nonce: String? = nil
    )
        throws -> [String]
    {
        let at = Date(timeIntervalSince1970: seconds.now)
        return [
            try signer.proof(method: method, url: Self.issuer + path, accessToken: token, nonce: nonce, issuedAt: at)
        ]
    }

    static func object(_ answer: SessionHTTPResponse) throws -> JSONObject {
        try #require(try StrictJSON.parse(answer.body).objectValue)
    }

    static func errorCode(_ answer: SessionHTTPResponse) -> String? {
        (try? object(answer))?["error"]?.objectValue?["code"]?.stringValue
    }

    /// A sign-in as `subject` with a proof by a new device key: the key and the answer.
    func boundSignIn(_ fixture: Fixture, _ subject: String) async throws -> (DPoPSigner, SessionHTTPResponse) {
        let device = try DPoPSigner.es256(P256.Signing.PrivateKey())
        let answer = await fixture.endpoints.signIn(
            body: try signInBody(subject), contentType: "application/json", clientIP: "192.0.2.1",
            dpop: try proof(device, "POST", "/auth/apple"))
        return (device, answer)
    }

    /// A fixture whose session limit allows one refresh in 600 s, and a session bound to a new
    /// device key by signing in as `subject`: the key and the session's refresh token.
    func oneRefreshBoundSession(
        _ subject: String
    ) async throws -> (fixture: Fixture, device: DPoPSigner, refreshToken: String) {
        var limits = SessionEndpoints.Limits()
        limits.perUser = try RateLimit(requests: 1, per: 600, burst: 1)
        let fixture = try await fixture(limits: limits)
        let (device, signedIn) = try await boundSignIn(fixture, subject)
        let refreshToken = try #require(try Self.object(signedIn)["refreshToken"]?.stringValue)
        return (fixture, device, refreshToken)
    }

    func refresh(_ endpoints: SessionEndpoints, _ token: String, _ proofs: [String]) async -> SessionHTTPResponse {
        await endpoints.refresh(
            body: Array(JSONValue.object(["refreshToken": .string(token)]).serialized().utf8),
            contentType: "application/json", clientIP: "192.0.2.9", dpop: proofs)
    }

    @Test func aSignInWithAProofBindsTheSessionToItsKey() async throws {
        let fixture = try await fixture()
        try await closing({ await fixture.store.close() }) {
            let (device, answer) = try await boundSignIn(fixture, "001234.dpop.0001")
            #expect(answer.status == .ok, "\(String(decoding: answer.body, as: UTF8.self))")
            let tokens = try Self.object(answer)
            #expect(tokens["tokenType"]?.stringValue == "DPoP")
            let access = try #require(tokens["accessToken"]?.stringValue)
            let refreshToken = try #require(tokens["refreshToken"]?.stringValue)
            #expect(try CompactJWS(access).unverifiedPayload()["cnf"] == .object(["jkt": .string(device.thumbprint)]))

            // Refresh: without a proof, with the thief's, then the device's.
            let thief = try DPoPSigner.es256(P256.Signing.PrivateKey())
            let bare = await refresh(fixture.endpoints, refreshToken, [])
            #expect(bare.status == .badRequest && Self.errorCode(bare) == "invalid_dpop_proof")
            let stolen = await refresh(fixture.endpoints, refreshToken, try proof(thief, "POST", "/auth/refresh"))
            #expect(stolen.status == .badRequest && Self.errorCode(stolen) == "invalid_dpop_proof")
            let genuine = await refresh(fixture.endpoints, refreshToken, try proof(device, "POST", "/auth/refresh"))
            #expect(genuine.status == .ok, "\(String(decoding: genuine.body, as: UTF8.self))")
            #expect(try Self.object(genuine)["tokenType"]?.stringValue == "DPoP")

            // A proof made for another route, or replayed, is refused before the session is read.
            let elsewhere = await refresh(
                fixture.endpoints, try #require(try Self.object(genuine)["refreshToken"]?.stringValue),
                try proof(device, "POST", "/auth/apple"))
            #expect(elsewhere.status == .badRequest && Self.errorCode(elsewhere) == "invalid_dpop_proof")
            let once = try proof(device, "POST", "/auth/refresh")
            let next = try #require(try Self.object(genuine)["refreshToken"]?.stringValue)
            #expect(await refresh(fixture.endpoints, next, once).status == .ok)
            let replayed = await refresh(fixture.endpoints, next, once)
            #expect(replayed.status == .badRequest)
            #expect(String(decoding: replayed.body, as: UTF8.self).contains("replayed"))
        }
    }

    /// A stolen refresh token of a bound session cannot sign the user out: a logout without the
    /// key's proof, or with another key's, is refused and the session stays; with the device's
    /// proof it ends the session. An unbound session logs out without a proof, as before.
    @Test func aBoundSessionLogsOutOnlyWithItsKey() async throws {
        let fixture = try await fixture()
        try await closing({ await fixture.store.close() }) {
            let (device, signedIn) = try await boundSignIn(fixture, "001234.dpop.logout")
            let refreshToken = try #require(try Self.object(signedIn)["refreshToken"]?.stringValue)
            func logout(_ token: String, _ proofs: [String]) async -> SessionHTTPResponse {
                await fixture.endpoints.logout(
                    body: Array(JSONValue.object(["refreshToken": .string(token)]).serialized().utf8),
                    contentType: "application/json", clientIP: "192.0.2.9", dpop: proofs)
            }
            let thief = try DPoPSigner.es256(P256.Signing.PrivateKey())
            for proofs in [[], try proof(thief, "POST", "/auth/logout")] {
                let refused = await logout(refreshToken, proofs)
                #expect(refused.status == .badRequest && Self.errorCode(refused) == "invalid_dpop_proof")
            }
            let wrongRoute = await logout(refreshToken, try proof(device, "POST", "/auth/refresh"))
            #expect(wrongRoute.status == .badRequest && Self.errorCode(wrongRoute) == "invalid_dpop_proof")
            // The session stayed: it still refreshes with the device's proof.
            let refreshed = await refresh(fixture.endpoints, refreshToken, try proof(device, "POST", "/auth/refresh"))
            #expect(refreshed.status == .ok, "\(String(decoding: refreshed.body, as: UTF8.self))")
            let next = try #require(try Self.object(refreshed)["refreshToken"]?.stringValue)
            let ended = await logout(next, try proof(device, "POST", "/auth/logout"))
            #expect(ended.status == .ok && String(decoding: ended.body, as: UTF8.self) == #"{"revoked":true}"#)
            let after = await refresh(fixture.endpoints, next, try proof(device, "POST", "/auth/refresh"))
            #expect(after.status == .unauthorized && Self.errorCode(after) == "invalid_grant")

            // An unbound session needs no proof.
            let bearer = await fixture.endpoints.signIn(
                body: try signInBody("001234.dpop.logout2"), contentType: "application/json", clientIP: "192.0.2.1")
            let bearerToken = try #require(try Self.object(bearer)["refreshToken"]?.stringValue)
            let unbound = await logout(bearerToken, [])
            #expect(unbound.status == .ok && String(decoding: unbound.body, as: UTF8.self) == #"{"revoked":true}"#)
        }
    }

    /// A refresh's session limit and its proof's replay row are written together
    /// (Docs/sessions.md, "Rate limits"): a refused proof still counts against the limit, a
    /// limited request's proof is spent, and neither rotates the session.
    @Test func aLimitedRefreshSpendsItsProofAndARefusedProofCounts() async throws {
        let (fixture, device, refreshToken) = try await oneRefreshBoundSession("001234.dpop.0009")
        try await closing({ await fixture.store.close() }) {

            // The thief's proof is refused, and still takes the session's one refresh.
            let thief = try DPoPSigner.es256(P256.Signing.PrivateKey())
            let stolen = await refresh(fixture.endpoints, refreshToken, try proof(thief, "POST", "/auth/refresh"))
            #expect(stolen.status == .badRequest && Self.errorCode(stolen) == "invalid_dpop_proof")
            let genuine = try proof(device, "POST", "/auth/refresh")
            let limited = await refresh(fixture.endpoints, refreshToken, genuine)
            #expect(limited.status == .tooManyRequests && Self.errorCode(limited) == "rate_limited")
            // The limited request's proof was recorded: it cannot be used again.
            let checked = try DPoPVerifier(clock: clock).verify(
                genuine, method: "POST", url: Self.issuer + "/auth/refresh")
            let now = Int64(seconds.now * 1000)
            #expect(try await fixture.store.firstUse(of: checked.replayKey, until: now + 600_000, now: now) == false)

            // Once the limit allows it, the same refresh token still refreshes: nothing rotated.
            seconds.advance(601)
            let later = await refresh(fixture.endpoints, refreshToken, try proof(device, "POST", "/auth/refresh"))
            #expect(later.status == .ok, "\(String(decoding: later.body, as: UTF8.self))")
        }
    }

    /// A proof refused by a check that needs no store (here its `htu`) is refused before any
    /// write and writes no replay row, yet its request still counts against the session's limit,
    /// as it would with the limit counted first.
    @Test func aProofRefusedWithoutTheStoreStillCountsAndIsNotSpent() async throws {
        let (fixture, device, refreshToken) = try await oneRefreshBoundSession("001234.dpop.0010")
        try await closing({ await fixture.store.close() }) {
            let elsewhere = try proof(device, "POST", "/auth/logout")
            let refused = await refresh(fixture.endpoints, refreshToken, elsewhere)
            #expect(refused.status == .badRequest && Self.errorCode(refused) == "invalid_dpop_proof")
            #expect(String(decoding: refused.body, as: UTF8.self).contains("uri_mismatch"))
            let checked = try DPoPVerifier(clock: clock).verify(
                elsewhere, method: "POST", url: Self.issuer + "/auth/logout")
            let now = Int64(seconds.now * 1000)
            #expect(try await fixture.store.firstUse(of: checked.replayKey, until: now + 600_000, now: now))
            let limited = await refresh(fixture.endpoints, refreshToken, try proof(device, "POST", "/auth/refresh"))
            #expect(limited.status == .tooManyRequests && Self.errorCode(limited) == "rate_limited")
        }
    }

    /// RFC 9449 §7.1: a bound token is refused as a bearer token, with the DPoP challenge; with
    /// `Authorization: DPoP` and a proof for the request it is accepted; a proof for another
    /// token (`ath`) or by another key is refused.
    @Test func aBoundAccessTokenNeedsItsProofAtEveryRoute() async throws {
        let fixture = try await fixture()
        try await closing({ await fixture.store.close() }) {
            let device = try DPoPSigner.es256(P256.Signing.PrivateKey())
            let issued = try await fixture.endpoints.authority.signIn(
                appleSubject: "001234.rs.0001", appleClientID: Self.client, appleRefreshToken: nil, device: "phone",
                keyThumbprint: device.thumbprint)
            let token = issued.accessToken
            let bearer = await fixture.endpoints.sessions(authorization: "Bearer " + token, clientIP: "192.0.2.2")
            #expect(bearer.status == .unauthorized && Self.errorCode(bearer) == "invalid_token")
            #expect(bearer.headers[values: .wwwAuthenticate].contains { $0.hasPrefix("DPoP algs=\"ES256 RS256\"") })
            let noProof = await fixture.endpoints.sessions(authorization: "DPoP " + token, clientIP: "192.0.2.2")
            #expect(noProof.status == .unauthorized && Self.errorCode(noProof) == "invalid_dpop_proof")
            let ok = await fixture.endpoints.sessions(
                authorization: "DPoP " + token, clientIP: "192.0.2.2",
                dpop: try proof(device, "GET", "/auth/sessions", token: token))
            #expect(ok.status == .ok, "\(String(decoding: ok.body, as: UTF8.self))")
            let otherToken = await fixture.endpoints.sessions(
                authorization: "DPoP " + token, clientIP: "192.0.2.2",
                dpop: try proof(device, "GET", "/auth/sessions", token: token + "x"))
            #expect(String(decoding: otherToken.body, as: UTF8.self).contains("ath_mismatch"))
            let otherKey = await fixture.endpoints.sessions(
                authorization: "DPoP " + token, clientIP: "192.0.2.2",
                dpop: try proof(try DPoPSigner.es256(P256.Signing.PrivateKey()), "GET", "/auth/sessions", token: token))
            #expect(String(decoding: otherKey.body, as: UTF8.self).contains("key_mismatch"))
            // Introspection tells a resource server the key (RFC 9449 §6.2).
            let introspected = await fixture.endpoints.introspect(
                body: Array("token=\(token)".utf8), contentType: "application/x-www-form-urlencoded",
                authorization: "Basic " + Data("rs:rs-secret".utf8).base64EncodedString())
            let answer = try Self.object(introspected)
            #expect(answer["token_type"]?.stringValue == "DPoP")
            #expect(answer["cnf"] == .object(["jkt": .string(device.thumbprint)]))
        }
    }

    /// Nonces (RFC 9449 §8): a proof without one is answered `use_dpop_nonce` with the current
    /// nonce; with it, the request goes through; two periods later the old one is refused again,
    /// with the new one.
    @Test func noncesRotate() async throws {
        let fixture = try await fixture(nonces: true)
        try await closing({ await fixture.store.close() }) {
            let device = try DPoPSigner.es256(P256.Signing.PrivateKey())
            func signIn(_ subject: String, nonce: String?) async throws -> SessionHTTPResponse {
                await fixture.endpoints.signIn(
                    body: try signInBody(subject), contentType: "application/json", clientIP: "192.0.2.3",
                    dpop: try proof(device, "POST", "/auth/apple", nonce: nonce))
            }
            let first = try await signIn("001234.n.0001", nonce: nil)
            #expect(first.status == .badRequest && Self.errorCode(first) == "use_dpop_nonce")
            let nonce = try #require(first.headers[DPoPPolicy.nonceHeader])
            let second = try await signIn("001234.n.0001", nonce: nonce)
            #expect(second.status == .ok, "\(String(decoding: second.body, as: UTF8.self))")
            #expect(second.headers[DPoPPolicy.nonceHeader] == nonce)
            seconds.advance(600)
            let stale = try await signIn("001234.n.0002", nonce: nonce)
            #expect(stale.status == .badRequest && Self.errorCode(stale) == "use_dpop_nonce")
            let fresh = try #require(stale.headers[DPoPPolicy.nonceHeader])
            #expect(fresh != nonce)
            #expect(try await signIn("001234.n.0002", nonce: fresh).status == .ok)
        }
    }

    @Test func requiringDPoPRefusesASignInWithoutAProof() async throws {
        let fixture = try await fixture(require: true)
        try await closing({ await fixture.store.close() }) {
            let answer = await fixture.endpoints.signIn(
                body: try signInBody("001234.r.0001"), contentType: "application/json", clientIP: "192.0.2.4")
            #expect(answer.status == .badRequest && Self.errorCode(answer) == "invalid_dpop_proof")
            let bearerChallenge = await fixture.endpoints.sessions(authorization: nil, clientIP: "192.0.2.4")
            #expect(bearerChallenge.headers[values: .wwwAuthenticate].allSatisfy { $0.hasPrefix("DPoP ") })
        }
    }
}

/// Seconds since 1970 that a test moves forward.
final class TestClock: Sendable {
    private let value = Mutex<TimeInterval>(Date().timeIntervalSince1970)
    var now: TimeInterval { value.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { value.withLock { $0 += seconds } }
}
