import CryptoExtras
import Foundation
import ShadowJOSE
import Logging
import NIOCore
import PostgresNIO
import ShadowCore
import ShadowCredentials
import ShadowPostgres
import ShadowSQLite
import ShadowTestSupport
import ShadowVault
import SQLiteNIO

/// The database stores at 10,000 and at a million users (`SHADOW_BENCH_USERS` overrides the
/// larger count): a status lookup beside the bare driver's SELECT of the same row, transitions
/// in batches, eight concurrent PostgreSQL writers, bytes per user, and per process what
/// `state check` and `--state` cost next to `verify-token`.
enum DatabaseBenchmarks {
    static let client = "com.example.notes"
    static let key = SecretBytes((0..<32).map { UInt8($0) })
    static let start: Int64 = 1_700_000_000_000

    static func subject(_ index: Int) -> String {
        "001234." + String(String(index, radix: 16).reversed()).padding(toLength: 32, withPad: "0", startingAt: 0)
            + ".0042"
    }

    static func signIns(_ range: Range<Int>) throws -> [CredentialEvent] {
        try range.map {
            try CredentialEvent(
                kind: .signIn, clientID: client, subject: subject($0), timeMilliseconds: start,
                id: "sign-in:" + String(format: "%032x", $0))
        }
    }

    static var largeUsers: Int { Int(ProcessInfo.processInfo.environment["SHADOW_BENCH_USERS"] ?? "") ?? 1_000_000 }

    static func run(binary: String, workDirectory: String) async throws -> [BenchRow] {
        var rows: [BenchRow] = []
        rows += try await sqlite(binary: binary, workDirectory: workDirectory)
        rows += try await postgres()
        return rows
    }

    /// Grows `store` to `users`, returning the median per-batch rate (events/s).
    static func grow(_ store: some CredentialStateStore, from: Int, to users: Int) async throws -> Double {
        var rates: [Double] = []
        for batch in stride(from: from, to: users, by: 2000) {
            let events = try signIns(batch..<min(batch + 2000, users))
            let began = DispatchTime.now().uptimeNanoseconds
            _ = try await store.apply(events)
            rates.append(Double(events.count) / (Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9))
        }
        return Harness.median(rates)
    }

    /// Median lookup rate of random known users through the store, and of the bare SELECT.
    static func lookups(
        _ store: some CredentialStateStore, users: Int, raw: @escaping ([UInt8]) async throws -> Void, ids: RowIDCache
    ) async throws -> Samples {
        var random = SystemRandomNumberGenerator()
        return try await Harness.sampleAsync([
            {
                _ = try await store.status(
                    clientID: client, subject: subject(Int.random(in: 0..<users, using: &random)))
            },
            { try await raw(ids.random(using: &random)) },
        ])
    }

