#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import Logging
import Metrics
public import ShadowApple
public import ShadowCore
public import ShadowCredentials
public import HTTPTypes
public import ShadowJOSE

/// What a notification endpoint answers: an HTTP status and a JSON body, and what happened.
public struct NotificationResponse: Sendable {
    public enum Outcome: String, Sendable {
        /// Verified and applied (the user's state changed, or the event was recorded).
        case applied
        /// Verified, and already applied: by this instance or another sharing the store.
        case duplicate
        /// Verified, of a type Apple has not documented: logged, nothing applied.
        case ignored
        /// Not JSON, no `payload`, or a malformed token (400).
        case badRequest = "bad_request"
        /// A signature, key, claim or age check failed (401).
        case unauthorized
        /// Over 64 KiB (413).
        case tooLarge = "too_large"
        /// Apple's keys or the store could not be reached (503): Apple retries later.
        case unavailable
        /// The body did not arrive: the client went away mid-body (400), or was slower than the
        /// body timeout (408). Nothing was verified or applied.
        case incomplete
    }

    public let status: HTTPResponse.Status
    public let outcome: Outcome
    /// `{"outcome":…}`, with `"error":{"code","message"}` for a refusal.
    public let body: [UInt8]
    /// The verified notification, when it verified.
    public let notification: AppleNotification?
    /// The change applying it made, when it was applied.
    public let change: CredentialChange?

    init(
        _ outcome: Outcome, notification: AppleNotification? = nil, change: CredentialChange? = nil,
        code: String? = nil, message: String? = nil
    ) {
        self.outcome = outcome
        self.notification = notification
        self.change = change
        switch outcome {
        case .applied, .duplicate, .ignored: status = .ok
        case .badRequest: status = .badRequest
        case .unauthorized: status = .unauthorized
        case .tooLarge: status = .contentTooLarge
        case .unavailable: status = .serviceUnavailable
        case .incomplete: status = code == "timeout" ? .requestTimeout : .badRequest
        }
        var object: JSONObject = ["outcome": .string(outcome.rawValue)]
        if let code, let message { object.set("error", .error(code: code, message: message)) }
        body = Array(JSONValue.object(object).serialized().utf8)
    }
}

/// The framework-neutral core of a Sign in with Apple notification endpoint: the POST body in,
/// a verified, applied and logged outcome out (Docs/server.md).
///
/// The body's `payload` is verified against Apple's keys (`iss`, `aud` one of the client IDs,
/// `exp`, and `iat` no older than `maxAge`); its event is applied to the store under the
/// notification's `aud`. A repeated `jti` changes nothing and is answered 200 as a duplicate,
/// whichever instance sharing the store saw it first. A recorded `account-delete` or
/// `consent-revoked` queues the user's stored tokens for revocation in the same transaction, when
/// the store is a ``RevocationQueue`` (the database stores); a ``RevocationWorker`` does the rest.
///
/// Metrics (swift-metrics): `shadow_keys_notifications_received_total`, and
/// `shadow_keys_notifications_total` with the dimension `outcome` (`applied`, `duplicate`,
/// `ignored`, `bad_request`, `unauthorized`, `too_large`, `unavailable`).
public final class AppleNotificationReceiver: Sendable {
    public let verifier: AppleNotificationVerifier
    public let keys: any JWKSource
    public let store: any CredentialStateStore
    /// Notifications issued longer ago than this are refused (401): a replay of an old body.
    public let maxAge: TimeInterval
    /// Runs after each applied notification, before the answer (sessions end there: see
    /// ``SessionStateRules``); when it throws, the answer is 503, so Apple delivers it again.
    let afterApplying: (@Sendable (CredentialChange) async throws -> Void)?
    let logger: Logger
    let received = Counter(label: "shadow_keys_notifications_received_total")
    let outcomes: [NotificationResponse.Outcome: Counter]

    /// - Parameter afterApplying: runs after each notification is applied (a duplicate too),
    ///   before the answer; when it throws, the answer is 503 `unavailable` and Apple retries.
    public init(
        clientIDs: [String], keys: any JWKSource, store: any CredentialStateStore, maxAge: TimeInterval = 86_400,
        leeway: TimeInterval = 60,
        clock: WallClock = .system, logger: Logger = Logger(label: "shadow-keys.notifications"),
        afterApplying: (@Sendable (CredentialChange) async throws -> Void)? = nil
    ) {
        verifier = AppleNotificationVerifier(clientIDs: clientIDs, leeway: leeway, clock: clock)
        self.keys = keys
        self.store = store
        self.maxAge = maxAge
        self.afterApplying = afterApplying
        self.logger = logger
        let all: [NotificationResponse.Outcome] = [
            .applied, .duplicate, .ignored, .badRequest, .unauthorized, .tooLarge, .unavailable, .incomplete,
        ]
        outcomes = Dictionary(
            uniqueKeysWithValues: all.map {
                ($0, Counter(label: "shadow_keys_notifications_total", dimensions: [("outcome", $0.rawValue)]))
            })
    }

