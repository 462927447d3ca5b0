#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import Logging
public import ShadowCore
public import ShadowJOSE
import HTTPTypes
import Synchronization

/// A key set fetched from a URL and kept fresh: the same verification API as a local
/// ``JWKSet``, with the caching rules of Docs/jwks-caching.md.
///
/// - Freshness comes from `Cache-Control: max-age` or `Expires`, clamped to [1 min, 24 h]
///   (1 h when the server says nothing); refreshes are conditional (`ETag`, `Last-Modified`).
/// - An unknown `kid` triggers at most one refresh per cooldown (30 s); during a cooldown the
///   answer is an immediate "unknown key", and recently unknown `kid`s sit in a bounded
///   negative cache. Concurrent callers share one in-flight fetch.
/// - When a refresh fails, the last good set keeps serving for up to `maximumStaleness` past
///   its expiry (24 h); after that, "keys unavailable". Keys dropped from a new set stop
///   verifying at once.
public final class JWKSProvider: Sendable {
    /// The provider's settings; defaults follow Docs/jwks-caching.md.
    public struct Configuration: Sendable {
        /// The key-set URL (HTTPS).
        public var url: String
        /// Whole-fetch timeout. Default 5 s.
        public var timeout: Duration = .seconds(5)
        /// Largest accepted response body. Default 256 KiB.
        public var maxResponseBytes: Int = 256 * 1024
        /// Freshness when the server gives none. Default 1 h.
        public var defaultTTL: Duration = .seconds(3600)
        /// Bounds on server-given freshness. Default 1 min to 24 h.
        public var ttlBounds: ClosedRange<Duration> = .seconds(60) ... .seconds(86400)
        /// Least time between two fetches triggered by unknown `kid`s or after a failure. Default 30 s.
        public var refreshCooldown: Duration = .seconds(30)
        /// Most `kid`s remembered as unknown. Default 1024.
        public var negativeCacheSize: Int = 1024
        /// How long past its expiry the last good set may serve while refreshes fail. Default 24 h.
        public var maximumStaleness: Duration = .seconds(86400)
        /// Allow plain `http://` to 127.0.0.1 or ::1 (tests, local mirrors). Default false.
        public var allowLoopbackHTTP = false
        /// Sent as `User-Agent`.
        public var userAgent = "shadow-keys/0.1"
        /// Fetch over TLS 1.3 only: set for Apple's key set and mirrors of it (Apple requires
        /// TLS 1.3 for its APIs), or for any issuer that requires it. Default false.
        public var requiresTLS13 = false

        /// Settings for `url` with every default.
        public init(url: String) { self.url = url }
    }

    /// What the provider holds, for diagnostics (`shadow-keys jwks show`).
    public struct Status: Sendable {
        public let keySet: JWKSet?
        public let snapshot: KeySetSnapshot
    }

    public let configuration: Configuration
    private let transport: (any HTTPTransport)?
    private let store: (any KeySetStore)?
    private let clock: WallClock
    private let logger: Logger
    private let state: Mutex<State>

    private struct State: Sendable {
        var snapshot = KeySetSnapshot()
        var keySet: JWKSet?
        var loaded = false
        var inFlight: Task<Void, Never>?
        var isShutDown = false
    }

    /// A provider fetching through `transport`; with a `store`, its state survives the process.
    /// Without a transport it only serves what the store holds (offline mode).
    public init(
        configuration: Configuration, transport: (any HTTPTransport)?, store: (any KeySetStore)? = nil,
        clock: WallClock = .system,
        logger: Logger = Logger(label: "shadow-keys.jwks")
    ) throws {
        try URLPolicy.check(configuration.url, allowLoopbackHTTP: configuration.allowLoopbackHTTP)
        self.configuration = configuration
        self.transport = transport
        self.store = store
        self.clock = clock
        self.logger = logger
        self.state = Mutex(State())
    }

