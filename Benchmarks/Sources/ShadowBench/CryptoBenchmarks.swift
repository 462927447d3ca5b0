import Crypto
import CryptoExtras
import Foundation
import ShadowCore
import ShadowCrypto

/// PBKDF2, envelope encryption and SHA-256: ours beside the raw swift-crypto primitive and
/// peers (Python's hashlib, age, gpg, openssl, sha256sum), in one run.
enum CryptoBenchmarks {
    static func run(binary: String, workDirectory: String) async throws -> [BenchRow] {
        var rows: [BenchRow] = []
        rows.append(try pbkdf2(workDirectory: workDirectory))
        rows += try inMemory()
        rows += try files(binary: binary, workDirectory: workDirectory)
        return rows
    }

    /// PBKDF2-HMAC-SHA256, 100,000 iterations, 32-byte output.
    static func pbkdf2(workDirectory: String) throws -> BenchRow {
        let passphrase = SecretBytes(utf8: "correct horse battery staple")
        let salt = [UInt8](repeating: 7, count: 16)
        let samples = try Harness.sample([
            { _ = try PBKDF2.deriveKey(passphrase: passphrase, salt: salt) },
            {
                _ = try KDF.Insecure.PBKDF2.deriveKey(
                    from: Array("correct horse battery staple".utf8), salt: salt, using: .sha256, outputByteCount: 32,
                    unsafeUncheckedRounds: 100_000)
            },
        ])
        let script = workDirectory + "/pbkdf2.py"
        try """
        import hashlib, statistics, time
        times = []
        for _ in range(15):
            start = time.perf_counter()
            hashlib.pbkdf2_hmac("sha256", b"correct horse battery staple", bytes([7] * 16), 100000, 32)
            times.append(time.perf_counter() - start)
        print(statistics.median(times))
        """.write(toFile: script, atomically: true, encoding: .utf8)
        let python = pythonWithJoserfc()
        let out = workDirectory + "/pbkdf2.out"
        let peer = (try? Harness.spawn(python, [script], environment: [], stdout: out)).flatMap { _ in
            (try? String(contentsOfFile: out, encoding: .utf8)).flatMap {
                Double($0.trimmingCharacters(in: .whitespacesAndNewlines))
            }
        }
        var row = BenchRow(
            name: "PBKDF2-HMAC-SHA256, 100k iterations", unit: "op/s", ours: samples.median(0), raw: samples.median(1),
            peer: peer.map { 1 / $0 }, peerName: "python3 hashlib (OpenSSL)",
            note: "time per derivation; goal: ours within 5% of raw")
        row.pairedRatios = (samples.pairedRatio(0, 1), nil)
        return row
    }

    /// Envelope sealing and opening in memory (no I/O) against raw AES-256-GCM on 16 KiB chunks.
    static func inMemory() throws -> [BenchRow] {
        let size = 16 << 20
        let data = [UInt8](repeating: 0xA5, count: size)
        let kek = try KeyEncryptionKey.raw(SecretBytes([UInt8](repeating: 1, count: 32)))
        let key = SymmetricKey(size: .bits256)
        let nonce = AES.GCM.Nonce()
        var sealedEnvelope: [UInt8] = []
        do {
            var encryptor = try EnvelopeStreamEncryptor(kek: kek)
            sealedEnvelope = try encryptor.update(data) + encryptor.finish()
        }
        let rawChunks = stride(from: 0, to: size, by: 16 << 10).map { offset in
            try! AES.GCM.seal(data[offset..<offset + (16 << 10)], using: key, nonce: nonce)
        }
        // Fed in 1 MiB pieces, as a streaming caller would.
        let piece = 1 << 20
        let seal = try Harness.sample([
            {
                var encryptor = try EnvelopeStreamEncryptor(kek: kek)
                for offset in stride(from: 0, to: size, by: piece) {
                    _ = try encryptor.update(data[offset..<offset + piece])
                }
                _ = try encryptor.finish()
            },
            {
                for offset in stride(from: 0, to: size, by: 16 << 10) {
                    _ = try AES.GCM.seal(data[offset..<offset + (16 << 10)], using: key, nonce: nonce)
                }
            },
        ])
        let open = try Harness.sample([
            {
                var decryptor = EnvelopeStreamDecryptor(kek: kek)
                for offset in stride(from: 0, to: sealedEnvelope.count, by: piece) {
                    _ = try decryptor.update(sealedEnvelope[offset..<min(offset + piece, sealedEnvelope.count)])
                }
                _ = try decryptor.finish()
            },
            { for box in rawChunks { _ = try AES.GCM.open(box, using: key) } },
        ])
        func row(_ name: String, _ samples: Samples) -> BenchRow {
            var row = BenchRow(
                name: name, unit: "B/s", ours: samples.median(0) * Double(size), raw: samples.median(1) * Double(size),
                peer: nil, peerName: nil,
                note: "16 MiB in memory, fed in 1 MiB pieces; raw = swift-crypto AES-256-GCM on 16 KiB chunks")
            row.pairedRatios = (samples.pairedRatio(0, 1), nil)
            return row
        }
        return [row("envelope stream seal, in memory", seal), row("envelope stream open, in memory", open)]
    }

