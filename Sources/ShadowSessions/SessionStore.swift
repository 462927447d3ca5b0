#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import ShadowCore
public import ShadowDPoP

/// One session: a refresh-token family, one row (Docs/sessions.md, "Tables").
public struct SessionRow: Sendable, Hashable {
    public let id: SessionID
    public let user: UUID
    /// The current generation: the only refresh token of the family that rotates.
    public var generation: UInt64
    /// When the current generation was issued (ms since 1970): the grace interval runs from here.
    public var rotatedAt: Int64
    public let createdAt: Int64
    public var lastUsedAt: Int64
    /// The absolute end (ms): rotation does not move it.
    public let expiresAt: Int64
    /// When it was revoked, if it was.
    public var revokedAt: Int64?
    /// The device's name, as the app gave it (at most 64 bytes).
    public let device: String
    /// The RFC 7638 thumbprint (`jkt`, base64url) of the DPoP key the session is bound to, set at
    /// sign-in and never changed; nil for a session without DPoP (Docs/dpop.md, "Sessions").
    public let keyThumbprint: String?
    /// The row's MAC as stored (Docs/sessions.md, "Tables"): a change compares it, so a row
    /// changed since it was read is not overwritten. Empty for a row not yet stored.
    package var mac: [UInt8] = []

    public init(
        id: SessionID, user: UUID, generation: UInt64, rotatedAt: Int64, createdAt: Int64, lastUsedAt: Int64,
        expiresAt: Int64, revokedAt: Int64?, device: String, keyThumbprint: String? = nil
    ) {
        (self.id, self.user, self.generation, self.rotatedAt) = (id, user, generation, rotatedAt)
        (self.createdAt, self.lastUsedAt, self.expiresAt, self.revokedAt, self.device) =
            (createdAt, lastUsedAt, expiresAt, revokedAt, device)
        self.keyThumbprint = keyThumbprint
    }
}

extension SessionRow {
    /// A DPoP key thumbprint's 32 bytes, from its base64url text (43 characters); nil for
    /// anything else.
    static func thumbprintBytes(_ text: String) -> [UInt8]? {
        DPoPThumbprint.bytes(text)
    }
}

/// A signing key of the access-token ring, as stored: its private key sealed.
public struct StoredSigningKey: Sendable, Hashable {
    public let keyID: String
    /// `ES256` or `RS256`.
    public let algorithm: String
    /// AES-256-GCM under the seal key: nonce (12) ‖ ciphertext ‖ tag; AAD "shadow-keys session v1
    /// signing key" ‖ key ID. The plaintext is the PKCS#8 DER of the private key.
    public let sealedPrivateKey: [UInt8]
    /// When it was made and published (ms).
    public let createdAt: Int64
    /// From when it signs (ms): after `createdAt`, so verifiers see it before its first token.
    public let activatesAt: Int64
    /// When a newer key took over (ms); it stays published until every token it signed expired.
    public var retiredAt: Int64?

    public init(
        keyID: String, algorithm: String, sealedPrivateKey: [UInt8], createdAt: Int64, activatesAt: Int64,
        retiredAt: Int64?
    ) {
        (self.keyID, self.algorithm, self.sealedPrivateKey) = (keyID, algorithm, sealedPrivateKey)
        (self.createdAt, self.activatesAt, self.retiredAt) = (createdAt, activatesAt, retiredAt)
    }
}

/// A user as the mapping table holds them: an internal ID for a keyed hash of Apple's `sub`.
public struct SessionUser: Sendable, Hashable {
    public let id: UUID
    /// Apple's refresh token, sealed (nonce ‖ ciphertext ‖ tag; AAD "shadow-keys session v1 apple
    /// refresh" ‖ user ID), for the monthly re-check.
    public let sealedAppleRefreshToken: [UInt8]?
    public let inactive: Bool
    public let checkedAt: Int64

    public init(id: UUID, sealedAppleRefreshToken: [UInt8]?, inactive: Bool, checkedAt: Int64) {
        (self.id, self.sealedAppleRefreshToken, self.inactive, self.checkedAt) =
            (id, sealedAppleRefreshToken, inactive, checkedAt)
    }
}

/// Where a pass of the sweep has got to in one table, in the order of its key: at its start,
/// after a key (the last one a batch examined), or past its end.
public enum SweepCursor: Sendable, Hashable {
    case start
    case after([UInt8])
    case end
}

/// Where a pass of the sweep has got to in each table. A batch examines the next rows of each
/// table not yet at its end, so a batch's statements stay short however large the tables grow.
public struct SweepPosition: Sendable, Hashable {
    public var sessions: SweepCursor
    public var rateLimits: SweepCursor
    public var proofs: SweepCursor