    /// A provider that serves a local key set and never fetches (for code that takes a provider).
    public static func serving(_ keySet: JWKSet, clock: WallClock = .system) throws -> JWKSProvider {
        let provider = try JWKSProvider(
            configuration: .init(url: "https://local.invalid/jwks"), transport: nil, clock: clock)
        provider.state.withLock { state in
            state.loaded = true
            state.keySet = keySet
            state.snapshot.expiresAt = .distantFuture
        }
        return provider
    }

    // MARK: - Lifecycle

    /// Fetches the key set now, so the first verification does not wait. Failures are logged
    /// and left for verification to report.
    public func start() async {
        do { _ = try await keySet() } catch {
            logger.debug("initial key-set fetch failed", metadata: ["error": "\(error)"])
        }
    }

    /// Cancels any fetch in flight; later calls throw ``JWKSError/Code/shutDown``.
    public func shutdown() async {
        let task = state.withLock { state -> Task<Void, Never>? in
            state.isShutDown = true
            defer { state.inFlight = nil }
            return state.inFlight
        }
        task?.cancel()
        await task?.value
    }

    // MARK: - Keys

    /// A usable key set: the cached one while fresh, else refreshed; a stale one while refreshes
    /// fail and it is within `maximumStaleness`.
    ///
    /// - Throws: ``JOSEError/Code/keysUnavailable`` when nothing can be served.
    public func keySet() async throws -> JWKSet {
        try loadIfNeeded()
        let now = clock.now
        enum Plan { case serve(JWKSet), fetch, wait(Task<Void, Never>), fallBack }
        let plan = try state.withLock { state -> Plan in
            if state.isShutDown { throw JWKSError(.shutDown, "the key-set provider was shut down") }
            if let set = state.keySet, let expiry = state.snapshot.expiresAt, now < expiry { return .serve(set) }
            if let task = state.inFlight { return .wait(task) }
            if let notBefore = state.snapshot.retryNotBefore, now < notBefore { return .fallBack }
            return .fetch
        }
        switch plan {
        case .serve(let set): return set
        case .wait(let task): await task.value
        case .fetch: await fetch(reason: "expired")
        case .fallBack: break
        }
        return try servable()
    }

    /// The key for a token's `kid` and algorithm, refreshing once per cooldown for an unknown `kid`.
    ///
    /// - Throws: ``JOSEError/Code/unknownKey`` (at once while cooling down or for a `kid` known
    ///   to be unknown), ``JOSEError/Code/algorithmKeyMismatch``, or
    ///   ``JOSEError/Code/keysUnavailable``.
    public func key(for keyID: String?, algorithm: JWSAlgorithm) async throws -> JWK {
        let set = try await keySet()
        do {
            return try set.key(for: keyID, algorithm: algorithm)
        } catch let error as JOSEError where error.code == .unknownKey {
            guard let keyID else { throw error }
            let now = clock.now
            enum Plan { case answer, fetch, wait(Task<Void, Never>) }
            let plan = state.withLock { state -> Plan in
                if let task = state.inFlight { return .wait(task) }
                if let entry = state.snapshot.unknownKeyIDs.first(where: { $0.keyID.exactlyEquals(keyID) }),
                    now.timeIntervalSince(entry.at) < configuration.refreshCooldown.inSeconds
                {
                    return .answer
                }
                if let last = state.snapshot.lastAttempt,
                    now.timeIntervalSince(last) < configuration.refreshCooldown.inSeconds
                {
                    return .answer
                }
                if let notBefore = state.snapshot.retryNotBefore, now < notBefore { return .answer }
                return .fetch
            }
            switch plan {
            case .answer:
                remember(unknown: keyID, at: now)
                logger.debug("unknown kid during refresh cooldown", metadata: ["kid": "\(keyID)"])
                throw error
            case .wait(let task): await task.value
            case .fetch: await fetch(reason: "unknown kid", unknownKeyID: keyID)
            }
            do {
                return try servable().key(for: keyID, algorithm: algorithm)
            } catch let again as JOSEError where again.code == .unknownKey {
                remember(unknown: keyID, at: clock.now)
                throw JOSEError(.unknownKey, again.reason + " (after refreshing the key set)")
            }
        }
    }

