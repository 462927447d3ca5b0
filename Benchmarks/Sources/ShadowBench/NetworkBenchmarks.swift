import CryptoExtras
import Foundation
import ShadowKeys
import ShadowTestSupport

/// Process start and the CLI's own HTTP client (AsyncHTTPClient), beside a hello-world floor
/// built the same way, against in-process loopback servers (no server child process to hang).
enum NetworkBenchmarks {
    static func run(binary: String, hello: String, workDirectory: String) async throws -> [BenchRow] {
        let now = Int64(Date().timeIntervalSince1970)
        let signer = try JWSSigner.rs256(try _RSA.Signing.PrivateKey(keySize: .bits2048), keyID: "W6WcOKB")
        let jwksText = TestKeys.jwksJSON([try signer.publicJWK()])
        let jwksFile = workDirectory + "/net-jwks.json", tokenFile = workDirectory + "/net-token.txt"
        try jwksText.write(toFile: jwksFile, atomically: true, encoding: .utf8)
        try signer.sign(claims: JWTBenchmarks.appleClaims(now: now)).write(
            toFile: tokenFile, atomically: true, encoding: .utf8)
        let server = try LoopbackHTTPSServer(headers: [("Cache-Control", "max-age=3600")], body: Array(jwksText.utf8))
        let url = server.url("/keys")
        let verify = [
            "verify-token", "--token-file", tokenFile, "--iss", JWTBenchmarks.issuer, "--aud", JWTBenchmarks.audience,
        ]
        let ca = ["--ca-file", LoopbackHTTPSServer.caFile]

        // Warm the disk cache once, then time hello / local file / warm URL in interleaved rounds.
        let cache = workDirectory + "/net-cache"
        setenv("XDG_CACHE_HOME", cache, 1)
        guard try Harness.spawnAndWait(binary, verify + ["--jwks", url] + ca, environment: Harness.environment) == 0
        else {
            throw BenchError("could not warm the cache from \(url)")
        }
        let warmedRequests = server.requestCount
        let times = try Harness.interleavedWallTimes([
            (hello, []),
            (binary, verify + ["--jwks", jwksFile]),
            (binary, verify + ["--jwks", url] + ca),
        ])
        let warmRequests = server.requestCount - warmedRequests
        let (floor, local, warm) = (times[0], times[1], times[2])

        // Cold: an empty cache before every run, so each run makes one https request.
        let cold = try Harness.interleavedWallTimes([(binary, verify + ["--jwks", url] + ca)], runs: 21) {
            try? FileManager.default.removeItem(atPath: cache)
        }[0]

        var rows = [
            BenchRow(
                name: "process floor: hello world (FoundationEssentials)", unit: "ms/run", ours: 1 / floor, raw: nil,
                peer: nil, peerName: nil,
                note: "median wall time; built like shadow-keys (release, --static-swift-stdlib)"),
            BenchRow(
                name: "CLI verify-token, local JWK Set, per process", unit: "ms/run", ours: 1 / local, raw: 1 / floor,
                peer: nil, peerName: nil,
                note: "raw = the hello-world floor; goal: at most 1.5x"),
            BenchRow(
                name: "CLI verify-token --jwks https URL, warm cache", unit: "ms/run", ours: 1 / warm, raw: 1 / local,
                peer: nil, peerName: nil,
                note:
                    """
                    raw = the local-file run; goal within 10%; requests during the timed runs: \(warmRequests) (goal \
                    0)
                    """
            ),
            BenchRow(
                name: "CLI verify-token --jwks https URL, cold fetch", unit: "ms/run", ours: 1 / cold, raw: 1 / floor,
                peer: nil, peerName: nil,
                note: "loopback TLS (test CA via --ca-file), empty cache each run; goal < 30 ms"),
        ]
        rows += try hostile(binary: binary)
        rows.append(try await concurrentCold(signer: signer, jwksText: jwksText, now: now))
        return rows
    }

    /// Endless body and slow drip: exit status, wall time and peak memory of `jwks fetch`.
    static func hostile(binary: String) throws -> [BenchRow] {
        let head = Array("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n".utf8)
        let megabyte = [UInt8](repeating: 0x78, count: 1 << 20)
        let cases: [(String, LoopbackHTTPServer.Reply)] = [
            (
                "endless body",
                .stream(interval: 0, limit: 30) { $0 == 0 ? head + Array("Connection: close\r\n\r\n".utf8) : megabyte }
            ),
            (
                "one byte a second",
                .stream(interval: 1, limit: 30) {
                    $0 == 0 ? head + Array("Content-Length: 100000\r\n\r\n".utf8) : [0x20]
                }
            ),
        ]
        return try cases.map { name, reply in
            let server = try LoopbackHTTPServer { _ in reply }
            let started = Date()
            let child = try ChildProcess(binary, ["jwks", "fetch", server.url("/keys"), "--allow-http-loopback"])
            let result = try child.wait(timeout: 30)
            let seconds = Date().timeIntervalSince(started)
            return BenchRow(
                name: "CLI jwks fetch, hostile server: \(name)", unit: "ms/run", ours: 1 / seconds, raw: nil, peer: nil,
                peerName: nil,
                note:
                    """
                    exit \(result.status) (goal 13), peak RSS \(result.peakMemoryKiB / 1024) MiB (goal < 64), \
                    deadline 5 s (goal: exit within 6 s)
                    """
            )
        }
    }

    /// 1,000 concurrent verifications through one cold provider over AsyncHTTPClient and real TLS.
    static func concurrentCold(signer: JWSSigner, jwksText: String, now: Int64) async throws -> BenchRow {
        let server = try LoopbackHTTPSServer(body: Array(jwksText.utf8))
        let transport = try AsyncHTTPClientTransport(
            options: .init(additionalTrustRootsFile: LoopbackHTTPSServer.caFile, proxy: .none))
        let provider = try JWKSProvider(configuration: .init(url: server.url("/keys")), transport: transport)
        let verifier = JWTVerifier(
            policy: ClaimPolicy(issuer: JWTBenchmarks.issuer, audiences: [JWTBenchmarks.audience]))
        let token = try signer.sign(claims: JWTBenchmarks.appleClaims(now: now))
        let started = Date()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<1000 { group.addTask { _ = try await verifier.verify(token, keys: provider) } }
            try await group.waitForAll()
        }
        let seconds = Date().timeIntervalSince(started)
        await provider.shutdown()
        return BenchRow(
            name: "library: 1,000 concurrent cold verifications, AsyncHTTPClient", unit: "ms/run", ours: 1 / seconds,
            raw: nil, peer: nil, peerName: nil,
            note: "HTTPS requests made: \(server.requestCount) (goal 1)")
    }
}
