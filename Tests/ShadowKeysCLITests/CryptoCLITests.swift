import Foundation
import ShadowCore
import ShadowTestSupport
import Testing

/// `derive-key`, `encrypt`, `decrypt`, `rewrap` and `hash`, run as scripts run them.
@Suite(.tags(.multiProcess), .ownThreads) struct CryptoCLITests {
    let directory: TemporaryDirectory
    let keyFile: String

    init() throws {
        directory = try TemporaryDirectory()
        keyFile = try directory.write(
            "kek.hex", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n", mode: 0o600)
    }

    private func run(
        _ arguments: [String], stdin: String? = nil, environment: [String: String] = [:]
    ) throws -> CLIResult {
        try CLIRunner.run(arguments, stdin: stdin, environment: environment, currentDirectory: directory.url)
    }

    @Test func deriveKeyMatchesAnIndependentPBKDF2() throws {
        // Python: hashlib.pbkdf2_hmac('sha256', b'correct horse battery staple', bytes(range(16)), 100000, 32)
        let expected = "49d49c25f597846209f0d92e7770ab64e1c75e94b4ce6c509265ee67175d2a1e"
        let salt = "000102030405060708090a0b0c0d0e0f"
        let viaEnv = try run(
            ["derive-key", "--salt-hex", salt, "--passphrase-env", "PW"],
            environment: ["PW": "correct horse battery staple"])
        #expect(viaEnv.status == 0 && viaEnv.stdout == expected + "\n", "\(viaEnv.stderr)")
        let viaStdin = try run(
            ["derive-key", "--salt-hex", salt, "--passphrase-stdin"], stdin: "correct horse battery staple\n")
        #expect(viaStdin.stdout == expected + "\n")
        let file = try directory.write("pw.txt", "correct horse battery staple\n", mode: 0o600)
        let longer = try run(["derive-key", "--salt-hex", salt, "--passphrase-file", file, "--length", "48"])
        #expect(
            longer.stdout
                == "49d49c25f597846209f0d92e7770ab64e1c75e94b4ce6c509265ee67175d2a1e774b608062dc707de6ae4a581af62822\n")
        for arguments in [
            ["derive-key", "--salt-hex", salt, "--passphrase-env", "PW", "--iterations", "99999"],
            ["derive-key", "--salt-hex", "0001", "--passphrase-env", "PW"],
            ["derive-key", "--salt-hex", "zz", "--passphrase-env", "PW"],
            ["derive-key", "--salt-hex", salt],
            ["derive-key", "--salt-hex", salt, "--passphrase-env", "PW", "--passphrase-stdin"],
            ["derive-key", "--salt-hex", salt, "--passphrase", "in-argv"],
        ] {
            #expect(try run(arguments, environment: ["PW": "pw"]).status == 64, "\(arguments)")
        }
        let loose = try directory.write("loose.txt", "pw", mode: 0o644)
        #expect(
            try run(["derive-key", "--salt-hex", salt, "--passphrase-file", loose]).stderr.contains(
                "readable by group or others"))
    }

    @Test func encryptDecryptRoundTripsBothForms() throws {
        let plain = try directory.write("plain.json", #"{"id":"e-1","title":"groceries"}"#)
        for extra in [[], ["--record"], ["--chunk-size", "64"]] {
            let sealed = directory.path + "/sealed-\(extra.count)"
            let encrypted = try run(
                [
                    "encrypt", plain, "-o", sealed, "--key-file", keyFile, "--context", "entityId=e-1", "--context",
                    "version=2",
                ] + extra)
            #expect(encrypted.status == 0, "\(encrypted.stderr)")
            #expect(try Files.ownerAndMode(sealed)?.mode == 0o600)
            let decrypted = try run([
                "decrypt", sealed, "-o", "-", "--key-file", keyFile, "--context", "entityId=e-1", "--context",
                "version=2",
            ])
            #expect(decrypted.status == 0, "\(decrypted.stderr)")
            #expect(decrypted.stdout == #"{"id":"e-1","title":"groceries"}"#)
            // The record moved to another entity does not open, and leaves nothing behind.
            let moved = try run([
                "decrypt", sealed, "-o", directory.path + "/out", "--key-file", keyFile, "--context", "entityId=e-2",
                "--context", "version=2",
            ])
            #expect(moved.status == 20)
            #expect(moved.stderr.contains("authentication failed"))
            #expect(!FileManager.default.fileExists(atPath: directory.path + "/out"))
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(!names.contains { $0.contains("partial") || $0.contains("shadow-keys-decrypt") }, "\(names)")
    }

    /// A pair splits at its first `=` byte: a value that begins with a combining mark (which a
    /// split by Character joins to the `=`) is a value, in `--context k=v` and `--context=k=v`.
    @Test func aContextValueMayBeginWithACombiningMark() throws {
        let plain = try directory.write("accent.txt", "x")
        let sealed = directory.path + "/accent.skev"
        let encrypted = try run(["encrypt", plain, "-o", sealed, "--key-file", keyFile, "--context", "k=\u{301}v"])
        #expect(encrypted.status == 0, "\(encrypted.stderr)")
        let decrypted = try run(["decrypt", sealed, "-o", "-", "--key-file", keyFile, "--context=k=\u{301}v"])
        #expect(decrypted.status == 0 && decrypted.stdout == "x", "\(decrypted.stderr)")
        // Another value, so the pair was bound as given.
        #expect(try run(["decrypt", sealed, "-o", "-", "--key-file", keyFile, "--context", "k=v"]).status == 20)
    }

    @Test func passphrasesAndRewrap() throws {
        let plain = try directory.write("plain.bin", Data((0..<5000).map { UInt8(truncatingIfNeeded: $0) }))
        let sealed = directory.path + "/sealed"
        #expect(
            try run(
                ["encrypt", plain, "-o", sealed, "--passphrase-env", "PW", "--key-id", "laptop"],
                environment: ["PW": "old pass"]
            ).status == 0)
        #expect(
            try run(
                ["decrypt", sealed, "-o", directory.path + "/x", "--passphrase-env", "PW"],
                environment: ["PW": "wrong pass"]
            ).status == 20)
        #expect(try run(["decrypt", sealed, "-o", directory.path + "/x", "--key-file", keyFile]).status == 64)
        let rewrapped = directory.path + "/rewrapped"
        let result = try run(
            [
                "rewrap", sealed, "-o", rewrapped, "--from-passphrase-env", "PW", "--to-key-file", keyFile,
                "--to-key-id", "kek-2026",
            ], environment: ["PW": "old pass"])
        #expect(result.status == 0, "\(result.stderr)")
        let opened = try run(["decrypt", rewrapped, "-o", directory.path + "/opened", "--key-file", keyFile])
        #expect(opened.status == 0)
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: directory.path + "/opened"))
                == Data(contentsOf: URL(fileURLWithPath: plain)))
        #expect(
            try run(["rewrap", sealed, "-o", rewrapped, "--from-key-file", keyFile, "--to-key-file", keyFile]).status
                == 64)
    }

    @Test func everyEnvelopeVectorThroughTheCLI() throws {
        let document = try #require(
            try StrictJSON.parse(PackagePaths.vector("shadow/envelope/vectors.json")).objectValue)
        func arguments(for vector: JSONObject, input: String, output: String) throws -> ([String], [String: String]) {
            var arguments = ["decrypt", input, "-o", output]
            var environment: [String: String] = [:]
            let kek = try #require(vector["kek"]?.objectValue)
            if kek["kind"]?.stringValue == "raw" {
                arguments += [
                    "--key-file",
                    try directory.write("key-\(UUID().uuidString)", kek["key_hex"]?.stringValue ?? "", mode: 0o600),
                ]
            } else {
                arguments += ["--passphrase-env", "PW"]
                environment["PW"] = kek["passphrase"]?.stringValue
            }
            for pair in vector["context"]?.arrayValue ?? [] {
                arguments += [
                    "--context", "\(pair.arrayValue?[0].stringValue ?? "")=\(pair.arrayValue?[1].stringValue ?? "")",
                ]
            }
            return (arguments, environment)
        }
        for vector in document["positive"]?.arrayValue?.compactMap(\.objectValue) ?? [] {
            let name = vector["name"]?.stringValue ?? "?"
            let input = try directory.write(
                "\(name).skev", Data(try Hex.decode(vector["envelopeHex"]?.stringValue ?? "")))
            let output = directory.path + "/\(name).out"
            let (args, env) = try arguments(for: vector, input: input, output: output)
            let result = try run(args, environment: env)
            #expect(result.status == 0, "\(name): \(result.stderr)")
            #expect(
                try Data(contentsOf: URL(fileURLWithPath: output))
                    == Data(try Hex.decode(vector["plaintextHex"]?.stringValue ?? "")), "\(name)")
        }
        let negatives = document["negative"]?.arrayValue?.compactMap(\.objectValue) ?? []
        #expect(negatives.count == 21)
        for vector in negatives {
            let name = vector["name"]?.stringValue ?? "?"
            let input = try directory.write(
                "\(name).skev", Data(try Hex.decode(vector["envelopeHex"]?.stringValue ?? "")))
            let output = directory.path + "/\(name).out"
            let (args, env) = try arguments(for: vector, input: input, output: output)
            let result = try run(args, environment: env)
            let expected: Int32 = vector["expect"]?.stringValue == "malformed" ? 65 : 20
            #expect(result.status == expected, "\(name): \(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: output), "\(name) left output behind")
        }
    }

    @Test func usageAndInputErrors() throws {
        let plain = try directory.write("p", "x")
        #expect(try run(["encrypt", plain, "-o", "out", "--key-file", keyFile, "--chunk-size", "100"]).status == 64)
        #expect(try run(["encrypt", plain, "-o", "out", "--key-file", keyFile, "--context", "novalue"]).status == 64)
        #expect(
            try run(["encrypt", plain, "-o", "out", "--key-file", keyFile, "--context", "a=1", "--context", "a=2"])
                .status == 64)
        #expect(try run(["encrypt", plain, "-o", "out"]).status == 64)
        #expect(try run(["encrypt", "-", "-o", "out", "--passphrase-stdin"], stdin: "pw").status == 64)
        #expect(try run(["encrypt", directory.path + "/missing", "-o", "out", "--key-file", keyFile]).status == 66)
        let shortKey = try directory.write("short.key", "0011", mode: 0o600)
        #expect(try run(["encrypt", plain, "-o", "out", "--key-file", shortKey]).status == 64)
        let big = try directory.write("big", Data(count: (1 << 20) + 1))
        #expect(try run(["encrypt", big, "-o", "out", "--key-file", keyFile, "--record"]).status == 65)
        let raw = try directory.write("raw.key", Data((0..<32).map { UInt8($0) }), mode: 0o600)
        let base64 = try directory.write("b64.key", Data((0..<32).map { UInt8($0) }).base64EncodedString(), mode: 0o600)
        #expect(try run(["encrypt", plain, "-o", "viaraw", "--key-file", raw]).status == 0)
        #expect(
            try run(["decrypt", "viaraw", "-o", "back", "--key-file", base64]).status == 0,
            "the same key in three encodings")
        #expect(try run(["decrypt", "viaraw", "-o", "back2", "--key-file", keyFile]).status == 0)
    }

    @Test func hashAndCheckFollowSha256sum() throws {
        let a = try directory.write("a.txt", "abc")
        let b = try directory.write("b b.txt", "hello\n")
        let hashed = try run(["hash", "a.txt", "b b.txt"])
        #expect(hashed.status == 0)
        #expect(
            hashed.stdout
                == """
                ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  \
                a.txt\n5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03  b b.txt\n
                """
        )
        _ = (a, b)
        let manifest = try directory.write("SHA256SUMS", hashed.stdout + "not a checksum line\n")
        let ok = try run(["hash", "--check", "SHA256SUMS"])
        #expect(ok.status == 0)
        #expect(ok.stdout == "a.txt: OK\nb b.txt: OK\n")
        #expect(ok.stderr.contains("1 line is improperly formatted"))
        try Data("abd".utf8).write(to: URL(fileURLWithPath: a))
        let failed = try run(["hash", "--check", manifest])
        #expect(failed.status == 1)
        #expect(failed.stdout.contains("a.txt: FAILED\n") && failed.stdout.contains("b b.txt: OK"))
        #expect(failed.stderr.contains("1 computed checksum did NOT match"))
        try FileManager.default.removeItem(atPath: b)
        let missing = try run(["hash", "--check", manifest, "--quiet"])
        #expect(
            missing.status == 1 && missing.stdout.contains("b b.txt: FAILED open or read")
                && !missing.stdout.contains(": OK"))
        #expect(try run(["hash", "--check", manifest, "--status"]).stdout.isEmpty)
        let stdin = try run(["hash"], stdin: "abc")
        #expect(stdin.stdout == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  -\n")
        let key = try directory.write("hmac.key", Data(repeating: 0x0b, count: 20), mode: 0o600)
        let hmac = try run(["hash", "--hmac-key-file", key], stdin: "Hi There")
        #expect(hmac.stdout.hasPrefix("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"))
        let empty = try directory.write("empty-manifest", "garbage\n")
        #expect(try run(["hash", "--check", empty]).status == 1)
    }
}
