import Crypto
import Foundation
import JWTKit
import ShadowApple
import ShadowCore

/// Client secrets: a cached secret beside minting one, and the CLI per process.
enum AppleBenchmarks {
    static func run(binary: String, workDirectory: String) async throws -> [BenchRow] {
        let key = P256.Signing.PrivateKey()
        let builder = try ClientSecretBuilder(
            key: AppleSigningKey(key), teamID: "TEAM123456", keyID: "KEY1234567", clientID: "com.example.app")
        let provider = ClientSecretProvider(builder: builder)
        _ = try provider.secret()
        // The peer mints an equivalent ES256 JWT with jwt-kit.
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: try ES256PrivateKey(pem: key.pemRepresentation), kid: "KEY1234567")
        struct Secret: JWTPayload {
            let iss: IssuerClaim, iat: IssuedAtClaim, exp: ExpirationClaim, aud: AudienceClaim, sub: SubjectClaim
            func verify(using _: some JWTAlgorithm) throws {}
        }
        let cached = try await Harness.sampleAsync([
            { _ = try provider.secret() },
            { _ = try builder.make(issuedAt: Date()) },
            {
                let now = Date()
                _ = try await keys.sign(
                    Secret(
                        iss: "TEAM123456", iat: .init(value: now), exp: .init(value: now.addingTimeInterval(86400)),
                        aud: "https://appleid.apple.com", sub: "com.example.app"), kid: "KEY1234567")
            },
        ])
        var reuse = BenchRow(
            name: "client secret: cached reuse vs minting", unit: "ops/s", ours: cached.median(0),
            raw: cached.median(1), peer: cached.median(2),
            peerName: "jwt-kit 5.8.0 ES256 sign",
            note: String(
                format: "cached reuse %.0f ns per call (goal < 1 µs); raw = minting a new secret (ES256 sign)",
                1e9 / cached.median(0)))
        reuse.pairedRatios = (cached.pairedRatio(0, 1), cached.pairedRatio(0, 2))

        let p8 = workDirectory + "/AuthKey_KEY1234567.p8"
        try key.pemRepresentation.write(toFile: p8, atomically: true, encoding: .utf8)
        chmod(p8, 0o600)
        let perProcess = try Harness.processWallTime(
            binary,
            [
                "client-secret", "--p8", p8, "--team-id", "TEAM123456", "--key-id", "KEY1234567", "--client-id",
                "com.example.app",
            ])
        let floor = try Harness.processWallTime(binary, ["--version"])
        let cli = BenchRow(
            name: "CLI client-secret, per process", unit: "ms/run", ours: 1 / perProcess, raw: 1 / floor, peer: nil,
            peerName: nil,
            note: "median wall time; raw = `shadow-keys --version` (process start floor); goal < 15 ms")
        return [reuse, cli]
    }
}
