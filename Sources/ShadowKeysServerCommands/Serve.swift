import ArgumentParser
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Hummingbird
import HummingbirdCore
import Logging
import Metrics
import NIOCore
import Prometheus
import ServiceLifecycle
import ShadowApple
import ShadowCore
import ShadowCredentials
import ShadowHummingbird
import ShadowJOSE
import ShadowKeysCommands
import ShadowServer
import ShadowSessions
import UnixSignals

struct Serve: AsyncParsableCommand, QuietCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Receive Sign in with Apple server-to-server notifications over HTTP (TLS from a reverse proxy).",
        discussion: """
            POST /apple/notifications takes Apple's body ({"payload":"<JWT>"}) and answers 200 (applied, \
            duplicate, or an undocumented type), 400 (not JSON, no payload, malformed token), 401 \
            (signature or claims rejected, or issued more than --max-age ago), 413 (over 64 KiB) or \
            503 (Apple's keys or the store unavailable), each with a JSON body. A recorded account-delete \
            or consent-revoked queues the user's stored tokens for revocation; with --p8, --team-id and \
            --key-id they are revoked with Apple in the background, retried across restarts. GET \
            /healthz answers 200 {"status":"ok"} while the store answers, else 503; GET /metrics gives \
            the counters in Prometheus' text format. Logs go to stderr. SIGTERM or SIGINT stop taking \
            connections and finish the requests in flight. See Docs/server.md.
            """)

    @Option(help: ArgumentHelp("Address and port to listen on.", valueName: "host:port")) var listen = "127.0.0.1:8080"
    @Option(
        name: .customLong("client-id"),
        help: "A client ID (Services ID or bundle ID) notifications may be for; repeatable.") var clientIDs: [String] =
            []
    @Option(
        name: .customLong("max-age"), help: "Refuse notifications issued longer ago than this, seconds (60 to 604800).")
    var maxAge: Double = 86_400
    @OptionGroup var keySource: KeySourceOptions
    @OptionGroup var store: StoreOptions
    @Option(
        name: .customLong("p8"),
        help: "The Sign in with Apple key (.p8) that revokes tokens; with --team-id and --key-id.") var p8: String?
    @Option(name: .customLong("team-id"), help: "The 10-character Team ID, for revocations.") var teamID: String?
    @Option(name: .customLong("key-id"), help: "The 10-character Key ID of the .p8 key, for revocations.") var keyID:
        String?
    @Option(name: .customLong("base-url"), help: "Apple's auth base URL, for revocations (mirrors and tests).")
    var baseURL: String = Apple.baseURL
    @Option(
        name: .customLong("revocation-retry"),
        help: "Seconds before retrying a failed revocation, doubled each time up to an hour (1 to 3600).")
    var revocationRetry: Double = 30
    @Option(
        name: .customLong("revocation-lease"),
        help: "Seconds a claimed revocation is held before another worker may take it (5 to 3600).")
    var revocationLease: Double = 60
    @Option(
        name: .customLong("shutdown-grace"),
        help: "Seconds the requests in flight get after SIGTERM or SIGINT; then the rest are closed (0 to 3600).")
    var shutdownGrace: Double = 10
    @Option(
        name: .customLong("idle-timeout"),
        help:
            """
            Seconds a connection may sit without a complete request head: idle, or sending its head slowly (1 to \
            3600).
            """
    )
    var idleTimeout: Double = 15
    @Option(
        name: .customLong("body-timeout"),
        help: "Seconds a request body may take to arrive; slower gets 408 and the connection is closed (1 to 600).")
    var bodyTimeout: Double = 10
    @Option(
        name: .customLong("max-connections"),
        help: "Most connections at once; more wait to be accepted (default: the descriptor limit less 64).")
    var maxConnections: Int?
    @OptionGroup var sessions: SessionOptions
    @Option(
        name: .customLong("trusted-proxy"),
        help: ArgumentHelp(
            """
            A proxy whose Forwarded or X-Forwarded-For header names the client, for the per-IP limits: an address \
            or a CIDR range; repeatable. Without it, those headers are ignored.
            """, valueName: "address|cidr"))
    var trustedProxies: [String] = []

    /// The listen address, checked.
    func address() throws -> (host: String, port: Int) {
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]),
            (1...65535).contains(port)
        else {
            throw ValidationError("--listen: host:port with a port of 1 to 65535, not \(listen.quotedForMessage)")
        }
        var host = String(listen[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw ValidationError("--listen: no host in \(listen.quotedForMessage)") }
        return (host, port)
    }

    @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

    func validate() throws {
        _ = try address()
        guard !clientIDs.isEmpty else {
            throw ValidationError("give at least one --client-id: the client IDs notifications may be for")
        }
        guard (60...604_800).contains(maxAge) else { throw ValidationError("--max-age: 60 to 604800 seconds") }
        try keySource.validate(default: Apple.keysURL, networkUsedElsewhere: p8 != nil)
        if keySource.jwks == "-" { throw ValidationError("--jwks -: a server reads its keys from a URL or a file") }
        try store.requireKey()
        let revokes = [p8, teamID, keyID].compactMap { $0 }.count
        guard revokes == 0 || revokes == 3 else {
            throw ValidationError("give --p8, --team-id and --key-id together (revocations), or none of them")
        }
        let identifier = #/^[A-Z0-9]{10}$/#
        if let teamID, teamID.wholeMatch(of: identifier) == nil {
            throw ValidationError("--team-id must be 10 characters A-Z and 0-9")
        }
        if let keyID, keyID.wholeMatch(of: identifier) == nil {
            throw ValidationError("--key-id must be 10 characters A-Z and 0-9")
        }
        try keySource.network.check(baseURL + "/auth/revoke", option: "--base-url")
        guard (1...3600).contains(revocationRetry) else {
            throw ValidationError("--revocation-retry: 1 to 3600 seconds")
        }
        guard (5...3600).contains(revocationLease) else {
            throw ValidationError("--revocation-lease: 5 to 3600 seconds")
        }
        guard (0...3600).contains(shutdownGrace) else { throw ValidationError("--shutdown-grace: 0 to 3600 seconds") }
        guard (1...3600).contains(idleTimeout) else { throw ValidationError("--idle-timeout: 1 to 3600 seconds") }
        guard (1...600).contains(bodyTimeout) else { throw ValidationError("--body-timeout: 1 to 600 seconds") }
        try sessions.validate(clientIDs: clientIDs, revokes: revokes == 3)
        do { _ = try TrustedProxies(trustedProxies) } catch let error as TrustedProxies.InvalidProxy {
            throw ValidationError("--trusted-proxy: \(error)")
        }
        if !trustedProxies.isEmpty, !sessions.enabled {
            throw ValidationError("--trusted-proxy is for the session routes' limits: give --sessions-issuer")
        }
        if sessions.enabled {
            guard try store.sqlitePath() != nil || store.postgresURL() != nil else {
                throw ValidationError("--sessions-issuer: sessions live in a sqlite: or postgres:// store, not a vault")
            }
        }
        if let maxConnections, !(1...ServeLimits.descriptorLimit()).contains(maxConnections) {
            throw ValidationError(
                "--max-connections: 1 to \(ServeLimits.descriptorLimit()) (this process's descriptor limit)")
        }
    }

    /// Apple clients by client ID, for the code exchange and the re-check (needs the .p8 key).
    func appleClients(keys: any JWKSource) throws -> [String: AppleAuthClient] {
        guard let p8, let teamID, let keyID else { return [:] }
        let key = try readAppleSigningKey(p8)
        var configuration = AppleAuthClient.Configuration()
        configuration.baseURL = baseURL
        configuration.allowLoopbackHTTP = keySource.network.allowHTTPLoopback
        let transport = try keySource.network.transport()
        var clients: [String: AppleAuthClient] = [:]
        for clientID in clientIDs {
            let builder = try ClientSecretBuilder(key: key, teamID: teamID, keyID: keyID, clientID: clientID)
            clients[clientID] = try AppleAuthClient(
                configuration: configuration, secrets: ClientSecretProvider(builder: builder), transport: transport,
                identityTokenKeys: keys)
        }
        return clients
    }

    /// The revocation worker, when the store keeps a queue and the Apple key was given.
    func revocationWorker(
        queue: any RevocationQueue, clients: [String: AppleAuthClient], logger: Logger
    ) -> RevocationWorker? {
        guard !clients.isEmpty else { return nil }
        var settings = RevocationWorker.Configuration()
        settings.firstRetryDelay = .seconds(revocationRetry)
        settings.lease = .seconds(revocationLease)
        return RevocationWorker(
            queue: queue, configuration: settings, logger: logger, revoke: RevocationWorker.apple(clients))
    }

    func run() async throws {
        try await reportingFailures(json: false) {
            LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
            let registry = PrometheusCollectorRegistry()
            MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
            var logger = Logger(label: "shadow-keys.serve")
            logger.logLevel = .info
            let keys = try keySource.appleKeys()
            // The .p8 key is read once, before the store is opened: the code exchange and the
            // revocation worker share its clients.
            let apple = try appleClients(keys: keys)
            // The clients file, the proxies and the address are read before the store is opened
            // (or created), so a mistake in one leaves no new store behind.
            let introspection = sessions.enabled ? try sessions.introspectionClients() : [:]
            let proxies = try TrustedProxies(trustedProxies)
            let (host, port) = try address()
            // One database handle for the store: credential state, sessions and the
            // authentication log share its connections.
            let database = try await ServerDatabase.open(store)
            // Nothing is left open when the setup fails: the database is closed before the error
            // is reported (a SQLite handle dropped unclosed is a programming error in the driver).
            let group: ServiceGroup
            do {
                let states = try await database.credentialStore(store)
                var sessionService: SessionService?
                var sessionEndpoints: SessionEndpoints?
                if sessions.enabled {
                    let started = try await sessions.start(
                        store: store, database: database, states: states, clientIDs: clientIDs, keys: keys,
                        appleClients: apple, introspectionClients: introspection, logger: logger)
                    sessionEndpoints = started.endpoints
                    sessionService = started.service
                }
                // A notification that leaves the user revoked or transferred ends their sessions
                // before Apple gets its answer (SessionStateRules).
                var afterApplying: (@Sendable (CredentialChange) async throws -> Void)?
                if let rules = sessionEndpoints?.rules {
                    afterApplying = { change in _ = try await rules.endSessions(after: change) }
                }
                let receiver = AppleNotificationReceiver(
                    clientIDs: clientIDs, keys: keys, store: states, maxAge: maxAge, logger: logger,
                    afterApplying: afterApplying)
                var worker: RevocationWorker?
                if let queue = states as? any RevocationQueue {
                    worker = revocationWorker(queue: queue, clients: apple, logger: logger)
                    if worker == nil {
                        Console.warn(
                            "no --p8, --team-id and --key-id: revocations are queued in the store but not sent to Apple"
                        )
                    }
                } else if p8 != nil {
                    Console.warn(
                        "a vault store keeps no revocation queue: --p8 is not used; use a SQLite or PostgreSQL store")
                }
                // HEAD wherever GET; what no route takes is answered in JSON (JSONRouterResponder).
                let router = Router(context: ShadowRequestContext.self, options: .autoGenerateHeadEndpoints)
                if let sessionEndpoints {
                    router.addSessionRoutes(
                        sessionEndpoints, bodyTimeout: .nanoseconds(Int64(bodyTimeout * 1e9)),
                        trustedProxies: proxies)
                }
                router.addAppleNotifications(receiver: receiver, bodyTimeout: .nanoseconds(Int64(bodyTimeout * 1e9)))
                router.get("metrics") { _, _ -> Response in
                    var text: [UInt8] = []
                    registry.emit(into: &text)
                    return Response(
                        status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                        body: .init(byteBuffer: ByteBuffer(bytes: text)))
                }
                router.get("healthz") { _, _ -> Response in
                    let healthy = (try? await states.status(clientID: "healthz", subject: "healthz")) != nil
                    return Response(
                        status: healthy ? .ok : .serviceUnavailable, headers: [.contentType: "application/json"],
                        body: .init(
                            byteBuffer: ByteBuffer(
                                string: healthy ? #"{"status":"ok"}"# : #"{"status":"store_unavailable"}"#)))
                }
                // At the limit, idle connections make room for new ones (ConnectionLimit).
                let limit = ConnectionLimit(
                    maximum: maxConnections ?? ServeLimits.defaultMaxConnections(), logger: logger)
                let app = Application(
                    responder: JSONRouterResponder(router),
                    server: .http1(
                        configuration: .init(
                            additionalChannelHandlers: limit.channelHandlers(),
                            idleTimeout: .nanoseconds(Int64(idleTimeout * 1e9)))),
                    configuration: .init(
                        address: .hostname(host, port: port), serverName: "shadow-keys",
                        availableConnectionsDelegate: limit.delegate),
                    logger: logger)
                // Shut down in reverse order: the database last, once nothing uses it.
                var services: [any Service] = [DatabaseService(database: database), app]
                if let worker { services.append(RevocationService(worker: worker)) }
                if let sessionService { services.append(sessionService) }
                var configuration = ServiceGroupConfiguration(
                    services: services.map { .init(service: $0) }, gracefulShutdownSignals: [.sigterm, .sigint],
                    logger: logger)
                // After the grace period the group cancels the server, which closes what is still open.
                configuration.maximumGracefulShutdownDuration = .nanoseconds(Int64(shutdownGrace * 1e9))
                configuration.maximumCancellationDuration = .seconds(5)
                group = ServiceGroup(configuration: configuration)
            } catch {
                await database.close()
                throw error
            }
            do {
                try await group.run()
            } catch {
                await database.close()
                throw CLIError(.failure, code: "serve_failed", "serving on \(listen) failed: \(error)")
            }
            await database.close()
        }
    }
}

/// The revocation worker as a service: it stops between attempts when the server shuts down.
struct RevocationService: Service {
    let worker: RevocationWorker

    func run() async throws {
        await cancelWhenGracefulShutdown { await worker.run() }
    }
}

/// The descriptor limit `serve` runs under: raised at start to the hard limit, as servers do
/// (systemd's soft default of 1024 is for programs that do not expect many connections).
enum ServeLimits {
    /// Descriptors kept back from the connection limit: the store, the key cache, logs, Apple.
    static let reserve = 64

    /// Raises the soft descriptor limit to the hard one, and returns the soft limit now in force.
    static func descriptorLimit() -> Int {
        #if canImport(Glibc)
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        #else
        let resource = RLIMIT_NOFILE
        #endif
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return 1024 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = min(limit.rlim_max, 1 << 20)
            if setrlimit(resource, &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)
    }

    /// The default connection limit: the descriptor limit less the reserve.
    static func defaultMaxConnections() -> Int { max(1, descriptorLimit() - reserve) }
}
