#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import ShadowCore

/// A user's credential state for one client ID, with Apple's raw values
/// (`ASAuthorizationAppleIDProvider.CredentialState`).
public enum CredentialState: Int, Sendable, CaseIterable, CustomStringConvertible {
    case revoked = 0
    case authorized = 1
    case notFound = 2
    case transferred = 3

    /// The name used in JSON and the audit log.
    public var description: String {
        switch self {
        case .revoked: return "revoked"
        case .authorized: return "authorized"
        case .notFound: return "notFound"
        case .transferred: return "transferred"
        }
    }

    public init?(name: String) {
        guard let state = Self.allCases.first(where: { $0.description == name }) else { return nil }
        self = state
    }
}

/// One signal about a user's credential, with the time it happened (not when it arrived).
public struct CredentialEvent: Sendable, Hashable {
    public enum Kind: String, Sendable, CaseIterable {
        /// A verified identity token (time: its `iat`).
        case signIn = "sign-in"
        /// Apple accepted the user's refresh token.
        case refreshSucceeded = "refresh-ok"
        /// Apple answered `invalid_grant` to the user's refresh token.
        case refreshRejected = "refresh-invalid-grant"
        /// The `consent-revoked` notification.
        case consentRevoked = "consent-revoked"
        /// The `account-delete(d)` notification.
        case accountDeleted = "account-deleted"
        /// An app transfer moved the subject to `linkedSubject` (`transfer_sub`, or a migration result).
        case transferred
        /// The `email-enabled` notification: mail to the private relay address is forwarded again.
        case emailEnabled = "email-enabled"
        /// The `email-disabled` notification.
        case emailDisabled = "email-disabled"

        /// What the event does to the state.
        public enum Effect: Int, Sendable, Comparable {
            case authorize = 0, metadata = 1, revoke = 2, transfer = 3
            public static func < (a: Effect, b: Effect) -> Bool { a.rawValue < b.rawValue }
        }

        public var effect: Effect {
            switch self {
            case .signIn, .refreshSucceeded: return .authorize
            case .emailEnabled, .emailDisabled: return .metadata
            case .refreshRejected, .consentRevoked, .accountDeleted: return .revoke
            case .transferred: return .transfer
            }
        }
    }

    public let kind: Kind
    /// The client ID (audience) the state belongs to.
    public let clientID: String
    /// The user (`sub`).
    public let subject: String
    /// When it happened, in whole milliseconds since 1970.
    public let timeMilliseconds: Int64
    /// An identifier: the notification's `jti`, or one derived from the token or result.
    public let id: String
    /// For ``Kind/transferred``: the subject the user now has.
    public let linkedSubject: String?

    public var time: Date { Date(millisecondsSince1970: timeMilliseconds) }

    public init(
        kind: Kind, clientID: String, subject: String, time: Date, id: String, linkedSubject: String? = nil
    ) throws {
        try self.init(
            kind: kind, clientID: clientID, subject: subject, timeMilliseconds: try Self.milliseconds(time), id: id,
            linkedSubject: linkedSubject)
    }

    /// The event time range: 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z, in milliseconds.
    public static let timeRange: ClosedRange<Int64> = 0...Timestamp.range.upperBound

    /// A time as event milliseconds, or ``CredentialError/Code/invalidEvent`` outside ``timeRange``.
    static func milliseconds(_ time: Date) throws -> Int64 {
        guard let stamp = Timestamp(time), timeRange.contains(stamp.milliseconds) else {
            throw CredentialError(
                .invalidEvent, "an event time lies outside 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z")
        }
        return stamp.milliseconds
    }

