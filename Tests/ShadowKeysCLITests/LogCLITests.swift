import Foundation
import ShadowCore
import ShadowTestSupport
import Testing

/// `shadow-keys log`, as a sync tool's scripts use it: exit codes, JSON, and nothing written
/// when an input is bad.
@Suite(.tags(.multiProcess), .ownThreads) struct LogCLITests {
    let directory: TemporaryDirectory
    let keyFile: String
    let path: String

    init() throws {
        directory = try TemporaryDirectory()
        keyFile = try directory.write(
            "log.key", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n", mode: 0o600)
        path = directory.path + "/ops.log"
    }

    func log(_ arguments: [String], location: String? = nil, stdin: String? = nil) throws -> CLIResult {
        try CLIRunner.run(["log"] + arguments + ["--log", location ?? path, "--key-file", keyFile], stdin: stdin)
    }

    func append(_ entityID: String, location: String? = nil) throws -> CLIResult {
        try log(
            [
                "append", "--origin", "example.com/ops", "--operation", "upload", "--provider", "icloud",
                "--entity-type", "file", "--entity-id", entityID, "--json",
            ], location: location)
    }

    func json(_ text: String) throws -> JSONObject {
        guard case .object(let object) = try StrictJSON.parse(text.trimmingCharacters(in: .newlines)) else {
            throw CLIRunnerError("not a JSON object: \(text)")
        }
        return object
    }

    /// `show --entity-id ID --from N --count C` pages through one entity: the C entries about it
    /// from index N on, so the next page starts after the last index printed.
    @Test(arguments: ["file", "sqlite"]) func showPagesThroughOneEntity(backend: String) throws {
        let location = backend == "file" ? path : "sqlite:" + directory.path + "/state.sqlite"
        let lines = (0..<6).map { number in
            let entity = number % 2 == 0 ? "a" : "b"
            return #"{"operation":"upload","provider":"icloud","entityType":"file","#
                + #""entityId":"\#(entity)","success":true}"#
        }
        let appended = try log(
            ["append", "--origin", "example.com/ops", "--from", "-"], location: location,
            stdin: lines.joined(separator: "\n") + "\n")
        #expect(appended.status == 0, "\(appended.stderr)")
        let page = try log(["show", "--entity-id", "a", "--from", "1", "--count", "2"], location: location)
        #expect(page.status == 0, "\(page.stderr)")
        let indices = try page.stdout.split(separator: "\n").map { try json(String($0))["index"] }
        #expect(indices == [.int(2), .int(4)])
    }

    @Test(arguments: ["file", "sqlite"]) func appendShowProveVerify(backend: String) throws {
        let location = backend == "file" ? path : "sqlite:" + directory.path + "/state.sqlite"
        let first = try append("Documents/a.pdf", location: location)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(try json(first.stdout)["first"] == .int(0))
        let lines = """
            {"operation":"delete","provider":"google-drive","entityType":"file","entityId":"b","success":false,\
            "error":"HTTP 500"}
            {"operation":"download","provider":"icloud","entityType":"file","entityId":"c","success":true,\
            "time":"2026-01-01T00:00:00Z","details":{"bytes":12}}

            """
        let batch = try log(["append", "--from", "-", "--json"], location: location, stdin: lines)
        #expect(batch.status == 0, "\(batch.stderr)")
        #expect(try json(batch.stdout)["count"] == .int(2))
        let shown = try log(["show"], location: location)
        #expect(shown.status == 0)
        let entries = try shown.stdout.split(separator: "\n").map { try json(String($0)) }
        #expect(entries.count == 3)
        #expect(entries[1]["error"] == .string("HTTP 500") && entries[1]["success"] == .bool(false))
        #expect(entries[2]["time"] == .string("2026-01-01T00:00:00Z"))
        let proof = try json(try log(["prove", "--inclusion", "1"], location: location).stdout)
        #expect(proof["size"] == .int(3))
        #expect(proof["proof"]?.arrayValue?.count == 2)
        let verified = try log(["verify", "--json"], location: location)
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(try json(verified.stdout)["size"] == .int(3))
        let checkpoint = try log(["checkpoint"], location: location)
        #expect(checkpoint.stdout.hasPrefix("example.com/ops\n3\n"))
        #expect(checkpoint.stdout.contains("\n\n\u{2014} example.com/ops "))
        let key = try log(["checkpoint", "--verifier-key"], location: location)
        #expect(key.stdout.hasPrefix("example.com/ops+"))
    }

    @Test func aBadLineWritesNothing() throws {
        #expect(try append("a").status == 0)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let lines = """
            {"operation":"upload","provider":"icloud","entityType":"file","entityId":"ok","success":true}
            {"operation":"up load","provider":"icloud","entityType":"file","entityId":"bad","success":true}

            """
        let result = try log(["append", "--from", "-", "--json"], stdin: lines)
        #expect(result.status == 65)
        #expect(result.stderr.contains("line 2"))
        #expect(try json(result.stdout)["valid"] == .bool(false))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
    }

    @Test func exitCodes() throws {
        #expect(try log(["verify"]).status == 66, "no log")
        #expect(try append("a").status == 0)
        let wrongKey = try directory.write("wrong.key", String(repeating: "ab", count: 32), mode: 0o600)
        #expect(
            try CLIRunner.run(["log", "verify", "--log", path, "--key-file", wrongKey]).status == 30, "wrong key")
        let other = try directory.write("other", "just text")
        #expect(try log(["verify"], location: other).status == 35, "not a log")
        #expect(try log(["prove"]).status == 64, "usage")
        #expect(try log(["prove", "--inclusion", "5"]).status == 64, "no such entry")
        #expect(try log(["append", "--operation", "upload"]).status == 64, "missing fields")
        // --details that are not a JSON object say why, with the subcommand's usage.
        for (details, reason) in [
            (#"{"a":1,"a":2}"#, #"--details is not valid JSON: duplicate member name "a""#),
            ("[1]", "--details is a JSON array, not an object"),
        ] {
            let refused = try log(
                [
                    "append", "--operation", "upload", "--provider", "icloud", "--entity-type", "file",
                    "--entity-id", "d", "--details", details,
                ])
            #expect(refused.status == 64 && refused.stderr.contains(reason), "\(refused.stderr)")
            #expect(refused.stderr.contains("shadow-keys log append"), "\(refused.stderr)")
        }
        #expect(try log(["verify"], location: "postgres://db/x").status == 64)
        // A flipped byte in the entry.
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let marker = Array("icloud".utf8)
        let at = try #require(
            (0..<(bytes.count - marker.count)).first { Array(bytes[$0..<($0 + marker.count)]) == marker })
        bytes[at] ^= 0x20
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let tampered = try log(["verify", "--json"])
        #expect(tampered.status == 31)
        #expect(try json(tampered.stdout)["error"]?.objectValue?["code"] == .string("log_tampered"))
    }

    @Test func aRestoredLogIsRolledBack() throws {
        let witness = directory.path + "/witness"
        #expect(try append("a").status == 0)
        #expect(try log(["verify", "--witness", witness]).status == 0)
        try FileManager.default.copyItem(atPath: path, toPath: path + ".old")
        #expect(try append("b").status == 0)
        #expect(try log(["verify", "--witness", witness]).status == 0)
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.copyItem(atPath: path + ".old", toPath: path)
        #expect(try log(["verify"]).status == 0, "the old copy is a valid log in itself")
        let rolledBack = try log(["verify", "--witness", witness, "--json"])
        #expect(rolledBack.status == 36)
        #expect(try json(rolledBack.stdout)["error"]?.objectValue?["code"] == .string("rolled_back"))
    }

    @Test(.tags(.postgres), .enabled(if: postgresWanted)) func theServerBinaryKeepsTheLogInPostgres() throws {
        let url = try PostgresCluster.shared.get().freshDatabase()
        let options = ["--log", url, "--key-file", keyFile]
        let appended = try CLIRunner.runServer(
            [
                "log", "append", "--origin", "example.com/ops", "--operation", "upload", "--provider", "icloud",
                "--entity-type", "file", "--entity-id", "a", "--json",
            ] + options)
        #expect(appended.status == 0, "\(appended.stderr)")
        let verified = try CLIRunner.runServer(["log", "verify", "--json"] + options)
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(try json(verified.stdout)["size"] == .int(1))
        // The lean binary names the one that opens it.
        let lean = try CLIRunner.run(["log", "verify"] + options)
        #expect(lean.status == 64 && lean.stderr.contains("shadow-keys-server"))
    }

    @Test func noSecretInArgvIsNeeded() throws {
        // The key comes from a file or an environment variable; the entity ID is not a secret
        // but is sealed in the log: it is not in the file in clear.
        #expect(try append("Secret Plans/2027.key").status == 0)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(bytes.range(of: Data("Secret Plans".utf8)) == nil)
    }
}

/// Exit codes a script branches on where a log meets the file system: no log, a file that is no
/// log, a lock another process holds, each with its own code and nothing written.
@Suite(.tags(.multiProcess), .ownThreads) struct LogExitCodeTests {
    let base: LogCLITests

    init() throws { base = try LogCLITests() }

    @Test func aMissingLogRandomBytesAndAHeldLockHaveTheirCodes() throws {
        let missing = try base.log(["show"], location: base.directory.path + "/no/such/folder/ops.log")
        #expect(missing.status == 66, "\(missing.status) \(missing.stderr)")
        let random = try base.directory.write("random.db", String(repeating: "\u{7}garbage", count: 600))
        for location in ["sqlite:" + random, random] {
            let verified = try base.log(["verify"], location: location)
            #expect(verified.status == 35, "\(location): \(verified.status) \(verified.stderr)")
        }
        #expect(try base.append("first").status == 0)
        // Another process holds the log file's lock past --lock-timeout: 33, nothing appended.
        let holder = try ChildProcess(
            "/usr/bin/env", ["python3", "-c", Self.holdLock, base.path + ".lock"], environment: [:])
        defer { holder.kill() }
        var held = false
        for _ in 0..<300 where !held {
            held = FileManager.default.fileExists(atPath: base.directory.path + "/held")
            if !held { usleep(20_000) }
        }
        try #require(held, "the lock holder never started")
        let blocked = try CLIRunner.run(
            [
                "log", "append", "--operation", "upload", "--provider", "icloud", "--entity-type", "file",
                "--entity-id", "y", "--log", base.path, "--key-file", base.keyFile, "--lock-timeout", "0.2",
            ])
        #expect(blocked.status == 33 && blocked.stderr.contains("lock"), "\(blocked.status) \(blocked.stderr)")
        holder.kill()
        _ = try? holder.wait(timeout: 10)
        let shown = try base.log(["show"])
        #expect(shown.stdout.split(separator: "\n").count == 1, "\(shown.stdout)")
    }

    /// Takes an exclusive flock on argv[1], marks the folder, and holds it.
    static let holdLock = """
        import fcntl, os, sys, time
        fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        open(os.path.join(os.path.dirname(sys.argv[1]), "held"), "w").close()
        time.sleep(120)
        """
}
