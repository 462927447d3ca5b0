import Crypto
import CryptoExtras
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import ShadowCore
public import ShadowDPoP
public import ShadowJOSE
import ShadowCrypto
import Synchronization

/// The settings of first-party sessions (Docs/sessions.md).
public struct SessionConfiguration: Sendable {
    /// `iss` of the access tokens: this service's URL.
    public var issuer: String
    /// `aud` of the access tokens: the API they are for.
    public var audience: String
    /// `client_id` of the access tokens: the app.
    public var clientID: String
    /// Access-token lifetime (default 1 hour; 60 s to 1 day).
    public var accessTokenLifetime: TimeInterval = 3600
    /// A session's absolute lifetime, which rotation does not extend (default 30 days).
    public var absoluteLifetime: TimeInterval = 30 * 86_400
    /// A session unused this long ends (default 14 days).
    public var idleLifetime: TimeInterval = 14 * 86_400
    /// How long the generation before the current one still gets the current successor back
    /// (default 10 s; 0 to 300).
    public var grace: TimeInterval = 10
    /// ES256 (default) or RS256.
    public var algorithm: JWSAlgorithm = .es256
    /// How long a signing key signs before the scheduled rotation replaces it (default 30 days).
    public var keyLifetime: TimeInterval = 30 * 86_400
    /// How long a new key is published before it signs (default 10 minutes): longer than the
    /// JWKS `max-age`, so every verifier has it before its first token.
    public var publishLead: TimeInterval = 600
    /// The JWKS document's `Cache-Control: max-age` (default 300 s).
    public var jwksMaxAge: Int = 300
    /// Refuse sessions without DPoP: a sign-in without a proof, the refresh of a session not
    /// bound to a key (`serve --require-dpop`; Docs/dpop.md, "Sessions").
    public var requireDPoP = false

    public init(issuer: String, audience: String, clientID: String) {
        self.issuer = issuer
        self.audience = audience
        self.clientID = clientID
    }

    /// Checks every setting; ``SessionAuthority`` runs it, and the CLI before it opens anything.
    package func validate() throws {
        func check(_ ok: Bool, _ reason: String) throws {
            if !ok { throw SessionError(.invalidParameter, reason) }
        }
        try check(!issuer.isEmpty && !audience.isEmpty && !clientID.isEmpty, "issuer, audience and client ID are set")
        try check((60...86_400).contains(accessTokenLifetime), "the access-token lifetime is 60 s to 1 day")
        try check((3600...(366 * 86_400)).contains(absoluteLifetime), "the absolute lifetime is 1 hour to 366 days")
        try check((600...absoluteLifetime).contains(idleLifetime), "the idle lifetime is 10 minutes to the absolute")
        try check((0...300).contains(grace), "the grace interval is 0 to 300 s")
        try check([.es256, .rs256].contains(algorithm), "access tokens are signed with ES256 or RS256")
        try check((3600...(366 * 86_400)).contains(keyLifetime), "a signing key's life is 1 hour to 366 days")
        try check((0...86_400).contains(jwksMaxAge), "the JWKS max-age is 0 to 86400 s")
        try check(
            (0...86_400).contains(publishLead) && Double(jwksMaxAge) <= publishLead,
            "a new key is published at least the JWKS max-age (and at most a day) before it signs")
    }
}

/// What a sign-in or a refresh hands the app.
public struct IssuedTokens: Sendable, CustomStringConvertible {
    public let userID: UUID
    public let session: SessionID
    public let accessToken: String
    public let refreshToken: String
    /// Seconds the access token lives.
    public let expiresIn: Int
    /// The thumbprint of the DPoP key the tokens are bound to, or nil for bearer tokens.
    public let keyThumbprint: String?

    /// `DPoP` for tokens bound to a key, `Bearer` otherwise (RFC 9449 §5).
    public var tokenType: String { keyThumbprint == nil ? "Bearer" : "DPoP" }

    public var description: String { "IssuedTokens(user \(userID), session \(session), redacted)" }
}

/// The claims of a verified access token (RFC 9068), typed.
public struct SessionClaims: Sendable, Hashable {
    public let userID: UUID
    public let session: SessionID
    public let tokenID: String
    public let clientID: String
    public let issuedAt: Date
    public let expiresAt: Date
    /// `cnf.jkt`: the thumbprint of the DPoP key the token is bound to, or nil for a bearer token.
    public let keyThumbprint: String?
}

