import Crypto
import Foundation
import ShadowCore
import ShadowJOSE
@testable import ShadowSessions
import ShadowSQLite
import ShadowTestSupport
import ShadowVault
import Synchronization
import Testing

/// First-party sessions on SQLite: sign-in, rotation with one compare-and-set, the grace
/// interval, reuse detection, lifetimes, key rotation, revocation, the re-check, rate limits.
@Suite struct SessionTests {
    let directory: TemporaryDirectory
    let clock: ManualClock
    let store: DatabaseSessionStore
    let configuration: SessionConfiguration

    init() async throws {
        directory = try TemporaryDirectory()
        clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        store = try await SQLiteSessionStore.open(
            path: directory.path + "/state.sqlite", unlock: .key(SecretBytes((0..<32).map { UInt8($0) })))
        configuration = SessionConfiguration(
            issuer: "https://api.example.com", audience: "https://api.example.com/v1", clientID: "com.example.app")
    }

    func authority(_ configure: (inout SessionConfiguration) -> Void = { _ in }) async throws -> SessionAuthority {
        var configuration = self.configuration
        configure(&configuration)
        return try await SessionAuthority(store: store, configuration: configuration, clock: clock.clock)
    }

    func signIn(_ authority: SessionAuthority, subject: String = "001234.abc.0042") async throws -> IssuedTokens {
        try await authority.signIn(
            appleSubject: subject, appleClientID: "com.example.app", appleRefreshToken: SecretBytes(utf8: "apple-rt"),
            device: "iPhone")
    }

