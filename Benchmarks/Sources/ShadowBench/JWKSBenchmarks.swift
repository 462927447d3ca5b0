import Crypto
import CryptoExtras
import Foundation
import HTTPTypes
import ShadowKeys
import Synchronization

/// A transport that answers from memory after a simulated network delay, and counts requests.
final class CountingTransport: HTTPTransport {
    let body: [UInt8]
    let delay: Double
    let count = Mutex(0)

    init(body: String, delay: Double) {
        self.body = Array(body.utf8)
        self.delay = delay
    }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        count.withLock { $0 += 1 }
        try await Task.sleep(nanoseconds: UInt64(delay * 1e9))
        return TransportResponse(status: .ok, headerFields: [.cacheControl: "max-age=3600"], body: body)
    }
}

/// The fetched-key-set path against a local key set, and the provider's fetch discipline.
enum JWKSBenchmarks {
    static func run() async throws -> [BenchRow] {
        let now = Int64(Date().timeIntervalSince1970)
        let signer = try JWSSigner.rs256(try _RSA.Signing.PrivateKey(keySize: .bits2048), keyID: "W6WcOKB")
        let jwks = ShadowCore.JSONValue.object(["keys": .array([.object(try signer.publicJWK().json)])]).serialized()
        let local = try JWKSet(jsonText: jwks)
        let verifier = JWTVerifier(
            policy: ClaimPolicy(issuer: JWTBenchmarks.issuer, audiences: [JWTBenchmarks.audience]))
        let token = try signer.sign(claims: JWTBenchmarks.appleClaims(now: now))

        let transport = CountingTransport(body: jwks, delay: 0.02)
        let provider = try JWKSProvider(configuration: .init(url: "https://keys.example/jwks"), transport: transport)
        _ = try await provider.keySet()
        // Key lookup alone shows the provider's added cost without RSA noise around it.
        let lookups = try await Harness.sampleAsync([
            { _ = try await provider.key(for: "W6WcOKB", algorithm: .rs256) },
            { _ = try local.key(for: "W6WcOKB", algorithm: .rs256) },
        ])
        let verifications = try await Harness.sampleAsync([
            { _ = try await verifier.verify(token, keys: provider) },
            { _ = try verifier.verify(token, keys: local) },
        ])
        let added = (1 / lookups.median(0) - 1 / lookups.median(1)) * 1e6

        // 1,000 concurrent verifications against a cold cache.
        let cold = CountingTransport(body: jwks, delay: 0.05)
        let coldProvider = try JWKSProvider(configuration: .init(url: "https://keys.example/jwks"), transport: cold)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<1000 { group.addTask { _ = try await verifier.verify(token, keys: coldProvider) } }
            try await group.waitForAll()
        }
        let coldFetches = cold.count.withLock { $0 }

        // 10,000 verifications with random unknown kids within one cooldown.
        let warm = CountingTransport(body: jwks, delay: 0.001)
        let clock = Mutex(Date())
        let warmProvider = try JWKSProvider(
            configuration: .init(url: "https://keys.example/jwks"), transport: warm,
            clock: WallClock { clock.withLock { $0 } })
        _ = try await warmProvider.keySet()
        clock.withLock { $0 = $0.addingTimeInterval(31) }  // past the first cooldown: one refresh is allowed
        var unknown = 0
        for index in 0..<10_000 {
            do {
                _ = try await warmProvider.key(
                    for: "random-\(index)-\(UInt64.random(in: 0...UInt64.max))", algorithm: .rs256)
            } catch { unknown += 1 }
        }
        let extraFetches = warm.count.withLock { $0 } - 1

        return [
            BenchRow(
                name: "RS256 verify via fetched key set (cached)", samples: verifications, peerName: nil,
                note: String(
                    format:
                        """
                        raw = the same verification against a local JWKSet; key lookup adds %.2f µs (provider %.0f ns \
                        vs local %.0f ns; goal < 1 µs)
                        """,
                    added, 1e9 / lookups.median(0), 1e9 / lookups.median(1))),
            BenchRow(
                name: "fetches for 1,000 concurrent verifications, cold cache", unit: "count",
                ours: Double(coldFetches), raw: nil, peer: nil, peerName: nil,
                note: "goal: exactly 1"),
            BenchRow(
                name: "extra fetches for 10,000 random unknown kids in one cooldown", unit: "count",
                ours: Double(extraFetches), raw: nil, peer: nil, peerName: nil,
                note: "goal: at most 1 (\(unknown) refused as unknown)"),
        ]
    }
}