    /// Every table at its start: a new pass.
    public init() { (sessions, rateLimits, proofs) = (.start, .start, .start) }

    /// Whether the pass is over: every table examined to its end.
    public var isFinished: Bool { sessions == .end && rateLimits == .end && proofs == .end }
}

/// What one batch of the sweep deleted, per table.
public struct SweptRows: Sendable, Hashable {
    public var sessions: Int
    public var rateLimits: Int
    public var proofs: Int

    public init(sessions: Int, rateLimits: Int, proofs: Int) {
        (self.sessions, self.rateLimits, self.proofs) = (sessions, rateLimits, proofs)
    }
}

/// Where sessions live: tables in a database store (SQLite in ShadowSQLite, PostgreSQL in
/// ShadowPostgres). Every method is one statement or one short transaction; none holds a lock
/// across a request. It is also the replay cache of the DPoP proofs the session routes accept,
/// shared by every instance on the same database (`firstUse(of:until:now:)`, one upsert).
public protocol SessionStore: DPoPReplayCache {
    /// The sessions' 32-byte secret, sealed in the store under the caller's key; made on first use.
    func sessionSecret() async throws -> [UInt8]

    /// The user mapped to `appleHash`, or nil.
    func user(appleHash: [UInt8]) async throws -> SessionUser?
    /// Maps `appleHash` to `candidate` unless it is mapped already; returns the mapped user (the
    /// existing one when two sign-ins race), and stores the sealed Apple refresh token.
    func mapUser(
        appleHash: [UInt8], candidate: UUID, sealedAppleRefreshToken: [UInt8]?, now: Int64
    ) async throws
        -> UUID
    /// An app transfer: the user mapped to `oldHash` (the subject before the transfer) is mapped
    /// to `newHash` instead, keeping their ID, unless `newHash` is mapped already. True when moved.
    func moveUser(from oldHash: [UInt8], to newHash: [UInt8]) async throws -> Bool
    /// Up to `limit` users whose last re-check is before `before` (and who have an Apple refresh
    /// token), oldest first, as `due`. A row among them that is malformed or does not match its
    /// MAC is not returned as due: it is marked inactive as it stands (its MAC left unmatched, so
    /// it still reads as edited), which takes it out of the re-check, and the user it names, when
    /// it names one, is in `edited`.
    func usersDue(checkedBefore before: Int64, limit: Int) async throws -> (due: [SessionUser], edited: [UUID])
    /// Moves a user's checked time from `from` to `to` while it is still `from` (nothing else
    /// checked or claimed the user meanwhile); false, with nothing written, when it moved. The
    /// re-check claims a user with it before asking Apple, and gives the claim back.
    func moveCheckedTime(user: UUID, from: Int64, to: Int64) async throws -> Bool
    /// Records a re-check; `inactive` marks the user so. With `checked`, only while the user's
    /// sealed Apple refresh token is still those bytes, the one the re-check asked Apple about;
    /// false, with nothing written, when a sign-in stored another meanwhile.
    @discardableResult
    func markChecked(
        user: UUID, at: Int64, inactive: Bool, ifAppleRefreshToken checked: [UInt8]?
    ) async throws
        -> Bool
    /// Whether the user is marked inactive.
    func isInactive(user: UUID) async throws -> Bool

    func insertSession(_ row: SessionRow) async throws
    func session(_ id: SessionID) async throws -> SessionRow?
    /// The compare-and-set of a rotation: `row` (as read) moves to the next generation, issued
    /// and used at `now`, only if it is still as read and not revoked. True when this call won.
    func rotate(_ row: SessionRow, now: Int64) async throws -> Bool
    /// Marks a session (as read) used (the grace path hands out the current successor without
    /// rotating), in one compare-and-set: true when the row was still as read and not revoked;
    /// false, with nothing written, when another writer changed it first.
    func touch(_ row: SessionRow, now: Int64) async throws -> Bool
    /// Revokes one session; true when it was live.
    func revoke(_ id: SessionID, now: Int64) async throws -> Bool
    /// Revokes every live session of `user` opened before `openedBefore` (epoch milliseconds),
    /// however many there are, and none opened after the call's own `now`; returns how many.
    func revokeAll(user: UUID, openedBefore: Int64, now: Int64) async throws -> Int
    /// The user's sessions, live and revoked, newest first.
    func sessions(user: UUID) async throws -> [SessionRow]
    /// One batch of the sweep: in each table not at its end in `position`, examines the next
    /// `limit` rows in key order and deletes those that are dead (sessions revoked, past
    /// `expiredBefore` or unused since `idleBefore`; rate-limit rows whose time is before
    /// `expiredBefore`; DPoP replay rows expired by then). Returns how many of each it deleted,
    /// and the position after the rows it examined.
    func deleteDead(
        expiredBefore: Int64, idleBefore: Int64, examining limit: Int, from position: SweepPosition
    ) async throws -> (deleted: SweptRows, next: SweepPosition)

