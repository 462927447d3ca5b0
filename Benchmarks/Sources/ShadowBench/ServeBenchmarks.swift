import AsyncHTTPClient
import Crypto
import CryptoExtras
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JWTKit
import NIOCore
import NIOHTTP1
import ShadowHummingbird
import ShadowKeys
import ShadowTestSupport
import Synchronization

/// The server side: `shadow-keys serve` under a load generator, and the bearer middleware's cost
/// next to the RS256 verification it is built on.
enum ServeBenchmarks {
    /// Seconds for one GET of `path` through Hummingbird's in-process test client, with `token`
    /// as the bearer; an answer other than 200 fails the benchmark.
    static func timedGet(
        _ client: some TestClientProtocol, _ path: String, bearer token: String
    ) async throws
        -> Double
    {
        let began = DispatchTime.now().uptimeNanoseconds
        let response = try await client.executeRequest(
            uri: path, method: .get, headers: [.authorization: "Bearer " + token], body: nil)
        guard response.status == .ok else { throw BenchError("\(path) answered \(response.status.code)") }
        return Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9
    }

    static let client = "com.example.app"

    static func run(binary: String, workDirectory: String) async throws -> [BenchRow] {
        let http = HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: .init(timeout: .init(connect: .seconds(5), read: .seconds(30))))
        do {
            var rows = try await endpoint(binary: binary, workDirectory: workDirectory, http: http)
            rows += try await middleware(http: http)
            try await http.shutdown()
            return rows
        } catch {
            try? await http.shutdown()
            throw error
        }
    }

    // MARK: The notification endpoint

    /// A release `serve` on SQLite; 32 clients post distinct Apple-shaped notifications. Beside it,
    /// the same load of bodies that are not JSON (answered 400 before any verification): the
    /// floor of HTTP, the route and the body read on this machine.
    static func endpoint(binary: String, workDirectory: String, http: HTTPClient) async throws -> [BenchRow] {
        let signer = try JWSSigner.rs256(TestKeys.rsa, keyID: "apple-1")
        let jwks = workDirectory + "/serve-keys.json"
        try TestKeys.jwksJSON([try signer.publicJWK()]).write(toFile: jwks, atomically: true, encoding: .utf8)
        let keyFile = workDirectory + "/serve.key"
        try (String(repeating: "5a", count: 32) + "\n").write(toFile: keyFile, atomically: true, encoding: .utf8)
        chmod(keyFile, 0o600)
        let port = try PostgresCluster.freePortForTests()
        let server = try ChildProcess(
            binary,
            [
                "serve", "--listen", "127.0.0.1:\(port)", "--client-id", client, "--jwks", jwks, "--store",
                "sqlite:\(workDirectory)/serve.sqlite",
                "--key-file", keyFile, "--quiet",
            ], environment: [:], removing: ["SHADOW_KEYS_STATE_STORE"])
        defer {
            server.kill(SIGTERM)
            _ = try? server.wait(timeout: 30)
        }
        try await waitHealthy(port: port, http: http)

        // Distinct notifications over 5,000 users, signed on both cores before the clock starts.
        let count = 12_000, warmup = 1_000
        let now = Int64(Date().timeIntervalSince1970)
        let types = ["consent-revoked", "email-disabled", "email-enabled", "account-delete"]
        let bodies = try await withThrowingTaskGroup(of: [(Int, [UInt8])].self) { group in
            for worker in 0..<2 {
                group.addTask {
                    var made: [(Int, [UInt8])] = []
                    for index in stride(from: worker, to: count + warmup, by: 2) {
                        let events: JSONObject = [
                            "type": .string(types[index % types.count]), "sub": .string("001234.\(index % 5000).0042"),
                            "event_time": .int((now - 600 + Int64(index / 5000)) * 1000),
                        ]
                        let claims: JSONObject = [
                            "iss": "https://appleid.apple.com", "aud": .string(client), "iat": .int(now),
                            "exp": .int(now + 3600), "jti": .string("bench-\(index)"),
                            "events": .string(JSONValue.object(events).serialized()),
                        ]
                        made.append(
                            (
                                index,
                                Array(
                                    JSONValue.object(["payload": .string(try signer.sign(claims: claims))]).serialized()
                                        .utf8)
                            ))
                    }
                    return made
                }
            }
            var all = [[UInt8]](repeating: [], count: count + warmup)
            for try await batch in group { for (index, body) in batch { all[index] = body } }
            return all
        }
        _ = try await load(Array(bodies.prefix(warmup)), port: port, concurrency: 32, http: http, expect: 200)
        let ours = try await load(Array(bodies.dropFirst(warmup)), port: port, concurrency: 32, http: http, expect: 200)
        let floor = try await load(
            Array(repeating: Array("not json".utf8), count: count), port: port, concurrency: 32, http: http, expect: 400
        )

        return [
            BenchRow(
                name: "serve: notifications/s, SQLite, 32 clients", unit: "ops/s", ours: ours.throughput,
                raw: floor.throughput, peer: nil, peerName: nil,
                note:
                    """
                    distinct RS256-signed notifications, each verified and applied (group commit); raw = the same \
                    load of non-JSON bodies answered 400 (HTTP, route and body read only); the load generator shares \
                    the 2 cores
                    """
            ),
            BenchRow(
                name: "serve: notification latency p50", unit: "us/op", ours: 1 / ours.p50, raw: 1 / floor.p50,
                peer: nil, peerName: nil, note: ""),
            BenchRow(
                name: "serve: notification latency p99", unit: "us/op", ours: 1 / ours.p99, raw: 1 / floor.p99,
                peer: nil, peerName: nil,
                note: "goal: at least 2,000 notifications/s with p99 under 20 ms"),
        ]
    }

    static func waitHealthy(port: Int, http: HTTPClient) async throws {
        for _ in 0..<300 {
            if let response = try? await http.execute(
                HTTPClientRequest(url: "http://127.0.0.1:\(port)/healthz"), timeout: .seconds(2)),
                response.status == .ok
            {
                return
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw BenchError("serve never answered /healthz")
    }

    struct LoadResult {
        let throughput: Double
        let p50: Double
        let p99: Double
    }

    /// Posts every body with `concurrency` requests in flight; throughput and latency percentiles (seconds).
    static func load(
        _ bodies: [[UInt8]], port: Int, concurrency: Int, http: HTTPClient, expect status: Int
    ) async throws -> LoadResult {
        final class Shared: Sendable {
            let next = Atomic(0)
            let latencies = Mutex<[Double]>([])
        }
        let shared = Shared()
        let start = DispatchTime.now().uptimeNanoseconds
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<concurrency {
                group.addTask {
                    var mine: [Double] = []
                    while true {
                        let index = shared.next.wrappingAdd(1, ordering: .relaxed).oldValue
                        guard index < bodies.count else { break }
                        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/apple/notifications")
                        request.method = .POST
                        request.headers.add(name: "Content-Type", value: "application/json")
                        request.body = .bytes(ByteBuffer(bytes: bodies[index]))
                        let began = DispatchTime.now().uptimeNanoseconds
                        let response = try await http.execute(request, timeout: .seconds(30))
                        _ = try await response.body.collect(upTo: 4096)
                        mine.append(Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9)
                        guard Int(response.status.code) == status else {
                            throw BenchError("serve answered \(response.status.code), not \(status)")
                        }
                    }
                    let done = mine
                    shared.latencies.withLock { $0 += done }
                }
            }
            try await group.waitForAll()
        }
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        let sorted = shared.latencies.withLock { $0 }.sorted()
        return LoadResult(
            throughput: Double(bodies.count) / elapsed, p50: sorted[sorted.count / 2],
            p99: sorted[min(sorted.count - 1, sorted.count * 99 / 100)])
    }

    // MARK: The bearer middleware

    /// A trivial route with and without `AppleIdentityMiddleware` (warm key set), one client,
    /// sequential requests; the difference of the medians beside the raw RS256 verify of the same
    /// token and jwt-kit's verify, in interleaved rounds.
    static func middleware(http: HTTPClient) async throws -> [BenchRow] {
        let now = Int64(Date().timeIntervalSince1970)
        let rsaKey = TestKeys.rsa
        let signer = try JWSSigner.rs256(rsaKey, keyID: "apple-1")
        let keySet = try JWKSet(keys: [signer.publicJWK()])
        let token = try signer.sign(claims: JWTBenchmarks.appleClaims(now: now))
        let parts = token.split(separator: ".")
        let input = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        let signature = _RSA.Signing.RSASignature(rawRepresentation: Array(try CompactJWS(token).signature))
        let publicKey = rsaKey.publicKey
        let peer = JWTKeyCollection()
        try await peer.add(
            jwksJSON: JSONValue.object(["keys": .array([.object(try signer.publicJWK().json)])]).serialized())

        let validator = AppleIdentityTokenValidator(clientIDs: [client])
        let provider = try JWKSProvider.serving(keySet)
        // The validation the middleware runs, alone: Apple's rules over a warm key set.
        let alone = try await Harness.sampleAsync([
            { _ = try await validator.validate(token, keys: provider) },
            {
                guard publicKey.isValidSignature(signature, for: SHA256.hash(data: input), padding: .insecurePKCS1v1_5)
                else { throw BenchError("raw RSA failed") }
            },
            { _ = try await peer.verify(token, as: JWTKit.AppleIdentityToken.self, expectedAudience: client) },
        ])
        let router = Router(context: AppleIdentityContext.self)
        router.get("plain") { _, _ in "ok" }
        router.group("api")
            .add(middleware: AppleIdentityMiddleware(validator: validator, keys: provider))
            .get("me") { _, context in context.appleIdentity?.token.subject ?? "" }
        let port = try PostgresCluster.freePortForTests()
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
        let running = Task { try await app.runService() }
        defer { running.cancel() }
        try await Task.sleep(for: .milliseconds(300))

        func timed(_ path: String, bearer: Bool) async throws -> Double {
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
            if bearer { request.headers.add(name: "Authorization", value: "Bearer " + token) }
            let began = DispatchTime.now().uptimeNanoseconds
            let response = try await http.execute(request, timeout: .seconds(10))
            _ = try await response.body.collect(upTo: 4096)
            guard response.status == .ok else { throw BenchError("\(path) answered \(response.status.code)") }
            return Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9
        }
        let rawVerify: @Sendable () throws -> Void = {
            guard publicKey.isValidSignature(signature, for: SHA256.hash(data: input), padding: .insecurePKCS1v1_5)
            else { throw BenchError("raw RSA failed") }
        }
        for _ in 0..<500 { _ = try await timed("/api/me", bearer: true) }
        let overHTTP = try await pairedRounds(
            perRound: 100, plain: { try await timed("/plain", bearer: true) },
            guarded: { try await timed("/api/me", bearer: true) },
            raw: rawVerify,
            peer: { _ = try await peer.verify(token, as: JWTKit.AppleIdentityToken.self, expectedAudience: client) })

        // The same two routes through Hummingbird's in-process test client: the router and the
        // middleware without sockets, so the difference is the middleware's own work.
        let inProcess = try await Application(router: router).test(.router) { client in
            func timed(_ path: String) async throws -> Double {
                try await ServeBenchmarks.timedGet(client, path, bearer: token)
            }
            return try await pairedRounds(
                perRound: 200, plain: { try await timed("/plain") }, guarded: { try await timed("/api/me") },
                raw: rawVerify, peer: nil)
        }
        return [
            BenchRow(
                name: "Apple identity token validation, warm key set", samples: alone, peerName: "jwt-kit 5.8.0",
                note:
                    """
                    AppleIdentityTokenValidator.validate (RS256 and Apple's claim rules) through a JWKSProvider; raw \
                    = the swift-crypto RS256 verify; jwt-kit decodes its AppleIdentityToken
                    """
            ),
            BenchRow(
                name: "middleware: time added, in-process router", unit: "us/op", ours: 1 / inProcess.added,
                raw: 1 / inProcess.raw,
                peer: 1 / overHTTP.peer, peerName: "jwt-kit 5.8.0 verify",
                note: String(
                    format:
                        """
                        Hummingbird's router test client (no sockets): %.1f µs with the middleware, %.1f µs without; \
                        the middleware adds %.2f× the raw RS256 verify (goal ≤ 1.3×)
                        """,
                    inProcess.guarded * 1e6, inProcess.plain * 1e6, inProcess.ratio)),
            BenchRow(
                name: "middleware: time added to a trivial route", unit: "us/op", ours: 1 / overHTTP.added,
                raw: 1 / overHTTP.raw, peer: 1 / overHTTP.peer,
                peerName: "jwt-kit 5.8.0 verify",
                note: String(
                    format:
                        """
                        loopback HTTP, one client: median latency %.1f µs with AppleIdentityMiddleware, %.1f µs \
                        without; the middleware adds %.2f× the raw swift-crypto RS256 verify (goal ≤ 1.3×)
                        """,
                    overHTTP.guarded * 1e6, overHTTP.plain * 1e6, overHTTP.ratio)),
        ]
    }

    struct Paired {
        let plain: Double, guarded: Double, raw: Double, peer: Double
        /// Median over rounds of (guarded − plain) / raw.
        let ratio: Double
        var added: Double { guarded - plain }
    }

    /// `Harness.samples` rounds of `perRound` timings of each contender, interleaved; the medians
    /// of the per-round medians.
    static func pairedRounds(
        perRound: Int, plain: () async throws -> Double, guarded: () async throws -> Double, raw: () throws -> Void,
        peer: (() async throws -> Void)?
    ) async throws -> Paired {
        func seconds(_ body: () async throws -> Void) async rethrows -> Double {
            let began = DispatchTime.now().uptimeNanoseconds
            try await body()
            return Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9
        }
        var medians = ([Double](), [Double](), [Double](), [Double]())
        var ratios: [Double] = []
        for _ in 0..<Harness.samples {
            var round = ([Double](), [Double](), [Double](), [Double]())
            for _ in 0..<perRound {
                round.0.append(try await plain())
                round.1.append(try await guarded())
                round.2.append(try await seconds { try raw() })
                if let peer { round.3.append(try await seconds(peer)) }
            }
            let (p, g, r) = (Harness.median(round.0), Harness.median(round.1), Harness.median(round.2))
            medians.0.append(p)
            medians.1.append(g)
            medians.2.append(r)
            medians.3.append(Harness.median(round.3))
            ratios.append((g - p) / r)
        }
        return Paired(
            plain: Harness.median(medians.0), guarded: Harness.median(medians.1), raw: Harness.median(medians.2),
            peer: Harness.median(medians.3),
            ratio: Harness.median(ratios))
    }
}