    /// Fetches now (conditionally), whatever the freshness and cooldown.
    public func refresh() async throws {
        try loadIfNeeded()
        let task = state.withLock { $0.inFlight }
        if let task { await task.value } else { await fetch(reason: "explicit refresh") }
        let failure = state.withLock { $0.snapshot.lastAttempt != nil ? $0.snapshot.lastFailure : nil }
        if let failure { throw JWKSError(.fetchFailed, failure) }
    }

    /// What the provider currently holds.
    public var status: Status {
        get throws {
            try loadIfNeeded()
            return state.withLock { Status(keySet: $0.keySet, snapshot: $0.snapshot) }
        }
    }

    // MARK: - Internals

    /// The set to serve after any fetch has finished: fresh, or stale within bounds.
    private func servable() throws -> JWKSet {
        let now = clock.now
        return try state.withLock { state in
            guard let set = state.keySet, let expiry = state.snapshot.expiresAt else {
                let why = state.snapshot.lastFailure.map { ": \($0)" } ?? ""
                throw JOSEError(.keysUnavailable, "no key set has been fetched from \(configuration.url)\(why)")
            }
            if now < expiry { return set }
            let staleness = now.timeIntervalSince(expiry)
            guard staleness <= configuration.maximumStaleness.inSeconds else {
                let why = state.snapshot.lastFailure.map { "; last refresh failed: \($0)" } ?? ""
                throw JOSEError(
                    .keysUnavailable,
                    """
                    the cached key set from \(configuration.url) expired \(Int(staleness)) s ago, beyond the \
                    \(Int(configuration.maximumStaleness.inSeconds)) s staleness limit\(why)
                    """
                )
            }
            logger.debug(
                "serving a stale key set",
                metadata: ["url": "\(configuration.url)", "stale_seconds": "\(Int(staleness))"])
            return set
        }
    }

    private func loadIfNeeded() throws {
        let needed = try state.withLock { state -> Bool in
            if state.isShutDown { throw JWKSError(.shutDown, "the key-set provider was shut down") }
            return !state.loaded
        }
        guard needed else { return }
        let snapshot = store?.load()
        state.withLock { state in
            guard !state.loaded else { return }
            state.loaded = true
            if let snapshot { adopt(snapshot, into: &state) }
        }
    }

    /// Takes a snapshot as current, re-reading its key set.
    private func adopt(_ snapshot: KeySetSnapshot, into state: inout State) {
        state.snapshot = snapshot
        state.keySet = snapshot.body.flatMap { try? JWKSet(json: $0) }.flatMap { $0.keys.isEmpty ? nil : $0 }
        if state.keySet == nil {
            state.snapshot.body = nil
            state.snapshot.expiresAt = nil
        }
    }

    /// The longest `kid` the negative cache remembers: a token chooses its `kid`, and the cache is
    /// persisted, so it must not grow with what an attacker sends.
    static let maxRememberedKeyIDBytes = 256

    private func remember(unknown keyID: String, at time: Date) {
        guard keyID.utf8.count <= Self.maxRememberedKeyIDBytes else { return }
        let snapshot = state.withLock { state -> KeySetSnapshot in
            state.snapshot.unknownKeyIDs.removeAll { $0.keyID.exactlyEquals(keyID) }
            state.snapshot.unknownKeyIDs.append(.init(keyID: keyID, at: time))
            let excess = state.snapshot.unknownKeyIDs.count - configuration.negativeCacheSize
            if excess > 0 { state.snapshot.unknownKeyIDs.removeFirst(excess) }
            return state.snapshot
        }
        persist(snapshot)
    }

