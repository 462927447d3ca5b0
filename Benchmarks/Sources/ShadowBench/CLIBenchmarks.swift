import Crypto
import CryptoExtras
import Foundation
import ShadowKeys

/// Per-process wall time of `shadow-keys` subcommands, beside a peer CLI doing the same job.
enum CLIBenchmarks {
    static func run(binary: String, workDirectory: String) throws -> [BenchRow] {
        let now = Int64(Date().timeIntervalSince1970)
        let rsaKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let signer = try JWSSigner.rs256(rsaKey, keyID: "W6WcOKB")
        let token = try signer.sign(claims: JWTBenchmarks.appleClaims(now: now))
        let jwks = workDirectory + "/jwks.json"
        let tokenFile = workDirectory + "/token.txt"
        try ShadowCore.JSONValue.object(["keys": .array([.object(try signer.publicJWK().json)])]).serialized().write(toFile: jwks, atomically: true, encoding: .utf8)
        try token.write(toFile: tokenFile, atomically: true, encoding: .utf8)

        let ours = try Harness.processWallTime(binary, ["verify-token", "--token-file", tokenFile, "--jwks", jwks, "--iss", JWTBenchmarks.issuer, "--aud", JWTBenchmarks.audience])
        let floor = try Harness.processWallTime(binary, ["--version"])
        let script = """
            import json, sys
            from joserfc import jwt
            from joserfc.jwk import KeySet
            keys = KeySet.import_key_set(json.load(open(sys.argv[2])))
            token = jwt.decode(open(sys.argv[1]).read().strip(), keys, algorithms=["RS256"])
            jwt.JWTClaimsRegistry(iss={"essential": True, "value": sys.argv[3]}, aud={"essential": True, "value": sys.argv[4]}).validate(token.claims)
            print(json.dumps(token.claims))
            """
        let scriptPath = workDirectory + "/peer_verify.py"
        try script.write(toFile: scriptPath, atomically: true, encoding: .utf8)
        let python = pythonWithJoserfc()
        let peer = try? Harness.processWallTime(python, [scriptPath, tokenFile, jwks, JWTBenchmarks.issuer, JWTBenchmarks.audience], runs: 15, warmup: 2)
        var rows = [BenchRow(
            name: "CLI verify-token (local JWKS), per process", unit: "ms/run", ours: 1 / ours, raw: 1 / floor, peer: peer.map { 1 / $0 },
            peerName: peer == nil ? nil : "python3 joserfc 1.6.5",
            note: "median wall time; raw = `shadow-keys --version` (process start floor); goal < 15 ms")]
        rows += try warmCache(binary: binary, workDirectory: workDirectory, tokenFile: tokenFile, floor: floor)
        return rows
    }

    /// `verify-token --jwks URL` with a warm disk cache, against a loopback server that logs requests.
    static func warmCache(binary: String, workDirectory: String, tokenFile: String, floor: Double) throws -> [BenchRow] {
        let port = Int.random(in: 20000...60000)
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        server.arguments = ["python3", "-m", "http.server", String(port), "--bind", "127.0.0.1", "--directory", workDirectory]
        let log = Pipe()
        server.standardError = log
        server.standardOutput = FileHandle.nullDevice
        try server.run()
        defer { server.terminate() }
        let url = "http://127.0.0.1:\(port)/jwks.json"
        let environment = ["XDG_CACHE_HOME": workDirectory + "/cache"]
        let arguments = ["verify-token", "--token-file", tokenFile, "--jwks", url, "--allow-http-loopback", "--iss", JWTBenchmarks.issuer, "--aud", JWTBenchmarks.audience]
        // Wait until the server accepts connections: a failed fetch would start the refresh cooldown.
        for _ in 0..<100 where !portIsOpen(port) { Thread.sleep(forTimeInterval: 0.05) }
        guard (try? Harness.processWallTime(binary, arguments, environment: environment, runs: 1, warmup: 0)) != nil else {
            throw BenchError("could not warm the cache from \(url)")
        }
        let median = try Harness.processWallTime(binary, arguments, environment: environment)
        server.terminate()
        server.waitUntilExit()
        let requests = String(decoding: log.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).components(separatedBy: "\"GET ").count - 1
        return [BenchRow(
            name: "CLI verify-token --jwks URL, warm disk cache, per process", unit: "ms/run", ours: 1 / median, raw: 1 / floor, peer: nil, peerName: nil,
            note: "median wall time; HTTP requests during \(41 + 5) timed runs: \(requests - 1) (the warming run made 1); goal < 15 ms and none")]
    }
}

/// True when something accepts TCP connections on 127.0.0.1:port.
func portIsOpen(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } } == 0
}

/// The python3 interpreter that has joserfc (the peer), resolved once to its real path.
func pythonWithJoserfc() -> String {
    let probe = Process()
    probe.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    probe.arguments = ["python3", "-c", "import sys, joserfc; print(sys.executable)"]
    let out = Pipe()
    probe.standardOutput = out
    probe.standardError = FileHandle.nullDevice
    guard (try? probe.run()) != nil else { return "/usr/bin/python3" }
    let path = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    probe.waitUntilExit()
    return path.isEmpty ? "/usr/bin/python3" : path
}