/// What happened, for the authentication log.
public struct SessionEvent: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        case signIn = "sign-in", refresh, reuseDetected = "reuse-detected", logout, revoke
        case revokeAll = "revoke-all", recheck, recheckFailed = "recheck-failed"
    }
    public let kind: Kind
    public let user: UUID?
    public let session: SessionID?
    public let time: Int64
}

/// First-party sessions after Sign in with Apple: RFC 9068 access tokens from a key ring sealed
/// in the store, and opaque rotating refresh tokens, one row per family, with RFC 9700 reuse
/// detection (Docs/sessions.md).
public final class SessionAuthority: Sendable {
    public let configuration: SessionConfiguration
    let store: any SessionStore
    let keys: SessionKeys
    let clock: WallClock
    let events: (@Sendable (SessionEvent) async -> Void)?
    let ring = Mutex<KeyRing?>(nil)
    /// Where the sweep's pass has got to (``sweep(limit:batches:)``).
    let sweepPosition = Mutex(SweepPosition())

    /// How often the ring is re-read from the store (other instances rotate keys too).
    static let ringRefresh: Int64 = 30_000

    /// Opens the authority over `store`; makes the first signing key when the ring is empty.
    /// `events` receives every sign-in, refresh, reuse, logout, revocation and re-check.
    public init(
        store: any SessionStore, configuration: SessionConfiguration, clock: WallClock = .system,
        events: (@Sendable (SessionEvent) async -> Void)? = nil
    ) async throws {
        try configuration.validate()
        self.configuration = configuration
        self.store = store
        self.clock = clock
        self.events = events
        keys = try SessionKeys(secret: try await store.sessionSecret())
        _ = try await currentRing(force: true)
    }

    var now: Int64 { Int64((clock.now.timeIntervalSince1970 * 1000).rounded(.down)) }

    func milliseconds(_ seconds: TimeInterval) -> Int64 { Int64(seconds * 1000) }

    // MARK: Signing in and refreshing

    /// Maps Apple's `sub` to an internal user (a repeat sign-in finds the same one), keeps Apple's
    /// refresh token sealed, and opens a new session. The identity token and the code exchange
    /// are the caller's (ShadowApple), done before.
    ///
    /// `keyThumbprint` binds the session to a DPoP key (Docs/dpop.md, "Sessions"): the caller
    /// checked the request's proof; from then on every refresh needs a proof by the same key.
    ///
    /// `appleTransferSubject` is the identity token's `transfer_sub` (an app transfer,
    /// Docs/apple.md): the first sign-in of the new subject takes over the user of the subject
    /// before the transfer, so the user keeps their ID (and their data in the app).
    public func signIn(
        appleSubject: String, appleClientID: String, appleRefreshToken: SecretBytes?, device: String,
        keyThumbprint: String? = nil, appleTransferSubject: String? = nil
    ) async throws -> IssuedTokens {
        guard !appleSubject.isEmpty, appleSubject.utf8.count <= 255 else {
            throw SessionError(.invalidParameter, "an Apple subject is 1 to 255 bytes")
        }
        if let old = appleTransferSubject, old.isEmpty || old.utf8.count > 255 {
            throw SessionError(.invalidParameter, "an Apple transfer subject is 1 to 255 bytes")
        }
        if let keyThumbprint {
            guard SessionRow.thumbprintBytes(keyThumbprint) != nil else {
                throw SessionError(.invalidParameter, "a key thumbprint is 32 bytes, base64url")
            }
        } else if configuration.requireDPoP {
            throw SessionError(.invalidProof, "this server binds every session to a DPoP key: send a DPoP proof")
        }
        let device = Self.deviceName(device)
        let now = self.now
        let hash = keys.appleHash(clientID: appleClientID, subject: appleSubject)
        if let old = appleTransferSubject, !old.exactlyEquals(appleSubject) {
            _ = try await store.moveUser(from: keys.appleHash(clientID: appleClientID, subject: old), to: hash)
        }
        let candidate = UUID()
        let sealed = try appleRefreshToken.map { try seal($0.withUnsafeBytes { Array($0) }, user: candidate) }
        var user = try await store.mapUser(
            appleHash: hash, candidate: candidate, sealedAppleRefreshToken: sealed, now: now)
        if user != candidate, let appleRefreshToken {
            // An existing user: store the new Apple refresh token under their ID.
            user = try await store.mapUser(
                appleHash: hash, candidate: user,
                sealedAppleRefreshToken: try seal(appleRefreshToken.withUnsafeBytes { Array($0) }, user: user), now: now
            )
        }
        if try await store.isInactive(user: user) {
            // A new sign-in with Apple is a fresh consent: the user is active again.
            try await store.markChecked(user: user, at: now, inactive: false)
        }
        let row = SessionRow(
            id: SessionID.random(), user: user, generation: 1, rotatedAt: now, createdAt: now, lastUsedAt: now,
            expiresAt: now + milliseconds(configuration.absoluteLifetime), revokedAt: nil, device: device,
            keyThumbprint: keyThumbprint)
        try await store.insertSession(row)
        await events?(SessionEvent(kind: .signIn, user: user, session: row.id, time: now))
        return try await issue(row, generation: 1)
    }