    private func persist(_ snapshot: KeySetSnapshot) {
        guard let store else { return }
        do { try store.save(snapshot) } catch {
            logger.debug("could not save the key-set cache", metadata: ["error": "\(error)"])
        }
    }

    /// Runs one fetch, shared by every caller that arrives while it is in flight.
    private func fetch(reason: String, unknownKeyID: String? = nil) async {
        let task = state.withLock { state -> Task<Void, Never> in
            if let existing = state.inFlight { return existing }
            let task = Task { await self.performFetch(reason: reason, unknownKeyID: unknownKeyID) }
            state.inFlight = task
            return task
        }
        await task.value
    }

    private func performFetch(reason: String, unknownKeyID: String?) async {
        defer { state.withLock { $0.inFlight = nil } }
        // Across processes: take the store's lock, then look again; another process may have
        // fetched meanwhile.
        let unlock = store?.lockForRefresh(timeout: configuration.timeout + .seconds(1))
        defer { unlock?() }
        if let store, let latest = store.load() {
            let now = clock.now
            let skip = state.withLock { state -> Bool in
                guard latest.lastAttempt ?? .distantPast > state.snapshot.lastAttempt ?? .distantPast else {
                    return false
                }
                adopt(latest, into: &state)
                if let set = state.keySet, let expiry = latest.expiresAt, now < expiry {
                    // Fresh now; an unknown kid is answered from it unless the cooldown allows a refresh.
                    guard let unknownKeyID, !set.contains(keyID: unknownKeyID) else { return true }
                    return now.timeIntervalSince(latest.lastAttempt ?? .distantPast)
                        < configuration.refreshCooldown.inSeconds
                }
                return false
            }
            if skip { return }
        }
        guard let transport else {
            state.withLock { $0.snapshot.lastFailure = "offline: only the cache is used" }
            return
        }

        let started = clock.now
        var request = TransportRequest(
            url: configuration.url,
            headerFields: [.accept: "application/json, application/jwk-set+json", .userAgent: configuration.userAgent],
            timeout: configuration.timeout, maxResponseBytes: configuration.maxResponseBytes,
            requiresTLS13: configuration.requiresTLS13)
        let conditional = state.withLock { state -> (String?, String?) in
            state.snapshot.lastAttempt = started
            return state.keySet == nil ? (nil, nil) : (state.snapshot.etag, state.snapshot.lastModified)
        }
        // Validators come from a server (or a cache file): only well-formed ones go back out.
        if let etag = conditional.0, HTTPCaching.isSafeToEcho(etag) { request.headerFields[.ifNoneMatch] = etag }
        if let modified = conditional.1, HTTPCaching.isSafeToEcho(modified) {
            request.headerFields[.ifModifiedSince] = modified
        }
        logger.debug(
            "fetching key set",
            metadata: [
                "url": "\(configuration.url)", "reason": "\(reason)",
                "conditional": "\(conditional.0 != nil || conditional.1 != nil)",
            ])

        let outcome: Result<TransportResponse, HTTPTransportError>
        do {
            outcome = .success(try await transport.send(request))
        } catch let error as HTTPTransportError {
            outcome = .failure(error)
        } catch {
            outcome = .failure(HTTPTransportError(.other, "\(error)"))
        }
        let now = clock.now
        let snapshot = state.withLock { state -> KeySetSnapshot in
            switch outcome {
            case .success(let response) where response.status == .ok:
                do {
                    guard response.body.count <= configuration.maxResponseBytes else {
                        throw JWKSError(.fetchFailed, "response body exceeds \(configuration.maxResponseBytes) bytes")
                    }
                    let set: JWKSet
                    do { set = try JWKSet(json: response.body) } catch let error as JOSEError {
                        throw JWKSError(.fetchFailed, error.reason)
                    }
                    guard !set.keys.isEmpty else {
                        let skipped = set.skipped.map(\.description).joined(separator: "; ")
                        throw JWKSError(
                            .fetchFailed, "the key set has no usable key" + (skipped.isEmpty ? "" : " (\(skipped))"))
                    }
                    let previous = state.keySet?.keys.compactMap(\.keyID) ?? []
                    state.keySet = set
                    state.snapshot.body = response.body
                    state.snapshot.fetchedAt = now
                    state.snapshot.expiresAt = now.addingTimeInterval(ttl(response.headerFields, now: now))
                    state.snapshot.etag = response.headerFields.first(.eTag).flatMap {
                        HTTPCaching.isSafeToEcho($0) ? $0 : nil
                    }
                    state.snapshot.lastModified = response.headerFields.first(.lastModified).flatMap {
                        HTTPCaching.isSafeToEcho($0) ? $0 : nil
                    }
                    state.snapshot.lastFailure = nil
                    state.snapshot.retryNotBefore = nil
                    state.snapshot.unknownKeyIDs.removeAll()
                    let current = set.keys.compactMap(\.keyID)
                    logger.debug(
                        "fetched key set",
                        metadata: [
                            "url": "\(configuration.url)", "keys": "\(current)",
                            "dropped": "\(previous.filter { !current.contains($0) })",
                            "skipped": "\(set.skipped.count)",
                        ])
                } catch let error as JWKSError {
                    fail(&state, error.reason, now: now, response: response)
                } catch {
                    fail(&state, "\(error)", now: now, response: response)
                }
            case .success(let response) where response.status == .notModified && state.keySet != nil:
                state.snapshot.expiresAt = now.addingTimeInterval(ttl(response.headerFields, now: now))
                if let etag = response.headerFields.first(.eTag), HTTPCaching.isSafeToEcho(etag) {
                    state.snapshot.etag = etag
                }
                state.snapshot.lastFailure = nil
                state.snapshot.retryNotBefore = nil
                logger.debug(
                    "key set not modified (304); freshness extended", metadata: ["url": "\(configuration.url)"])
            case .success(let response):
                fail(
                    &state, "HTTP status \(response.status.code) from \(configuration.url)", now: now,
                    response: response)
            case .failure(let error):
                fail(&state, error.message, now: now, response: nil)
            }
            return state.snapshot
        }
        persist(snapshot)
    }

