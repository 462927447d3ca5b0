import Crypto
import Foundation
import HTTPTypes
import ShadowApple
import ShadowCore
import ShadowCredentials
import ShadowHTTP
import ShadowJOSE
import ShadowJWKS
import ShadowSQLite
import ShadowServer
import ShadowSessions
import ShadowTestSupport
import ShadowVault
import Synchronization
import Testing

/// `SessionEndpoints` with no HTTP framework, over a real SQLite store and a loopback fake of
/// Apple: the routes' logic and the credential-state rules they share with serve.
@Suite(.serialized) struct SessionEndpointsTests {
    static let client = "com.example.app"
    let directory: TemporaryDirectory
    let apple: FakeAppleServer
    let key = SecretBytes((0..<32).map { UInt8($0) })

    init() throws {
        directory = try TemporaryDirectory()
        apple = try FakeAppleServer(clientKey: TestKeys.p256.publicKey)
    }

    struct Fixture {
        let endpoints: SessionEndpoints
        let sessions: DatabaseSessionStore
        let states: SQLiteCredentialStore
        func close() async {
            await sessions.close()
            await states.close()
        }
    }

    /// `events` sees the authority's events with the credential store at hand (to act between
    /// a sign-in's steps).
    func fixture(
        events: (@Sendable (SessionEvent, SQLiteCredentialStore) async -> Void)? = nil
    ) async throws -> Fixture {
        let path = directory.path + "/state.sqlite"
        let states = try await SQLiteCredentialStore.open(path: path, unlock: .key(key))
        let sessions = try await SQLiteSessionStore.open(path: path, unlock: .key(key))
        var seen: (@Sendable (SessionEvent) async -> Void)?
        if let events { seen = { event in await events(event, states) } }
        let authority = try await SessionAuthority(
            store: sessions,
            configuration: SessionConfiguration(
                issuer: "https://api.example.com", audience: "https://api.example.com", clientID: Self.client),
            events: seen)
        var configuration = AppleAuthClient.Configuration()
        configuration.baseURL = apple.baseURL
        configuration.allowLoopbackHTTP = true
        configuration.timeout = .seconds(30)
        let builder = try ClientSecretBuilder(
            key: AppleSigningKey(TestKeys.p256), teamID: apple.teamID, keyID: apple.keyID, clientID: Self.client)
        let keys = try JWKSet(keys: [try apple.identitySigner.publicJWK()])
        let client = try AppleAuthClient(
            configuration: configuration, secrets: ClientSecretProvider(builder: builder),
            transport: DefaultHTTPTransport(allowLoopbackHTTP: true), identityTokenKeys: keys)
        let endpoints = SessionEndpoints(
            authority: authority, validator: AppleIdentityTokenValidator(clientIDs: [Self.client]), appleKeys: keys,
            appleClients: [Self.client: client], states: states)
        return Fixture(endpoints: endpoints, sessions: sessions, states: states)
    }

    func identityToken(
        _ subject: String, issuedAt: Int64 = Int64(Date().timeIntervalSince1970) - 1, transferSubject: String? = nil
    ) throws -> String {
        var claims: JSONObject = [
            "iss": "https://appleid.apple.com", "aud": .string(Self.client), "sub": .string(subject),
            "iat": .int(issuedAt), "exp": .int(issuedAt + 600),
        ]
        if let transferSubject { claims.set("transfer_sub", .string(transferSubject)) }
        return try apple.identitySigner.sign(claims: claims)
    }

    func signIn(_ endpoints: SessionEndpoints, _ subject: String, token: String? = nil) async throws -> JSONObject {
        let body = JSONValue.object([
            "identityToken": .string(try token ?? identityToken(subject)),
            "authorizationCode": .string(apple.issueCode(for: subject)),
        ])
        let answer = await endpoints.signIn(
            body: Array(body.serialized().utf8), contentType: "application/json", clientIP: "192.0.2.1")
        guard answer.status == .ok, case .object(let object) = try StrictJSON.parse(answer.body) else {
            throw CLIRunnerError("sign-in answered \(answer.status): \(String(decoding: answer.body, as: UTF8.self))")
        }
        return object
    }

