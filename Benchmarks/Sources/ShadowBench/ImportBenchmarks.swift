import Foundation
import ShadowTestSupport
import Synchronization

/// `state apply-events` as a script runs it: a backlog of `SHADOW_BENCH_USERS` users (default a
/// million) into a new SQLite store by one process, and the same backlog in four quarters into one
/// PostgreSQL database by four `shadow-keys-server` processes at once. Each user signs in, and
/// every eighth later revokes consent: 1.125 M events for a million users, in the default batches
/// of 1,000, with every check of the audit chain. Then four writers again with batches of 10
/// (40,000 users), where each transaction is a few round trips under the write lock. One run each
/// (a run is minutes long); the rate is the events over the wall time of the whole command,
/// start-up and store creation included.
enum ImportBenchmarks {
    static func run(binary: String, server: String, workDirectory: String) async throws -> [BenchRow] {
        let directory = workDirectory + "/import"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let keyFile = directory + "/state.key"
        try (String(repeating: "ab", count: 32) + "\n").write(toFile: keyFile, atomically: true, encoding: .utf8)
        chmod(keyFile, 0o600)
        let users = DatabaseBenchmarks.largeUsers
        let quarters = try (0..<4).map { quarter in
            let path = directory + "/events-\(quarter).jsonl"
            try backlog(users: (users * quarter / 4)..<(users * (quarter + 1) / 4), to: path)
            return path
        }
        let events = users + (users + 7) / 8
        let environment = ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" }
        var rows: [BenchRow] = []

        // One process into SQLite: the four quarters as one file.
        let whole = directory + "/events.jsonl"
        FileManager.default.createFile(atPath: whole, contents: nil)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: whole))
        for quarter in quarters { output.write(try Data(contentsOf: URL(fileURLWithPath: quarter))) }
        try output.close()
        let database = directory + "/state.sqlite"
        let sqliteSeconds = try timed {
            try check(
                Harness.spawn(
                    binary,
                    [
                        "state", "apply-events", whole, "--store", "sqlite:" + database, "--key-file", keyFile,
                        "--quiet",
                    ],
                    environment: environment, timeout: 3600), "SQLite")
        }
        rows.append(
            row(
                "\(users) users (\(events) events) into SQLite", events: events, seconds: sqliteSeconds,
                how: "one process, batches of 1,000, every audit check", goal: "≥ 10,000 events/s"))

        // Four processes into one PostgreSQL database, a quarter each, after one has made the schema.
        let cluster = try PostgresCluster.start(durable: true)
        defer { cluster.stop() }
        let url = try cluster.createDatabase("import")
        let first = directory + "/first.jsonl"
        try backlog(users: users..<(users + 1), to: first)
        try check(
            Harness.spawn(
                server, ["state", "apply-events", first, "--store", url, "--key-file", keyFile, "--quiet"],
                environment: environment, timeout: 600), "PostgreSQL set-up")
        let postgresSeconds = try fourWriters(server, quarters, into: url, keyFile: keyFile, environment: environment)
        // The floor the four are measured against: one process applying the same events alone
        // into a second database of the same server, so the ratio is what the writers' overlap gains.
        let single = try cluster.createDatabase("import_single")
        try check(
            Harness.spawn(
                server, ["state", "apply-events", first, "--store", single, "--key-file", keyFile, "--quiet"],
                environment: environment, timeout: 600), "PostgreSQL set-up, one writer")
        let singleSeconds = try timed {
            try check(
                Harness.spawn(
                    server, ["state", "apply-events", whole, "--store", single, "--key-file", keyFile, "--quiet"],
                    environment: environment, timeout: 3600), "PostgreSQL, one writer")
        }
        rows.append(
            row(
                "four writers into one PostgreSQL, \(events) events", events: events, seconds: postgresSeconds,
                how: String(
                    format: """
                        four shadow-keys-server processes at once, a quarter of the users each, batches of 1,000, the \
                        server on the same 2 cores; until the last finished; raw = one process applying all the \
                        events alone into another database of the same server, same run (%.1f s); no peer tool keeps \
                        this state
                        """, singleSeconds), goal: "≥ 40,000 events/s", raw: Double(events) / singleSeconds))

        // Small transactions, as notifications arrive: the write lock's round trips set the pace.
        let smallUsers = 40_000
        let smallEvents = smallUsers + smallUsers / 8
        let smallQuarters = try (0..<4).map { quarter in
            let path = directory + "/small-\(quarter).jsonl"
            try backlog(users: (smallUsers * quarter / 4)..<(smallUsers * (quarter + 1) / 4), to: path)
            return path
        }
        let smallWhole = directory + "/small.jsonl"
        try backlog(users: 0..<smallUsers, to: smallWhole)
        let small = try cluster.createDatabase("import_small")
        let smallSingle = try cluster.createDatabase("import_small_single")
        for database in [small, smallSingle] {
            try check(
                Harness.spawn(
                    server, ["state", "apply-events", first, "--store", database, "--key-file", keyFile, "--quiet"],
                    environment: environment, timeout: 600), "PostgreSQL set-up, small batches")
        }
        let smallSeconds = try fourWriters(
            server, smallQuarters, into: small, keyFile: keyFile, environment: environment, batch: 10)
        let smallSingleSeconds = try timed {
            try check(
                Harness.spawn(
                    server,
                    [
                        "state", "apply-events", smallWhole, "--store", smallSingle, "--key-file", keyFile, "--quiet",
                        "--batch-size", "10",
                    ],
                    environment: environment, timeout: 3600), "PostgreSQL, one writer, small batches")
        }
        rows.append(
            row(
                "four writers into one PostgreSQL, batches of 10, \(smallEvents) events", events: smallEvents,
                seconds: smallSeconds,
                how: String(
                    format: """
                        as above with --batch-size 10, as notifications arrive (each transaction holds the write lock \
                        for a few round trips); raw = one process applying the same events alone, same batches, same \
                        run (%.1f s)
                        """, smallSingleSeconds), goal: "ours/raw > 1", raw: Double(smallEvents) / smallSingleSeconds))
        return rows
    }

    /// Runs one `state apply-events` process per file, all at once, into `url`; returns the wall
    /// time until the last finished.
    static func fourWriters(
        _ server: String, _ files: [String], into url: String, keyFile: String, environment: [String],
        batch: Int? = nil
    ) throws -> Double {
        let statuses = Mutex<[Int: Int32]>([:])
        let extra = batch.map { ["--batch-size", String($0)] } ?? []
        let seconds = try timed {
            DispatchQueue.concurrentPerform(iterations: files.count) { index in
                let status =
                    (try? Harness.spawn(
                        server,
                        ["state", "apply-events", files[index], "--store", url, "--key-file", keyFile, "--quiet"]
                            + extra,
                        environment: environment, timeout: 3600
                    ).status) ?? -1
                statuses.withLock { $0[index] = status }
            }
        }
        guard statuses.withLock({ $0.values.allSatisfy { $0 == 0 } }) else {
            throw BenchError("a PostgreSQL writer failed: \(statuses.withLock { $0 })")
        }
        return seconds
    }

    /// Writes the backlog of `users`: a sign-in each, and a later consent revocation for every eighth.
    static func backlog(users: Range<Int>, to path: String) throws {
        var text = ""
        text.reserveCapacity(users.count * 150)
        for user in users {
            let subject = DatabaseBenchmarks.subject(user)
            let time = DatabaseBenchmarks.start + Int64(user)
            text += """
                {"kind":"sign-in","client_id":"\(DatabaseBenchmarks.client)","sub":"\(subject)","time_ms":\(time),\
                "id":"sign-in:\(String(format: "%032x", user))"}\n
                """
            if user % 8 == 0 {
                text += """
                    {"kind":"consent-revoked","client_id":"\(DatabaseBenchmarks.client)","sub":"\(subject)",\
                    "time_ms":\(time + 86_400_000),"id":"revoke-\(user)"}\n
                    """
            }
        }
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }

    /// A row of `events` over `seconds` of wall time, one run.
    static func row(
        _ what: String, events: Int, seconds: Double, how: String, goal: String, raw: Double? = nil
    ) -> BenchRow {
        BenchRow(
            name: "CLI state apply-events, " + what, unit: "ops/s", ours: Double(events) / seconds, raw: raw,
            peer: nil, peerName: nil,
            note: how + String(format: "; events over the wall time (%.1f s, one run); goal ", seconds) + goal)
    }

    static func check(_ result: (status: Int32, maxRSSKiB: Int), _ what: String) throws {
        guard result.status == 0 else { throw BenchError("state apply-events (\(what)) exited \(result.status)") }
    }

    static func timed(_ body: () throws -> Void) rethrows -> Double {
        let began = DispatchTime.now().uptimeNanoseconds
        try body()
        return Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9
    }
}
