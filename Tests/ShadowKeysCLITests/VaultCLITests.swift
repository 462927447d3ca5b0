import Foundation
import ShadowCore
import ShadowCrypto
import ShadowTestSupport
import ShadowVault
import Synchronization
import Testing

/// `shadow-keys vault`, as scripts use it: the contract, then crash, concurrency and damage.
@Suite(.tags(.multiProcess), .ownThreads) struct VaultCLITests {
    let directory: TemporaryDirectory
    let keyFile: String
    let vault: String
    let keyHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

    init() throws {
        directory = try TemporaryDirectory()
        keyFile = try directory.write("vault.key", keyHex + "\n", mode: 0o600)
        vault = directory.path + "/store/vault.skv"
    }

    func run(_ arguments: [String], stdin: String? = nil, environment: [String: String] = [:]) throws -> CLIResult {
        try CLIRunner.run(
            ["vault"] + arguments, stdin: stdin, environment: environment, currentDirectory: directory.url)
    }

    /// Runs a vault subcommand on this suite's vault with its key file.
    func keyed(_ arguments: [String], stdin: String? = nil) throws -> CLIResult {
        try run(arguments + ["--vault", vault, "--key-file", keyFile], stdin: stdin)
    }

    func library() -> TokenVault { TokenVault(path: vault, unlock: .key(SecretBytes(try! Hex.decode(keyHex)))) }

    /// `--label` keys compare byte for byte, as the vault format compares them: the precomposed
    /// and decomposed spellings of "é" are two labels, and one spelling given twice is refused.
    @Test func labelKeysCompareByteForByte() throws {
        #expect(try keyed(["init"]).status == 0)
        let put = try keyed(
            ["put", "k", "--label", "\u{E9}=precomposed", "--label", "e\u{301}=decomposed"], stdin: "s")
        #expect(put.status == 0, "\(put.stderr)")
        let json = try keyed(["get", "k", "--json"])
        #expect(json.status == 0, "\(json.stderr)")
        let bytes = Array(json.stdout.utf8)
        #expect(bytes.firstRange(of: Array("\"\u{E9}\":\"precomposed\"".utf8)) != nil, "\(json.stdout)")
        #expect(bytes.firstRange(of: Array("\"e\u{301}\":\"decomposed\"".utf8)) != nil, "\(json.stdout)")

        let twice = try keyed(["put", "j", "--label", "e\u{301}=1", "--label", "e\u{301}=2"], stdin: "s")
        #expect(twice.status == 64 && twice.stderr.contains("is given twice"), "\(twice.stderr)")
        #expect(try keyed(["get", "j"]).status != 0)
    }

    @Test func theContractHolds() throws {
        let created = try keyed(["init", "--json"])
        #expect(created.status == 0, "\(created.stderr)")
        #expect(try created.json()["created"] as? Bool == true)
        #expect(try Files.ownerAndMode(vault)?.mode == 0o600)
        #expect(try Files.ownerAndMode(directory.path + "/store")?.mode == 0o700)
        // A second init changes nothing.
        let before = try Data(contentsOf: URL(fileURLWithPath: vault))
        let again = try keyed(["init"])
        #expect(again.status == 1 && again.stderr.contains("already exists"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: vault)) == before)

        let put = try keyed(
            [
                "put", "apple/refresh", "--provider", "apple", "--kind", "refresh-token", "--subject", "001.abc",
                "--expires-in", "3600", "--label", "team=T1",
                "--label", "app=notes",
            ], stdin: "r.live-token\n")
        #expect(put.status == 0, "\(put.stderr)")
        #expect(put.stdout.isEmpty)

        // get prints exactly the secret.
        let get = try keyed(["get", "apple/refresh"])
        #expect(get.status == 0 && get.stdout == "r.live-token\n" && get.stderr.isEmpty, "\(get.stderr)")
        #expect(try keyed(["get", "apple/refresh", "-n"]).stdout == "r.live-token")
        let entry = try keyed(["get", "apple/refresh", "--json"]).json()
        #expect(
            entry["secret"] as? String == "r.live-token" && entry["provider"] as? String == "apple"
                && entry["kind"] as? String == "refresh-token")
        #expect(entry["subject"] as? String == "001.abc" && entry["expired"] as? Bool == false)
        #expect(entry["labels"] as? [String: String] == ["app": "notes", "team": "T1"])

        // --raw keeps the newline; an expired entry warns but still prints.
        #expect(try keyed(["put", "raw", "--raw"], stdin: "bytes\n").status == 0)
        #expect(try keyed(["get", "raw"]).stdout == "bytes\n\n")
        #expect(try keyed(["put", "old", "--expires", "2020-01-01T00:00:00Z"], stdin: "stale").status == 0)
        let old = try keyed(["get", "old"])
        #expect(old.status == 0 && old.stdout == "stale\n" && old.stderr.contains("expired at 2020-01-01T00:00:00Z"))

        // list never prints secrets.
        let list = try keyed(["list"])
        #expect(
            list.status == 0
                && list.stdout.split(separator: "\n").map { $0.split(separator: "\t")[0] } == [
                    "apple/refresh", "old", "raw",
                ])
        #expect(!list.stdout.contains("r.live-token") && list.stdout.contains("(expired)"))
        let listed = try keyed(["list", "--json"])
        #expect(!listed.stdout.contains("live-token") && !listed.stdout.contains("secret"))
        #expect((try listed.json()["entries"] as? [[String: Any]])?.count == 3)

        // info: header without a key, the count with one.
        let header = try run(["info", "--vault", vault, "--json"]).json()
        #expect(
            header["format_version"] as? Int == 1 && header["key_kind"] as? String == "key"
                && header["entries"] is NSNull)
        #expect(header["generation"] as? Int == 4 && header["verified"] as? Bool == false)
        let counted = try keyed(["info", "--json"]).json()
        #expect(counted["entries"] as? Int == 3 && counted["verified"] as? Bool == true)

        // rm, then the entry is gone: 32 for get and for a second rm.
        #expect(try keyed(["rm", "old"]).status == 0)
        let gone = try keyed(["get", "old"])
        #expect(gone.status == 32 && gone.stdout.isEmpty && gone.stderr.contains("no entry named \"old\""))
        #expect(try keyed(["rm", "old"]).status == 32)
        let json = try keyed(["get", "old", "--json"]).json()
        #expect((json["error"] as? [String: Any])?["code"] as? String == "no_such_entry")
    }

    /// A vault path in a folder that does not exist: no vault (66), for writers as for readers,
    /// and no folder or file made.
    @Test func aVaultInAMissingFolderIsNoInputForEveryCommand() throws {
        let nowhere = directory.path + "/no/such/folder/vault.skv"
        let options = ["--vault", nowhere, "--key-file", keyFile]
        for (arguments, stdin) in [
            (["put", "a"], "secret\n"), (["get", "a"], nil), (["token", "a"], nil),
            (
                [
                    "login", "a", "--client-id", "c", "--token-endpoint", "https://example.com/t",
                    "--refresh-token-stdin",
                    "--auth", "none",
                ], "rt\n"
            ),
        ] as [([String], String?)] {
            let result = try run(arguments + options, stdin: stdin)
            #expect(result.status == 66, "\(arguments[0]): \(result.status) \(result.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/no"))
    }

    @Test func keysAndPassphrasesComeFromFilesOrTheEnvironment() throws {
        #expect(
            try run(
                ["init", "--vault", vault, "--passphrase-env", "PW", "--iterations", "100000"],
                environment: ["PW": "correct horse"]
            ).status == 0)
        let info = try run(["info", "--vault", vault, "--json"]).json()
        #expect(
            (info["kdf"] as? [String: Any])?["iterations"] as? Int == 100_000
                && info["key_kind"] as? String == "passphrase")
        #expect(
            try run(
                ["put", "a", "--vault", vault, "--passphrase-env", "PW"], stdin: "s1",
                environment: ["PW": "correct horse"]
            ).status == 0)

        // Wrong passphrase, key where a passphrase is needed: 30, and nothing printed.
        let wrong = try run(
            ["get", "a", "--vault", vault, "--passphrase-env", "PW"], environment: ["PW": "correct horsf"])
        #expect(wrong.status == 30 && wrong.stdout.isEmpty && wrong.stderr.contains("wrong passphrase or key"))
        #expect(try keyed(["get", "a"]).status == 30)

        // rekey to a key from the environment, then from a file.
        let rekey = try run(
            ["rekey", "--vault", vault, "--passphrase-env", "PW", "--new-key-env", "VK", "--json"],
            environment: ["PW": "correct horse", "VK": keyHex])
        #expect(rekey.status == 0, "\(rekey.stderr)")
        #expect(
            try run(["get", "a", "--vault", vault, "--passphrase-env", "PW"], environment: ["PW": "correct horse"])
                .status == 30)
        #expect(
            try run(["get", "a", "--vault", vault, "--key-env", "VK"], environment: ["VK": keyHex]).stdout == "s1\n")
        #expect(try keyed(["get", "a"]).stdout == "s1\n")
        // Raising the iterations of a passphrase vault.
        #expect(
            try run(
                ["rekey", "--vault", vault, "--key-file", keyFile, "--new-passphrase-stdin", "--iterations", "150000"],
                stdin: "new phrase\n"
            ).status == 0)
        #expect(
            try run(["info", "--vault", vault, "--json"]).json()["kdf"].flatMap {
                ($0 as? [String: Any])?["iterations"] as? Int
            } == 150_000)
        #expect(try run(["get", "a", "--vault", vault, "--passphrase-stdin"], stdin: "new phrase\n").stdout == "s1\n")
    }

    @Test func usageErrorsAreExit64AndTouchNothing() throws {
        #expect(try keyed(["init"]).status == 0)
        for arguments in [
            ["put", "a", "--vault", vault],  // no key
            ["put", "a", "--vault", vault, "--key-file", keyFile, "--passphrase-env", "PW"],  // two keys
            ["put", "a", "--vault", vault, "--passphrase-stdin"],  // stdin is the secret's
            ["put", "a", "--vault", vault, "--key-file", keyFile, "--provider", "facebook"],
            ["put", "a", "--vault", vault, "--key-file", keyFile, "--kind", "password"],
            ["put", "a", "--vault", vault, "--key-file", keyFile, "--expires", "tomorrow"],
            [
                "put", "a", "--vault", vault, "--key-file", keyFile, "--expires", "2030-01-01T00:00:00Z",
                "--expires-in", "10",
            ],
            ["put", "a", "--vault", vault, "--key-file", keyFile, "--label", "novalue"],
            ["put", "a", "--vault", vault, "--key-file", keyFile, "--label", "k=1", "--label", "k=2"],
            ["put", "", "--vault", vault, "--key-file", keyFile],
            ["put", "a", "--vault", vault, "--secret", "in-argv"],
            ["rekey", "--vault", vault, "--key-file", keyFile],
            ["rekey", "--vault", vault, "--passphrase-stdin", "--new-passphrase-stdin"],
            ["init", "--vault", directory.path + "/weak.skv", "--passphrase-env", "PW", "--iterations", "1000"],
            ["get", "a", "--vault", vault, "--key-env", "BAD"],
        ] {
            let result = try run(arguments, stdin: "secret", environment: ["PW": "pw", "BAD": "not-a-key"])
            #expect(result.status == 64, "\(arguments): \(result.status) \(result.stderr)")
        }
        // An empty secret is refused. A bad name is named first, before stdin is read.
        #expect(try keyed(["put", "a"], stdin: "\n").status == 64)
        for name in ["", "a\u{1}b", String(repeating: "n", count: 256)] {
            let badName = try keyed(["put", name], stdin: "")
            #expect(badName.status == 64 && badName.stderr.contains("entry names are"), "\(badName.stderr)")
        }
        #expect(try keyed(["list"]).stdout.isEmpty)
        #expect(try TokenVault.headerInfo(path: vault).generation == 1)
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/weak.skv"))
        // No vault: 66.
        #expect(try run(["get", "a", "--vault", directory.path + "/none.skv", "--key-file", keyFile]).status == 66)
    }

    @Test func theDefaultPathFollowsTheEnvironment() throws {
        let data = directory.path + "/xdg"
        let environment = ["XDG_DATA_HOME": data, "SHADOW_KEYS_VAULT": ""]
        #expect(try run(["init", "--key-file", keyFile], environment: environment).status == 0)
        #expect(FileManager.default.fileExists(atPath: data + "/shadow-keys/vault.skv"))
        let chosen = directory.path + "/chosen.skv"
        #expect(try run(["init", "--key-file", keyFile], environment: ["SHADOW_KEYS_VAULT": chosen]).status == 0)
        #expect(
            try run(["put", "x", "--key-file", keyFile], stdin: "v", environment: ["SHADOW_KEYS_VAULT": chosen]).status
                == 0)
        #expect(try run(["get", "x", "--vault", chosen, "--key-file", keyFile]).stdout == "v\n")
    }

    @Test func looseModesWarnAndAHeldLockTimesOut() throws {
        #expect(try keyed(["init"]).status == 0)
        chmod(vault, 0o644)
        let warned = try keyed(["list"])
        #expect(warned.status == 0 && warned.stderr.contains("should be 600"))

        let holder = try #require(try FileLock.acquire(vault + ".lock", timeout: 1))
        defer { holder.release() }
        let blocked = try run(
            ["put", "a", "--vault", vault, "--key-file", keyFile, "--lock-timeout", "0.3"], stdin: "s")
        #expect(blocked.status == 33 && blocked.stderr.contains("lock"), "\(blocked.stderr)")
        #expect(try keyed(["get", "a"]).status == 32)
    }

    // MARK: - Reliability

    @Test func everyFlippedByteAndTruncationExits31() throws {
        #expect(try keyed(["init"]).status == 0)
        #expect(
            try keyed(["put", "apple/refresh", "--provider", "apple", "--subject", "001.abc"], stdin: "r.token").status
                == 0)
        let original = [UInt8](try Data(contentsOf: URL(fileURLWithPath: vault)))
        let flips: [(String, [UInt8])] = original.indices.map { index in
            var bytes = original
            bytes[index] ^= 0x01
            return ("flip byte \(index)", bytes)
        }
        let cases =
            flips + (0..<original.count).map { ("truncate to \($0)", Array(original[..<$0])) } + [
                ("append a byte", original + [0])
            ]
        let failures = Mutex<[String]>([])
        let workers = 4
        DispatchQueue.concurrentPerform(iterations: workers) { worker in
            let path = directory.path + "/damaged-\(worker).skv"
            for (label, bytes) in cases.enumerated().filter({ $0.offset % workers == worker }).map(\.element) {
                do {
                    try Data(bytes).write(to: URL(fileURLWithPath: path))
                    let result = try CLIRunner.run(
                        ["vault", "get", "apple/refresh", "--vault", path, "--key-file", keyFile], stdin: nil)
                    if result.status != 31 || !result.stdout.isEmpty {
                        failures.withLock { $0.append("\(label): exit \(result.status) \(result.stderr)") }
                    }
                } catch {
                    failures.withLock { $0.append("\(label): \(error)") }
                }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 }.prefix(10))")
        #expect(try keyed(["get", "apple/refresh"]).stdout == "r.token\n")
    }
}