    private func fail(_ state: inout State, _ message: String, now: Date, response: TransportResponse?) {
        state.snapshot.lastFailure = message
        var retry = configuration.refreshCooldown.inSeconds
        if let response, let after = HTTPCaching.retryAfter(response.headerFields, now: now) {
            retry = max(retry, min(after, 300))
        }
        state.snapshot.retryNotBefore = now.addingTimeInterval(retry)
        logger.debug(
            "key-set fetch failed",
            metadata: ["url": "\(configuration.url)", "error": "\(message)", "retry_in": "\(Int(retry))"])
    }

    private func ttl(_ headers: HTTPFields, now: Date) -> Double {
        guard let lifetime = HTTPCaching.freshnessLifetime(headers, now: now) else {
            return configuration.defaultTTL.inSeconds
        }
        return min(
            max(lifetime, configuration.ttlBounds.lowerBound.inSeconds), configuration.ttlBounds.upperBound.inSeconds)
    }
}

extension JWKSProvider: JWKSource {}

/// Runs `body` with a started provider and shuts it down afterwards, however `body` ends.
public func withJWKSProvider<R>(
    configuration: JWKSProvider.Configuration, transport: any HTTPTransport, store: (any KeySetStore)? = nil,
    _ body: (JWKSProvider) async throws -> R
) async throws -> R {
    let provider = try JWKSProvider(configuration: configuration, transport: transport, store: store)
    await provider.start()
    do {
        let result = try await body(provider)
        await provider.shutdown()
        return result
    } catch {
        await provider.shutdown()
        throw error
    }
}
