import Crypto
import CryptoExtras
import Foundation
import ShadowKeys

/// The lean `shadow-keys` as scripts run it: whole processes beside the C tool scripts use today
/// (`jose`), a static hello world, and `--each-line` beside one core and the library's verify.
enum CLIBenchmarks {
    static func run(binary: String, hello: String, workDirectory: String) throws -> [BenchRow] {
        let now = Int64(Date().timeIntervalSince1970)
        let rsaKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let signer = try JWSSigner.rs256(rsaKey, keyID: "W6WcOKB")
        let claims = JWTBenchmarks.appleClaims(now: now)
        let token = try signer.sign(claims: claims)
        let jwks = workDirectory + "/jwks.json"
        let tokenFile = workDirectory + "/token.txt"
        try ShadowCore.JSONValue.object(["keys": .array([.object(try signer.publicJWK().json)])]).serialized().write(
            toFile: jwks, atomically: true, encoding: .utf8)
        try token.write(toFile: tokenFile, atomically: true, encoding: .utf8)
        chmod(tokenFile, 0o600)
        var rows: [BenchRow] = []

        // 1. verify-token against jose (C, jansson + OpenSSL), the hello world as the floor, in
        // every plain shape a script writes (Docs/cli.md, "Start-up").
        let jose = peer("jose", package: "jose")
        let policy = ["--iss", JWTBenchmarks.issuer, "--aud", JWTBenchmarks.audience]
        let shapes: [(name: String, arguments: [String], stdin: String, status: Int32)] = [
            ("--token-file F", ["verify-token", "--token-file", tokenFile, "--jwks", jwks] + policy, "/dev/null", 0),
            // A refusal (exit 12: another issuer) costs what a pass costs.
            (
                "--token-file F, refused (exit 12)",
                [
                    "verify-token", "--token-file", tokenFile, "--jwks", jwks, "--iss", "https://other.example",
                    "--aud", JWTBenchmarks.audience, "--quiet",
                ], "/dev/null", 12
            ),
            ("TOKEN --quiet", ["verify-token", token, "--jwks", jwks, "--quiet"] + policy, "/dev/null", 0),
            ("- (stdin) --json", ["verify-token", "-", "--jwks", jwks, "--json"] + policy, tokenFile, 0),
            (
                "--apple --token-file F",
                [
                    "verify-token", "--apple", "--token-file", tokenFile, "--jwks", jwks,
                    "--aud", JWTBenchmarks.audience,
                ], "/dev/null", 0
            ),
        ]
        for shape in shapes {
            var commands = [(binary, shape.arguments), (hello, [String]())]
            if let jose { commands.append((jose, ["jws", "ver", "-i", tokenFile, "-k", jwks, "-O", "/dev/null"])) }
            let times = try Harness.interleavedWallTimes(
                commands, stdin: shape.stdin, runs: 61, warmup: 5, firstStatus: shape.status)
            rows.append(
                BenchRow(
                    name: "CLI verify-token \(shape.name) --jwks F, per process", unit: "ms/run", ours: 1 / times[0],
                    raw: 1 / times[1], peer: jose == nil ? nil : 1 / times[2],
                    peerName: jose == nil ? nil : "jose jws ver (C: jansson + OpenSSL)",
                    note:
                        """
                        median wall time of interleaved runs; raw = a static hello world; goal ≤ 1.0× jose (jose \
                        checks the signature only, ours the claims too)
                        """
                ))
        }

        // 2. --version against the static hello, and its peak RSS.
        let version = try Harness.interleavedWallTimes([(binary, ["--version"]), (hello, [])], runs: 61, warmup: 5)
        let versionRSS = try (0..<9).map { _ in try peakRSS(binary, ["--version"], workDirectory: workDirectory) }
        let helloRSS = try (0..<9).map { _ in try peakRSS(hello, [], workDirectory: workDirectory) }
        rows.append(
            BenchRow(
                name: "CLI --version, per process", unit: "ms/run", ours: 1 / version[0], raw: 1 / version[1],
                peer: nil, peerName: nil,
                note:
                    """
                    raw = a static hello world; goal ≤ 1.3×; peak RSS \(mebibytes(versionRSS)) (hello \
                    \(mebibytes(helloRSS))), goal ≤ 12 MiB
                    """
            ))
        let size = (try FileManager.default.attributesOfItem(atPath: binary)[.size] as? Int) ?? 0
        rows.append(
            BenchRow(
                name: "static stripped shadow-keys, MiB", unit: "count", ours: Double(size) / 1_048_576, raw: nil,
                peer: nil, peerName: nil,
                note: "Scripts/install's build; goal ≤ 40 MiB"))

        // 3. --each-line over 50,000 tokens (10,000 signed, five times over): every core against
        // one (taskset), and per token against the library's own verify on one thread.
        let lines = workDirectory + "/tokens.txt"
        var log = ""
        for index in 0..<10_000 {
            var extra = claims
            extra.set("jti", .string("t\(index)"))
            log += try signer.sign(claims: extra) + "\n"
        }
        try String(repeating: log, count: 5).write(toFile: lines, atomically: true, encoding: .utf8)
        let lineCount = 50_000.0
        let eachLine = [
            "verify-token", "--each-line", "--jwks", jwks, "--iss", JWTBenchmarks.issuer, "--aud",
            JWTBenchmarks.audience,
        ]
        var scaling: [(String, [String])] = [(binary, eachLine)]
        let taskset = peer("taskset", package: "util-linux")
        if let taskset { scaling.append((taskset, ["-c", "0", binary] + eachLine)) }
        let batch = try Harness.interleavedWallTimes(scaling, stdin: lines, runs: 7, warmup: 1)
        if taskset != nil {
            rows.append(
                BenchRow(
                    name: "CLI verify-token --each-line, 50,000 tokens, all cores", unit: "ops/s",
                    ours: lineCount / batch[0], raw: lineCount / batch[1], peer: nil,
                    peerName: nil,
                    note:
                        """
                        raw = the same run held to one core (taskset -c 0); \
                        \(ProcessInfo.processInfo.activeProcessorCount) cores; goal ≥ 1.7× on 2
                        """
                ))
        }
        let verifier = JWTVerifier(
            algorithms: [.rs256], policy: ClaimPolicy(issuer: JWTBenchmarks.issuer, audiences: [JWTBenchmarks.audience])
        )
        let keys = try JWKSet(json: Array(try String(contentsOfFile: jwks, encoding: .utf8).utf8))
        let tokens = log.split(separator: "\n").map(String.init)
        let start = DispatchTime.now().uptimeNanoseconds
        let semaphore = DispatchSemaphore(value: 0)
        Task {
            for token in tokens { _ = try? await verifier.verify(token, keys: keys) }
            semaphore.signal()
        }
        semaphore.wait()
        let library = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        if taskset != nil {
            rows.append(
                BenchRow(
                    name: "CLI --each-line per token, one core, vs the library", unit: "ops/s",
                    ours: lineCount / batch[1],
                    raw: 10_000 / library, peer: nil,
                    peerName: nil,
                    note:
                        """
                        raw = JWTVerifier.verify on one thread in this process; goal: ours/raw ≥ 0.91 (≤ 1.1× the \
                        time)
                        """
                ))
        }
        return rows
    }

