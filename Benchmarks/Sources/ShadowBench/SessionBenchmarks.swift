import AsyncHTTPClient
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import ShadowHummingbird
import ShadowKeys
import ShadowApple
import ShadowPostgres
import ShadowSQLite
import ShadowServer
import ShadowSessions
import ShadowTestSupport
import SQLiteNIO
import Synchronization

/// First-party sessions on SQLite: the middleware's cost beside the raw P-256 verify, refreshes
/// over loopback HTTP from 32 clients, and bytes per live session.
enum SessionBenchmarks {
    static let unlock = VaultUnlock.key(SecretBytes((0..<32).map { UInt8($0) }))
    static let configuration = SessionConfiguration(
        issuer: "https://api.example.com", audience: "https://api.example.com", clientID: "com.example.app")

    static func run(workDirectory: String) async throws -> [BenchRow] {
        let (directory, store, authority) = try await freshStore(workDirectory: workDirectory)
        var rows: [BenchRow] = []
        rows += try await middleware(authority)
        rows += try await refreshes([authority], label: "SQLite, one instance")
        rows += try await signIns(authority)
        rows += try await rateLimitStatement(directory: directory)
        await store.close()
        rows += try await storage(directory: directory)
        rows += try await sweep(directory: directory)
        rows += try await postgres()
        return rows
    }

    /// A new SQLite session store in the folder `folder` of `workDirectory`, and its authority.
    static func freshStore(
        workDirectory: String, folder: String = "sessions"
    ) async throws -> (directory: String, store: DatabaseSessionStore, authority: SessionAuthority) {
        let directory = workDirectory + "/" + folder
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let store = try await SQLiteSessionStore.open(path: directory + "/state.sqlite", unlock: unlock)
        return (directory, store, try await SessionAuthority(store: store, configuration: configuration))
    }

    /// The SQLite refresh row on a store of its own.
    static func sqliteRefreshes(workDirectory: String, dpop: Bool = false) async throws -> [BenchRow] {
        let (_, store, authority) = try await freshStore(workDirectory: workDirectory)
        let rows = try await refreshes([authority], label: "SQLite, one instance", dpop: dpop)
        await store.close()
        return rows
    }

    /// Two instances (two stores, two routers, two ports) on one PostgreSQL (a durable cluster).
    static func postgres(storage: Bool = true) async throws -> [BenchRow] {
        let cluster = try PostgresCluster.start(durable: true)
        defer { cluster.stop() }
        let url = try cluster.createDatabase("sessions")
        let stores = [
            try await PostgresSessionStore.connect(try PostgresLocation(url: url), unlock: unlock),
            try await PostgresSessionStore.connect(try PostgresLocation(url: url), unlock: unlock),
        ]
        var authorities: [SessionAuthority] = []
        for store in stores {
            authorities.append(try await SessionAuthority(store: store, configuration: configuration))
        }
        var rows = try await refreshes(authorities, label: "two instances on one PostgreSQL")
        if storage { rows += try await postgresStorage(authorities[0], cluster: cluster) }
        for store in stores { await store.close() }
        return rows
    }

    /// 50,000 live sessions of 10,000 users on PostgreSQL: the sessions table's growth (heap,
    /// TOAST and indexes, after VACUUM) per session over the last 40,000.
    static func postgresStorage(_ authority: SessionAuthority, cluster: PostgresCluster) async throws -> [BenchRow] {
        func size() throws -> Double {
            _ = try cluster.psql("sessions", "VACUUM ANALYZE shadow_sessions")
            let text = try cluster.psql("sessions", "SELECT pg_total_relation_size('shadow_sessions')")
            guard let bytes = Double(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw BenchError("pg_total_relation_size answered \(text)")
            }
            return bytes
        }
        let users = 10_000, sessions = 50_000
        for user in 0..<users {
            _ = try await authority.signIn(
                appleSubject: "stored-\(user)", appleClientID: "com.example.app", appleRefreshToken: nil,
                device: "iPhone 15 Pro")
        }
        let before = try size()
        for number in 0..<(sessions - users) {
            _ = try await authority.signIn(
                appleSubject: "stored-\(number % users)", appleClientID: "com.example.app", appleRefreshToken: nil,
                device: "iPhone 15 Pro")
        }
        let after = try size()
        return [
            BenchRow(
                name: "PostgreSQL bytes per live session (row and indexes)", unit: "count",
                ours: (after - before) / Double(sessions - users), raw: nil, peer: nil, peerName: nil,
                note: String(
                    format: """
                        %d sessions of %d users; growth of shadow_sessions over the last %d sessions, after VACUUM, \
                        device names of 13 bytes (goal ≤ 300)
                        """, sessions, users, sessions - users))
        ]
    }