    /// A device name as stored: control characters (U+0000 to U+001F, U+007F to U+009F) dropped,
    /// then the longest run of whole characters from the start that fits in 64 bytes of UTF-8.
    static func deviceName(_ name: String) -> String {
        var printable = String.UnicodeScalarView()
        printable.append(
            contentsOf: name.unicodeScalars.filter { $0.value >= 0x20 && !(0x7F...0x9F).contains($0.value) })
        var result = ""
        var bytes = 0
        for character in String(printable) {
            bytes += character.utf8.count
            if bytes > 64 { break }
            result.append(character)
        }
        return result.isEmpty ? "unnamed device" : result
    }

    /// Rotates a refresh token: the family's current generation gets the next one (one
    /// compare-and-set); the generation before it, within the grace interval, gets the current one
    /// back; any other generation revokes the family.
    ///
    /// `proof` is the request's DPoP proof, checked by the caller (``DPoPVerifier``). A session
    /// bound to a key is refreshed only with a proof by that key: without one, or with another
    /// key, the request is refused before anything else and changes nothing, not even reuse
    /// detection (the holder of a stolen token cannot revoke the session either).
    /// - Throws: ``SessionErrorCode/invalidGrant``; ``SessionErrorCode/reuseDetected`` (the
    ///   family is revoked); ``SessionErrorCode/invalidProof``.
    public func refresh(_ text: String, proof: DPoPProof? = nil) async throws -> IssuedTokens {
        try await refresh(try RefreshToken(parsing: text, keys: keys), proof: proof)
    }

    /// ``refresh(_:proof:)`` of a token this authority has already read and authenticated
    /// (``authenticate(refreshToken:)``). Not public: `RefreshToken(family:generation:)` makes a
    /// token with no MAC, and this would refresh it.
    ///
    /// `read`, when given, is the session's row as the store has just read it
    /// (``admit(_:replay:reading:)``): the first try starts from it instead of reading the row again.
    package func refresh(
        _ token: RefreshToken, proof: DPoPProof? = nil, read: Result<SessionRow?, any Error>? = nil
    ) async throws -> IssuedTokens {
        let now = self.now
        var read = read
        for _ in 0..<3 {
            let found: SessionRow?
            if let first = read {
                (found, read) = (try first.get(), nil)
            } else {
                found = try await store.session(token.family)
            }
            guard let row = found else {
                throw SessionError(.invalidGrant, "the session does not exist")
            }
            try checkBinding(row, proof: proof)
            try check(row, now: now)
            if token.generation == row.generation {
                if try await store.rotate(row, now: now) {
                    var rotated = row
                    rotated.generation += 1
                    await events?(SessionEvent(kind: .refresh, user: row.user, session: row.id, time: now))
                    return try await issue(rotated, generation: rotated.generation)
                }
                continue  // another request rotated it first: read the row again
            }
            if token.generation + 1 == row.generation, now - row.rotatedAt <= milliseconds(configuration.grace) {
                // Two tabs, or a retry after a lost answer: the successor already issued, again,
                // only while the session is live (a logout or a revocation since ends it).
                if try await store.touch(row, now: now) { return try await issue(row, generation: row.generation) }
                // Another writer changed the row first. Still live at this generation: a racing
                // retry marked it used, which is this one's write done. Else read and answer again.
                if let again = try await store.session(row.id), again.generation == row.generation,
                    (try? check(again, now: now)) != nil
                {
                    return try await issue(again, generation: again.generation)
                }
                continue
            }
            guard token.generation < row.generation else {
                throw SessionError(.invalidGrant, "the refresh token's generation was never issued")
            }
            _ = try await store.revoke(row.id, now: now)
            await events?(SessionEvent(kind: .reuseDetected, user: row.user, session: row.id, time: now))
            throw SessionError(
                .reuseDetected, "an old refresh token was used again: the session is revoked (RFC 9700, 4.14.2)")
        }
        throw SessionError(.invalidGrant, "the session kept changing; try again")
    }

