import Crypto
import Foundation
import ShadowCore
import ShadowCrypto
import ShadowVault

/// The token vault: `vault get` per process, passphrase unlock beside PBKDF2 alone, and a put
/// into a vault of 10,000 entries.
enum VaultBenchmarks {
    static func run(binary: String, workDirectory: String) async throws -> [BenchRow] {
        let directory = workDirectory + "/vault"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let keyHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
        let keyFile = directory + "/vault.key"
        try (keyHex + "\n").write(toFile: keyFile, atomically: true, encoding: .utf8)
        chmod(keyFile, 0o600)
        let key = SecretBytes((0..<32).map { UInt8($0) })
        var rows: [BenchRow] = []

        // 1. `vault get` with a key file, per process, beside the start-up floor and age decrypting a token.
        let small = directory + "/small.skv"
        let vault = try await TokenVault.create(at: small, unlock: .key(key))
        for index in 0..<20 { try await vault.put(entry(index)) }
        let environment = ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" }
        var commands: [(String, [String])] = [
            (binary, ["vault", "get", "apple/refresh/7", "--vault", small, "--key-file", keyFile]),
            (binary, ["--version"]),
        ]
        let age = "/usr/bin/age"
        var peerName: String?
        if FileManager.default.isExecutableFile(atPath: age) {
            let identity = directory + "/age.key", sealed = directory + "/token.age", plain = directory + "/token.txt"
            try? FileManager.default.removeItem(atPath: identity)
            _ = try Harness.spawn("/usr/bin/age-keygen", ["-o", identity], environment: environment)
            try String(repeating: "r", count: 64).write(toFile: plain, atomically: true, encoding: .utf8)
            let recipient =
                try String(contentsOfFile: identity, encoding: .utf8).split(separator: "\n").first {
                    $0.hasPrefix("# public key: ")
                }
                .map { String($0.dropFirst("# public key: ".count)) } ?? ""
            if try Harness.spawn(age, ["-r", recipient, "-o", sealed, plain], environment: environment).status == 0 {
                commands.append((age, ["-d", "-i", identity, sealed]))
                peerName = "age 1.x -d (X25519 identity), one token"
            }
        }
        let times = try Harness.interleavedWallTimes(commands)
        rows.append(
            BenchRow(
                name: "CLI vault get (key file), per process", unit: "ms/run", ours: 1 / times[0], raw: 1 / times[1],
                peer: times.count > 2 ? 1 / times[2] : nil,
                peerName: peerName,
                note: "median wall time; raw = `shadow-keys --version` (process start floor); goal < 15 ms"))

        // 2. Passphrase unlock against PBKDF2 alone (100,000 iterations). A fresh handle each time, so
        // nothing is cached.
        let phrasePath = directory + "/phrase.skv"
        let passphrase = SecretBytes(utf8: "correct horse battery staple")
        let phraseVault = try await TokenVault.create(at: phrasePath, unlock: .passphrase(passphrase))
        for index in 0..<20 { try await phraseVault.put(entry(index)) }
        let salt = (0..<16).map { UInt8($0) }
        let unlock = try await Harness.sampleAsync([
            {
                _ = try await TokenVault(path: phrasePath, unlock: .passphrase(passphrase)).entry(
                    named: "apple/refresh/3")
            },
            { _ = try PBKDF2.deriveKey(passphrase: passphrase, salt: salt, iterations: PBKDF2.defaultIterations) },
        ])
        var unlockRow = BenchRow(
            name: "vault unlock with a passphrase (PBKDF2 100k)", unit: "op/s", ours: unlock.median(0),
            raw: unlock.median(1), peer: nil,
            peerName: nil,
            note: String(
                format: "open + read one entry; raw = PBKDF2 alone; unlock costs %.1f%% more (goal < 10%%)",
                (unlock.median(1) / unlock.median(0) - 1) * 100))
        unlockRow.pairedRatios = (unlock.pairedRatio(0, 1), nil)
        rows.append(unlockRow)

        // 3. put into a vault of 10,000 entries: the library call, and the CLI per process. The raw
        // contender does the same file and cipher work without the entries: read, open, seal the same
        // plaintext size, write atomically.
        let large = directory + "/large.skv"
        let largeVault = try await TokenVault.create(at: large, unlock: .key(key))
        try await largeVault.put(contentsOf: (0..<10_000).map(entry))
        let fileBytes = try Data(contentsOf: URL(fileURLWithPath: large))
        let bodyKey = SymmetricKey(size: .bits256)
        let plaintext = [UInt8](repeating: 0x61, count: fileBytes.count - 126)
        let rawPath = directory + "/raw.bin"
        var counter = 0
        let put = try await Harness.sampleAsync([
            {
                counter += 1
                try await largeVault.put(entry(counter % 10_000))
            },
            {
                let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: large)))
                _ = bytes
                let sealed = try AES.GCM.seal(plaintext, using: bodyKey)
                _ = try AES.GCM.open(sealed, using: bodyKey)
                try Data(sealed.combined!).write(to: URL(fileURLWithPath: rawPath))
                let fd = open(rawPath, O_RDONLY)
                fsync(fd)
                close(fd)
            },
        ])
        var putRow = BenchRow(
            name: "vault put into 10,000 entries (library)", unit: "op/s", ours: put.median(0), raw: put.median(1),
            peer: nil, peerName: nil,
            note: String(
                format: "file %.1f MB; raw = read, GCM open and seal, write and fsync the same size; goal < 100 ms",
                Double(fileBytes.count) / 1e6))
        putRow.pairedRatios = (put.pairedRatio(0, 1), nil)
        rows.append(putRow)

        let cliPut = try Harness.interleavedWallTimes(
            [
                (binary, ["vault", "put", "apple/refresh/42", "--vault", large, "--key-file", keyFile]),
                (binary, ["--version"]),
            ], stdin: directory + "/secret.txt",
            prepare: {
                try "r.new-refresh-token".write(toFile: directory + "/secret.txt", atomically: true, encoding: .utf8)
            })
        rows.append(
            BenchRow(
                name: "CLI vault put into 10,000 entries, per process", unit: "ms/run", ours: 1 / cliPut[0],
                raw: 1 / cliPut[1], peer: nil, peerName: nil,
                note: "median wall time; raw = `shadow-keys --version`; goal < 100 ms"))
        return rows
    }

    /// A realistic entry: an Apple refresh token with its subject, expiry and two labels.
    static func entry(_ index: Int) -> VaultEntry {
        VaultEntry(
            name: "apple/refresh/\(index)",
            secret: SecretBytes(utf8: "r\(index).0.\(String(repeating: "x", count: 64))"), provider: .apple,
            kind: .refreshToken,
            subject: "001234.\(String(index, radix: 16)).0042", expiresAt: Date().addingTimeInterval(15_552_000),
            labels: ["team": "ABCDE12345", "client": "com.example.notes"])
    }
}
