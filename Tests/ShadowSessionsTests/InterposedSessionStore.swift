import Foundation
import ShadowDPoP
import ShadowSessions

/// A real session store with a step of the test's run before chosen calls: every call goes to
/// `base`, after `before(call)` when the call's name is in `calls`. It puts another writer's
/// change (a logout, a revocation) between an authority's read and its write, the window a
/// second instance or request can take.
final class InterposedSessionStore: SessionStore {
    let base: any SessionStore
    let calls: Set<String>
    let before: @Sendable (String) async throws -> Void

    init(_ base: any SessionStore, before calls: Set<String>, _ step: @escaping @Sendable (String) async throws -> Void)
    {
        (self.base, self.calls, self.before) = (base, calls, step)
    }

    private func step(_ call: String) async throws {
        if calls.contains(call) { try await before(call) }
    }

    func sessionSecret() async throws -> [UInt8] { try await base.sessionSecret() }
    func user(appleHash: [UInt8]) async throws -> SessionUser? { try await base.user(appleHash: appleHash) }
    func mapUser(
        appleHash: [UInt8], candidate: UUID, sealedAppleRefreshToken: [UInt8]?, now: Int64
    ) async throws
        -> UUID
    {
        try await step("mapUser")
        return try await base.mapUser(
            appleHash: appleHash, candidate: candidate, sealedAppleRefreshToken: sealedAppleRefreshToken, now: now)
    }
    func moveUser(from oldHash: [UInt8], to newHash: [UInt8]) async throws -> Bool {
        try await step("moveUser")
        return try await base.moveUser(from: oldHash, to: newHash)
    }
    func usersDue(checkedBefore before: Int64, limit: Int) async throws -> (due: [SessionUser], edited: [UUID]) {
        try await base.usersDue(checkedBefore: before, limit: limit)
    }
    func moveCheckedTime(user: UUID, from: Int64, to: Int64) async throws -> Bool {
        try await step("moveCheckedTime")
        return try await base.moveCheckedTime(user: user, from: from, to: to)
    }
    func markChecked(
        user: UUID, at: Int64, inactive: Bool, ifAppleRefreshToken checked: [UInt8]?
    ) async throws
        -> Bool
    {
        try await step("markChecked")
        return try await base.markChecked(user: user, at: at, inactive: inactive, ifAppleRefreshToken: checked)
    }
    func isInactive(user: UUID) async throws -> Bool { try await base.isInactive(user: user) }
    func insertSession(_ row: SessionRow) async throws {
        try await step("insertSession")
        try await base.insertSession(row)
    }
    func session(_ id: SessionID) async throws -> SessionRow? { try await base.session(id) }
    func rotate(_ row: SessionRow, now: Int64) async throws -> Bool {
        try await step("rotate")
        return try await base.rotate(row, now: now)
    }
    func touch(_ row: SessionRow, now: Int64) async throws -> Bool {
        try await step("touch")
        return try await base.touch(row, now: now)
    }
    func revoke(_ id: SessionID, now: Int64) async throws -> Bool {
        try await step("revoke")
        return try await base.revoke(id, now: now)
    }
    func revokeAll(user: UUID, openedBefore: Int64, now: Int64) async throws -> Int {
        try await step("revokeAll")
        return try await base.revokeAll(user: user, openedBefore: openedBefore, now: now)
    }
    func sessions(user: UUID) async throws -> [SessionRow] { try await base.sessions(user: user) }
    func deleteDead(
        expiredBefore: Int64, idleBefore: Int64, examining limit: Int, from position: SweepPosition
    ) async throws -> (deleted: SweptRows, next: SweepPosition) {
        try await base.deleteDead(
            expiredBefore: expiredBefore, idleBefore: idleBefore, examining: limit, from: position)
    }
    func signingKeys() async throws -> [StoredSigningKey] { try await base.signingKeys() }
    func insertSigningKey(_ key: StoredSigningKey) async throws { try await base.insertSigningKey(key) }
    func insertFirstSigningKey(_ key: StoredSigningKey) async throws -> Bool {
        try await base.insertFirstSigningKey(key)
    }
    func retireSigningKey(_ keyID: String, at: Int64) async throws { try await base.retireSigningKey(keyID, at: at) }
    func deleteSigningKey(_ keyID: String) async throws { try await base.deleteSigningKey(keyID) }
    func rateLimit(key: [UInt8], now: Int64, interval: Int64, tolerance: Int64) async throws -> Int64? {
        try await base.rateLimit(key: key, now: now, interval: interval, tolerance: tolerance)
    }
    func admit(
        _ limits: [RateLimitStep], replay: DPoPReplayEntry?
    ) async
        -> (limits: [Result<Int64?, any Error>], replay: Result<Bool, any Error>?)
    {
        await base.admit(limits, replay: replay)
    }
    func admit(
        _ limits: [RateLimitStep], replay: DPoPReplayEntry?, reading session: SessionID
    ) async -> (
        limits: [Result<Int64?, any Error>], replay: Result<Bool, any Error>?, session: Result<SessionRow?, any Error>
    ) {
        await base.admit(limits, replay: replay, reading: session)
    }
    func firstUse(of key: [UInt8], until expiresAt: Int64, now: Int64) async throws -> Bool {
        try await base.firstUse(of: key, until: expiresAt, now: now)
    }
}