    /// Reads and authenticates a refresh token (its MAC, in constant time), with no store read.
    /// - Throws: ``SessionErrorCode/invalidGrant`` for a token that is malformed or not ours.
    public func authenticate(refreshToken text: String) throws -> RefreshToken {
        try RefreshToken(parsing: text, keys: keys)
    }

    /// A bound session needs a proof by its key; with DPoP required, an unbound one is refused.
    private func checkBinding(_ row: SessionRow, proof: DPoPProof?) throws {
        if row.keyThumbprint == nil, configuration.requireDPoP {
            throw SessionError(.invalidProof, "this server requires DPoP, and this session is not bound to a key")
        }
        try checkKey(row, proof: proof)
    }

    /// A session bound to a key needs a proof by that key; an unbound one needs none.
    private func checkKey(_ row: SessionRow, proof: DPoPProof?) throws {
        guard let bound = row.keyThumbprint else { return }
        guard let proof else {
            throw SessionError(.invalidProof, "this session is bound to a DPoP key: send a DPoP proof by that key")
        }
        guard ConstantTime.equals(Array(bound.utf8), Array(proof.thumbprint.utf8)) else {
            throw SessionError(.invalidProof, "the DPoP proof is signed by another key than the session's")
        }
    }

    /// Whether `row` is live now, by the rules a refresh applies: not revoked, before its
    /// absolute end, and used within the idle lifetime.
    public func isLive(_ row: SessionRow) -> Bool { (try? check(row, now: now)) != nil }

    /// The session `id` when it is `user`'s and live (one row read, however many sessions the
    /// user has); nil otherwise.
    public func liveSession(_ id: SessionID, of user: UUID) async throws -> SessionRow? {
        guard let row = try await store.session(id), row.user == user, isLive(row) else { return nil }
        return row
    }

    private func check(_ row: SessionRow, now: Int64) throws {
        guard row.revokedAt == nil else { throw SessionError(.invalidGrant, "the session was revoked") }
        guard now < row.expiresAt else { throw SessionError(.invalidGrant, "the session reached its 30-day end") }
        guard now - row.lastUsedAt < milliseconds(configuration.idleLifetime) else {
            throw SessionError(.invalidGrant, "the session was idle too long")
        }
    }

    /// The tokens of `generation` of `row`. No read of the user: the re-check that marks a user
    /// inactive revokes, in the same step, every session opened before it asked Apple (one opened
    /// since came from a new sign-in), and a new sign-in makes the user active.
    private func issue(_ row: SessionRow, generation: UInt64) async throws -> IssuedTokens {
        let now = self.now
        let ring = try await currentRing()
        let lifetime = Int64(configuration.accessTokenLifetime)
        // Never past the session's own end.
        let expiresAt = min(now / 1000 + lifetime, row.expiresAt / 1000)
        var claims: JSONObject = [
            "iss": .string(configuration.issuer), "sub": .string(row.user.uuidString.lowercased()),
            "aud": .string(configuration.audience), "exp": .int(expiresAt), "iat": .int(now / 1000),
            "jti": .string(Base64URL.encode(SecretBytes.random(count: 16).withUnsafeBytes { Array($0) })),
            "client_id": .string(configuration.clientID), "sid": .string(row.id.description),
        ]
        // RFC 9449 §6.1: a bound token confirms its key's thumbprint.
        if let thumbprint = row.keyThumbprint { claims.set("cnf", ["jkt": .string(thumbprint)]) }
        let accessToken = try ring.signer(at: now).sign(claims: claims, header: ["typ": "at+jwt"])
        return IssuedTokens(
            userID: row.user, session: row.id, accessToken: accessToken,
            refreshToken: RefreshToken(family: row.id, generation: generation).encoded(keys: keys),
            expiresIn: Int(expiresAt - now / 1000), keyThumbprint: row.keyThumbprint)
    }