    public init(
        kind: Kind, clientID: String, subject: String, timeMilliseconds: Int64, id: String, linkedSubject: String? = nil
    ) throws {
        guard !clientID.isEmpty, clientID.utf8.count <= 255 else {
            throw CredentialError(.invalidEvent, "a client ID is 1 to 255 bytes")
        }
        guard !subject.isEmpty, subject.utf8.count <= 255 else {
            throw CredentialError(.invalidEvent, "a subject is 1 to 255 bytes")
        }
        guard !id.isEmpty, id.utf8.count <= 255 else {
            throw CredentialError(.invalidEvent, "an event id is 1 to 255 bytes")
        }
        guard (kind == .transferred) == (linkedSubject != nil),
            linkedSubject.map({ !$0.isEmpty && $0.utf8.count <= 255 }) ?? true
        else {
            throw CredentialError(.invalidEvent, "a transfer, and only a transfer, names the new subject")
        }
        guard Self.timeRange.contains(timeMilliseconds) else {
            throw CredentialError(
                .invalidEvent,
                "event time \(timeMilliseconds) ms lies outside 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z")
        }
        self.kind = kind
        self.clientID = clientID
        self.subject = subject
        self.timeMilliseconds = timeMilliseconds
        self.id = id
        self.linkedSubject = linkedSubject
    }

    /// The order events are applied in: event time, then authorizations before metadata before
    /// revocations before transfers (so a revocation wins a tie), then id bytes, then kind name
    /// bytes. The order is total, so the outcome never depends on arrival order.
    public static func appliesBefore(_ a: CredentialEvent, _ b: CredentialEvent) -> Bool {
        if a.timeMilliseconds != b.timeMilliseconds { return a.timeMilliseconds < b.timeMilliseconds }
        if a.kind.effect != b.kind.effect { return a.kind.effect < b.kind.effect }
        return CredentialRecord.Mark.tieBreak(a.id, a.kind, b.id, b.kind)
    }
}

/// A user's status as a caller sees it.
public struct CredentialStatus: Sendable, Equatable {
    public var state: CredentialState
    /// When the event that last set this state happened: the latest sign-in or successful
    /// refresh (authorized), the latest revocation (revoked), the transfer (transferred).
    public var since: Date?
    /// That event's kind.
    public var cause: CredentialEvent.Kind?
    /// That event's id.
    public var eventID: String?
    /// For a transferred subject: the subject the user has now.
    public var linkedSubject: String?
    /// Whether Apple forwards mail to the private relay address: nil until an email event.
    public var emailForwarding: Bool?

    public static let notFound = CredentialStatus(state: .notFound)

    public init(
        state: CredentialState, since: Date? = nil, cause: CredentialEvent.Kind? = nil, eventID: String? = nil,
        linkedSubject: String? = nil,
        emailForwarding: Bool? = nil
    ) {
        self.state = state
        self.since = since
        self.cause = cause
        self.eventID = eventID
        self.linkedSubject = linkedSubject
        self.emailForwarding = emailForwarding
    }

    /// The transition table of Docs/credential-state.md, for events applied in
    /// ``CredentialEvent/appliesBefore(_:_:)`` order.
    public func applying(_ event: CredentialEvent) -> CredentialStatus {
        var next = self
        func set(_ state: CredentialState) {
            next.state = state
            next.since = event.time
            next.cause = event.kind
            next.eventID = event.id
            next.linkedSubject = event.linkedSubject
        }
        switch (state, event.kind.effect) {
        case (.transferred, _): if event.kind.effect == .metadata { next.emailForwarding = event.kind == .emailEnabled }
        case (_, .metadata): next.emailForwarding = event.kind == .emailEnabled
        case (_, .transfer): set(.transferred)
        case (_, .revoke): set(.revoked)
        case (.revoked, .authorize):
            // Re-authorizes only after the revocation (a tie goes to the revocation).
            if let since, event.time <= since { break }
            set(.authorized)
        case (_, .authorize): set(.authorized)
        }
        return next
    }
}

/// What a store keeps per (client ID, subject): the latest authorization, the latest revocation,
/// the earliest transfer and the latest email event. Applying an event keeps the maximum (or
/// minimum) by (time, id), so the record is the same whatever order events arrive in and however
/// often they repeat; ``status`` is then what the transition table gives for the events sorted.
public struct CredentialRecord: Sendable, Equatable {
    /// One remembered event.
    public struct Mark: Sendable, Equatable {
        public let timeMilliseconds: Int64
        public let id: String
        public let kind: CredentialEvent.Kind
        public let linkedSubject: String?