    /// The peer's path, or nil with a note on how to get it (the bench installs nothing).
    static func peer(_ name: String, package: String) -> String? {
        for directory in ["/usr/bin", "/usr/local/bin", "/bin"]
        where FileManager.default.isExecutableFile(atPath: directory + "/" + name) {
            return directory + "/" + name
        }
        FileHandle.standardError.write(
            Data("bench: \(name) not found; its rows are skipped (apt-get install \(package))\n".utf8))
        return nil
    }

    /// A command's peak RSS in KiB, as its parent sees it through wait4. A child spawned straight
    /// from this process would be charged this process's pages (posix_spawn shares them until the
    /// exec), so a small python3 parent spawns it, its output sent to /dev/null, and prints the
    /// figure alone; what that parent adds is the same for every row.
    static func peakRSS(_ path: String, _ arguments: [String], workDirectory: String) throws -> Int {
        let script = workDirectory + "/peak_rss.py"
        if !FileManager.default.fileExists(atPath: script) {
            try """
            import os, sys
            quiet = [(os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0)]
            pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ, file_actions=quiet)
            _, status, usage = os.wait4(pid, 0)
            print(usage.ru_maxrss)
            """.write(toFile: script, atomically: true, encoding: .utf8)
        }
        let output = workDirectory + "/peak_rss.txt"
        _ = try Harness.spawn(
            "/usr/bin/python3", [script, path] + arguments, environment: Harness.environment, stdout: output)
        return Int(try String(contentsOfFile: output, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines))
            ?? 0
    }

    static func mebibytes(_ kibibytes: [Int]) -> String {
        String(format: "%.1f MiB", Harness.median(kibibytes.map(Double.init)) / 1024)
    }
}

/// The python3 interpreter that has joserfc (a peer of the crypto rows), resolved once to its real path.
func pythonWithJoserfc() -> String {
    let answer = FileManager.default.temporaryDirectory.appendingPathComponent("shadow-bench-python-\(getpid())").path
    defer { try? FileManager.default.removeItem(atPath: answer) }
    let probe = try? Harness.spawn(
        "/usr/bin/env", ["python3", "-c", "import sys, joserfc; print(sys.executable)"],
        environment: Harness.environment,
        stdout: answer)
    guard probe?.status == 0,
        let path = try? String(contentsOfFile: answer, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines),
        !path.isEmpty
    else { return "/usr/bin/python3" }
    return path
}
