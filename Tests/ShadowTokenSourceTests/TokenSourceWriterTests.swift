import Foundation
import ShadowCore
import ShadowTestSupport
import ShadowTokenSource
import ShadowVault
import Testing

/// A refresh and another writer of the same entry at once: a new sign-in (`vault login`) or a
/// `vault rm` while the refresh request is out. What the other writer stored stays; the
/// refresh's answer for the grant it replaced is dropped.
@Suite struct TokenSourceWriterTests {
    let base: TokenSourceTests

    init() async throws {
        base = try await TokenSourceTests()
        try await base.login()
        base.fake.withState { $0.delay = 0.5 }
    }

    /// Starts a refresh and returns once the provider holds its request.
    func refreshInFlight() async throws -> Task<AccessToken, any Error> {
        let source = try base.source()
        let pending = Task { try await source.token() }
        let deadline = Date().addingTimeInterval(10)
        while base.fake.server.requestCount == 0 {
            guard Date() < deadline else { throw TokenError(.providerUnavailable, "the refresh never arrived") }
            try await Task.sleep(for: .milliseconds(5))
        }
        return pending
    }

    /// What `vault login` stores for a new sign-in: a new refresh token and a fresh access token.
    func signInAgain() async throws {
        var refresh = try await base.vault.entry(named: "drive")
        refresh.secret = SecretBytes(utf8: "rt-new")
        try await base.vault.put(contentsOf: [
            refresh,
            VaultEntry(
                name: TokenSourceEntries.access("drive"), secret: SecretBytes(utf8: "at-new"), provider: .google,
                kind: .accessToken, expiresAt: base.clock.now.addingTimeInterval(3600)),
        ])
    }

    @Test func aSignInDuringARefreshIsKept() async throws {
        let pending = try await refreshInFlight()
        try await signInAgain()
        let answer = try await pending.value
        #expect(base.text(answer.token) == "at-new", "the token of the entry as it is now")
        #expect(base.text(try await base.vault.entry(named: "drive").secret) == "rt-new")
        #expect(base.text(try await base.vault.entry(named: "drive.access").secret) == "at-new")
        #expect(base.fake.withState { $0.refreshes } == 1)
    }

    /// The provider refuses the old refresh token while the user signs in again: the new sign-in
    /// is not marked as needing one.
    @Test func aRefusalDuringASignInMarksNothing() async throws {
        base.fake.withState { $0.revoked = ["rt-0"] }
        let pending = try await refreshInFlight()
        try await signInAgain()
        #expect(base.text(try await pending.value.token) == "at-new")
        let entry = try await base.vault.entry(named: "drive")
        #expect(base.text(entry.secret) == "rt-new")
        #expect(entry.labels["oauth.reauthentication"] == nil)
        #expect(!(try await base.source().token().refreshed))
    }

    /// `vault rm` while the refresh is out: the entry stays removed, and no access token is left.
    @Test func aRemovedEntryStaysRemoved() async throws {
        let pending = try await refreshInFlight()
        try await base.vault.remove(named: "drive")
        let error = await #expect(throws: VaultError.self) { _ = try await pending.value }
        #expect(error?.code == .noSuchEntry)
        let names = try await base.vault.list().map(\.name)
        #expect(!names.contains("drive") && !names.contains("drive.access"), "found \(names)")
    }

    /// Another writer's change to an unrelated entry meanwhile does not stop the refresh.
    @Test func anotherEntrysWriteDoesNotStopTheRefresh() async throws {
        let pending = try await refreshInFlight()
        try await base.vault.put(VaultEntry(name: "notes-key", secret: SecretBytes(utf8: "k")))
        #expect(base.text(try await pending.value.token) == "at-1")
        #expect(base.text(try await base.vault.entry(named: "drive").secret) == "rt-1")
        #expect(try await base.vault.entry(named: "notes-key").kind == .other)
    }
}

/// `vault rekey` while a refresh is out waits for it, so the rotated refresh token is saved
/// (under the old key, then carried to the new one), not refused by a vault it cannot open.
@Suite struct TokenSourceRekeyTests {
    @Test func aRekeyWaitsForTheRefreshInFlight() async throws {
        let writers = try await TokenSourceWriterTests()
        let base = writers.base
        let pending = try await writers.refreshInFlight()
        let newKey = SecretBytes((100..<132).map { UInt8($0) })
        try await base.vault.rekey(to: .key(newKey))
        #expect(base.text(try await pending.value.token) == "at-1")
        let rekeyed = TokenVault(path: base.vault.path, unlock: .key(newKey))
        #expect(base.text(try await rekeyed.entry(named: "drive").secret) == "rt-1", "the rotated token")
        #expect(base.text(try await rekeyed.entry(named: "drive.access").secret) == "at-1")
    }
}
