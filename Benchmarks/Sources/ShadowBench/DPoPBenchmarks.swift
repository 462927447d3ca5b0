import Crypto
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOEmbedded
import ShadowHummingbird
import ShadowKeys
import ShadowSQLite
import ShadowServer
import ShadowSessions
import Synchronization

/// DPoP (Docs/dpop.md): a proof checked beside one raw P-256 verify, SessionMiddleware with a
/// bound token beside the raw verify, and a bound refresh beside an unbound one on SQLite.
enum DPoPBenchmarks {
    static let url = "https://api.example.com/v1/files"

    static func run(workDirectory: String) async throws -> [BenchRow] {
        var rows = try proofs()
        rows.append(try await fullReplayCache())
        let (_, store, authority) = try await SessionBenchmarks.freshStore(workDirectory: workDirectory, folder: "dpop")
        rows += try await middleware(authority)
        rows += try await refreshes(authority)
        await store.close()
        return rows
    }

    /// `ProtectedRouteAccess.caller` on new tokens with fresh proofs, in a loop; prints the loop's
    /// window on CLOCK_MONOTONIC and the time per call.
    static func profile(workDirectory: String) async throws {
        let (_, store, authority) = try await SessionBenchmarks.freshStore(workDirectory: workDirectory, folder: "dpop")
        let device = try DPoPSigner.es256(P256.Signing.PrivateKey())
        let issued = try await authority.signIn(
            appleSubject: "dpop-profile", appleClientID: "com.example.app", appleRefreshToken: nil, device: "bench",
            keyThumbprint: device.thumbprint)
        let count = Int(ProcessInfo.processInfo.environment["ITERATIONS"] ?? "4000") ?? 4000
        let pairs = try await newTokens(count, of: issued, device: device, authority: authority)
        let access = ProtectedRouteAccess(authority: authority)
        let start = monotonicSeconds()
        for (token, proof) in pairs {
            guard
                case .success = await access.caller(
                    authorization: "DPoP " + token, dpop: [proof], method: "GET", path: "/api/me")
            else { throw BenchError("a call was refused") }
        }
        let end = monotonicSeconds()
        print(String(format: "window %.6f,%.6f: %.1f µs per call", start, end, (end - start) / Double(count) * 1e6))
        await store.close()
    }

    /// `count` (access token, proof of a GET /api/me with it) pairs, each token new: the
    /// session's refreshes in turn, each with a proof by `device`.
    static func newTokens(
        _ count: Int, of issued: IssuedTokens, device: DPoPSigner, authority: SessionAuthority
    ) async throws -> [(String, String)] {
        let target = SessionBenchmarks.configuration.issuer + "/api/me"
        var pairs: [(String, String)] = []
        var refreshToken = issued.refreshToken
        for _ in 0..<count {
            let next = try await authority.refresh(
                refreshToken,
                proof: try DPoPVerifier().verify(
                    try device.proof(method: "POST", url: "https://bench.example/auth/refresh"), method: "POST",
                    url: "https://bench.example/auth/refresh"))
            refreshToken = next.refreshToken
            pairs.append(
                (next.accessToken, try device.proof(method: "GET", url: target, accessToken: next.accessToken)))
        }
        return pairs
    }

    /// The raw check of compact JWSs' ES256 signatures under `key`, each call the next of `tokens`
    /// (in turn; one token: the same signature every call). The middleware checks a signature it
    /// has not seen on every request, and BoringSSL checks the same signature again and again
    /// about 8 % faster (34.5 µs against 37.4 µs here).
    static func rawVerify(
        cycling tokens: [String], key: P256.Signing.PublicKey
    ) throws
        -> @Sendable () throws -> Void
    {
        let checks = try tokens.map { token -> (P256.Signing.ECDSASignature, [UInt8]) in
            let parts = token.split(separator: ".")
            guard parts.count == 3, let signatureBytes = base64URL(parts[2]) else {
                throw BenchError("not a compact JWS")
            }
            let input = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
            return (try P256.Signing.ECDSASignature(rawRepresentation: signatureBytes), input)
        }
        let next = Mutex(0)
        return {
            let (signature, input) = checks[
                next.withLock { index in
                    defer { index = (index + 1) % checks.count }
                    return index
                }]
            guard key.isValidSignature(signature, for: SHA256.hash(data: input)) else { throw BenchError("raw P-256") }
        }
    }