    func signingKeys() async throws -> [StoredSigningKey]
    func insertSigningKey(_ key: StoredSigningKey) async throws
    /// Inserts `key` only when the ring holds no key at all, decided under a lock on the ring, so
    /// instances that find an empty ring at once make exactly one first key; true when this call
    /// inserted it.
    func insertFirstSigningKey(_ key: StoredSigningKey) async throws -> Bool
    func retireSigningKey(_ keyID: String, at: Int64) async throws
    func deleteSigningKey(_ keyID: String) async throws

    /// GCRA in one statement: the key's theoretical arrival time moves to max(tat, now) + interval
    /// when that is at most `now + tolerance + interval`. Returns nil when allowed, else the time
    /// (ms) at which a request would be.
    func rateLimit(key: [UInt8], now: Int64, interval: Int64, tolerance: Int64) async throws -> Int64?
    /// The GCRA steps of `limits` and, with `replay`, a proof's replay check, handed to the store
    /// together: independent writes, each answered as ``rateLimit(key:now:interval:tolerance:)``
    /// or ``DPoPReplayCache/firstUse(of:until:now:)`` would answer it, which may share a commit.
    func admit(
        _ limits: [RateLimitStep], replay: DPoPReplayEntry?
    ) async -> (limits: [Result<Int64?, any Error>], replay: Result<Bool, any Error>?)
    /// ``admit(_:replay:)`` and ``session(_:)`` of `session` in one hand-over (a refresh's first
    /// trip to the store): the steps and the proof answered as there, and the row as that read
    /// would answer it, read before the steps are taken or with them.
    func admit(
        _ limits: [RateLimitStep], replay: DPoPReplayEntry?, reading session: SessionID
    ) async -> (
        limits: [Result<Int64?, any Error>], replay: Result<Bool, any Error>?, session: Result<SessionRow?, any Error>
    )
}

/// One request counted against one GCRA limit (``SessionStore/rateLimit(key:now:interval:tolerance:)``).
public struct RateLimitStep: Sendable {
    public var key: [UInt8]
    public var now: Int64
    public var interval: Int64
    public var tolerance: Int64

    public init(key: [UInt8], now: Int64, interval: Int64, tolerance: Int64) {
        (self.key, self.now, self.interval, self.tolerance) = (key, now, interval, tolerance)
    }

    /// The last millisecond of 9999-12-31 UTC.
    public static let latest: Int64 = 253_402_300_799_999
    /// A day: the longest interval a ``RateLimit`` gives (one request a day).
    public static let longestInterval: Int64 = 86_400_000
    /// The longest tolerance a ``RateLimit`` gives: a day's interval times 999,999.
    public static let longestTolerance: Int64 = longestInterval * 999_999

    /// Whether the store takes the step: a time from 1970 to 9999, an interval and a tolerance
    /// no ``RateLimit`` exceeds. The store adds them without overflow, and with τ ≥ 0 its
    /// statement's comparison is GCRA's.
    public var isInRange: Bool {
        (0...Self.latest).contains(now) && (1...Self.longestInterval).contains(interval)
            && (0...Self.longestTolerance).contains(tolerance)
    }
}

extension SessionStore {
    /// ``admit(_:replay:)``, then ``session(_:)``: two trips, for a store with no better way.
    public func admit(
        _ limits: [RateLimitStep], replay: DPoPReplayEntry?, reading session: SessionID
    ) async -> (
        limits: [Result<Int64?, any Error>], replay: Result<Bool, any Error>?, session: Result<SessionRow?, any Error>
    ) {
        let answers = await admit(limits, replay: replay)
        do {
            return (answers.limits, answers.replay, .success(try await self.session(session)))
        } catch {
            return (answers.limits, answers.replay, .failure(error))
        }
    }

    /// ``markChecked(user:at:inactive:ifAppleRefreshToken:)`` whatever the stored token.
    public func markChecked(user: UUID, at: Int64, inactive: Bool) async throws {
        try await markChecked(user: user, at: at, inactive: inactive, ifAppleRefreshToken: nil)
    }

    /// Revokes every live session of `user` opened by `now`; returns how many.
    public func revokeAll(user: UUID, now: Int64) async throws -> Int {
        try await revokeAll(user: user, openedBefore: .max, now: now)
    }
}