    // MARK: Ending sessions

    /// Revokes the session a refresh token belongs to (logout; RFC 7009 for refresh tokens).
    /// An unknown or malformed token is no error (RFC 7009, 2.2).
    @discardableResult
    public func revoke(refreshToken text: String) async throws -> Bool {
        guard let token = try? RefreshToken(parsing: text, keys: keys) else { return false }
        return try await revoke(token)
    }

    /// ``revoke(refreshToken:)`` of a token this authority has already read and authenticated
    /// (``authenticate(refreshToken:)``). Not public, as the refresh of a `RefreshToken` is not:
    /// a token made with `RefreshToken(family:generation:)` has no MAC.
    /// A logout (`POST /auth/logout`): revokes the token's session, but a session bound to a
    /// DPoP key only with a proof by that key, so the holder of a stolen token cannot sign the
    /// user out (Docs/dpop.md, "Sessions"). False when there is no such session.
    /// - Throws: ``SessionErrorCode/invalidProof`` for a bound session without its key's proof.
    package func logout(_ token: RefreshToken, proof: DPoPProof?) async throws -> Bool {
        guard let row = try await store.session(token.family) else { return false }
        try checkKey(row, proof: proof)
        return try await revoke(token)
    }

    package func revoke(_ token: RefreshToken) async throws -> Bool {
        let row = try await store.session(token.family)
        let revoked = try await store.revoke(token.family, now: now)
        if revoked { await events?(SessionEvent(kind: .logout, user: row?.user, session: token.family, time: now)) }
        return revoked
    }

    /// Revokes one of `user`'s sessions (`DELETE /auth/sessions/{id}`); false when it is not theirs.
    @discardableResult
    public func revoke(session: SessionID, user: UUID? = nil) async throws -> Bool {
        guard let row = try await store.session(session), user == nil || row.user == user else { return false }
        let revoked = try await store.revoke(session, now: now)
        if revoked { await events?(SessionEvent(kind: .revoke, user: row.user, session: session, time: now)) }
        return revoked
    }

    /// Revokes every live session of `user` (Apple's consent-revoked and account-delete, a revoked
    /// credential state, a failed re-check); returns how many. Revoking none logs nothing.
    @discardableResult
    public func revokeAll(user: UUID) async throws -> Int {
        let count = try await store.revokeAll(user: user, now: now)
        if count > 0 { await events?(SessionEvent(kind: .revokeAll, user: user, session: nil, time: now)) }
        return count
    }

    /// Revokes the live sessions of `user` opened before `time` (epoch milliseconds): what a
    /// revocation at `time` ends when a later sign-in left the user authorized. Returns how many;
    /// revoking none logs nothing.
    @discardableResult
    public func revokeAll(user: UUID, openedBefore time: Int64) async throws -> Int {
        let now = self.now
        let count = try await store.revokeAll(user: user, openedBefore: time, now: now)
        if count > 0 { await events?(SessionEvent(kind: .revokeAll, user: user, session: nil, time: now)) }
        return count
    }

    /// The user mapped to an Apple `sub` (for Apple's notifications), if any.
    public func user(appleSubject: String, appleClientID: String) async throws -> UUID? {
        try await store.user(appleHash: keys.appleHash(clientID: appleClientID, subject: appleSubject))?.id
    }

    /// The user's sessions, newest first.
    public func sessions(user: UUID) async throws -> [SessionRow] { try await store.sessions(user: user) }

    /// RFC 7662 introspection of a refresh token: its session, when live.
    public func introspect(refreshToken text: String) async throws -> SessionRow? {
        guard let token = try? RefreshToken(parsing: text, keys: keys),
            let row = try await store.session(token.family), (try? check(row, now: now)) != nil,
            token.generation == row.generation
        else { return nil }
        return row
    }