    /// One proof, checked again and again (no replay cache: the check alone), beside the raw verify.
    static func proofs() throws -> [BenchRow] {
        let key = P256.Signing.PrivateKey()
        let signer = try DPoPSigner.es256(key)
        let token = "an-access-token"
        let proof = try signer.proof(method: "GET", url: url, accessToken: token)
        let verifier = DPoPVerifier(maxAge: 3600)
        let raw = try rawVerify(cycling: [proof], key: key.publicKey)
        let samples = try Harness.sample([
            {
                _ = try verifier.verify(
                    [proof], method: "GET", url: url, accessToken: token, boundTo: signer.thumbprint)
            },
            raw,
        ])
        return [
            BenchRow(
                name: "DPoP proof check (RFC 9449 §4.3, ES256, ath and jkt)", samples: samples, peerName: nil,
                note: """
                    DPoPVerifier.verify: parse, typ, alg, the header's JWK and its thumbprint, the signature, htm, \
                    htu normalized, iat, ath, jkt; raw = one P-256 verify of the same proof; goal ours/raw ≥ 0.77 \
                    (≤ 1.3× the time)
                    """)
        ]
    }

    /// A flood of new proofs at a memory replay cache full of live keys (100,000, the default):
    /// each is refused, and the cache looks for expired keys at most once a second; beside it, the
    /// same cache answering a replayed key (one lookup).
    static func fullReplayCache() async throws -> BenchRow {
        let cache = DPoPMemoryReplayCache()
        func milliseconds() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
        let later = milliseconds() + 3_600_000
        for index in 0..<cache.capacity {
            _ = try await cache.firstUse(
                of: withUnsafeBytes(of: index) { Array($0) }, until: later, now: milliseconds())
        }
        var next = cache.capacity
        let known = withUnsafeBytes(of: 7) { Array($0) }
        let samples = try await Harness.sampleAsync([
            {
                next += 1
                do {
                    _ = try await cache.firstUse(
                        of: withUnsafeBytes(of: next) { Array($0) }, until: later, now: milliseconds())
                    throw BenchError("a full cache took a new key")
                } catch let error as DPoPError where error.code == .unavailable {}
            },
            {
                guard try await !cache.firstUse(of: known, until: later, now: milliseconds()) else {
                    throw BenchError("a replay was taken")
                }
            },
        ])
        return BenchRow(
            name: "DPoP memory replay cache full of live keys: a new proof refused", samples: samples, peerName: nil,
            note: """
                DPoPMemoryReplayCache at its 100,000 keys, all live: a new key refused (503), with the look \
                for expired keys at most once a second; raw = the same cache answering a replayed key
                """)
    }

    /// A route behind SessionMiddleware with a DPoP-bound token and a fresh proof per request
    /// (made beforehand, untimed), beside the same route without it, through Hummingbird's
    /// in-process client: the time the middleware adds, beside one raw P-256 verify. Twice: with
    /// one access token throughout (a client's hour with its token: the verified-token cache
    /// answers after the first), and with a new token on every request (both signatures checked).
    static func middleware(_ authority: SessionAuthority) async throws -> [BenchRow] {
        let deviceKey = P256.Signing.PrivateKey()
        let device = try DPoPSigner.es256(deviceKey)
        let issued = try await authority.signIn(
            appleSubject: "dpop-bench", appleClientID: "com.example.app", appleRefreshToken: nil, device: "bench",
            keyThumbprint: device.thumbprint)
        let target = SessionBenchmarks.configuration.issuer + "/api/me"
        // One token throughout.
        let warmCount = 500 + Harness.samples * 200
        let warm = try (0..<warmCount).map { _ in
            (issued.accessToken, try device.proof(method: "GET", url: target, accessToken: issued.accessToken))
        }
        // A new token per request: the session's refreshes, each token used once. The untimed
        // first ones fill the verified-token cache, so the timed ones find it full, as a server's
        // is after its first few thousand tokens.
        let coldRound = 60
        let cold = try await newTokens(
            AccessTokenVerifier.cacheCapacity + 100 + Harness.samples * coldRound, of: issued, device: device,
            authority: authority)
        // Raw: one P-256 verify of a signature not seen before, as the middleware's checks are.
        let raw = try rawVerify(cycling: warm.map(\.1), key: deviceKey.publicKey)
        let warmRun = try await middlewareRun(authority, requests: warm, perRound: 200, raw: raw)
        let coldRun = try await middlewareRun(authority, requests: cold, perRound: coldRound, raw: raw)
        func row(_ paired: ServeBenchmarks.Paired, _ name: String, _ what: String) -> BenchRow {
            BenchRow(
                name: "session middleware with DPoP, \(name): time added, router responder", unit: "us/op",
                ours: 1 / paired.added, raw: 1 / paired.raw, peer: nil, peerName: nil,
                note: String(
                    format: """
                        SessionMiddleware, a DPoP-bound ES256 access token (%@) and a fresh proof per request \
                        (the replay cache in memory, no store read): %.1f µs with it, %.1f µs without; it adds \
                        %.2f× the raw P-256 verify (goal ≤ 2.3×)
                        """, what, paired.guarded * 1e6, paired.plain * 1e6, paired.ratio))
        }
        return [
            row(warmRun, "one token", "the same token throughout: its signature checked once, then from the cache"),
            row(coldRun, "a new token each time", "a new token per request: two signatures checked"),
        ]
    }