    /// A token made from Docs/sessions.md alone (HKDF and HMAC in Python's standard library).
    @Test func refreshTokensFollowTheDocumentedFormat() async throws {
        try await closing({ await store.close() }) {
            let keys = try SessionKeys(secret: [UInt8](repeating: 0x33, count: 32))
            let text = "skr1.AAECAwQFBgcICQoLDA0ODwAAAAAAAAABU6AV-kf_SZJZVNfe4xZ3jw"
            let token = try RefreshToken(parsing: text, keys: keys)
            #expect(token.family.bytes == Array(0..<16) && token.generation == 1)
            #expect(token.encoded(keys: keys) == text)
            #expect(throws: SessionError(.invalidGrant, "")) {
                try RefreshToken(parsing: text, keys: try SessionKeys(secret: [UInt8](repeating: 0x34, count: 32)))
            }
        }
    }

    @Test func signInIssuesRFC9068TokensAndMapsTheSameUser() async throws {
        try await closing({ await store.close() }) {
            let authority = try await authority()
            let first = try await signIn(authority)
            #expect(first.expiresIn == 3600)
            #expect(first.refreshToken.hasPrefix("skr1."))
            let claims = try await authority.verifier().verify(first.accessToken)
            #expect(claims.userID == first.userID && claims.session == first.session)
            #expect(claims.clientID == "com.example.app")
            let header = try CompactJWS(first.accessToken).header
            #expect(header.type == "at+jwt" && header.algorithm == "ES256")
            let second = try await signIn(authority)
            #expect(second.userID == first.userID && second.session != first.session, "a new device family")
            #expect(try await authority.sessions(user: first.userID).count == 2)
            // The store holds no Apple user ID in clear.
            await store.close()
            let bytes = try Data(contentsOf: URL(fileURLWithPath: directory.path + "/state.sqlite"))
            #expect(bytes.range(of: Data("001234.abc.0042".utf8)) == nil)
        }
    }

    @Test func concurrentRefreshesWithOneTokenNeverMakeTwoSuccessors() async throws {
        try await closing({ await store.close() }) {
            let authority = try await authority()
            let issued = try await signIn(authority)
            let results = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<16 { group.addTask { try await authority.refresh(issued.refreshToken).refreshToken } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(results).count == 1, "every racer got the one successor")
            #expect(try await store.session(issued.session)?.generation == 2)
            // After the grace interval, the old token is reuse: the family is revoked...
            clock.advance(by: 11)
            await #expect(throws: SessionError(.reuseDetected, "")) { try await authority.refresh(issued.refreshToken) }
            // ... and its live token stops working too.
            await #expect(throws: SessionError(.invalidGrant, "")) { try await authority.refresh(results[0]) }
        }
    }

    @Test func olderGenerationsAreReuseEvenWithinTheGrace() async throws {
        try await closing({ await store.close() }) {
            let authority = try await authority()
            let t1 = try await signIn(authority).refreshToken
            let t2 = try await authority.refresh(t1).refreshToken
            let t3 = try await authority.refresh(t2).refreshToken
            #expect(try await authority.refresh(t2).refreshToken == t3, "the one before, within the grace")
            await #expect(throws: SessionError(.reuseDetected, "")) { try await authority.refresh(t1) }
            await #expect(throws: SessionError(.invalidGrant, "")) { try await authority.refresh(t3) }
        }
    }

    /// A logout that lands between the grace path's read and its write: the retry gets no
    /// tokens, and the session stays revoked.
    @Test func aLogoutDuringAGraceRetryHandsOutNothing() async throws {
        try await closing({ await store.close() }) {
            let base = store
            let target = Mutex<SessionID?>(nil)
            let interposed = InterposedSessionStore(base, before: ["touch"]) { _ in
                if let id = target.withLock({ $0 }) { _ = try await base.revoke(id, now: 1_800_000_000_000) }
            }
            let authority = try await SessionAuthority(
                store: interposed, configuration: configuration, clock: clock.clock)
            let issued = try await signIn(authority)
            let second = try await authority.refresh(issued.refreshToken)
            target.withLock { $0 = issued.session }
            // The first token again, within the grace: the path that hands out the successor.
            await #expect(throws: SessionError(.invalidGrant, "")) { try await authority.refresh(issued.refreshToken) }
            #expect(try await base.session(issued.session)?.revokedAt != nil)
            await #expect(throws: SessionError(.invalidGrant, "")) { try await authority.refresh(second.refreshToken) }
        }
    }

    @Test func forgedAndMalformedTokensAreInvalidGrants() async throws {
        try await closing({ await store.close() }) {
            let authority = try await authority()
            let token = try await signIn(authority).refreshToken
            var bytes = Array(token.utf8)
            bytes[10] = bytes[10] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            for bad in [String(decoding: bytes, as: UTF8.self), "", "skr1.", token + "A", String(token.dropLast())] {
                await #expect(throws: SessionError(.invalidGrant, "")) { try await authority.refresh(bad) }
            }
            #expect(try await authority.refresh(token).refreshToken != token)
        }
    }

    @Test func lifetimesHold() async throws {
        try await closing({ await store.close() }) {
            let authority = try await authority()
            var token = try await signIn(authority).refreshToken
            // Rotating every 13 days keeps it from going idle, but not past 30 days.
            for _ in 0..<2 {
                clock.advance(by: 13 * 86_400)
                token = try await authority.refresh(token).refreshToken
            }
            clock.advance(by: 5 * 86_400)
            await #expect(throws: SessionError(.invalidGrant, "")) { try await authority.refresh(token) }
            // Idle: fifteen days unused.
            let idle = try await signIn(authority, subject: "other").refreshToken
            clock.advance(by: 15 * 86_400)
            await #expect(throws: SessionError(.invalidGrant, "")) { try await authority.refresh(idle) }
            #expect(try await authority.sweep() == 2)
        }
    }

    /// A session is live by the rules a refresh applies, idle lifetime included: with a
    /// 10-minute idle lifetime and hour-long access tokens, a session idle for 11 minutes is
    /// dead to the per-request check and the device list while its access token still verifies.
    @Test func liveMeansWhatARefreshAccepts() async throws {
        try await closing({ await store.close() }) {
            let authority = try await authority { $0.idleLifetime = 600 }
            let issued = try await signIn(authority)
            let claims = try await authority.verifier().verify(issued.accessToken)
            #expect(try await authority.isLive(claims))
            clock.advance(by: 660)
            #expect(try await authority.verifier().verify(issued.accessToken).session == claims.session)
            #expect(try await !authority.isLive(claims))
            #expect(try await authority.sessions(user: claims.userID).filter(authority.isLive).isEmpty)
            await #expect(throws: SessionError(.invalidGrant, "")) { try await authority.refresh(issued.refreshToken) }
        }
    }

    /// Docs/sessions.md: control characters (C0, DEL, C1) dropped, then cut to 64 bytes at a
    /// character boundary, keeping a prefix (a character that does not fit ends the name).
    @Test func deviceNamesAreCleanedAndCutAsDocumented() async throws {
        // The suite opens a store for every test; this one only closes it.
        await closing({ await store.close() }) {
            let sixtyTwo = String(repeating: "a", count: 62)
            for (given, stored) in [
                ("Ada's\u{0}\u{1B}[31m iPhone\u{7F}\u{85}\u{9B}", "Ada's[31m iPhone"), ("", "unnamed device"),
                ("\u{1}\u{9F}", "unnamed device"), (sixtyTwo + "\u{1F600}b", sixtyTwo),
                (sixtyTwo + "éb", sixtyTwo + "é"),
                (sixtyTwo + "e\u{301}\u{301}b", sixtyTwo),
                (String(repeating: "ü", count: 40), String(repeating: "ü", count: 32)),
            ] {
                #expect(SessionAuthority.deviceName(given) == stored, "\(given.debugDescription)")
            }
        }
    }

    @Test func keyRotationPublishesFirstAndKeepsOldTokensValid() async throws {
        try await closing({ await store.close() }) {
            let authority = try await authority()
            let before = try await signIn(authority)
            let oldKey = try CompactJWS(before.accessToken).header.keyID
            let newKey = try await authority.rotateKeys()
            #expect(try await authority.jwks().document.contains(newKey), "published at once")
            // It does not sign until the publish lead has passed.
            #expect(try CompactJWS(try await authority.refresh(before.refreshToken).accessToken).header.keyID == oldKey)
            clock.advance(by: 601)
            let after = try await signIn(authority)
            #expect(try CompactJWS(after.accessToken).header.keyID == newKey)
            // A token of the old key verifies until its exp.
            #expect(try await authority.verifier().verify(before.accessToken).userID == before.userID)
            clock.advance(by: 2400)
            #expect(try await authority.verifier().verify(before.accessToken).userID == before.userID)
            #expect(try await authority.maintainKeys() == false)
            #expect(try await authority.jwks().document.contains(oldKey!), "kept while its tokens live")
            clock.advance(by: 3600)
            _ = try await authority.maintainKeys()
            #expect(try await !authority.jwks().document.contains(oldKey!), "dropped once they expired")
            // The schedule rotates after the key lifetime.
            clock.advance(by: 31 * 86_400)
            #expect(try await authority.maintainKeys() == true)
        }
    }

    @Test func rs256OnRequest() async throws {
        try await closing({ await store.close() }) {
            let authority = try await authority { $0.algorithm = .rs256 }
            let issued = try await signIn(authority)
            #expect(try CompactJWS(issued.accessToken).header.algorithm == "RS256")
            #expect(try await authority.verifier().verify(issued.accessToken).session == issued.session)
        }
    }

    @Test func revocationsAndTheRecheck() async throws {
        try await closing({ await store.close() }) {
            let authority = try await authority()
            let a = try await signIn(authority)
            let b = try await signIn(authority)
            #expect(try await authority.revoke(session: a.session, user: UUID()) == false, "not another user's")
            #expect(try await authority.revoke(session: a.session, user: a.userID))
            await #expect(throws: SessionError(.invalidGrant, "")) { try await authority.refresh(a.refreshToken) }
            #expect(try await authority.revoke(refreshToken: b.refreshToken))
            #expect(try await authority.revoke(refreshToken: "nonsense") == false)
            // The monthly re-check: Apple refuses the stored token, so every session ends.
            let c = try await signIn(authority)
            clock.advance(by: 31 * 86_400)
            let result = try await authority.recheck { token in
                token.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } == "apple-rt" ? .invalid : .valid
            }
            #expect(result.checked == 1 && result.revoked == 1)
            await #expect(throws: SessionError(.invalidGrant, "")) { try await authority.refresh(c.refreshToken) }
            // Apple's notifications find the user by Apple's sub.
            #expect(
                try await authority.user(appleSubject: "001234.abc.0042", appleClientID: "com.example.app") == c.userID)
        }
    }

    @Test func rateLimitsFollowGCRA() async throws {
        try await closing({ await store.close() }) {
            let authority = try await authority()
            let limit = try RateLimit(requests: 5, per: 60)
            for _ in 0..<5 { #expect(try await authority.admit("ip:192.0.2.1", limit: limit) == nil) }
            let wait = try #require(try await authority.admit("ip:192.0.2.1", limit: limit))
            #expect((1...12).contains(wait))
            #expect(try await authority.admit("ip:192.0.2.2", limit: limit) == nil, "another key")
            clock.advance(by: 12)
            #expect(try await authority.admit("ip:192.0.2.1", limit: limit) == nil)
            #expect(try await authority.admit("ip:192.0.2.1", limit: limit) != nil)
        }
    }

    @Test func accessTokensAreCheckedStrictly() async throws {
        try await closing({ await store.close() }) {
            let authority = try await authority()
            let issued = try await signIn(authority)
            let verifier = try await authority.verifier()
            let otherStore = try await SQLiteSessionStore.open(
                path: directory.path + "/other.sqlite", unlock: .key(SecretBytes((0..<32).map { UInt8($0) })))
            let foreign = try await closing({ await otherStore.close() }) {
                let other = try await SessionAuthority(
                    store: otherStore, configuration: configuration, clock: clock.clock)
                return try await signIn(other).accessToken
            }
            for bad in [foreign, "", issued.accessToken + "x", String(issued.accessToken.dropLast(2))] {
                #expect(throws: SessionError(.invalidToken, "")) { try verifier.verify(bad) }
            }
            clock.advance(by: 3700)
            #expect(throws: SessionError(.invalidToken, "")) { try verifier.verify(issued.accessToken) }
        }
    }

    @Test func aTokenVerifiedBeforeIsCheckedAgainstTheClockAndNothingNearItPasses() async throws {
        try await closing({ await store.close() }) {
            let authority = try await authority()
            let issued = try await signIn(authority)
            let verifier = try await authority.verifier()
            let first = try verifier.verify(issued.accessToken)
            #expect(verifier.verified.count == 1, "kept after it verified")
            #expect(try verifier.verify(issued.accessToken) == first, "the kept answer is the same")
            // Tokens that differ from a kept one by a byte, or a prefix of it, are checked in full.
            let signature = issued.accessToken.split(separator: ".")[2]
            let flipped = String(issued.accessToken.dropLast()) + (signature.last == "A" ? "Q" : "A")
            for bad in [flipped, String(issued.accessToken.dropLast(2)), issued.accessToken + "."] {
                #expect(throws: SessionError(.invalidToken, "")) { try verifier.verify(bad) }
            }
            #expect(verifier.verified.count == 1, "a refused token is not kept")
            // Within the leeway it still verifies; past it, it is refused though it was kept.
            clock.advance(by: 3600 + 29)
            #expect(try verifier.verify(issued.accessToken) == first)
            clock.advance(by: 2)
            #expect(throws: SessionError(.invalidToken, "")) { try verifier.verify(issued.accessToken) }
            #expect(verifier.verified.count == 0, "an expired entry is dropped")
        }
    }

    @Test func theVerifiedTokensStayWithinTheirCapacity() async throws {
        await store.close()  // this suite opens one; the cache needs none
        let cache = VerifiedTokens(capacity: 3)
        let claims = SessionClaims(
            userID: UUID(), session: SessionID.random(), tokenID: "t", clientID: "c", issuedAt: Date(),
            expiresAt: Date(), keyThumbprint: nil)
        let digests = (0..<5).map { DigestKey(SHA256.hash(data: [UInt8($0)])) }
        for digest in digests {
            cache.insert(digest, VerifiedToken(session: claims, notBefore: nil, issuedAt: nil, expiresAt: nil))
        }
        #expect(cache.count == 3)
        #expect(cache[digests[4]] != nil, "the newest is kept")
    }

    /// A kept token is current exactly when the policy's time rules would pass its claims: each
    /// bound (exp, nbf, iat) on both sides of its leeway, against ClaimPolicy itself.
    @Test func aKeptTokenIsCurrentExactlyWhenThePolicyWouldPassIt() async throws {
        await store.close()  // this suite opens one; the check needs none
        let policy = ClaimPolicy(leeway: 30)
        let now = 1_800_000_000.0
        let claims = SessionClaims(
            userID: UUID(), session: SessionID.random(), tokenID: "t", clientID: "c", issuedAt: Date(),
            expiresAt: Date(), keyThumbprint: nil)
        let offsets: [Double?] = [nil, -31, -30, -29.5, 0, 29.5, 30, 31]
        var cases = 0
        for exp in offsets {
            for nbf in offsets {
                for iat in offsets {
                    let (expAt, nbfAt, iatAt) = (exp.map { now + $0 }, nbf.map { now + $0 }, iat.map { now + $0 })
                    var members: [JSONObject.Member] = []
                    for (name, value) in [("exp", expAt), ("nbf", nbfAt), ("iat", iatAt)] {
                        if let value {
                            members.append(.init(name: name, value: .number(try #require(JSONNumber(value)))))
                        }
                    }
                    let passes = policy.evaluate(
                        JWTClaims(JSONObject(uniqueMembers: members)), now: Date(timeIntervalSince1970: now)
                    ).isEmpty
                    let kept = VerifiedToken(session: claims, notBefore: nbfAt, issuedAt: iatAt, expiresAt: expAt)
                    #expect(
                        kept.isCurrent(at: now, leeway: 30) == passes,
                        "exp \(String(describing: exp)), nbf \(String(describing: nbf)), iat \(String(describing: iat))"
                    )
                    cases += 1
                }
            }
        }
        #expect(cases == 512)
    }
}
