#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import ShadowCore
import ShadowStorage

/// A queued revocation as a database holds it: the token's row id and kind, the time of the
/// event that asked for it, when it is next due, how often it was tried, and, once finished,
/// when and how.
package struct StoredRevocation: Sendable, Equatable {
    package var rowID: [UInt8]
    package var kind: String
    package var eventMilliseconds: Int64
    package var dueMilliseconds: Int64
    package var attempts: Int

    package init(rowID: [UInt8], kind: String, eventMilliseconds: Int64, dueMilliseconds: Int64, attempts: Int) {
        self.rowID = rowID
        self.kind = kind
        self.eventMilliseconds = eventMilliseconds
        self.dueMilliseconds = dueMilliseconds
        self.attempts = attempts
    }
}

/// A token to revoke with Apple, claimed from the queue for one lease.
public struct PendingRevocation: Sendable, CustomStringConvertible {
    /// The token (its value never prints).
    public let token: ServerToken
    /// When the event that asked for the revocation happened.
    public let eventTime: Date
    /// Attempts so far, this one included (1 on the first).
    public let attempts: Int
    let rowID: [UInt8]
    let sealed: [UInt8]

    public var description: String {
        "PendingRevocation(\(token.kind) for a subject of \(token.clientID), attempt \(attempts))"
    }
}

/// How a revocation attempt ended.
public enum RevocationResult: Sendable, Equatable {
    /// Apple revoked the token: it is deleted from the store.
    case revoked
    /// Apple answered `invalid_grant`: the token was already expired or revoked; it is deleted.
    case alreadyInvalid
    /// A failure worth retrying (Apple unavailable, a transport failure): due again at `after`.
    case retry(after: Date, reason: String)
    /// Given up (too many attempts): the token is kept, the queue entry marked `failed`.
    case failed(reason: String)

    /// Whether the token leaves the store: Apple no longer honours it.
    var deletesToken: Bool {
        switch self {
        case .revoked, .alreadyInvalid: true
        case .retry, .failed: false
        }
    }

    /// The name stored in the queue's `outcome` column (nil while it stays pending).
    var outcome: String? {
        switch self {
        case .revoked: "revoked"
        case .alreadyInvalid: "invalid_grant"
        case .retry: nil
        case .failed: "failed"
        }
    }
}

/// How many revocations the queue holds.
public struct RevocationCounts: Sendable, Equatable {
    /// Not yet finished (due now or later, or leased to a worker).
    public let pending: Int
    /// Finished: revoked, already invalid, superseded by a newer token, or the token was gone.
    public let done: Int
    /// Given up after the attempt limit.
    public let failed: Int

    public init(pending: Int, done: Int, failed: Int) {
        self.pending = pending
        self.done = done
        self.failed = failed
    }
}

/// The revocations a store owes Apple (Docs/server.md, "Revocations"). Recording an
/// `account-delete` or `consent-revoked` event queues, in the same transaction, every token of
/// that user stored at or before the event; a ``RevocationWorker`` claims them, calls Apple and
/// records the result. The queue is in the database, so it survives restarts, and a claim is a
/// lease, so instances sharing the database never work on one token at once.
public protocol RevocationQueue: Sendable {
    /// Claims up to `limit` due revocations for `lease`; claimed again by anyone only after the
    /// lease runs out (a worker that died). Entries whose token is gone, or was replaced by a
    /// token stored after the event, are finished here and not returned. Entries whose token
    /// does not open (edited, or moved from another row) are given up here as `failed`, and
    /// counted in `unreadable`, so the caller can say so.
    func claimRevocations(limit: Int, lease: Duration) async throws -> (due: [PendingRevocation], unreadable: Int)
    /// Records how an attempt ended.
    func completeRevocation(_ revocation: PendingRevocation, _ result: RevocationResult) async throws
    /// The queue's counts.
    func revocationCounts() async throws -> RevocationCounts
    /// How many entries are unfinished: ``revocationCounts()``'s `pending`, which a worker reads
    /// after every pass, without counting the finished ones too.
    func pendingRevocations() async throws -> Int
}

extension RevocationQueue {
    /// ``revocationCounts()``'s `pending`.
    public func pendingRevocations() async throws -> Int { try await revocationCounts().pending }

    /// ``claimRevocations(limit:lease:)``'s claimed entries.
    public func dueRevocations(limit: Int, lease: Duration) async throws -> [PendingRevocation] {
        try await claimRevocations(limit: limit, lease: lease).due
    }
}