    /// The paired run of one middleware row: `requests` (token, proof) used once each, in order.
    /// Each request goes to the router's responder directly, in this task: Hummingbird's test
    /// client hands every request to a child task, and a handler that runs longer (the
    /// middleware's two signatures) more often finds the waiting thread asleep, which added a
    /// wake-up of about 12 µs to the guarded route that no server pays.
    static func middlewareRun(
        _ authority: SessionAuthority, requests: [(String, String)], perRound: Int,
        raw: @escaping @Sendable () throws -> Void
    ) async throws -> ServeBenchmarks.Paired {
        let router = Router(context: ShadowRequestContext.self)
        router.get("plain") { _, _ in "ok" }
        // Both routes answer "ok": the guarded one once it finds the session the middleware set.
        router.group("api").add(middleware: SessionMiddleware(authority: authority))
            .get("me") { _, context -> String in
                guard context.session != nil else { throw HTTPError(.internalServerError) }
                return "ok"
            }
        let responder = router.buildResponder()
        let channel = EmbeddedChannel()
        let logger = Logger(label: "shadow-bench")
        var requests = requests.reversed().map { $0 }
        // The plain route gets the same headers, so the difference is the middleware's work.
        let sample = requests[0]
        func call(_ path: String, _ request: (String, String)) async throws -> Double {
            let began = DispatchTime.now().uptimeNanoseconds
            let head = HTTPRequest(
                method: .get, scheme: "https", authority: "localhost", path: path,
                headerFields: [.authorization: "DPoP " + request.0, DPoPPolicy.proofHeader: request.1])
            let response = try await responder.respond(
                to: Request(head: head, body: RequestBody(buffer: ByteBuffer())),
                context: ShadowRequestContext(source: .init(channel: channel, logger: logger)))
            guard response.status == .ok else { throw BenchError("\(path) answered \(response.status.code)") }
            return Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9
        }
        func guarded() async throws -> Double {
            guard let request = requests.popLast() else { throw BenchError("out of proofs") }
            return try await call("/api/me", request)
        }
        for _ in 0..<(requests.count - Harness.samples * perRound) { _ = try await guarded() }
        return try await ServeBenchmarks.pairedRounds(
            perRound: perRound, plain: { try await call("/plain", sample) }, guarded: guarded, raw: raw, peer: nil)
    }

    /// Bound refreshes (a proof checked and its jti recorded in the store, per request) beside
    /// unbound ones, on the same SQLite store: four rounds of 3 s each, the two kinds in turn and
    /// the first of each round alternating, so neither always runs on the warmer store; the row
    /// gives each kind's median rate and the note the median of the rounds' ratios.
    static func refreshes(_ authority: SessionAuthority) async throws -> [BenchRow] {
        var bound: [Double] = []
        var unbound: [Double] = []
        var boundCPU: [Double] = []
        var unboundCPU: [Double] = []
        for round in 0..<4 {
            for dpop in round % 2 == 0 ? [false, true] : [true, false] {
                let run = try await SessionBenchmarks.refreshRate(
                    [authority], label: dpop ? "SQLite, DPoP-bound" : "SQLite, bearer", dpop: dpop, seconds: 3,
                    noop: false)
                if dpop {
                    bound.append(run.rate)
                    boundCPU.append(run.cpuPerRefresh)
                } else {
                    unbound.append(run.rate)
                    unboundCPU.append(run.cpuPerRefresh)
                }
            }
        }
        let ratios = zip(bound, unbound).map { $0 / $1 }
        return [
            BenchRow(
                name: "DPoP-bound refresh over loopback HTTP, SQLite, 32 clients", unit: "ops/s",
                ours: Harness.median(bound), raw: Harness.median(unbound), peer: nil, peerName: nil,
                note: String(
                    format: """
                        POST /auth/refresh with a proof by the session's key (checked, its jti upserted in the store) \
                        beside the same refresh of bearer sessions; each proof made before the timed run; medians of \
                        4 alternating rounds of 3 s; the rounds' ratios %@ (median %.2f); the process's CPU per \
                        refresh (server, store and clients), medians: %.0f µs bound, %.0f µs bearer; goal \
                        ours/raw ≥ 0.8
                        """, ratios.map { String(format: "%.2f", $0) }.joined(separator: ", "),
                    Harness.median(ratios), Harness.median(boundCPU) * 1e6, Harness.median(unboundCPU) * 1e6))
        ]
    }
}

/// `#require` for the benchmarks: the value, or a BenchError.
func require<T>(_ value: T?, _ what: String = "a value") throws -> T {
    guard let value else { throw BenchError("missing \(what)") }
    return value
}

/// Unpadded base64url to bytes, through Foundation's base64.
func base64URL(_ text: some StringProtocol) -> [UInt8]? {
    var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    standard += String(repeating: "=", count: (4 - standard.count % 4) % 4)
    return Data(base64Encoded: standard).map { [UInt8]($0) }
}
