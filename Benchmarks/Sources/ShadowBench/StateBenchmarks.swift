import Crypto
import CryptoExtras
import Foundation
import ShadowCore
import ShadowCredentials
import ShadowJOSE
import ShadowCrypto
import ShadowVault

/// Credential state: recording a transition in a store of 1,000 and of 10,000 users (library), and
/// what a state check adds to a process and to `verify-token --apple`. The store keeps its records
/// as JSON in one vault section, so both costs grow with the number of users.
enum StateBenchmarks {
    static func run(binary: String, workDirectory: String) async throws -> [BenchRow] {
        var rows: [BenchRow] = []
        for users in [1_000, 10_000] {
            rows += try await run(users: users, binary: binary, workDirectory: workDirectory)
        }
        return rows
    }

    static func run(users: Int, binary: String, workDirectory: String) async throws -> [BenchRow] {
        let directory = workDirectory + "/state-\(users)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let keyFile = directory + "/vault.key"
        try "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n".write(
            toFile: keyFile, atomically: true, encoding: .utf8)
        chmod(keyFile, 0o600)
        let key = SecretBytes((0..<32).map { UInt8($0) })
        let client = "com.example.notes"
        func subject(_ index: Int) -> String { "001234.\(String(index, radix: 16).leftPadded(32)).0042" }
        var rows: [BenchRow] = []

        // 1. A transition in the store, beside a vault put into a vault of the same
        // file size (the write the store builds on) and the event fold alone.
        let path = directory + "/users.skv"
        let vault = try await TokenVault.create(at: path, unlock: .key(key))
        let store = VaultCredentialStore(vault: vault)
        let start: Int64 = 1_700_000_000_000
        _ = try await store.apply(
            try (0..<users).map {
                try CredentialEvent(
                    kind: .signIn, clientID: client, subject: subject($0), timeMilliseconds: start, id: "sign-in:\($0)")
            })
        let fileBytes = try Data(contentsOf: URL(fileURLWithPath: path)).count
        let twin = directory + "/twin.skv"
        let twinVault = try await TokenVault.create(at: twin, unlock: .key(key))
        // Entries hold at most 1 MiB each: pad with 512 KiB pieces.
        let pieces = stride(from: 0, to: fileBytes - 200, by: 1 << 19).map { offset in
            VaultEntry(
                name: "padding/\(offset)",
                secret: SecretBytes([UInt8](repeating: 0x61, count: min(1 << 19, fileBytes - 200 - offset))))
        }
        try await twinVault.put(contentsOf: pieces)
        var round: Int64 = 0
        let samples = try await Harness.sampleAsync([
            {
                round += 1
                // Alternate revocation and sign-in of one user, so every call is a transition.
                let kind: CredentialEvent.Kind = round % 2 == 0 ? .signIn : .consentRevoked
                _ = try await store.apply([
                    try CredentialEvent(
                        kind: kind, clientID: client, subject: subject(42), timeMilliseconds: start + round * 1000,
                        id: "e\(round)")
                ])
            },
            { try await twinVault.put(VaultEntry(name: "token", secret: SecretBytes(utf8: "r.token"))) },
        ])
        var applyRow = BenchRow(
            name: "state transition among \(users) users (library)", unit: "op/s", ours: samples.median(0),
            raw: samples.median(1), peer: nil,
            peerName: nil,
            note: String(
                format:
                    """
                    vault %.1f MB; raw = a vault put into a vault of that size; includes the audit line and its \
                    fsync; no peer tracks state
                    """,
                Double(fileBytes) / 1e6))
        applyRow.pairedRatios = (samples.pairedRatio(0, 1), nil)
        rows.append(applyRow)

        // 2. Per process: `state check`, and `verify-token --apple` with and without --state.
        let signer = try JWSSigner.rs256(try _RSA.Signing.PrivateKey(keySize: .bits2048), keyID: "apple-1")
        let jwks = directory + "/apple-keys.json"
        try ShadowCore.JSONValue.object(["keys": .array([.object(try signer.publicJWK().json)])]).serialized().write(
            toFile: jwks, atomically: true, encoding: .utf8)
        let token = try signer.sign(claims: [
            "iss": "https://appleid.apple.com", "aud": .string(client), "sub": .string(subject(7)),
            "iat": 1_700_000_100, "exp": 1_700_086_500,
        ])
        let tokenFile = directory + "/token"
        try token.write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let verify = [
            "verify-token", "--apple", "--aud", client, "--jwks", jwks, "--token-file", tokenFile, "--now",
            "1700000200",
        ]
        let times = try Harness.interleavedWallTimes([
            (binary, verify + ["--state", "--vault", path, "--key-file", keyFile]),
            (binary, verify),
            (
                binary,
                ["state", "check", "--client-id", client, "--sub", subject(7), "--vault", path, "--key-file", keyFile]
            ),
            (binary, ["--version"]),
        ])
        rows.append(
            BenchRow(
                name: "CLI verify-token --apple --state (\(users) users), per process", unit: "ms/run",
                ours: 1 / times[0], raw: 1 / times[1], peer: nil, peerName: nil,
                note: "median wall time; raw = the same verification without --state"))
        rows.append(
            BenchRow(
                name: "CLI state check (\(users) users), per process", unit: "ms/run", ours: 1 / times[2],
                raw: 1 / times[3], peer: nil, peerName: nil,
                note: "median wall time; raw = `shadow-keys --version` (process start floor)"))
        return rows
    }
}

private extension String {
    func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