        public init(timeMilliseconds: Int64, id: String, kind: CredentialEvent.Kind, linkedSubject: String? = nil) {
            self.timeMilliseconds = timeMilliseconds
            self.id = id
            self.kind = kind
            self.linkedSubject = linkedSubject
        }

        init(_ event: CredentialEvent) {
            self.init(
                timeMilliseconds: event.timeMilliseconds, id: event.id, kind: event.kind,
                linkedSubject: event.linkedSubject)
        }

        public var time: Date { Date(millisecondsSince1970: timeMilliseconds) }

        /// (time, id bytes, kind name bytes) order.
        func precedes(_ other: Mark) -> Bool {
            if timeMilliseconds != other.timeMilliseconds { return timeMilliseconds < other.timeMilliseconds }
            return Self.tieBreak(id, kind, other.id, other.kind)
        }

        /// Orders events of one time and effect: by id bytes, then kind name bytes.
        static func tieBreak(
            _ aID: String, _ aKind: CredentialEvent.Kind, _ bID: String, _ bKind: CredentialEvent.Kind
        ) -> Bool {
            let a = Array(aID.utf8), b = Array(bID.utf8)
            if a != b { return a.lexicographicallyPrecedes(b) }
            return Array(aKind.rawValue.utf8).lexicographicallyPrecedes(Array(bKind.rawValue.utf8))
        }
    }

    public internal(set) var authorization: Mark?
    public internal(set) var revocation: Mark?
    public internal(set) var transfer: Mark?
    public internal(set) var email: Mark?

    public init() {}

    /// Folds `event` in; the record changes only if the event is later (or, for a transfer, earlier)
    /// than what it holds. Returns whether the status changed.
    @discardableResult
    public mutating func apply(_ event: CredentialEvent) -> Bool {
        let before = status
        let mark = Mark(event)
        switch event.kind.effect {
        case .authorize: if authorization.map({ $0.precedes(mark) }) ?? true { authorization = mark }
        case .revoke: if revocation.map({ $0.precedes(mark) }) ?? true { revocation = mark }
        case .transfer: if transfer.map({ mark.precedes($0) }) ?? true { transfer = mark }
        case .metadata: if email.map({ $0.precedes(mark) }) ?? true { email = mark }
        }
        // An authorization at or before the latest revocation can never count again (revocations
        // only move later), so it is not kept: a stale sign-in leaves the record as it was.
        if let authorization, let revocation, authorization.timeMilliseconds <= revocation.timeMilliseconds {
            self.authorization = nil
        }
        return status != before
    }

    /// The status the transition table gives for every event folded in, sorted.
    public var status: CredentialStatus {
        var status = CredentialStatus.notFound
        status.emailForwarding = email.map { $0.kind == .emailEnabled }
        let decisive: Mark?
        if let transfer {
            status.state = .transferred
            decisive = transfer
        } else if let authorization, revocation.map({ authorization.timeMilliseconds > $0.timeMilliseconds }) ?? true {
            status.state = .authorized
            decisive = authorization
        } else if let revocation {
            status.state = .revoked
            decisive = revocation
        } else {
            decisive = nil
        }
        if let decisive {
            status.since = decisive.time
            status.cause = decisive.kind
            status.eventID = decisive.id
            status.linkedSubject = decisive.linkedSubject
        }
        return status
    }

    /// The revocation or transfer that supersedes a token issued at `issuedAt` (whole seconds),
    /// if any: one that happened at or after the token's `iat`. A revocation supersedes older
    /// tokens even after the user signs in again.
    public func superseding(issuedAt: Date) -> Mark? {
        // A verified token's iat is in range; an out-of-range one is treated as the earliest time.
        let issued = Timestamp(issuedAt)?.milliseconds ?? Int64.min
        if let transfer, issued <= transfer.timeMilliseconds { return transfer }
        if let revocation, issued <= revocation.timeMilliseconds { return revocation }
        return nil
    }
}

extension Date {
    init(millisecondsSince1970 milliseconds: Int64) { self.init(timeIntervalSince1970: Double(milliseconds) / 1000) }
}