    /// Whole-file runs: the CLI against age, gpg, openssl and sha256sum on the same file.
    static func files(binary: String, workDirectory: String) throws -> [BenchRow] {
        let megabytes = Int(ProcessInfo.processInfo.environment["BENCH_FILE_MB"] ?? "1024") ?? 1024
        let directory =
            FileManager.default.isWritableFile(atPath: "/dev/shm")
            ? "/dev/shm/shadow-bench-\(getpid())" : workDirectory + "/files"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let plain = directory + "/plain.bin", sealed = directory + "/sealed.skev", opened = directory + "/opened.bin"
        let key = directory + "/kek.hex", passphrase = directory + "/passphrase.txt"
        try String(repeating: "ab", count: 32).write(toFile: key, atomically: true, encoding: .utf8)
        try "correct horse battery staple".write(toFile: passphrase, atomically: true, encoding: .utf8)
        chmod(key, 0o600)
        chmod(passphrase, 0o600)
        // Incompressible content, so no peer gains by compressing.
        _ = FileManager.default.createFile(atPath: plain, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: plain))
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<megabytes {
            handle.write(Data((0..<(1 << 20) / 8).flatMap { _ in withUnsafeBytes(of: generator.next()) { Array($0) } }))
        }
        try handle.close()
        let bytes = Double(megabytes) * Double(1 << 20)

