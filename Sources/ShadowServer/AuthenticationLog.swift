#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import Logging
import ShadowCore
public import ShadowOperationLog
public import ShadowSessions

/// The authentication log (Docs/sessions.md, "Authentication log"): every session event of a
/// ``SessionAuthority`` as an entry of a tamper-evident operation log, as `serve`, the `sessions`
/// commands and a library user write it alike.
public struct AuthenticationLog: Sendable {
    public let log: OperationLog
    let logger: Logger

    public init(log: OperationLog, logger: Logger = Logger(label: "shadow-keys.sessions")) {
        self.log = log
        self.logger = logger
    }

    /// The origin a new authentication log gets for `issuer`: the issuer's host and path without
    /// its scheme, whitespace or `+`, then `/auth-log` (`sessions/auth-log` when nothing is left).
    public static func origin(issuer: String) -> String {
        let name =
            issuer.split(separator: "://", maxSplits: 1).last.map(String.init)?.split(separator: "/")
            .joined(separator: "/").filter { !$0.isWhitespace && $0 != "+" } ?? ""
        return (name.isEmpty ? "sessions" : name) + "/auth-log"
    }

    /// One event as an entry: the kind as the operation, `shadow-keys` as the provider, `user` as
    /// the entity type, the user ID (lowercase) as the sealed entity ID (`unknown` when there is
    /// none), `success` false for reuse and failed re-checks, and `{"session": ID}` as details.
    public static func entry(_ event: SessionEvent) -> OperationEntry {
        var details: JSONObject?
        if let session = event.session { details = ["session": .string(session.description)] }
        return OperationEntry(
            operation: event.kind.rawValue, provider: "shadow-keys", entityType: "user",
            entityID: event.user?.uuidString.lowercased() ?? "unknown", time: event.time,
            success: event.kind != .reuseDetected && event.kind != .recheckFailed, details: details)
    }

    /// Appends the event; a log that refuses it is logged, not thrown: sessions go on.
    public func record(_ event: SessionEvent) async {
        do {
            _ = try await log.append(Self.entry(event))
        } catch {
            logger.error("the authentication log refused an entry", metadata: ["error": "\(error)"])
        }
    }

    /// The `events` closure a ``SessionAuthority`` takes.
    public var events: @Sendable (SessionEvent) async -> Void { { event in await record(event) } }
}