extension VaultCLITests {
    /// Writers killed at random moments, and eight writing at once. Run alone with
    /// `swift test --filter VaultCLITests/Stress`.
    @Suite(.tags(.stress)) struct Stress {
        let fixture: VaultCLITests
        init() throws { fixture = try VaultCLITests() }

        @Test func aWriterKilledAtAnyMomentLeavesTheOldVaultOrTheNew() throws {
            #expect(try fixture.keyed(["init"]).status == 0)
            let library = fixture.library()
            // Time a few puts, then kill later ones anywhere in that window (and a little past it).
            var durations: [Double] = []
            for index in 0..<3 {
                let start = monotonicSeconds()
                #expect(try fixture.keyed(["put", "warm-up-\(index)"], stdin: "s").status == 0)
                durations.append(monotonicSeconds() - start)
            }
            let window = min(durations.sorted()[1], 0.25)
            var committed: Set<String> = ["warm-up-0", "warm-up-1", "warm-up-2"]
            // Kill moments are drawn from a seeded generator, so a failing round can be replayed.
            let seed: UInt64 = 0x0C4A_5401
            var generator = SeededGenerator(seed: seed)
            for round in 0..<200 {
                let name = "entry-\(round)"
                let child = try ChildProcess(
                    CLIRunner.executable.path,
                    ["vault", "put", name, "--vault", fixture.vault, "--key-file", fixture.keyFile],
                    stdin: Data("secret-\(round)".utf8))
                usleep(UInt32(Double.random(in: 0...(window * 1.2), using: &generator) * 1_000_000))
                child.kill()
                let result = try child.wait()
                // What survived is checked whether or not the kill landed before the put finished:
                // a finished put is there whole, an interrupted one whole or not at all, the vault
                // always opens, and nothing else changed.
                let names = Set(try library.contents().names)
                if result.status == 0 {
                    committed.insert(name)
                    #expect(names == committed, "round \(round) (seed \(seed)): a completed put is missing")
                } else {
                    #expect(result.status == 128 + SIGKILL, "round \(round) (seed \(seed)): \(result.stderr)")
                    #expect(
                        names == committed || names == committed.union([name]),
                        "round \(round) (seed \(seed)): \(names.symmetricDifference(committed))")
                    if names.contains(name) { committed.insert(name) }
                }
                if let entry = try library.contents().entry(named: name) {
                    #expect(
                        entry.secret.withUnsafeBytes { Array($0) } == Array("secret-\(round)".utf8),
                        "round \(round) (seed \(seed)): a torn secret")
                }
            }
            // A later write clears the temporary files killed writers left.
            #expect(try fixture.keyed(["put", "final"], stdin: "s").status == 0)
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: fixture.directory.path + "/store")
                .filter { $0.contains(".tmp-") }
            #expect(leftovers.isEmpty)
            #expect(try library.contents().count == committed.count + 1)
        }

        @Test func eightProcessesPuttingFiftyEachLoseNothing() throws {
            #expect(try fixture.keyed(["init"]).status == 0)
            let failures = Mutex<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 8) { writer in
                for index in 0..<50 {
                    do {
                        let result = try CLIRunner.run(
                            [
                                "vault", "put", "w\(writer)-\(index)", "--vault", fixture.vault, "--key-file",
                                fixture.keyFile, "--lock-timeout", "60",
                            ], stdin: "secret-\(writer)-\(index)")
                        if result.status != 0 {
                            failures.withLock { $0.append("w\(writer)-\(index): \(result.status) \(result.stderr)") }
                        }
                    } catch {
                        failures.withLock { $0.append("w\(writer)-\(index): \(error)") }
                    }
                }
            }
            #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
            let contents = try fixture.library().contents()
            #expect(contents.count == 400)
            #expect(contents.generation == 401)
            for writer in 0..<8 {
                for index in 0..<50 {
                    let secret = contents.entry(named: "w\(writer)-\(index)")?.secret.withUnsafeBytes {
                        String(decoding: $0, as: UTF8.self)
                    }
                    #expect(secret == "secret-\(writer)-\(index)")
                }
            }
        }
    }
}