    /// Sign-ins over loopback HTTP against a loopback fake of Apple (identity token checked,
    /// code exchanged with a client secret made from a .p8 key), one client at a time: latency.
    static func signIns(_ authority: SessionAuthority) async throws -> [BenchRow] {
        let apple = try FakeAppleServer(clientKey: TestKeys.p256.publicKey)
        var appleConfiguration = AppleAuthClient.Configuration()
        appleConfiguration.baseURL = apple.baseURL
        appleConfiguration.allowLoopbackHTTP = true
        let keys = try JWKSet(keys: [try apple.identitySigner.publicJWK()])
        let builder = try ClientSecretBuilder(
            key: AppleSigningKey(TestKeys.p256), teamID: apple.teamID, keyID: apple.keyID, clientID: "com.example.app")
        let client = try AppleAuthClient(
            configuration: appleConfiguration, secrets: ClientSecretProvider(builder: builder),
            transport: try AsyncHTTPClientTransport(options: .init(allowLoopbackHTTP: true)), identityTokenKeys: keys)
        var limits = SessionEndpoints.Limits()
        limits.perIP = try RateLimit(requests: 1_000_000, per: 1, burst: 1_000_000)
        let endpoints = SessionEndpoints(
            authority: authority, validator: AppleIdentityTokenValidator(clientIDs: ["com.example.app"]),
            appleKeys: keys, appleClients: ["com.example.app": client], limits: limits)
        let router = Router(context: ShadowRequestContext.self)
        router.addSessionRoutes(endpoints)
        let port = try PostgresCluster.freePortForTests()
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
        let running = Task { try await app.runService() }
        defer { running.cancel() }
        try await Task.sleep(for: .milliseconds(300))
        var latencies: [Double] = []
        for number in 0..<400 {
            let now = Int64(Date().timeIntervalSince1970)
            let identity = try apple.identitySigner.sign(claims: [
                "iss": "https://appleid.apple.com", "aud": "com.example.app", "sub": .string("signer-\(number)"),
                "iat": .int(now - 1), "exp": .int(now + 600),
            ])
            let body = JSONValue.object([
                "identityToken": .string(identity),
                "authorizationCode": .string(apple.issueCode(for: "signer-\(number)")), "deviceName": "bench",
            ]).serialized()
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/auth/apple")
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: body))
            let began = DispatchTime.now().uptimeNanoseconds
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
            _ = try await response.body.collect(upTo: 16 << 10)
            guard response.status == .ok else { throw BenchError("sign-in answered \(response.status.code)") }
            if number >= 50 { latencies.append(Double(DispatchTime.now().uptimeNanoseconds - began) / 1e6) }
        }
        let sorted = latencies.sorted()
        return [
            BenchRow(
                name: "sign-in over loopback HTTP against a loopback Apple fake: p99", unit: "ms",
                ours: sorted[sorted.count * 99 / 100], raw: sorted[sorted.count / 2], peer: nil, peerName: nil,
                note: """
                    POST /auth/apple, one client, 350 sign-ins after 50 to warm up: identity token checked, code \
                    exchanged (client secret made from the .p8 key), user mapped, session opened, tokens issued; \
                    raw column = the median (goal: p99 < 50 ms)
                    """)
        ]
    }

    /// A trivial route with and without `SessionMiddleware`, through Hummingbird's in-process
    /// client; the time it adds beside the raw P-256 verify of the same token.
    static func middleware(_ authority: SessionAuthority) async throws -> [BenchRow] {
        let issued = try await authority.signIn(
            appleSubject: "bench", appleClientID: "com.example.app", appleRefreshToken: nil, device: "bench")
        let token = issued.accessToken
        let jws = try CompactJWS(token)
        // The published key, from its JWK: x ‖ y is P-256's raw public key.
        let jwk = try await authority.verifier().keys.json["keys"]?.arrayValue?.first?.objectValue
        func coordinate(_ name: String) throws -> [UInt8] {
            guard var text = jwk?[name]?.stringValue else { throw BenchError("no \(name) in the JWK") }
            text = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            text += String(repeating: "=", count: (4 - text.count % 4) % 4)
            guard let data = Data(base64Encoded: text) else { throw BenchError("bad \(name)") }
            return [UInt8](data)
        }
        let key = try P256.Signing.PublicKey(rawRepresentation: try coordinate("x") + coordinate("y"))
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: Array(jws.signature))
        let input = Array(token.utf8.prefix(token.utf8.count - (token.split(separator: ".").last?.utf8.count ?? 0) - 1))
        let raw: @Sendable () throws -> Void = {
            guard key.isValidSignature(signature, for: SHA256.hash(data: input)) else { throw BenchError("raw P-256") }
        }
        let router = Router(context: ShadowRequestContext.self)
        router.get("plain") { _, _ in "ok" }
        router.group("api").add(middleware: SessionMiddleware(authority: authority))
            .get("me") { _, context in context.session?.userID.uuidString ?? "" }
        let paired = try await Application(router: router).test(.router) { client in
            func timed(_ path: String) async throws -> Double {
                try await ServeBenchmarks.timedGet(client, path, bearer: token)
            }
            for _ in 0..<500 { _ = try await timed("/api/me") }
            return try await ServeBenchmarks.pairedRounds(
                perRound: 200, plain: { try await timed("/plain") }, guarded: { try await timed("/api/me") }, raw: raw,
                peer: nil)
        }
        return [
            BenchRow(
                name: "session middleware: time added, in-process router", unit: "us/op", ours: 1 / paired.added,
                raw: 1 / paired.raw, peer: nil, peerName: nil,
                note: String(
                    format: """
                        SessionMiddleware (RFC 9068 ES256 access token, the ring's keys in memory, no store read) on \
                        Hummingbird's router test client: %.1f µs with it, %.1f µs without; it adds %.2f× the raw \
                        P-256 verify (goal ≤ 1.3×)
                        """, paired.guarded * 1e6, paired.plain * 1e6, paired.ratio))
        ]
    }

    /// 32 clients, each with its own session, refreshing in a loop over loopback HTTP for 5 s,
    /// spread over the instances (one router and port per authority).
    static func refreshes(
        _ authorities: [SessionAuthority], label: String, dpop: Bool = false
    ) async throws
        -> [BenchRow]
    {
        try await refreshRate(authorities, label: label, dpop: dpop).rows
    }

    /// This process's CPU time so far (user and system, every thread), in seconds.
    static func processCPUSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// The refresh run: its rows, and the rate (ops/s). With `dpop`, each client's session is
    /// bound to a key of its own and every refresh carries a fresh proof by it (made before the
    /// timed run).
    static func refreshRate(
        _ authorities: [SessionAuthority], label: String, dpop: Bool = false, seconds: Double = 5,
        noop: Bool = true
    ) async throws
        -> (rows: [BenchRow], rate: Double, cpuPerRefresh: Double)
    {
        var limits = SessionEndpoints.Limits()
        limits.perIP = try RateLimit(requests: 1_000_000, per: 1, burst: 1_000_000)
        limits.perUser = try RateLimit(requests: 1_000_000, per: 1, burst: 1_000_000)
        var ports: [Int] = []
        var running: [Task<Void, any Error>] = []
        var handlers: [SessionEndpoints] = []
        for authority in authorities {
            let endpoints = SessionEndpoints(
                authority: authority, validator: AppleIdentityTokenValidator(clientIDs: ["com.example.app"]),
                appleKeys: try JWKSet(keys: []), appleClients: [:], limits: limits)
            handlers.append(endpoints)
            let router = Router(context: ShadowRequestContext.self)
            router.addSessionRoutes(endpoints)
            // The peer of a refresh: the same server answering a route that does nothing.
            router.get("noop") { _, _ -> HTTPResponse.Status in .noContent }
            let port = try PostgresCluster.freePortForTests()
            let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
            running.append(Task { try await app.runService() })
            ports.append(port)
        }
        defer { for task in running { task.cancel() } }
        try await Task.sleep(for: .milliseconds(300))
        // 32 clients on 32 connections: the shared client keeps at most 8 per host, which would
        // hold 24 of them in its queue.
        var httpConfiguration = HTTPClient.Configuration(timeout: .init(connect: .seconds(5), read: .seconds(30)))
        httpConfiguration.connectionPool = .init(
            idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 32)
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: httpConfiguration)
        defer { _ = http.shutdown() }
        // With DPoP, each client's proofs are made before the clock starts (2,000 apiece: 400 a
        // second for 5 s, more than a client sends here; one is made on the spot only if they run
        // out), so the rate is the server's. At 800 apiece, clients at over 5.1k refreshes a
        // second in all ran out, and signed proofs inside the timed window.
        let refreshURL = configuration.issuer + "/auth/refresh"
        var starts: [(token: String, port: Int, signer: DPoPSigner?, proofs: [String])] = []
        for client in 0..<32 {
            let signer = dpop ? try DPoPSigner.es256(P256.Signing.PrivateKey()) : nil
            starts.append(
                (
                    try await authorities[client % authorities.count].signIn(
                        appleSubject: "refresher-\(client)-\(dpop)", appleClientID: "com.example.app",
                        appleRefreshToken: nil, device: "bench", keyThumbprint: signer?.thumbprint
                    ).refreshToken, ports[client % ports.count], signer,
                    try signer.map { signer in
                        try (0..<2_000).map { _ in try signer.proof(method: "POST", url: refreshURL) }
                    }
                        ?? []
                ))
        }
        let cpuBefore = processCPUSeconds()
        let windowStart = monotonicSeconds()
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(seconds * 1e9)
        let (counts, latencies) = try await withThrowingTaskGroup(of: (Int, [Double]).self) { group in
            for start in starts {
                group.addTask {
                    var token = start.token
                    var proofs = start.proofs
                    let port = start.port
                    var count = 0
                    var latencies: [Double] = []
                    while DispatchTime.now().uptimeNanoseconds < deadline {
                        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/auth/refresh")
                        request.method = .POST
                        request.headers.add(name: "Content-Type", value: "application/json")
                        if let signer = start.signer {
                            request.headers.add(
                                name: "DPoP",
                                value: try proofs.popLast() ?? signer.proof(method: "POST", url: refreshURL))
                        }
                        request.body = .bytes(
                            ByteBuffer(string: JSONValue.object(["refreshToken": .string(token)]).serialized()))
                        let began = DispatchTime.now().uptimeNanoseconds
                        let response = try await http.execute(request, timeout: .seconds(10))
                        let body = try await response.body.collect(upTo: 16 << 10)
                        guard response.status == .ok,
                            let object = try JSONSerialization.jsonObject(with: Data(body.readableBytesView))
                                as? [String: Any],
                            let next = object["refreshToken"] as? String
                        else { throw BenchError("refresh answered \(response.status.code)") }
                        latencies.append(Double(DispatchTime.now().uptimeNanoseconds - began) / 1e6)
                        token = next
                        count += 1
                    }
                    return (count, latencies)
                }
            }
            return try await group.reduce(into: (0, [Double]())) {
                $0.0 += $1.0
                $0.1 += $1.1
            }
        }
        let rate = Double(counts) / seconds
        // The whole process's CPU (server, store and clients) per refresh.
        let cpuPerRefresh = (processCPUSeconds() - cpuBefore) / Double(max(1, counts))
        // The timed window on CLOCK_MONOTONIC, for a profiler's --time (the clients' proofs are
        // made before it).
        if ProcessInfo.processInfo.environment["SHADOW_BENCH_WINDOW"] == "1" {
            print(String(format: "window %.6f,%.6f: %@", windowStart, monotonicSeconds(), label))
        }
        guard noop else { return ([], rate, cpuPerRefresh) }
        // The same 32 clients on the same servers, each sending GET /noop for as long.
        let noopCPUBefore = processCPUSeconds()
        let noopDeadline = DispatchTime.now().uptimeNanoseconds + UInt64(seconds * 1e9)
        let noops = try await withThrowingTaskGroup(of: Int.self) { group in
            for start in starts {
                group.addTask {
                    var count = 0
                    while DispatchTime.now().uptimeNanoseconds < noopDeadline {
                        let request = HTTPClientRequest(url: "http://127.0.0.1:\(start.port)/noop")
                        let response = try await http.execute(request, timeout: .seconds(10))
                        _ = try await response.body.collect(upTo: 1024)
                        guard response.status == .noContent else {
                            throw BenchError("the no-op route answered \(response.status.code)")
                        }
                        count += 1
                    }
                    return count
                }
            }
            return try await group.reduce(0, +)
        }
        let cpuPerNoop = (processCPUSeconds() - noopCPUBefore) / Double(max(1, noops))
        let handler = try await handlerRate(handlers, authorities, seconds: seconds)
        let sorted = latencies.sorted()
        let noopRate = Double(noops) / seconds
        let rows = [
            BenchRow(
                name: "refresh over loopback HTTP, \(label), 32 clients", unit: "ops/s", ours: rate,
                raw: noopRate, peer: nil, peerName: nil,
                note: String(
                    format: """
                        POST /auth/refresh: a compare-and-set rotation and an ES256 access token per request; latency \
                        median %.2f ms, p99 %.2f ms; the process's CPU (server, store and clients) %.0f µs per \
                        refresh, %.0f µs per no-op request; without HTTP (the route's handler called in process by \
                        32 callers, same store, same run) %.1fk/s and %.0f µs; raw = the same server's no-op route, \
                        same clients, same run (%.2fx; goals: ≥ 0.5x the no-op route, SQLite ≥ 2,000/s, two \
                        PostgreSQL instances ≥ 1,500/s)
                        """, sorted[sorted.count / 2], sorted[sorted.count * 99 / 100], cpuPerRefresh * 1e6,
                    cpuPerNoop * 1e6, handler.rate / 1000, handler.cpuPerRefresh * 1e6, rate / noopRate))
        ]
        return (rows, rate, cpuPerRefresh)
    }

    /// The refresh route's handler (`SessionEndpoints.refresh`: the body's parse, the rate
    /// limits, the rotation, the new tokens and the answer's JSON) called in process by 32
    /// callers on sessions of their own, for `seconds`: the refresh row's rate and CPU without
    /// HTTP, so the row shows what the store and the session rules cost apart from the transport.
    static func handlerRate(
        _ handlers: [SessionEndpoints], _ authorities: [SessionAuthority], seconds: Double
    ) async throws -> (rate: Double, cpuPerRefresh: Double) {
        var starts: [(token: String, handler: SessionEndpoints)] = []
        for client in 0..<32 {
            let issued = try await authorities[client % authorities.count].signIn(
                appleSubject: "in-process-\(client)", appleClientID: "com.example.app", appleRefreshToken: nil,
                device: "bench")
            starts.append((issued.refreshToken, handlers[client % handlers.count]))
        }
        let cpuBefore = processCPUSeconds()
        let windowStart = monotonicSeconds()
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(seconds * 1e9)
        let count = try await withThrowingTaskGroup(of: Int.self) { group in
            for start in starts {
                group.addTask {
                    var token = start.token
                    var count = 0
                    while DispatchTime.now().uptimeNanoseconds < deadline {
                        let answer = await start.handler.refresh(
                            body: Array(JSONValue.object(["refreshToken": .string(token)]).serialized().utf8),
                            contentType: "application/json", clientIP: "127.0.0.1")
                        guard answer.status == .ok,
                            let object = try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any],
                            let next = object["refreshToken"] as? String
                        else { throw BenchError("the refresh handler answered \(answer.status.code)") }
                        token = next
                        count += 1
                    }
                    return count
                }
            }
            return try await group.reduce(0, +)
        }
        if ProcessInfo.processInfo.environment["SHADOW_BENCH_WINDOW"] == "1" {
            print(String(format: "window %.6f,%.6f: the refresh handler in process", windowStart, monotonicSeconds()))
        }
        return (Double(count) / seconds, (processCPUSeconds() - cpuBefore) / Double(max(1, count)))
    }

    /// The rate-limit step's statement as Docs/sessions.md ("Rate limits") writes it, compiled and
    /// run by sqlite-nio (which keeps no prepared statements) 2,000 times a round inside one
    /// transaction, so no commit is timed; 9 interleaved rounds over 64 keys of a table like the
    /// store's. Raw: the plainest upsert of the same row (`DO UPDATE SET tat_ms =
    /// excluded.tat_ms`), the floor of any one-statement step. The note gives the form with two
    /// `CASE` expressions that the store used before.
    static func rateLimitStatement(directory: String) async throws -> [BenchRow] {
        let path = directory + "/rate-statement.sqlite"
        try? FileManager.default.removeItem(atPath: path)
        let connection = try await SQLiteConnection.open(storage: .file(path: path))
        for statement in [
            "PRAGMA journal_mode = WAL", "PRAGMA synchronous = FULL",
            "CREATE TABLE shadow_rate_limits (key BLOB PRIMARY KEY, tat_ms INTEGER NOT NULL) WITHOUT ROWID",
        ] { _ = try await connection.query(statement, []) }
        let head = "INSERT INTO shadow_rate_limits (key, tat_ms) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET"
        let later = "CASE WHEN shadow_rate_limits.tat_ms > ? THEN shadow_rate_limits.tat_ms ELSE ? END"
        let forms: [(sql: String, values: (SQLiteData, Int) -> [SQLiteData])] = [
            (
                head + " tat_ms = max(shadow_rate_limits.tat_ms, ?) + ? WHERE shadow_rate_limits.tat_ms <= ? "
                    + "RETURNING tat_ms",
                { key, now in [key, .integer(now + 1_000), .integer(now), .integer(1_000), .integer(now + 5_000)] }
            ),
            (head + " tat_ms = excluded.tat_ms RETURNING tat_ms", { key, now in [key, .integer(now + 1_000)] }),
            (
                head + " tat_ms = \(later) + ? WHERE \(later) - ? <= ? RETURNING tat_ms",
                { key, now in
                    [key, .integer(now + 1_000)] + [now, now, 1_000, now, now, now, 5_000].map { .integer($0) }
                }
            ),
        ]
        let keys = (0..<64).map { SQLiteData.blob(ByteBuffer(bytes: Array(SHA256.hash(data: [UInt8($0)])))) }
        var perSecond: [[Double]] = Array(repeating: [], count: forms.count)
        var now = 1_700_000_000_000
        for _ in 0..<9 {
            for (index, form) in forms.enumerated() {
                _ = try await connection.query("BEGIN", [])
                let start = monotonicSeconds()
                for step in 0..<2_000 {
                    now += 7
                    _ = try await connection.query(form.sql, form.values(keys[step % keys.count], now))
                }
                perSecond[index].append(2_000 / (monotonicSeconds() - start))
                _ = try await connection.query("COMMIT", [])
            }
        }
        try await connection.close()
        try? FileManager.default.removeItem(atPath: path)
        let medians = perSecond.map(Harness.median)
        return [
            BenchRow(
                name: "rate-limit step's statement through sqlite-nio, compiled and run", unit: "ops/s",
                ours: medians[0], raw: medians[1], peer: nil, peerName: nil,
                note: String(
                    format: """
                        Docs/sessions.md's statement (one comparison, max for the new time), 2,000 a round in one \
                        transaction, medians of 9 interleaved rounds; raw = the plainest upsert of the same row; \
                        the two-CASE form it replaced: %.1f µs a step against %.1f µs
                        """, 1e6 / medians[2], 1e6 / medians[0]))
        ]
    }

    /// 100,000 live sessions of 20,000 users: the file's growth per session.
    /// The minute's sweep on a SQLite store of `SHADOW_BENCH_USERS` live sessions and as many
    /// live rate-limit rows (default a million each; one row in 10,000 dead), written straight
    /// into the tables: the time of each batch of one whole pass (each holds the write lock for
    /// its deletes), beside the time-filtered deletes the sweep made before, which scanned every
    /// live row of a table whose dead rows were too few to fill a batch.
    static func sweep(directory: String) async throws -> [BenchRow] {
        let path = directory + "/sweep.sqlite"
        try? FileManager.default.removeItem(atPath: path)
        let store = try await SQLiteSessionStore.open(path: path, unlock: unlock)
        let authority = try await SessionAuthority(store: store, configuration: configuration)
        let rows = DatabaseBenchmarks.largeUsers
        let now = Int(Date().timeIntervalSince1970 * 1000)
        let connection = try await SQLiteConnection.open(storage: .file(path: path))
        let count = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < \(rows))"
        for statement in [
            """
            \(count) INSERT INTO shadow_sessions (id, user, generation, rotated_ms, created_ms, used_ms, expires_ms, \
            revoked_ms, device, mac) SELECT randomblob(16), randomblob(16), 1, \(now), \(now), \(now), \
            \(now + 86_400_000), CASE WHEN x % 10000 = 0 THEN \(now) END, 'iPhone 15 Pro', randomblob(32) FROM c
            """,
            """
            \(count) INSERT INTO shadow_rate_limits (key, tat_ms) SELECT randomblob(24), CASE WHEN x % 10000 = 0 \
            THEN 1 ELSE \(now + 3_600_000) END FROM c
            """,
        ] { _ = try await connection.query(statement, []) }
        // Before: one batch's deletes as the sweep wrote them, each time rolled back, so every try
        // finds the same rows and the pass below still has its dead rows.
        let margin = now - Int(SessionAuthority.sweepMargin)
        var before: [Double] = []
        for _ in 0..<5 {
            _ = try await connection.query("BEGIN IMMEDIATE", [])
            let start = monotonicSeconds()
            _ = try await connection.query(
                """
                DELETE FROM shadow_sessions WHERE id IN (SELECT id FROM shadow_sessions WHERE revoked_ms IS NOT NULL \
                OR expires_ms < ? OR used_ms < ? LIMIT 1000) RETURNING id
                """, [.integer(margin), .integer(now - 14 * 86_400_000)])
            _ = try await connection.query(
                """
                DELETE FROM shadow_rate_limits WHERE key IN (SELECT key FROM shadow_rate_limits WHERE tat_ms < ? \
                LIMIT 1000) RETURNING key
                """, [.integer(margin)])
            before.append((monotonicSeconds() - start) * 1000)
            _ = try await connection.query("ROLLBACK", [])
        }
        try await connection.close()
        // Ours: a whole pass, one batch a call, each timed.
        var batches: [Double] = []
        var deleted = 0
        repeat {
            let start = monotonicSeconds()
            deleted += try await authority.sweep(limit: 1000, batches: 1)
            batches.append((monotonicSeconds() - start) * 1000)
        } while batches.count <= rows / 1000
        await store.close()
        try? FileManager.default.removeItem(atPath: path)
        let sorted = batches.sorted()
        return [
            BenchRow(
                name: "sweep batch, \(rows.formatted()) live sessions and rate-limit rows, SQLite: median", unit: "ms",
                ours: Harness.median(batches), raw: nil, peer: Harness.median(before),
                peerName: "time-filtered deletes",
                note: String(
                    format: """
                        one pass of %d batches (each the next 1,000 rows of each table, examined and the dead \
                        deleted), %d dead sessions deleted; longest batch %.2f ms, p99 %.2f ms; peer = one batch \
                        of the deletes the sweep made before this change, which find dead rows by their times \
                        (a scan of every live row when too few are dead), same file, median of 5
                        """, batches.count, deleted, sorted.last ?? 0, sorted[sorted.count * 99 / 100]))
        ]
    }

    static func storage(directory: String) async throws -> [BenchRow] {
        let path = directory + "/storage.sqlite"
        let store = try await SQLiteSessionStore.open(path: path, unlock: unlock)
        let authority = try await SessionAuthority(store: store, configuration: configuration)
        _ = try await authority.signIn(
            appleSubject: "warm", appleClientID: "com.example.app", appleRefreshToken: nil, device: "x")
        func size() async throws -> Int {
            let connection = try await SQLiteConnection.open(storage: .file(path: path))
            _ = try await connection.query("PRAGMA wal_checkpoint(TRUNCATE)", [])
            try await connection.close()
            return try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
        }
        // Users first, so the growth measured is the sessions' alone.
        let users = 20_000, sessions = 100_000
        for user in 0..<users {
            _ = try await authority.signIn(
                appleSubject: "user-\(user)", appleClientID: "com.example.app", appleRefreshToken: nil,
                device: "iPhone 15 Pro")
        }
        let before = try await size()
        for number in 0..<(sessions - users) {
            _ = try await authority.signIn(
                appleSubject: "user-\(number % users)", appleClientID: "com.example.app", appleRefreshToken: nil,
                device: "iPhone 15 Pro")
        }
        let after = try await size()
        await store.close()
        let perSession = Double(after - before) / Double(sessions - users)
        return [
            BenchRow(
                name: "SQLite bytes per live session (row and index)", unit: "count", ours: perSession, raw: nil,
                peer: nil, peerName: nil,
                note: String(
                    format: """
                        %d sessions of %d users; growth over the last %d sessions, device names of 13 bytes (goal \
                        ≤ 200)
                        """, sessions, users, sessions - users))
        ]
    }
}

/// Seconds on CLOCK_MONOTONIC, the clock `perf report --time` reads.
func monotonicSeconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}