    static func json(_ object: JSONObject) -> [UInt8] { Array(JSONValue.object(object).serialized().utf8) }

    /// A body is read only under its media type: the part before any parameters, spaces and tabs
    /// around it ignored, letters in either case; nothing longer, shorter or near it.
    @Test func aBodyIsReadOnlyUnderItsMediaType() {
        for value in [
            "application/json", "Application/JSON", "application/json; charset=utf-8", " application/json\t;x=y",
            "application/json;",
        ] {
            #expect(SessionEndpoints.isMediaType(value, "application/json"), "\(value)")
        }
        for value in [
            nil, "", ";", "application/jsonx", "application/json5", "application/jso", "application/json+x",
            "text/plain", "application\u{0F}json", "applicatio\u{212A}n/json", "application/ json", "xapplication/json",
        ] {
            #expect(!SessionEndpoints.isMediaType(value, "application/json"), "\(String(describing: value))")
        }
        let form: StaticString = "application/x-www-form-urlencoded"
        #expect(SessionEndpoints.isMediaType("application/x-www-form-urlencoded; charset=UTF-8", form))
        #expect(SessionEndpoints.isMediaType("Application/X-WWW-Form-URLEncoded", form))
        #expect(!SessionEndpoints.isMediaType("application/x-www-form-urlencodedx", form), "not by its prefix")
    }

