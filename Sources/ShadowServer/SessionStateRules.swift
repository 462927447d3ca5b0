public import ShadowApple
public import ShadowCredentials
public import ShadowSessions

/// The rules where credential state and sessions meet (Docs/sessions.md, "Credential state"),
/// written once for `serve`, the Hummingbird routes and any library user:
///
/// - a sign-in with Apple records the user's authorization, as `state apply-token` does (the
///   identity token's sign-in at its `iat`, and the transfer its `transfer_sub` names), and an
///   identity token that a revocation or transfer at or after its `iat` superseded opens no session;
/// - an event that leaves the user revoked or transferred (`consent-revoked`, `account-delete`, a
///   rejected refresh, an app transfer) ends every session of the user; a revocation that a later
///   sign-in outweighs ends the sessions opened before it. Email events, and sign-ins, end none.
public struct SessionStateRules: Sendable {
    public let authority: SessionAuthority
    public let states: any CredentialStateStore

    public init(authority: SessionAuthority, states: any CredentialStateStore) {
        self.authority = authority
        self.states = states
    }

    /// Before the authorization code is spent: refuses an identity token whose subject was revoked
    /// or transferred at or after its `iat`.
    /// - Throws: ``CredentialError/Code/superseded``; the store's errors.
    public func admit(_ identity: AppleIdentityToken) async throws {
        try await states.enforce(identity, clientID: identity.audience)
    }

    /// After Apple accepted the code: records the sign-in (and any transfer the token names), ends
    /// the sessions of a subject it transferred, and refuses the token if it is superseded now.
    /// - Throws: ``CredentialError/Code/superseded``; the store's errors.
    @discardableResult
    public func recordSignIn(_ identity: AppleIdentityToken, rawToken: String) async throws -> [CredentialChange] {
        let events = try CredentialEvent.signIn(identity, rawToken: rawToken, clientID: identity.audience)
        let changes = try await states.apply(events)
        for change in changes { try await endSessions(after: change) }
        try await states.enforce(identity, clientID: identity.audience)
        return changes
    }

    /// Ends every session of the change's subject when the event left them revoked or transferred.
    /// A revocation that a later sign-in outweighs (its notification came after the user signed
    /// in again) ends the sessions opened before it, as it would have had it come on time. A
    /// repeat of such an event (Apple retrying a notification whose answer was lost, or one that
    /// failed here) ends them again, so a retry finishes what a failure left undone. Returns how
    /// many sessions ended.
    @discardableResult
    public func endSessions(after change: CredentialChange) async throws -> Int {
        let effect = change.event.kind.effect
        guard effect == .revoke || effect == .transfer,
            let user = try await authority.user(
                appleSubject: change.event.subject, appleClientID: change.event.clientID)
        else { return 0 }
        if Self.endsSessions(change) { return try await authority.revokeAll(user: user) }
        return try await authority.revokeAll(user: user, openedBefore: change.event.timeMilliseconds)
    }

    /// Whether `change` ends the subject's sessions: a revoking or transferring event whose
    /// subject is revoked or transferred after it.
    public static func endsSessions(_ change: CredentialChange) -> Bool {
        let effect = change.event.kind.effect
        guard effect == .revoke || effect == .transfer else { return false }
        return change.new.state == .revoked || change.new.state == .transferred
    }
}