    static func sqlite(binary: String, workDirectory: String) async throws -> [BenchRow] {
        let directory = workDirectory + "/db-sqlite"
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/state.sqlite"
        let store = try await SQLiteCredentialStore.open(path: path, unlock: .key(key))
        let rawConnection = try await SQLiteConnection.open(storage: .file(path: path))
        // The bare driver: the same SELECT by row id, with the row id already known (no HMAC, no
        // decryption, no decoding).
        let rowIDs = RowIDCache()
        let raw: ([UInt8]) async throws -> Void = { id in
            _ = try await rawConnection.query(
                "SELECT body FROM shadow_credentials WHERE row_id = ?", [.blob(ByteBuffer(bytes: id))])
        }
        var rows: [BenchRow] = []
        var rate = try await grow(store, from: 0, to: 10_000)
        try await rowIDs.learn(from: store, users: 10_000)
        let small = try await lookups(store, users: 10_000, raw: raw, ids: rowIDs)
        rows.append(
            lookupRow(
                "SQLite status lookup, 10,000 users (library)", small,
                note: "raw = the bare sqlite-nio SELECT of the row by a known row id"))
        rate = try await grow(store, from: 10_000, to: largeUsers)
        try await rowIDs.learn(from: store, users: largeUsers)
        let large = try await lookups(store, users: largeUsers, raw: raw, ids: rowIDs)
        rows.append(
            lookupRow(
                "SQLite status lookup, \(largeUsers) users (library)", large,
                note: String(
                    format: "%.2fx the 10,000-user median; raw as above",
                    large.median(1) > 0 ? small.median(0) / large.median(0) : 0)))
        rows.append(
            BenchRow(
                name: "SQLite transitions in batches of 2,000 (library)", unit: "ops/s", ours: rate, raw: nil,
                peer: nil, peerName: nil,
                note:
                    """
                    sign-ins of new users, each sealed and audited, one transaction per batch, synchronous=FULL; \
                    median over the batches up to \(largeUsers) users
                    """
            ))
        try await rawConnection.close()
        await store.close()

        // Bytes per user without the audit: a copy with the audit dropped and vacuumed.
        let copy = directory + "/rows-only.sqlite"
        let connection = try await SQLiteConnection.open(storage: .file(path: path))
        _ = try await connection.query("VACUUM INTO '\(copy)'", [])
        try await connection.close()
        let trimmed = try await SQLiteConnection.open(storage: .file(path: copy))
        _ = try await trimmed.query("DROP TABLE shadow_audit", [])
        _ = try await trimmed.query("VACUUM", [])
        try await trimmed.close()
        let bytes = try FileManager.default.attributesOfItem(atPath: copy)[.size] as? Int ?? 0
        let whole = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
        rows.append(
            BenchRow(
                name: "SQLite bytes per user, audit excluded", unit: "count", ours: Double(bytes) / Double(largeUsers),
                raw: nil, peer: nil, peerName: nil,
                note: String(
                    format: "%d users: %.1f MB without the audit, %.1f MB with it", largeUsers, Double(bytes) / 1e6,
                    Double(whole) / 1e6)))
        try? FileManager.default.removeItem(atPath: copy)

        // Per process, at the large size.
        let keyFile = directory + "/state.key"
        try "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n".write(
            toFile: keyFile, atomically: true, encoding: .utf8)
        chmod(keyFile, 0o600)
        let signer = try JWSSigner.rs256(try _RSA.Signing.PrivateKey(keySize: .bits2048), keyID: "apple-1")
        let jwks = directory + "/apple-keys.json"
        try JSONValue.object(["keys": .array([.object(try signer.publicJWK().json)])]).serialized().write(
            toFile: jwks, atomically: true, encoding: .utf8)
        let token = try signer.sign(claims: [
            "iss": "https://appleid.apple.com", "aud": .string(client), "sub": .string(subject(7)),
            "iat": 1_700_000_100, "exp": 1_700_086_500,
        ])
        let tokenFile = directory + "/token"
        try token.write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let verify = [
            "verify-token", "--apple", "--aud", client, "--jwks", jwks, "--token-file", tokenFile, "--now",
            "1700000200",
        ]
        let times = try Harness.interleavedWallTimes([
            (binary, verify + ["--state", "--store", "sqlite:\(path)", "--key-file", keyFile]),
            (binary, verify),
            (
                binary,
                [
                    "state", "check", "--client-id", client, "--sub", subject(7), "--store", "sqlite:\(path)",
                    "--key-file", keyFile,
                ]
            ),
        ])
        rows.append(
            BenchRow(
                name: "CLI verify-token --apple --state, SQLite, \(largeUsers) users, per process", unit: "ms/run",
                ours: 1 / times[0], raw: 1 / times[1], peer: nil,
                peerName: nil,
                note: String(
                    format: "median wall time; raw = the same verification without --state; --state adds %.2f ms",
                    (times[0] - times[1]) * 1000)))
        rows.append(
            BenchRow(
                name: "CLI state check, SQLite, \(largeUsers) users, per process", unit: "ms/run", ours: 1 / times[2],
                raw: 1 / times[1], peer: nil, peerName: nil,
                note: "median wall time; raw = `verify-token --apple` per process"))
        return rows
    }

