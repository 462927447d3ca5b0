#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import Logging
import Metrics
import ShadowApple
public import ShadowCore

/// Works through a store's ``RevocationQueue``: claims due revocations, revokes each token with
/// Apple, and records the result (Docs/server.md, "Revocations").
///
/// A token Apple revoked, or one Apple answers `invalid_grant` for (already expired or revoked),
/// is deleted from the store. Any other failure is retried after a delay that doubles from
/// `firstRetryDelay` up to `maximumRetryDelay`; after `maximumAttempts` the entry is marked
/// `failed` and the token kept, for a person to look at. Several workers (in several processes)
/// may share one store: each claim is a lease, so a token is worked on by one of them at a time.
///
/// Metrics (swift-metrics): `shadow_keys_revocations_total` (dimension `outcome`: `revoked`,
/// `invalid_grant`, `retry`, `failed`) and the gauge `shadow_keys_revocations_pending`.
public final class RevocationWorker: Sendable {
    public struct Configuration: Sendable {
        /// Revocations claimed (and attempted concurrently) per pass: 1 to 1000. Default 16.
        public var batchSize = 16
        /// How long a claim lasts; longer than one attempt can take (Apple's client retries
        /// included). Default 60 s.
        public var lease: Duration = .seconds(60)
        /// Wait between passes when nothing is due. Default 1 s.
        public var pollInterval: Duration = .seconds(1)
        /// The delay after a first failure, doubled after each one. Default 30 s.
        public var firstRetryDelay: Duration = .seconds(30)
        /// The longest delay between attempts. Default 1 h.
        public var maximumRetryDelay: Duration = .seconds(3600)
        /// Attempts before an entry is marked `failed`. Default 20 (over 14 h with the defaults).
        public var maximumAttempts = 20

        public init() {}
    }

    /// Revokes one token; throws ``ShadowApple/AppleError`` (or anything else) on failure.
    public typealias Revoke = @Sendable (ServerToken) async throws -> Void

    public let queue: any RevocationQueue
    public let configuration: Configuration
    let revoke: Revoke
    let clock: WallClock
    let logger: Logger
    let pending = Gauge(label: "shadow_keys_revocations_pending")
    /// One counter per outcome, made once: a registry lookup per attempt is not needed.
    let results: [String: Counter] = Dictionary(
        uniqueKeysWithValues: ["revoked", "invalid_grant", "retry", "failed"].map {
            ($0, Counter(label: "shadow_keys_revocations_total", dimensions: [("outcome", $0)]))
        })

    public init(
        queue: any RevocationQueue, configuration: Configuration = Configuration(), clock: WallClock = .system,
        logger: Logger = Logger(label: "shadow-keys.revocations"), revoke: @escaping Revoke
    ) {
        self.queue = queue
        self.configuration = configuration
        self.revoke = revoke
        self.clock = clock
        self.logger = logger
    }

    /// One pass: claims up to `batchSize` due revocations and attempts them concurrently.
    /// Returns how many were attempted.
    @discardableResult
    public func runOnce() async throws -> Int {
        let (due, unreadable) = try await queue.claimRevocations(
            limit: configuration.batchSize, lease: configuration.lease)
        if unreadable > 0 {
            results["failed"]?.increment(by: unreadable)
            logger.error(
                "revocations given up: their stored tokens do not open (edited, or moved from another row)",
                metadata: ["count": "\(unreadable)"])
        }
        await withTaskGroup(of: Void.self) { group in
            for revocation in due { group.addTask { await self.attempt(revocation) } }
        }
        pending.record(try await queue.pendingRevocations())
        return due.count
    }

    /// Runs passes until the task is cancelled: the next at once while full batches come back,
    /// else after `pollInterval`. A pass that fails (the store unreachable) is logged and retried.
    public func run() async {
        while !Task.isCancelled {
            var attempted = 0
            do { attempted = try await runOnce() } catch {
                logger.warning("revocation pass failed", metadata: ["error": "\(error)"])
            }
            if attempted < configuration.batchSize { try? await Task.sleep(for: configuration.pollInterval) }
        }
    }

    func attempt(_ revocation: PendingRevocation) async {
        let result: RevocationResult
        do {
            try await revoke(revocation.token)
            result = .revoked
        } catch let error as AppleError where error.code == .invalidGrant {
            result = .alreadyInvalid
        } catch {
            let reason = (error as? any ShadowKeysError)?.reason ?? "\(type(of: error))"
            if revocation.attempts >= configuration.maximumAttempts {
                result = .failed(reason: reason)
            } else {
                result = .retry(
                    after: clock.now.addingTimeInterval(retryDelay(after: revocation.attempts).inSeconds),
                    reason: reason)
            }
        }
        let metadata: Logger.Metadata = [
            "client_id": "\(revocation.token.clientID)", "kind": "\(revocation.token.kind)",
            "attempt": "\(revocation.attempts)",
        ]
        switch result {
        case .revoked, .alreadyInvalid:
            logger.info("token revoked", metadata: metadata.merging(["outcome": "\(result.outcome ?? "")"]) { $1 })
        case .retry(_, let reason):
            logger.warning("revocation failed; will retry", metadata: metadata.merging(["reason": "\(reason)"]) { $1 })
        case .failed(let reason):
            logger.error("revocation failed; giving up", metadata: metadata.merging(["reason": "\(reason)"]) { $1 })
        }
        results[result.outcome ?? "retry"]?.increment()
        do {
            try await queue.completeRevocation(revocation, result)
        } catch {
            // The lease runs out and the revocation is claimed again: revoking twice is harmless.
            logger.warning("revocation result not recorded", metadata: metadata.merging(["error": "\(error)"]) { $1 })
        }
    }

    /// `firstRetryDelay` doubled for each attempt after the first, at most `maximumRetryDelay`.
    func retryDelay(after attempts: Int) -> Duration {
        var delay = configuration.firstRetryDelay
        for _ in 1..<max(1, min(attempts, 40)) where delay < configuration.maximumRetryDelay { delay *= 2 }
        return min(delay, configuration.maximumRetryDelay)
    }
}
