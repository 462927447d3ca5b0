import Crypto
import Foundation
import NIOCore
import SQLiteNIO
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
        let floorSeconds = try await sqliteFloorSeconds(directory: directory, users: users)
        rows.append(
            row(
                "\(users) users (\(events) events) into SQLite", events: events, seconds: sqliteSeconds,
                how: String(
                    format: """
                        one process, batches of 1,000, every audit check; raw = the same rows written bare (%.1f s): \
                        a state row upserted and an audit line appended per event, of the store's sizes, under \
                        random keys, the same tables and indexes, one transaction of multi-row statements per \
                        1,000 events, the store writer's settings (synchronous=FULL, temp_store=MEMORY, a 16 MiB \
                        cache), through sqlite-nio; no parse, seal, MAC or chain check
                        """, floorSeconds), goal: "≥ 10,000 events/s", raw: Double(events) / floorSeconds))

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

    /// The SQLite floor of the import: what the disk and the driver take for the same writes with
    /// none of the store's work. Per event, the user's state row (32-byte random key, 144-byte
    /// body, as sealed) is upserted and an audit line (438 bytes, its subject a 32-byte random key)
    /// appended, in the store's own tables and indexes, in the backlog's order and batches.
    static func sqliteFloorSeconds(directory: String, users: Int) async throws -> Double {
        let path = directory + "/floor.sqlite"
        try? FileManager.default.removeItem(atPath: path)
        let connection = try await SQLiteConnection.open(storage: .file(path: path))
        // The store's writer's settings (ShadowSQLite's SQLiteDatabase.writerPragmas).
        for statement in [
            "PRAGMA journal_mode = WAL", "PRAGMA synchronous = FULL", "PRAGMA temp_store = MEMORY",
            "PRAGMA cache_size = -16384",
            """
            CREATE TABLE shadow_credentials (row_id BLOB PRIMARY KEY, state INTEGER NOT NULL, body BLOB NOT NULL) \
            WITHOUT ROWID
            """,
            """
            CREATE TABLE shadow_audit (seq INTEGER PRIMARY KEY, subject BLOB NOT NULL, linked BLOB, line BLOB \
            NOT NULL)
            """,
            "CREATE INDEX shadow_audit_subject ON shadow_audit (subject)",
        ] { _ = try await connection.query(statement, []) }
        var events: [(user: Int, state: Int)] = []
        for user in 0..<users {
            events.append((user, 1))
            if user % 8 == 0 { events.append((user, 2)) }
        }
        func key(_ label: String, _ user: Int) -> SQLiteData {
            .blob(ByteBuffer(bytes: Array(SHA256.hash(data: Array("\(label)\(user)".utf8)))))
        }
        // Random bytes made before the clock starts; each row takes a slice at its own offset.
        let pool = (0..<(64 << 10)).map { _ in UInt8.random(in: 0...255) }
        var offset = 0
        func noise(_ count: Int) -> SQLiteData {
            offset = (offset + 977) % (pool.count - count)
            return .blob(ByteBuffer(bytes: pool[offset..<(offset + count)]))
        }
        let began = DispatchTime.now().uptimeNanoseconds
        var seq = 0
        for batch in stride(from: 0, to: events.count, by: 1000) {
            _ = try await connection.query("BEGIN IMMEDIATE", [])
            let part = events[batch..<min(batch + 1000, events.count)]
            for chunk in stride(from: part.startIndex, to: part.endIndex, by: 200) {
                // A user's sign-in and revocation share a statement only when they are different rows.
                var pending = part[chunk..<min(chunk + 200, part.endIndex)][...]
                while !pending.isEmpty {
                    var seen = Set<Int>()
                    let group = pending.prefix { seen.insert($0.user).inserted }
                    pending = pending.dropFirst(group.count)
                    _ = try await connection.query(
                        """
                        INSERT INTO shadow_credentials (row_id, state, body) VALUES \
                        \(Array(repeating: "(?, ?, ?)", count: group.count).joined(separator: ", ")) \
                        ON CONFLICT (row_id) DO UPDATE SET state = excluded.state, body = excluded.body
                        """, group.flatMap { [key("row", $0.user), .integer($0.state), noise(144)] })
                    _ = try await connection.query(
                        """
                        INSERT INTO shadow_audit (seq, subject, line) VALUES \
                        \(Array(repeating: "(?, ?, ?)", count: group.count).joined(separator: ", "))
                        """,
                        group.flatMap { event -> [SQLiteData] in
                            seq += 1
                            return [.integer(seq), key("sub", event.user), noise(438)]
                        })
                }
            }
            _ = try await connection.query("COMMIT", [])
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9
        try await connection.close()
        try? FileManager.default.removeItem(atPath: path)
        return seconds
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