    /// The DPoP nonces every instance over this store gives and accepts (Docs/dpop.md, "Nonces").
    public func dpopNonces(period: Int64 = 300) throws -> DPoPNonces {
        try DPoPNonces(key: keys.dpopNonce, period: period, clock: clock)
    }

    /// How long, in milliseconds, a row stays past its time before the sweep deletes it: five
    /// minutes, the most a proof's leeway may be, so instances on one store whose clocks differ by
    /// less than that agree on every replay and every limit.
    public static let sweepMargin: Int64 = 300_000

    /// The replay cache the session routes check proofs against: the store, shared by every instance.
    public var replayCache: any DPoPReplayCache { store }

    /// Deletes dead sessions (revoked, past their end, or idle too long), and expired rate-limit
    /// and DPoP replay rows, in batches that each examine the next `limit` rows of every table in
    /// key order (each batch a few short statements), until every table has been examined to its
    /// end or `batches` batches have run; returns how many sessions it deleted. A pass that
    /// `batches` cut short goes on where it stopped at the next call; the one after a finished
    /// pass starts a new one.
    ///
    /// A row is deleted once it has been past its time for ``sweepMargin`` by this instance's
    /// clock: deleting a replay row or a rate-limit row early would let an instance whose clock
    /// runs behind accept a proof again, or grant a fresh burst.
    public func sweep(limit: Int = 1000, batches: Int = 100) async throws -> Int {
        guard limit > 0 else { return 0 }
        var position = sweepPosition.withLock { $0 }
        var sessions = 0
        for _ in 0..<batches {
            let now = self.now
            let (swept, next) = try await store.deleteDead(
                expiredBefore: now - Self.sweepMargin, idleBefore: now - milliseconds(configuration.idleLifetime),
                examining: limit, from: position)
            sessions += swept.sessions
            position = next.isFinished ? SweepPosition() : next
            sweepPosition.withLock { $0 = position }
            if next.isFinished { break }
        }
        return sessions
    }

    // MARK: Upkeep

    /// What one pass of ``upkeep(recheck:)`` did.
    public struct UpkeepReport: Sendable {
        /// Whether the key schedule rotated the signing key.
        public var rotated = false
        /// How many dead sessions the sweep deleted.
        public var sweptSessions = 0
        /// What the re-check did (nil when it did not finish, or was not asked for).
        public var recheck: (checked: Int, revoked: Int)?
        /// The steps that failed ("keys", "sweep", "recheck"), in order, with their errors.
        public var failures: [(step: String, error: any Error)] = []
    }

    /// One pass of the scheduled upkeep (`serve` runs it every minute): the key schedule
    /// (``maintainKeys()``), the sweep (``sweep(limit:batches:)``), and, with `check`, the
    /// re-check (``recheck(interval:limit:_:)``). Each step runs whatever the ones before it did:
    /// a key row that does not open stops neither the sweep nor the re-check, and a sweep that
    /// fails stops no re-check.
    public func upkeep(recheck check: (@Sendable (SecretBytes) async -> RecheckOutcome)?) async -> UpkeepReport {
        var report = UpkeepReport()
        do { report.rotated = try await maintainKeys() } catch { report.failures.append(("keys", error)) }
        do { report.sweptSessions = try await sweep() } catch { report.failures.append(("sweep", error)) }
        if let check {
            do { report.recheck = try await recheck(check) } catch { report.failures.append(("recheck", error)) }
        }
        return report
    }

    // MARK: The monthly re-check

    /// What Apple said about a user's refresh token.
    public enum RecheckOutcome: Sendable {
        case valid
        /// `invalid_grant` (or any 400): the Apple ID is no longer valid.
        case invalid
        /// Apple could not be asked; try later.
        case unavailable
    }

    /// How long, in milliseconds, a user claimed by one re-check is left out of the others while
    /// Apple is asked: five minutes.
    public static let recheckLease: Int64 = 300_000