/// `keygen` and `vault init --new-key`: a new user's first key, as the README shows it.
@Suite(.tags(.multiProcess), .ownThreads) struct KeygenCLITests {
    @Test func keygenWritesAnOwnerOnlyHexKeyAndNeverOverwrites() throws {
        let folder = try TemporaryDirectory()
        let path = folder.path + "/vault.key"
        let made = try CLIRunner.run(["keygen", path])
        #expect(made.status == 0, "\(made.stderr)")
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.count == 65 && text.hasSuffix("\n") && text.dropLast().allSatisfy(\.isHexDigit), "\(text)")
        let mode = try #require(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
        #expect(mode == 0o600)

        let again = try CLIRunner.run(["keygen", path, "--json"])
        #expect(again.status == 73)
        #expect(((try again.json())["error"] as? [String: Any])?["code"] as? String == "exists")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == text, "the key was overwritten")

        let other = try CLIRunner.run(["keygen", folder.path + "/other.key"])
        #expect(other.status == 0)
        #expect(try String(contentsOfFile: folder.path + "/other.key", encoding: .utf8) != text)
        #expect(try CLIRunner.run(["keygen", folder.path + "/absent/k.key"]).status == 66)
        #expect(try CLIRunner.run(["keygen", "-"]).status == 64)
        // Nothing but the two keys is left behind.
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == ["other.key", "vault.key"])
    }

    @Test func theReadmesVaultLinesWorkOnAFreshMachine() throws {
        let folder = try TemporaryDirectory()
        let environment = ["XDG_DATA_HOME": folder.path + "/data", "HOME": folder.path]
        let initialized = try CLIRunner.run(
            ["vault", "init", "--new-key", "vault.key"], environment: environment, currentDirectory: folder.url)
        #expect(initialized.status == 0, "\(initialized.stderr)")
        #expect(!initialized.stderr.contains("warning: the key file"), "\(initialized.stderr)")
        let put = try CLIRunner.run(
            ["vault", "put", "apple/refresh", "--key-file", "vault.key"], stdin: "r-token", environment: environment,
            currentDirectory: folder.url)
        #expect(put.status == 0, "\(put.stderr)")
        let got = try CLIRunner.run(
            ["vault", "get", "apple/refresh", "--key-file", "vault.key"], environment: environment,
            currentDirectory: folder.url)
        #expect(got.status == 0 && got.stdout == "r-token\n", "\(got.stderr)")
        #expect(got.stderr.isEmpty, "every call warned: \(got.stderr)")

        let twice = try CLIRunner.run(
            ["vault", "init", "--new-key", "second.key"], environment: environment, currentDirectory: folder.url)
        #expect(twice.status == 1, "\(twice.stderr)")
        #expect(
            !FileManager.default.fileExists(atPath: folder.path + "/second.key"),
            "a key was made for a vault that exists")
        let mixed = try CLIRunner.run(
            ["vault", "init", "--new-key", "third.key", "--key-file", "vault.key"], environment: environment,
            currentDirectory: folder.url)
        #expect(mixed.status == 64)
    }
}