    static func postgres() async throws -> [BenchRow] {
        let cluster = try PostgresCluster.start(durable: true)
        defer { cluster.stop() }
        let url = try cluster.createDatabase("bench")
        let location = try PostgresLocation(url: url)
        let store = try await PostgresCredentialStore.connect(location, unlock: .key(key))
        var configuration = PostgresClient.Configuration(
            host: "127.0.0.1", port: cluster.port, username: cluster.user, password: nil, database: "bench",
            tls: .disable)
        configuration.options.maximumConnections = 1
        let client = PostgresClient(configuration: configuration)
        let runner = Task { await client.run() }
        defer { runner.cancel() }
        let rowIDs = RowIDCache()
        let logger = Logger(label: "bench")
        let raw: ([UInt8]) async throws -> Void = { id in
            let bytes = ByteBuffer(bytes: id)
            _ = try await client.query("SELECT body FROM shadow_credentials WHERE row_id = \(bytes)", logger: logger)
                .collect()
        }
        var rows: [BenchRow] = []
        var rate = try await grow(store, from: 0, to: 10_000)
        try await rowIDs.learn(from: store, users: 10_000)
        let small = try await lookups(store, users: 10_000, raw: raw, ids: rowIDs)
        rows.append(
            lookupRow(
                "PostgreSQL status lookup, 10,000 users, loopback (library)", small,
                note: "raw = the bare postgres-nio SELECT of the row by a known row id"))
        rate = try await grow(store, from: 10_000, to: largeUsers)
        try await rowIDs.learn(from: store, users: largeUsers)
        let large = try await lookups(store, users: largeUsers, raw: raw, ids: rowIDs)
        rows.append(
            lookupRow(
                "PostgreSQL status lookup, \(largeUsers) users, loopback (library)", large,
                note: String(format: "%.2fx the 10,000-user median; raw as above", small.median(0) / large.median(0))))
        rows.append(
            BenchRow(
                name: "PostgreSQL transitions in batches of 2,000, one writer (library)", unit: "ops/s", ours: rate,
                raw: nil, peer: nil, peerName: nil,
                note: "sign-ins of new users, sealed and audited, one transaction per batch, fsync on"))

        // Eight writers: eight stores (eight connections, as eight instances), each applying
        // batches of 25 events, and then single events, for a few seconds.
        for batchSize in [25, 1] {
            var writers: [PostgresCredentialStore] = []
            for _ in 0..<8 { writers.append(try await PostgresCredentialStore.connect(location, unlock: .key(key))) }
            let base = largeUsers + (batchSize == 25 ? 0 : 10_000_000)
            let began = DispatchTime.now().uptimeNanoseconds
            let total = try await withThrowingTaskGroup(of: Int.self) { group in
                for (index, writer) in writers.enumerated() {
                    group.addTask {
                        var done = 0
                        var next = base + index * 1_000_000
                        while Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9 < 5 {
                            _ = try await writer.apply(try signIns(next..<next + batchSize))
                            next += batchSize
                            done += batchSize
                        }
                        return done
                    }
                }
                return try await group.reduce(0, +)
            }
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9
            rows.append(
                BenchRow(
                    name:
                        """
                        PostgreSQL transitions, 8 concurrent writers, \(batchSize == 1 ? "one event" : "25 events") a \
                        call
                        """,
                    unit: "ops/s",
                    ours: Double(total) / seconds, raw: nil, peer: nil, peerName: nil,
                    note:
                        """
                        eight stores (connections) on one database, serialised on the writer row, fsync on; \(total) \
                        transitions in \(String(format: "%.1f", seconds)) s
                        """
                ))
            for writer in writers { await writer.close() }
        }
        let sizes = try cluster.psql(
            "bench",
            """
            SELECT pg_total_relation_size('shadow_credentials'), pg_total_relation_size('shadow_audit'), count(*) \
            FROM shadow_credentials
            """
        )
        .trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "|").compactMap { Double($0) }
        if sizes.count == 3 {
            rows.append(
                BenchRow(
                    name: "PostgreSQL bytes per user, audit excluded", unit: "count", ours: sizes[0] / sizes[2],
                    raw: nil, peer: nil, peerName: nil,
                    note: String(
                        format: "%.0f users: %.1f MB in shadow_credentials with its index; the audit %.1f MB", sizes[2],
                        sizes[0] / 1e6, sizes[1] / 1e6)))
        }
        await store.close()
        return rows
    }

    static func lookupRow(_ name: String, _ samples: Samples, note: String) -> BenchRow {
        var row = BenchRow(
            name: name, unit: "us/op", ours: samples.median(0), raw: samples.median(1), peer: nil, peerName: nil,
            note: note)
        row.pairedRatios = (samples.median(1) / samples.median(0), nil)
        return row
    }

}

/// Row ids of the benchmark's users, read from the audit (whose subject hashes are the row ids),
/// so the bare-driver SELECT does no HMAC of its own.
final class RowIDCache: @unchecked Sendable {
    private var ids: [String: [UInt8]] = [:]
    private var list: [[UInt8]] = []
    private let lock = NSLock()

    func fill(_ values: [String: [UInt8]]) {
        lock.withLock {
            ids.merge(values) { $1 }
            list = Array(ids.values)
        }
    }

    func random(using generator: inout some RandomNumberGenerator) -> [UInt8] {
        let list = lock.withLock { self.list }
        return list[Int.random(in: 0..<list.count, using: &generator)]
    }

    /// The row ids of users 0..<users, from each one's history.
    func learn(from store: some AuditedCredentialStore, users: Int) async throws {
        // A sample is enough: the lookups draw from all users, and an unknown id costs the same
        // SELECT (no row). Learn 2,000 evenly spread ids and reuse them.
        var learned: [String: [UInt8]] = [:]
        for index in stride(from: 0, to: users, by: max(1, users / 2000)) {
            let subject = DatabaseBenchmarks.subject(index)
            if let hash = try await store.history(clientID: DatabaseBenchmarks.client, subject: subject).first?
                .subjectHash
            {
                learned[subject] = stride(from: 0, to: hash.count, by: 2).map { offset in
                    let start = hash.index(hash.startIndex, offsetBy: offset)
                    return UInt8(hash[start..<hash.index(start, offsetBy: 2)], radix: 16)!
                }
            }
        }
        fill(learned)
    }
}
