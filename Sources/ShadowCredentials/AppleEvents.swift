import Crypto
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import ShadowApple
import ShadowCore

extension CredentialEvent {
    /// The events a verified identity token brings: a sign-in at its `iat` and, when it carries
    /// `transfer_sub`, the transfer of that old subject to the token's `sub`.
    public static func signIn(
        _ token: AppleIdentityToken, rawToken: String, clientID: String
    ) throws -> [CredentialEvent] {
        let digest = Hex.encode(SHA256.hash(data: Array(rawToken.utf8)).prefix(16))
        // iat in whole seconds (the token's own precision), as event milliseconds.
        let time = (try CredentialEvent.milliseconds(token.issuedAt)) / 1000 * 1000
        var events = [
            try CredentialEvent(
                kind: .signIn, clientID: clientID, subject: token.subject, timeMilliseconds: time,
                id: "sign-in:" + digest)
        ]
        if let old = token.transferSubject, !old.exactlyEquals(token.subject) {
            events.append(
                try CredentialEvent(
                    kind: .transferred, clientID: clientID, subject: old, timeMilliseconds: time,
                    id: "transfer:" + digest,
                    linkedSubject: token.subject))
        }
        return events
    }

    /// The event a verified server-to-server notification brings (its `jti` is the id, its
    /// `event_time` the time); nil for a type Apple has not documented.
    public static func notification(_ notification: AppleNotification, clientID: String) throws -> CredentialEvent? {
        let kind: Kind
        switch notification.type {
        case .consentRevoked: kind = .consentRevoked
        case .accountDeleted: kind = .accountDeleted
        case .emailEnabled: kind = .emailEnabled
        case .emailDisabled: kind = .emailDisabled
        case .unknown: return nil
        }
        return try CredentialEvent(
            kind: kind, clientID: clientID, subject: notification.subject, time: notification.eventTime,
            id: notification.jwtID)
    }

    /// The result of validating the user's refresh token at `time`: success, or `invalid_grant`.
    public static func refresh(
        succeeded: Bool, clientID: String, subject: String, at time: Date
    ) throws -> CredentialEvent {
        let milliseconds = try CredentialEvent.milliseconds(time)
        return try CredentialEvent(
            kind: succeeded ? .refreshSucceeded : .refreshRejected, clientID: clientID, subject: subject,
            timeMilliseconds: milliseconds,
            id: (succeeded ? "refresh-ok:" : "refresh-invalid-grant:") + String(milliseconds))
    }

    /// A migration result (`/auth/usermigrationinfo`): `old` became `new` at `time`.
    /// Its id is the time: an unkeyed hash of the subjects would let the audit log be matched
    /// against guessed subjects.
    public static func migration(
        clientID: String, from old: String, to new: String, at time: Date
    ) throws -> CredentialEvent {
        let milliseconds = try CredentialEvent.milliseconds(time)
        return try CredentialEvent(
            kind: .transferred, clientID: clientID, subject: old, timeMilliseconds: milliseconds,
            id: "migration:" + String(milliseconds),
            linkedSubject: new)
    }
}