    /// Re-checks users not checked for `interval` (default 30 days) with `check` (Apple's token
    /// endpoint, given the user's Apple refresh token); an invalid one revokes the sessions the
    /// user opened before the question was asked and marks the user inactive, unless a sign-in
    /// stored a new Apple refresh token meanwhile (that one is asked about next time). Returns
    /// (checked, revoked users). Each user is claimed before Apple is asked
    /// (``SessionStore/moveCheckedTime(user:from:to:)``, to ``recheckLease`` short of due
    /// again), so instances re-checking at once on one store ask about each user once. The
    /// claim is given back when Apple could not be asked, or when a sign-in stored a new token
    /// meanwhile; a process that stops while it asks leaves the user due after the lease.
    ///
    /// A user whose row was edited, or whose sealed Apple refresh token does not open, cannot be
    /// asked about: their sessions are revoked and they leave the re-check (marked inactive), as
    /// if Apple had refused, and the others are still checked. The pass then throws
    /// ``SessionErrorCode/corrupted``, saying how many there were.
    public func recheck(
        interval: TimeInterval = 30 * 86_400, limit: Int = 100,
        _ check: @Sendable (SecretBytes) async -> RecheckOutcome
    ) async throws -> (checked: Int, revoked: Int) {
        guard interval >= 0, interval <= 3_650 * 86_400 else {
            throw SessionError(.invalidParameter, "the re-check interval is 0 to 3,650 days")
        }
        var checked = 0, revoked = 0, unopened = 0
        let (due, edited) = try await store.usersDue(checkedBefore: self.now - milliseconds(interval), limit: limit)
        for user in edited {
            let now = self.now
            _ = try await store.revokeAll(user: user, now: now)
            await events?(SessionEvent(kind: .recheckFailed, user: user, session: nil, time: now))
        }
        for user in due {
            let lease = self.now - milliseconds(interval) + Self.recheckLease
            guard let sealed = user.sealedAppleRefreshToken,
                try await store.moveCheckedTime(user: user.id, from: user.checkedAt, to: lease)
            else { continue }
            let asked = self.now
            let outcome: RecheckOutcome
            if let token = try? open(sealed, user: user.id) {
                outcome = await check(SecretBytes(token))
            } else {
                unopened += 1
                outcome = .invalid
            }
            switch outcome {
            case .valid:
                try await store.markChecked(user: user.id, at: asked, inactive: false)
                await events?(SessionEvent(kind: .recheck, user: user.id, session: nil, time: asked))
            case .invalid:
                // Apple's answer is about this token's grant: a session opened while it was
                // asked, by a new sign-in, is not that grant's, and neither is a new token.
                let now = self.now
                if try await !store.markChecked(user: user.id, at: now, inactive: true, ifAppleRefreshToken: sealed) {
                    // A sign-in stored a new token: due again now, to be asked about it.
                    _ = try await store.moveCheckedTime(user: user.id, from: lease, to: user.checkedAt)
                }
                _ = try await store.revokeAll(user: user.id, openedBefore: asked, now: now)
                await events?(SessionEvent(kind: .recheckFailed, user: user.id, session: nil, time: now))
                revoked += 1
            case .unavailable:
                _ = try await store.moveCheckedTime(user: user.id, from: lease, to: user.checkedAt)
                continue
            }
            checked += 1
        }
        if !edited.isEmpty || unopened > 0 {
            throw SessionError(
                .corrupted,
                "the re-check checked \(checked) users and revoked \(revoked); \(edited.count) user rows were "
                    + "edited and \(unopened) sealed Apple refresh tokens did not open: their sessions are revoked "
                    + "and they are marked inactive")
        }
        return (checked, revoked)
    }

    // MARK: Sealing

    static let appleLabel = Array("shadow-keys session v1 apple refresh".utf8)

    func seal(_ plaintext: [UInt8], user: UUID) throws -> [UInt8] {
        let nonce = AES256GCM.randomNonce()
        return nonce
            + (try AES256GCM.seal(plaintext, key: keys.seal, nonce: nonce, aad: Self.appleLabel + user.bytes16))
    }

    func open(_ sealed: [UInt8], user: UUID) throws -> [UInt8] {
        guard sealed.count >= AES256GCM.nonceBytes + AES256GCM.tagBytes else {
            throw SessionError(.corrupted, "a sealed Apple refresh token is too short")
        }
        do {
            return try AES256GCM.open(
                sealed[AES256GCM.nonceBytes...], key: keys.seal, nonce: sealed[..<AES256GCM.nonceBytes],
                aad: Self.appleLabel + user.bytes16)
        } catch {
            throw SessionError(.corrupted, "a sealed Apple refresh token does not open: it was edited or moved")
        }
    }
}