    /// A body that is not a JSON object is refused with what is wrong with it.
    @Test func aBodyThatIsNoObjectIsRefusedWithItsReason() async throws {
        let fixture = try await self.fixture()
        for (body, message) in [
            (#"{"refreshToken":"a","refreshToken":"b"}"#, #"duplicate member name \"refreshToken\" (RFC 7493 §2.3)"#),
            ("", "unexpected end of document at offset 0"), ("[1]", "the body is a JSON array, not an object"),
            (#"{"a":1} x"#, "data after the end of the JSON value"),
        ] {
            let answer = await fixture.endpoints.refresh(
                body: Array(body.utf8), contentType: "application/json", clientIP: "192.0.2.1", dpop: [])
            let text = String(decoding: answer.body, as: UTF8.self)
            #expect(answer.status.code == 400 && text.contains("invalid_request") && text.contains(message), "\(text)")
        }
        await fixture.close()
    }

    /// RFC 6750 §3.1: an Authorization header that is not one b64token (two credentials, two
    /// headers joined, stray spaces) is a malformed request, 400 invalid_request; a well-formed
    /// token that does not verify stays 401 invalid_token.
    @Test func anAuthorizationHeaderHoldsOneToken() async throws {
        let fixture = try await self.fixture()
        for (header, status, code) in [
            ("Bearer a.b.c, Bearer d.e.f", 400, "invalid_request"), ("Bearer  a.b.c", 400, "invalid_request"),
            ("Bearer a.b.c d", 400, "invalid_request"), ("DPoP a.b.c, DPoP d", 400, "invalid_request"),
            ("Bearer a.b.c=", 401, "invalid_token"), ("Bearer eyJ+/_-~.x==", 401, "invalid_token"),
        ] {
            let answer = await fixture.endpoints.sessions(authorization: header, clientIP: "192.0.2.7")
            let text = String(decoding: answer.body, as: UTF8.self)
            #expect(answer.status.code == status && text.contains(code), "\(header): \(text)")
            #expect(answer.headers[values: .wwwAuthenticate].contains { $0.contains(#"error="\#(code)""#) })
        }
        await fixture.close()
    }

    /// RFC 6749, 3.1: a parameter given twice is refused, so no two readers of the form (a proxy
    /// that checks the first, a server that takes the last) can disagree on the token.
    @Test func aFormThatGivesItsTokenTwiceIsRefused() async throws {
        let fixture = try await self.fixture()
        do {
            let clients = ["c1": SecretBytes(Array("s3cret-s3cret".utf8))]
            let endpoints = SessionEndpoints(
                authority: fixture.endpoints.authority,
                validator: AppleIdentityTokenValidator(clientIDs: [Self.client]),
                appleKeys: try JWKSet(keys: [try apple.identitySigner.publicJWK()]), appleClients: [:],
                introspectionClients: clients)
            let basic = "Basic " + Data("c1:s3cret-s3cret".utf8).base64EncodedString()
            let form = "application/x-www-form-urlencoded"
            for route in [
                endpoints.revoke(body:contentType:authorization:),
                endpoints.introspect(body:contentType:authorization:),
            ] {
                // The second `token` is found by its bytes (a combining mark after `=` joins it
                // into one Character), and an empty one counts.
                for body in ["token=a&token=b", "token=a&token=\u{301}b", "token=a&token=", "token&token=a"] {
                    let twice = await route(Array(body.utf8), form, basic)
                    #expect(twice.status.code == 400, "\(body)")
                    #expect(String(decoding: twice.body, as: UTF8.self).contains("token more than once"), "\(body)")
                }
                let none = await route(Array("tokens=a&token&x=token%3Da".utf8), form, basic)
                #expect(none.status.code == 400 && String(decoding: none.body, as: UTF8.self).contains("no token"))
                let once = await route(Array("token=a&token_type_hint=refresh_token".utf8), form, basic)
                #expect(once.status.code == 200)
            }
            // RFC 6749, 2.3.1: the ID and secret are form-encoded inside Basic.
            let special = SessionEndpoints(
                authority: fixture.endpoints.authority,
                validator: AppleIdentityTokenValidator(clientIDs: [Self.client]),
                appleKeys: try JWKSet(keys: [try apple.identitySigner.publicJWK()]), appleClients: [:],
                introspectionClients: ["c 1": SecretBytes(Array("p+q%r:s é".utf8))])
            for (pair, status) in [
                ("c+1:p%2Bq%25r%3As+%C3%A9", 200), ("c%201:p%2bq%25r%3as%20%c3%a9", 200), ("c 1:p+q%r:s é", 401),
                ("c+1:p%2Bq%25r%3As", 401),
            ] {
                let answer = await special.introspect(
                    body: Array("token=a".utf8), contentType: form,
                    authorization: "Basic " + Data(pair.utf8).base64EncodedString())
                #expect(answer.status.code == status, "\(pair)")
            }
        }
        await fixture.close()
    }

    @Test func aSignInRecordsTheUsersAuthorization() async throws {
        let fixture = try await fixture()
        try await closing({ await fixture.close() }) {
            _ = try await signIn(fixture.endpoints, "001234.a.0042")
            let status = try await fixture.states.status(clientID: Self.client, subject: "001234.a.0042")
            #expect(status.state == .authorized && status.cause == .signIn)
        }
    }

    /// Apple's revocation arrives after the user signed in again (the notification was late):
    /// the later sign-in leaves the user authorized, and its session stays, but the sessions
    /// opened before the revocation end, as they would have had it come on time.
    @Test func aLateRevocationEndsTheSessionsFromBeforeIt() async throws {
        let fixture = try await fixture()
        try await closing({ await fixture.close() }) {
            let rules = try #require(fixture.endpoints.rules)
            let subject = "001234.late.0042"
            let before = try await signIn(fixture.endpoints, subject)
            let revokedAt = Int64(Date().timeIntervalSince1970 * 1000) + 500
            try await Task.sleep(for: .milliseconds(2200))
            let after = try await signIn(
                fixture.endpoints, subject,
                token: try identityToken(subject, issuedAt: Int64(Date().timeIntervalSince1970)))
            let late = try CredentialEvent(
                kind: .consentRevoked, clientID: Self.client, subject: subject, timeMilliseconds: revokedAt,
                id: "late-consent-revoked")
            let change = try #require(try await fixture.states.apply([late]).first)
            #expect(change.new.state == .authorized, "the later sign-in decides the state")
            #expect(try await rules.endSessions(after: change) == 1)
            func refresh(_ issued: JSONObject) async -> HTTPResponse.Status {
                await fixture.endpoints.refresh(
                    body: Self.json(["refreshToken": issued["refreshToken"] ?? .null]),
                    contentType: "application/json", clientIP: "x"
                ).status
            }
            #expect(await refresh(before) == .unauthorized)
            #expect(await refresh(after) == .ok)
        }
    }

    /// A user with more sessions than the device list holds (an app that signs in at every
    /// launch), asking from their oldest device: the device routes answer that device, which
    /// the newest 1,000 no longer include, and it can end one of its sessions.
    @Test func theOldestOfManySessionsStillReachesTheDeviceRoutes() async throws {
        let fixture = try await fixture()
        try await closing({ await fixture.close() }) {
            let issued = try await signIn(fixture.endpoints, "001234.many.0042")
            guard case .string(let token) = issued["accessToken"] else { throw CLIRunnerError("no access token") }
            let claims = try await fixture.endpoints.authority.verifier().verify(token)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            var newest: SessionID?
            for index in 0..<1_000 {
                let id = try #require(SessionID(bytes: (0..<16).map { _ in UInt8.random(in: 0...255) }))
                try await fixture.sessions.insertSession(
                    SessionRow(
                        id: id, user: claims.userID, generation: 1, rotatedAt: now, createdAt: now + 1 + Int64(index),
                        lastUsedAt: now, expiresAt: now + 86_400_000, revokedAt: nil, device: "iPad"))
                newest = id
            }
            let list = await fixture.endpoints.sessions(authorization: "Bearer " + token, clientIP: "192.0.2.7")
            #expect(list.status == .ok, "\(String(decoding: list.body, as: UTF8.self))")
            let other = try #require(newest)
            let ended = await fixture.endpoints.deleteSession(
                other.description, authorization: "Bearer " + token, clientIP: "192.0.2.7")
            #expect(ended.status == .ok, "\(String(decoding: ended.body, as: UTF8.self))")
            #expect(try await fixture.sessions.session(other)?.revokedAt != nil)
            let own = await fixture.endpoints.deleteSession(
                claims.session.description, authorization: "Bearer " + token, clientIP: "192.0.2.7")
            #expect(own.status == .ok, "\(String(decoding: own.body, as: UTF8.self))")
        }
    }

    /// Apple's revocation lands while the sign-in opens its session, after the sign-in's check
    /// of the credential state and before the session exists, so the notification's own step
    /// found no session to end: the sign-in checks again once the session exists, refuses, and
    /// the session is not left live.
    @Test func aRevocationWhileTheSessionOpensOpensNone() async throws {
        let opened = Mutex<SessionID?>(nil)
        let fixture = try await fixture { event, states in
            guard event.kind == .signIn, let session = event.session else { return }
            opened.withLock { $0 = session }
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            _ = try? await states.apply([
                try! CredentialEvent(
                    kind: .consentRevoked, clientID: Self.client, subject: "001234.late.0042", timeMilliseconds: now,
                    id: "revoked-while-opening")
            ])
        }
        try await closing({ await fixture.close() }) {
            let body = JSONValue.object([
                "identityToken": .string(try identityToken("001234.late.0042")),
                "authorizationCode": .string(apple.issueCode(for: "001234.late.0042")),
            ])
            let answer = await fixture.endpoints.signIn(
                body: Array(body.serialized().utf8), contentType: "application/json", clientIP: "192.0.2.1")
            let text = String(decoding: answer.body, as: UTF8.self)
            #expect(answer.status == .unauthorized && text.contains("credential_revoked"), "\(text)")
            let session = try #require(opened.withLock { $0 })
            let row = try #require(try await fixture.sessions.session(session))
            #expect(row.revokedAt != nil, "the session opened meanwhile is revoked")
        }
    }

    /// An app transfer: the first sign-in with the new subject and `transfer_sub` keeps the user
    /// ID (the app's data stays theirs); the transfer ends the sessions opened before it; later
    /// sign-ins of the new subject find the same user.
    @Test func aTransferredUserKeepsTheirUserID() async throws {
        let fixture = try await fixture()
        try await closing({ await fixture.close() }) {
            let before = try await signIn(fixture.endpoints, "001234.old.0042")
            let user = try #require(before["userId"]?.stringValue)
            let moved = try await signIn(
                fixture.endpoints, "001234.new.0042",
                token: try identityToken("001234.new.0042", transferSubject: "001234.old.0042"))
            #expect(moved["userId"]?.stringValue == user)
            let oldRefresh = await fixture.endpoints.refresh(
                body: Self.json(["refreshToken": before["refreshToken"] ?? .null]), contentType: "application/json",
                clientIP: "x")
            #expect(oldRefresh.status == .unauthorized, "the transfer ended the session from before it")
            let newRefresh = await fixture.endpoints.refresh(
                body: Self.json(["refreshToken": moved["refreshToken"] ?? .null]), contentType: "application/json",
                clientIP: "x")
            #expect(newRefresh.status == .ok)
            #expect(try await signIn(fixture.endpoints, "001234.new.0042")["userId"]?.stringValue == user)
            let status = try await fixture.states.status(clientID: Self.client, subject: "001234.old.0042")
            #expect(status.state == .transferred)
        }
    }

    /// A `transfer_sub` that no credential record could hold (empty, over 255 bytes, not a
    /// string) is the identity token's fault, refused before the code is spent, not reported as
    /// the store's (it was 503 `store_unavailable` once the code was spent).
    @Test func aTransferSubjectOutOfRangeIsAClaimRefusal() async throws {
        let fixture = try await fixture()
        try await closing({ await fixture.close() }) {
            let long = String(repeating: "x", count: 256)
            for value in [JSONValue.string(""), .string(long), .int(42)] {
                let now = Int64(Date().timeIntervalSince1970) - 1
                let token = try apple.identitySigner.sign(claims: [
                    "iss": "https://appleid.apple.com", "aud": .string(Self.client), "sub": "001234.t.0042",
                    "iat": .int(now), "exp": .int(now + 600), "transfer_sub": value,
                ])
                let body = JSONValue.object([
                    "identityToken": .string(token),
                    "authorizationCode": .string(apple.issueCode(for: "001234.t.0042")),
                ])
                let answer = await fixture.endpoints.signIn(
                    body: Array(body.serialized().utf8), contentType: "application/json", clientIP: "192.0.2.1")
                let text = String(decoding: answer.body, as: UTF8.self)
                #expect(
                    answer.status == .unauthorized && text.contains("claims_rejected") && text.contains("transfer_sub"),
                    "\(value): \(text)")
            }
            let status = try await fixture.states.status(clientID: Self.client, subject: "001234.t.0042")
            #expect(status.state == .notFound, "no sign-in recorded")
        }
    }

    /// A new subject that already has a user keeps it: a transfer never merges two users.
    @Test func aTransferToASubjectWithAUserMergesNothing() async throws {
        let fixture = try await fixture()
        try await closing({ await fixture.close() }) {
            let old = try #require(try await signIn(fixture.endpoints, "001234.was.0042")["userId"]?.stringValue)
            let new = try #require(try await signIn(fixture.endpoints, "001234.now.0042")["userId"]?.stringValue)
            let moved = try await signIn(
                fixture.endpoints, "001234.now.0042",
                token: try identityToken("001234.now.0042", transferSubject: "001234.was.0042"))
            #expect(moved["userId"]?.stringValue == new && new != old)
        }
    }

    /// The authorization code must belong to the identity token's user, compared byte for byte:
    /// a code Apple issued for another subject, or for another spelling of the same one, opens
    /// no session and records no sign-in.
    @Test func aCodeOfAnotherUserOpensNoSession() async throws {
        let fixture = try await fixture()
        try await closing({ await fixture.close() }) {
            let subject = "001234.caf\u{E9}.0042"
            for codeSubject in ["001234.other.0042", "001234.cafe\u{301}.0042"] {
                let body = JSONValue.object([
                    "identityToken": .string(try identityToken(subject)),
                    "authorizationCode": .string(apple.issueCode(for: codeSubject)),
                ])
                let answer = await fixture.endpoints.signIn(
                    body: Array(body.serialized().utf8), contentType: "application/json", clientIP: "192.0.2.1")
                let text = String(decoding: answer.body, as: UTF8.self)
                #expect(answer.status == .unauthorized && text.contains("another user"), "\(codeSubject): \(text)")
            }
            let status = try await fixture.states.status(clientID: Self.client, subject: subject)
            #expect(status.state == .notFound)
            _ = try await signIn(fixture.endpoints, subject)
        }
    }

    /// A refresh token is authenticated before any store read: with the store closed, a forged
    /// token is still 401 (not 503), and logout of one is 200 `revoked: false`.
    @Test func aForgedRefreshTokenIsRefusedWithoutTheStore() async throws {
        let fixture = try await fixture()
        let issued = try await signIn(fixture.endpoints, "001234.b.0042")
        let genuine = try #require(issued["refreshToken"]?.stringValue)
        await fixture.close()
        let forged = "skr1." + String(repeating: "A", count: 54)
        for token in [forged, "not-a-token", String(genuine.dropLast()) + (genuine.hasSuffix("A") ? "B" : "A")] {
            let refreshed = await fixture.endpoints.refresh(
                body: Self.json(["refreshToken": .string(token)]), contentType: "application/json", clientIP: "x")
            #expect(refreshed.status == .unauthorized, "\(token)")
            #expect(String(decoding: refreshed.body, as: UTF8.self).contains("invalid_grant"))
            let loggedOut = await fixture.endpoints.logout(
                body: Self.json(["refreshToken": .string(token)]), contentType: "application/json", clientIP: "x")
            #expect(loggedOut.status == .ok && String(decoding: loggedOut.body, as: UTF8.self) == #"{"revoked":false}"#)
        }
        // The genuine one needs the store: unavailable, not refused.
        let genuineAnswer = await fixture.endpoints.refresh(
            body: Self.json(["refreshToken": .string(genuine)]), contentType: "application/json", clientIP: "x")
        #expect(genuineAnswer.status == .serviceUnavailable)
    }

    /// Logout of a genuine token revokes its session once: the answer says so, a second logout
    /// finds nothing to revoke, and the token no longer refreshes.
    @Test func aLogoutRevokesItsSessionOnce() async throws {
        let fixture = try await fixture()
        try await closing({ await fixture.close() }) {
            let issued = try await signIn(fixture.endpoints, "001234.logout.0042")
            let token = try #require(issued["refreshToken"]?.stringValue)
            let body = Self.json(["refreshToken": .string(token)])
            for expected in [#"{"revoked":true}"#, #"{"revoked":false}"#] {
                let answer = await fixture.endpoints.logout(body: body, contentType: "application/json", clientIP: "x")
                #expect(answer.status == .ok && String(decoding: answer.body, as: UTF8.self) == expected)
            }
            let refreshed = await fixture.endpoints.refresh(body: body, contentType: "application/json", clientIP: "x")
            #expect(refreshed.status == .unauthorized)
            #expect(String(decoding: refreshed.body, as: UTF8.self).contains("invalid_grant"))
        }
    }

    /// Email events end no session; a revocation ends every one; a repeat of it ends what a
    /// later failure left (SessionStateRules).
    @Test func onlyARevocationOrTransferEndsSessions() async throws {
        let fixture = try await fixture()
        try await closing({ await fixture.close() }) {
            let rules = try #require(fixture.endpoints.rules)
            let issued = try await signIn(fixture.endpoints, "001234.c.0042")
            let user = try #require(UUID(uuidString: issued["userId"]?.stringValue ?? ""))
            let now = Int64(Date().timeIntervalSince1970) * 1000
            func event(_ kind: CredentialEvent.Kind, _ offset: Int64, linked: String? = nil) throws -> CredentialEvent {
                try CredentialEvent(
                    kind: kind, clientID: Self.client, subject: "001234.c.0042", timeMilliseconds: now + offset,
                    id: "\(kind.rawValue)-\(offset)", linkedSubject: linked)
            }
            for kind in [CredentialEvent.Kind.emailDisabled, .emailEnabled, .refreshSucceeded] {
                let change = try #require(try await fixture.states.apply([try event(kind, 10)]).first)
                #expect(try await rules.endSessions(after: change) == 0, "\(kind)")
            }
            #expect(try await fixture.endpoints.authority.sessions(user: user).allSatisfy { $0.revokedAt == nil })
            let revoked = try #require(try await fixture.states.apply([try event(.consentRevoked, 20)]).first)
            #expect(try await rules.endSessions(after: revoked) == 1)
            // An email event for a revoked user ends nothing more; the revocation again ends none left.
            let email = try #require(try await fixture.states.apply([try event(.emailDisabled, 30)]).first)
            #expect(!SessionStateRules.endsSessions(email))
            #expect(try await rules.endSessions(after: revoked) == 0)
        }
    }
}
