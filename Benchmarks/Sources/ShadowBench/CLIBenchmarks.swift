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
        return rows
    }
}

/// The python3 interpreter that has joserfc (the peer), resolved once to its real path.
func pythonWithJoserfc() -> String {
    let answer = FileManager.default.temporaryDirectory.appendingPathComponent("shadow-bench-python-\(getpid())").path
    defer { try? FileManager.default.removeItem(atPath: answer) }
    let probe = try? Harness.spawn("/usr/bin/env", ["python3", "-c", "import sys, joserfc; print(sys.executable)"], environment: Harness.environment, stdout: answer)
    guard probe?.status == 0, let path = try? String(contentsOfFile: answer, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines), !path.isEmpty
    else { return "/usr/bin/python3" }
    return path
}
