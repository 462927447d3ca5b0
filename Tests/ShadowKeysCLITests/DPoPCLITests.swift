import Crypto
import Foundation
import ShadowCore
import ShadowTestSupport
import Testing

/// `shadow-keys dpop proof|verify` (Docs/dpop.md): a proof made for curl verifies, each kind of
/// refusal has its exit code, and RFC 9449's own example verifies from the shell.
@Suite(.tags(.multiProcess), .ownThreads) struct DPoPCLITests {
    let directory: TemporaryDirectory
    let key: String
    let token: String
    let url = "https://api.example.com/v1/files"

    init() throws {
        directory = try TemporaryDirectory()
        key = try directory.write("device.pem", P256.Signing.PrivateKey().pemRepresentation, mode: 0o600)
        token = try directory.write("access.txt", "the-access-token\n", mode: 0o600)
    }

    func proof(_ extra: [String] = []) throws -> String {
        let made = try CLIRunner.run(["dpop", "proof", "--key", key, "--htm", "GET", "--htu", url] + extra)
        try #require(made.status == 0, "\(made.stderr)")
        return made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func verify(_ proof: String, _ arguments: [String]) throws -> CLIResult {
        try CLIRunner.run(["dpop", "verify", "-"] + arguments, stdin: proof)
    }

    @Test func aProofVerifiesForItsRequestAndToken() throws {
        let proof = try proof(["--ath-of", token])
        let checked = try verify(proof, ["--htm", "GET", "--htu", url + "?page=2", "--ath-of", token, "--json"])
        #expect(checked.status == 0, "\(checked.stderr)")
        let object = try #require(try StrictJSON.parse(checked.stdout).objectValue)
        #expect(object["valid"] == .bool(true))
        #expect(object["claims"]?.objectValue?["htu"] == .string(url))
        // The thumbprint printed is the one --json of proof gives.
        let made = try CLIRunner.run(
            ["dpop", "proof", "--key", key, "--htm", "GET", "--htu", url, "--json"])
        let thumbprint = try #require(try StrictJSON.parse(made.stdout).objectValue?["thumbprint"]?.stringValue)
        #expect(object["thumbprint"]?.stringValue == thumbprint)
        // A proof made now: the first one may be past its 60 s on a loaded machine by this step.
        let fresh = try self.proof(["--ath-of", token])
        let bound = try verify(fresh, ["--htm", "GET", "--htu", url, "--ath-of", token, "--jkt", thumbprint])
        #expect(bound.status == 0 && bound.stdout == thumbprint + "\n", "\(bound.stderr)")
    }

    /// 10 not a proof, 11 its key or signature, 12 its claims, 64 usage.
    @Test func eachRefusalHasItsExitCode() throws {
        let proof = try proof(["--ath-of", token, "--nonce", "n-1"])
        let other = String(repeating: "A", count: 43)
        let cases: [(String, [String], Int32, String?)] = [
            ("not.a.proof", ["--htm", "GET", "--htu", url], 10, "malformed_proof"),
            (proof, ["--htm", "GET", "--htu", url, "--ath-of", token, "--jkt", other], 11, "key_mismatch"),
            (proof, ["--htm", "POST", "--htu", url], 12, "method_mismatch"),
            (proof, ["--htm", "GET", "--htu", "https://api.example.com/v2/files"], 12, "uri_mismatch"),
            (proof, ["--htm", "GET", "--htu", url, "--now", "2000000000"], 12, "iat_out_of_window"),
            (proof, ["--htm", "GET", "--htu", url, "--nonce", "n-2"], 12, "use_dpop_nonce"),
            (proof, ["--htm", "GET", "--htu", "/relative"], 64, nil),
            // A base64url thumbprint or a nonce may begin with "-": it is still the option's value.
            (
                proof, ["--htm", "GET", "--htu", url, "--ath-of", token, "--jkt", "-" + other.dropFirst()], 11,
                "key_mismatch"
            ),
            (proof, ["--htm", "GET", "--htu", url, "--nonce", "-n"], 12, "use_dpop_nonce"),
            // A value left out is not read as a thumbprint: the next option is not one.
            (proof, ["--htm", "GET", "--htu", url, "--jkt"], 64, nil),
        ]
        for (input, arguments, status, code) in cases {
            let result = try verify(input, arguments + ["--json"])
            #expect(result.status == status, "\(arguments): \(result.stderr)")
            if let code {
                let object = try StrictJSON.parse(result.stdout).objectValue
                #expect(object?["valid"] == .bool(false))
                #expect(object?["error"]?.objectValue?["code"] == .string(code), "\(result.stdout)")
            }
        }
        let dashed = try self.proof(["--nonce", "-n-1"])
        #expect(try verify(dashed, ["--htm", "GET", "--htu", url, "--nonce", "-n-1"]).status == 0)
        let tampered = String(proof.dropLast(2)) + (proof.hasSuffix("AA") ? "BA" : "AA")
        #expect(try verify(tampered, ["--htm", "GET", "--htu", url]).status == 11)
        // The access token is never an argument.
        #expect(
            try CLIRunner.run(["dpop", "proof", "--key", key, "--htm", "GET", "--htu", url, "--ath", "t"]).status == 64)
        // A method or URL a proof cannot carry is refused before a proof is made.
        for (method, target) in [("G T", url), ("GET", "ftp://x.example/"), ("GET", "https://u@x.example/")] {
            let refused = try CLIRunner.run(["dpop", "proof", "--key", key, "--htm", method, "--htu", target])
            #expect(refused.status == 64 && refused.stdout.isEmpty, "\(method) \(target)")
        }
    }

    /// RFC 9449, Figure 12, checked from the shell at its own time.
    @Test func theRFCExampleVerifies() throws {
        let document = try #require(
            try StrictJSON.parse(PackagePaths.vector("rfc/rfc9449-dpop.json")).objectValue)
        let example = try #require(document["cases"]?.arrayValue?.last?.objectValue)
        let access = try directory.write(
            "rfc-token.txt", try #require(example["accessToken"]?.stringValue), mode: 0o600)
        let result = try verify(
            try #require(example["proof"]?.stringValue),
            [
                "--htm", "GET", "--htu", try #require(example["url"]?.stringValue), "--ath-of", access,
                "--now", String(try #require(example["iat"]?.numberValue?.int64Value)),
            ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == (document["thumbprint"]?.stringValue ?? "") + "\n")
    }
}