    /// Handles one POST body.
    public func receive(_ body: some Collection<UInt8>) async -> NotificationResponse {
        guard body.count <= AppleNotificationVerifier.maxBodyBytes else { return refuseOversized() }
        received.increment()
        let response = await handle(body)
        outcomes[response.outcome]?.increment()
        return response
    }

    /// The 413 answer, for a framework that stops reading a body at
    /// ``AppleNotificationVerifier/maxBodyBytes`` (counted like any other notification).
    public func refuseOversized() -> NotificationResponse {
        logger.notice("notification refused", metadata: ["reason": "body over 64 KiB"])
        received.increment()
        outcomes[.tooLarge]?.increment()
        return NotificationResponse(
            .tooLarge, code: "too_large", message: "the body exceeds \(AppleNotificationVerifier.maxBodyBytes) bytes")
    }

    /// The answer to a body that never arrived whole: the client hung up or broke off
    /// (`incomplete`, 400), or was slower than the body timeout (`timeout`, 408). Counted under
    /// the outcome `incomplete`, never `too_large`.
    public func refuseIncomplete(timedOut: Bool) -> NotificationResponse {
        logger.notice("notification refused", metadata: ["reason": "\(timedOut ? "body timeout" : "incomplete body")"])
        received.increment()
        outcomes[.incomplete]?.increment()
        return timedOut
            ? NotificationResponse(
                .incomplete, code: "timeout", message: "the body did not arrive within the body timeout")
            : NotificationResponse(.incomplete, code: "incomplete", message: "the body ended before it was complete")
    }

    private func handle(_ body: some Collection<UInt8>) async -> NotificationResponse {
        let notification: AppleNotification
        do {
            notification = try await verifier.verify(body: body, keys: keys)
        } catch let error as JOSEError {
            let outcome: NotificationResponse.Outcome =
                switch error.code {
                case .malformedToken: .badRequest
                case .keysUnavailable: .unavailable
                default: .unauthorized
                }
            logger.notice("notification refused", metadata: ["code": "\(error.codeName)", "reason": "\(error.reason)"])
            return NotificationResponse(outcome, code: error.codeName, message: error.reason)
        } catch {
            logger.warning("notification keys unavailable", metadata: ["error": "\(error)"])
            return NotificationResponse(
                .unavailable, code: "keys_unavailable", message: "Apple's keys could not be read")
        }
        let age = verifier.clock.now.timeIntervalSince(notification.issuedAt)
        guard age <= maxAge else {
            logger.notice("notification refused", metadata: ["code": "stale", "jti": "\(notification.jwtID)"])
            return NotificationResponse(
                .unauthorized, notification: notification, code: "stale",
                message: "the notification was issued \(Int(age)) s ago, more than \(Int(maxAge)) s")
        }
        let event: CredentialEvent?
        do {
            event = try CredentialEvent.notification(notification, clientID: notification.audience)
        } catch let error as CredentialError {
            return NotificationResponse(
                .badRequest, notification: notification, code: error.codeName, message: error.reason)
        } catch {
            return NotificationResponse(
                .badRequest, notification: notification, code: "invalid_event", message: "the event cannot be recorded")
        }
        guard let event else {
            logger.info(
                "notification of an undocumented type ignored",
                metadata: ["type": "\(notification.rawType)", "jti": "\(notification.jwtID)"])
            return NotificationResponse(.ignored, notification: notification)
        }
        do {
            guard let change = try await store.apply([event]).first else {
                return NotificationResponse(.unavailable, code: "store", message: "nothing applied")
            }
            let outcome: NotificationResponse.Outcome = change.changed ? .applied : .duplicate
            if let afterApplying {
                do { try await afterApplying(change) } catch {
                    logger.error(
                        "notification applied, its consequences not",
                        metadata: ["error": "\(String(describing: error))"])
                    return NotificationResponse(
                        .unavailable, notification: notification, change: change, code: "sessions_unavailable",
                        message: "the state was recorded but the user's sessions could not be ended; deliver it again")
                }
            }
            logger.info(
                "notification \(outcome.rawValue)",
                metadata: [
                    "type": "\(notification.rawType)", "jti": "\(notification.jwtID)", "old": "\(change.old.state)",
                    "new": "\(change.new.state)",
                ])
            return NotificationResponse(outcome, notification: notification, change: change)
        } catch let error as CredentialError {
            logger.error(
                "notification not applied", metadata: ["code": "\(error.codeName)", "reason": "\(error.reason)"])
            return NotificationResponse(
                .unavailable, notification: notification, code: error.codeName,
                message: "the credential store is unavailable")
        } catch {
            logger.error("notification not applied", metadata: ["error": "\(type(of: error))"])
            return NotificationResponse(
                .unavailable, notification: notification, code: "store", message: "the credential store is unavailable")
        }
    }
}