        let environment = ["PATH=/usr/bin:/bin", "HOME=\(directory)", "GNUPGHOME=\(directory)/gnupg"]
        /// Median seconds over runs after one warm-up (`prepare` runs before each), and peak RSS
        /// from one more run under /usr/bin/time: a posix_spawn child reports its parent's
        /// high-water mark in rusage.
        func measure(
            _ path: String, _ arguments: [String], runs: Int = 5, prepare: () -> Void = {}
        ) -> (seconds: Double, rss: Int)? {
            var times: [Double] = []
            for run in 0...runs {
                prepare()
                let start = DispatchTime.now().uptimeNanoseconds
                guard let result = try? Harness.spawn(path, arguments, environment: environment), result.status == 0
                else { return nil }
                if run > 0 { times.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9) }
            }
            prepare()
            let rssFile = directory + "/rss.txt"
            _ = try? Harness.spawn(
                "/usr/bin/time", ["-f", "%M", "-o", rssFile, path] + arguments, environment: environment)
            let rss =
                (try? String(contentsOfFile: rssFile, encoding: .utf8)).flatMap {
                    Int($0.trimmingCharacters(in: .whitespacesAndNewlines))
                } ?? 0
            return (Harness.median(times), rss)
        }
        func remove(_ paths: String...) -> () -> Void { { for path in paths { unlink(path) } } }

        let encrypt = measure(binary, ["encrypt", plain, "-o", sealed, "--key-file", key], prepare: remove(sealed))
        let decrypt = measure(binary, ["decrypt", sealed, "-o", opened, "--key-file", key], prepare: remove(opened))
        // age with an X25519 recipient (its fast path; -p would add scrypt).
        try? FileManager.default.removeItem(atPath: directory + "/age.key")
        _ = try? Harness.spawn("/usr/bin/age-keygen", ["-o", directory + "/age.key"], environment: environment)
        let identity = (try? String(contentsOfFile: directory + "/age.key", encoding: .utf8)) ?? ""
        let recipient = identity.split(separator: "\n").first { $0.hasPrefix("# public key: ") }.map {
            String($0.dropFirst(14))
        }
        let ageEncrypt = recipient.flatMap {
            measure(
                "/usr/bin/age", ["-r", $0, "-o", directory + "/sealed.age", plain],
                prepare: remove(directory + "/sealed.age"))
        }
        let ageDecrypt =
            recipient == nil
            ? nil
            : measure(
                "/usr/bin/age",
                ["-d", "-i", directory + "/age.key", "-o", directory + "/opened.age", directory + "/sealed.age"],
                prepare: remove(directory + "/opened.age"))
        try? FileManager.default.createDirectory(atPath: directory + "/gnupg", withIntermediateDirectories: true)
        chmod(directory + "/gnupg", 0o700)
        let gpgArgs = [
            "--batch", "--yes", "--pinentry-mode", "loopback", "--passphrase-file", passphrase, "--cipher-algo",
            "AES256", "--compress-algo", "none",
        ]
        let gpgEncrypt = measure(
            "/usr/bin/gpg", gpgArgs + ["--symmetric", "-o", directory + "/sealed.gpg", plain], runs: 3,
            prepare: remove(directory + "/sealed.gpg"))
        let gpgDecrypt = measure(
            "/usr/bin/gpg", gpgArgs + ["--decrypt", "-o", directory + "/opened.gpg", directory + "/sealed.gpg"],
            runs: 3, prepare: remove(directory + "/opened.gpg"))

        let hash = measure(binary, ["hash", plain])
        let openssl = measure("/usr/bin/openssl", ["dgst", "-sha256", plain])
        let sha256sum = measure("/usr/bin/sha256sum", [plain])
        let rawHash = try rawSHA256()

        func throughput(_ result: (seconds: Double, rss: Int)?) -> Double? { result.map { bytes / $0.seconds } }
        func rss(_ result: (seconds: Double, rss: Int)?) -> String { result.map { "\($0.rss / 1024) MiB" } ?? "—" }
        let placement = directory.hasPrefix("/dev/shm") ? "tmpfs" : "disk"
        return [
            BenchRow(
                name: "CLI encrypt \(megabytes) MiB file (\(placement))", unit: "B/s", ours: throughput(encrypt) ?? 0,
                raw: nil, peer: throughput(ageEncrypt), peerName: "age 1.1.1 (X25519)",
                note:
                    """
                    median of 5 after a warm-up; peak RSS ours \(rss(encrypt)), age \(rss(ageEncrypt)); gpg \
                    --symmetric AES256: \
                    \(gigabytes(throughput(gpgEncrypt))) (RSS \
                    \(rss(gpgEncrypt))); goal ≥ 2 GB/s, RSS < 16 MiB
                    """
            ),
            BenchRow(
                name: "CLI decrypt \(megabytes) MiB file (\(placement))", unit: "B/s", ours: throughput(decrypt) ?? 0,
                raw: nil, peer: throughput(ageDecrypt), peerName: "age 1.1.1 (X25519)",
                note:
                    """
                    median of 5 after a warm-up; peak RSS ours \(rss(decrypt)), age \(rss(ageDecrypt)); gpg \
                    --decrypt: \(gigabytes(throughput(gpgDecrypt))); goal ≥ \
                    2 GB/s, RSS < 16 MiB
                    """
            ),
            BenchRow(
                name: "CLI hash \(megabytes) MiB file (\(placement))", unit: "B/s", ours: throughput(hash) ?? 0,
                raw: rawHash, peer: throughput(openssl), peerName: "openssl dgst -sha256",
                note:
                    """
                    median of 5; sha256sum: \
                    \(throughput(sha256sum).map { String(format: "%.2f GB/s", $0 / 1e9) } ?? "—") (ours/sha256sum \
                    \(String(format: "%.2f×", (throughput(hash) ?? 0) / (throughput(sha256sum) ?? .infinity)))); raw \
                    = swift-crypto SHA-256 in memory; goal ≥ openssl and ≥ 3× sha256sum
                    """
            ),
        ]
    }

    /// swift-crypto SHA-256 over a 1 MiB buffer, in bytes per second.
    static func rawSHA256() throws -> Double {
        let buffer = [UInt8](repeating: 0x5A, count: 1 << 20)
        let samples = try Harness.sample([{ _ = SHA256.hash(data: buffer) }])
        return samples.median(0) * Double(buffer.count)
    }

    /// A throughput in bytes per second as GB/s, or a dash when there is none.
    static func gigabytes(_ bytesPerSecond: Double?) -> String {
        bytesPerSecond.map { String(format: "%.2f GB/s", $0 / 1e9) } ?? "—"
    }
}