extension StateEngine {
    /// Queues the revocation of every token of `rowID` stored at or before `eventMilliseconds`,
    /// and of every token of it that does not open.
    func queueRevocations(
        _ requests: [(rowID: [UInt8], eventMilliseconds: Int64)], now: Int64, in transaction: any StateTransaction
    ) async throws {
        var queued: [StoredRevocation] = []
        var owned: [[UInt8]: [StoredTokenRow]] = [:]
        for chunk in Array(Set(requests.map(\.rowID))).chunked(500) {
            for row in try await transaction.tokens(rowIDs: Array(chunk)) { owned[row.rowID, default: []].append(row) }
        }
        for request in requests {
            for row in owned[request.rowID] ?? [] {
                // A token that does not open (edited, or moved from another row) is queued all
                // the same: the event is recorded whatever its tokens hold, and the claim gives
                // the entry up as `failed`.
                if let token = try? openToken(row), token.storedAtMilliseconds > request.eventMilliseconds { continue }
                queued.append(
                    StoredRevocation(
                        rowID: request.rowID, kind: row.kind, eventMilliseconds: request.eventMilliseconds,
                        dueMilliseconds: now, attempts: 0))
            }
        }
        if !queued.isEmpty { try await transaction.queueRevocations(queued) }
    }

    package func claimRevocations(
        limit: Int, lease: Duration
    ) async throws -> (due: [PendingRevocation], unreadable: Int) {
        guard (1...1000).contains(limit), lease >= .seconds(1), lease <= .seconds(86_400) else {
            throw CredentialError(.invalidParameter, "claim 1 to 1000 revocations for a lease of 1 s to 24 h")
        }
        let now = try CredentialEvent.milliseconds(clock.now)
        let until = now + Int64(lease.inSeconds * 1000)
        return try await database.transaction(writing: true) { transaction in
            var pending: [PendingRevocation] = [], unreadable = 0
            for claimed in try await transaction.claimRevocations(now: now, until: until, limit: limit) {
                guard let row = try await transaction.tokens(rowID: claimed.rowID, kind: claimed.kind).first else {
                    try await transaction.finishRevocation(
                        rowID: claimed.rowID, kind: claimed.kind, outcome: "no_token", at: now, due: now)
                    continue
                }
                // A token that does not open cannot be revoked: given up, its row kept as
                // evidence, and the entries after it still claimed.
                guard let token = try? self.openToken(row) else {
                    unreadable += 1
                    try await transaction.finishRevocation(
                        rowID: claimed.rowID, kind: claimed.kind, outcome: "failed", at: now, due: now)
                    continue
                }
                guard token.storedAtMilliseconds <= claimed.eventMilliseconds else {
                    try await transaction.finishRevocation(
                        rowID: claimed.rowID, kind: claimed.kind, outcome: "superseded", at: now, due: now)
                    continue
                }
                pending.append(
                    PendingRevocation(
                        token: token, eventTime: Date(millisecondsSince1970: claimed.eventMilliseconds),
                        attempts: claimed.attempts, rowID: claimed.rowID, sealed: row.body))
            }
            return (pending, unreadable)
        }
    }

    package func completeRevocation(_ revocation: PendingRevocation, _ result: RevocationResult) async throws {
        let now = try CredentialEvent.milliseconds(clock.now)
        let kind = revocation.token.kind.rawValue
        try await database.transaction(writing: true) { transaction in
            if case .retry(let after, _) = result {
                let due = (try? CredentialEvent.milliseconds(after)) ?? now
                try await transaction.finishRevocation(
                    rowID: revocation.rowID, kind: kind, outcome: nil, at: nil, due: max(due, now))
                return
            }
            // Only the token that was revoked goes: a newer one stored meanwhile stays.
            if result.deletesToken, let row = try await transaction.tokens(rowID: revocation.rowID, kind: kind).first,
                row.body == revocation.sealed
            {
                _ = try await transaction.deleteToken(rowID: revocation.rowID, kind: kind)
            }
            try await transaction.finishRevocation(
                rowID: revocation.rowID, kind: kind, outcome: result.outcome, at: now, due: now)
        }
    }

    package func revocationCounts() async throws -> RevocationCounts {
        try await database.read { try await $0.revocationCounts() }
    }

    /// The unfinished entries, counted from the due index (`shadow_revocations_due`, whose
    /// condition this is), not from every entry the queue ever held: the worker reads it after
    /// every pass, once a second when idle.
    package static let pendingRevocationsSQL = "SELECT count(*) AS n FROM shadow_revocations WHERE done_ms IS NULL"

    package func pendingRevocations() async throws -> Int {
        try await database.read { try await $0.pendingRevocations() }
    }
}
