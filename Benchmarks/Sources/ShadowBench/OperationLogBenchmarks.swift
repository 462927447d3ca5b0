import Crypto
import Foundation
import NIOCore
import ShadowCore
import ShadowOperationLog
import ShadowSQLite
import ShadowVault
import SQLiteNIO

/// The operation log on SQLite: batched and durable single appends beside the bare driver's
/// INSERT of the same bytes, proofs at a million entries, `verify` beside SHA-256 of the leaves
/// (its floor), and bytes per entry. `SHADOW_BENCH_ENTRIES` sets the large size (default 1,000,000).
enum OperationLogBenchmarks {
    static let unlock = VaultUnlock.key(SecretBytes((0..<32).map { UInt8($0) }))
    static var largeEntries: Int {
        Int(ProcessInfo.processInfo.environment["SHADOW_BENCH_ENTRIES"] ?? "") ?? 1_000_000
    }

    static func entry(_ number: Int) -> OperationEntry {
        OperationEntry(
            operation: ["upload", "download", "delete"][number % 3],
            provider: number % 2 == 0 ? "icloud" : "google-drive",
            entityType: "file", entityID: "Documents/Projects/\(number % 977)/report-\(number).pdf",
            time: 1_750_000_000_000 + Int64(number), success: number % 50 != 0,
            error: number % 50 == 0 ? "HTTP 503 from the provider" : nil)
    }

    static func run(workDirectory: String) async throws -> [BenchRow] {
        let directory = workDirectory + "/oplog"
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var rows: [BenchRow] = []
        rows += try await appends(directory: directory)
        rows += try await large(directory: directory)
        rows += try await largeFile(directory: directory)
        return rows
    }

    /// `log verify` on a log file (the CLI's default backend) as a process starts it: open (which
    /// reads the file and rebuilds the tree) and verify. Floor: reading the file and SHA-256 of
    /// every entry's leaf bytes.
    static func largeFile(directory: String) async throws -> [BenchRow] {
        let path = directory + "/large.log"
        let size = largeEntries
        do {
            let storage = try await FileLogStorage.open(
                path: path, unlock: unlock, create: true, origin: "bench.example/large-file")
            let log = try OperationLog(storage: storage)
            for start in stride(from: 0, to: size, by: 10_000) {
                _ = try await log.append(contentsOf: (start..<min(start + 10_000, size)).map(entry))
            }
        }
        let began = DispatchTime.now().uptimeNanoseconds
        let storage = try await FileLogStorage.open(path: path, unlock: unlock)
        let verification = try await OperationLog(storage: storage).verify()
        let verifySeconds = Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9
        guard verification.size == UInt64(size) else { throw BenchError("verify saw \(verification.size) entries") }
        let floorSeconds = try await leafHashingSeconds(storage)
        let bytes = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
        return [
            BenchRow(
                name: "log verify of \(size) entries in a log file (library, open included)", unit: "entries/s",
                ours: Double(size) / verifySeconds, raw: Double(size) / floorSeconds, peer: nil, peerName: nil,
                note: String(
                    format: """
                        the file (%.1f MB) read and its tree rebuilt on open, then every body hashed and decoded \
                        and the checkpoints' signatures and roots; raw = reading the entries and SHA-256 of each \
                        leaf (the floor)
                        """, Double(bytes) / 1e6))
        ]
    }

    /// The verify floor: seconds to read every entry from `storage`, in verify's chunks, and
    /// SHA-256 its leaf bytes.
    static func leafHashingSeconds(_ storage: any LogStorage) async throws -> Double {
        let began = DispatchTime.now().uptimeNanoseconds
        var position: UInt64 = 0
        while true {
            let records = try await storage.records(from: position, count: 8192)
            for record in records { _ = TreeHash.leaf(record.bytes ?? []) }
            position += UInt64(records.count)
            if records.count < 8192 { break }
        }
        return Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9
    }

    /// The floor of `verify` with its per-entry primitives: seconds to read every entry from
    /// `storage` in verify's chunks and, for each, SHA-256 its leaf bytes, open one AES-256-GCM box
    /// (the sealed part: a 2-byte length, an entity ID of 44 bytes and a flag, with 80 bytes of
    /// associated data) and take HMAC-SHA-256 of the ID, all through swift-crypto, one after the
    /// other on one thread. The HMAC is a copy of one already keyed, swift-crypto's fastest way
    /// (1.4 µs here, against 3.8 µs keying it each time).
    static func primitiveFloorSeconds(_ storage: any LogStorage) async throws -> Double {
        let key = SymmetricKey(size: .bits256)
        let lookup = HMAC<SHA256>(key: SymmetricKey(size: .bits256))
        let id = Array(repeating: UInt8(ascii: "a"), count: 44)
        let aad = Data(repeating: 7, count: 80)
        let box = try AES.GCM.seal([0, 44] + id + [0], using: key, authenticating: aad)
        let combined = try require(box.combined, "a combined box")
        let began = DispatchTime.now().uptimeNanoseconds
        var position: UInt64 = 0
        while true {
            let records = try await storage.records(from: position, count: 8192)
            for record in records {
                _ = TreeHash.leaf(record.bytes ?? [])
                let opened = try AES.GCM.open(
                    try AES.GCM.SealedBox(combined: combined), using: key, authenticating: aad)
                guard opened.count == 47 else { throw BenchError("the floor's box opened wrong") }
                var mac = lookup
                mac.update(data: id)
                _ = mac.finalize()
            }
            position += UInt64(records.count)
            if records.count < 8192 { break }
        }
        return Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9
    }

    /// A bare table with the same row shape, written with the same multi-row INSERTs.
    static func rawConnection(_ path: String) async throws -> SQLiteConnection {
        let connection = try await SQLiteConnection.open(storage: .file(path: path))
        for statement in [
            "PRAGMA journal_mode = WAL", "PRAGMA synchronous = FULL",
            "CREATE TABLE IF NOT EXISTS raw (idx INTEGER PRIMARY KEY, leaf BLOB NOT NULL, entity BLOB, body BLOB)",
        ] { _ = try await connection.query(statement, []) }
        return connection
    }

    static func rawInsert(_ connection: SQLiteConnection, _ rows: [[UInt8]], from index: Int) async throws {
        _ = try await connection.query("BEGIN IMMEDIATE", [])
        for chunk in stride(from: 0, to: rows.count, by: 200) {
            let part = rows[chunk..<min(chunk + 200, rows.count)]
            let values = Array(repeating: "(?, ?, ?, ?)", count: part.count).joined(separator: ", ")
            var bindings: [SQLiteData] = []
            for (offset, body) in part.enumerated() {
                bindings += [
                    .integer(index + chunk + offset), .blob(ByteBuffer(bytes: Array(SHA256.hash(data: body)))),
                    .blob(ByteBuffer(bytes: body.prefix(32))), .blob(ByteBuffer(bytes: body)),
                ]
            }
            _ = try await connection.query("INSERT INTO raw (idx, leaf, entity, body) VALUES \(values)", bindings)
        }
        _ = try await connection.query("COMMIT", [])
    }

    static func appends(directory: String) async throws -> [BenchRow] {
        let storage = try await SQLiteLogStorage.open(
            path: directory + "/appends.sqlite", unlock: unlock, create: true, origin: "bench.example/appends")
        let log = try OperationLog(storage: storage)
        let raw = try await rawConnection(directory + "/raw.sqlite")
        let keys = storage.keys
        var next = 0
        var rawNext = 0
        let batch = (0..<1000).map(entry)
        let batchBytes = try batch.map { try EntryCodec.encode($0, keys: keys) }
        let batched = try await Harness.sampleAsync([
            {
                _ = try await log.append(contentsOf: batch)
                next += batch.count
            },
            {
                try await rawInsert(raw, batchBytes, from: rawNext)
                rawNext += batchBytes.count
            },
        ])
        let single = try await Harness.sampleAsync([
            {
                _ = try await log.append(entry(next))
                next += 1
            },
            {
                try await rawInsert(raw, [batchBytes[rawNext % batchBytes.count]], from: rawNext)
                rawNext += 1
            },
        ])
        // Appends from 32 tasks at once: the group commit writes them together.
        let concurrent = try await Harness.sampleAsync([
            {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for number in 0..<32 { group.addTask { _ = try await log.append(entry(number)) } }
                    try await group.waitForAll()
                }
            }
        ])
        await storage.close()
        try await raw.close()
        return [
            BenchRow(
                name: "oplog appends on SQLite, batches of 1,000 (library)", unit: "entries/s",
                ours: batched.median(0) * 1000, raw: batched.median(1) * 1000, peer: nil, peerName: nil,
                note: """
                    each entry sealed, hashed into the tree, nodes written, checkpoint signed (Ed25519), one \
                    transaction per batch, synchronous=FULL; raw = the bare driver inserting the same bytes
                    """),
            BenchRow(
                name: "oplog single appends on SQLite, each durable before it returns", unit: "entries/s",
                ours: single.median(0), raw: single.median(1), peer: nil, peerName: nil,
                note: "one transaction and one fsync per entry; raw = a bare one-row INSERT and COMMIT"),
            BenchRow(
                name: "oplog appends on SQLite, 32 concurrent callers (library)", unit: "entries/s",
                ours: concurrent.median(0) * 32, raw: nil, peer: nil, peerName: nil,
                note: "each append returns once durable; appends that arrive together share a write"),
        ]
    }

    /// A SQLite log of ``largeEntries`` entries, then `verify` of it alone, printing its window on
    /// CLOCK_MONOTONIC (for `perf report --time`) and the rate, beside the floor's.
    static func profileVerify(directory: String) async throws {
        let storage = try await SQLiteLogStorage.open(
            path: directory + "/profile.sqlite", unlock: unlock, create: true, origin: "bench.example/profile")
        let log = try OperationLog(storage: storage)
        for start in stride(from: 0, to: largeEntries, by: 10_000) {
            _ = try await log.append(contentsOf: (start..<min(start + 10_000, largeEntries)).map(entry))
        }
        _ = try await log.checkpoint()
        let floorSeconds = try await leafHashingSeconds(storage)
        let primitivesSeconds = try await primitiveFloorSeconds(storage)
        let start = monotonicSeconds()
        _ = try await log.verify()
        let end = monotonicSeconds()
        await storage.close()
        print(
            String(
                format: "window %.6f,%.6f: %.0f entries/s (the floor: %.0f/s; with the primitives: %.0f/s)", start,
                end, Double(largeEntries) / (end - start), Double(largeEntries) / floorSeconds,
                Double(largeEntries) / primitivesSeconds))
    }

    static func large(directory: String) async throws -> [BenchRow] {
        let path = directory + "/large.sqlite"
        let storage = try await SQLiteLogStorage.open(
            path: path, unlock: unlock, create: true, origin: "bench.example/large")
        let log = try OperationLog(storage: storage)
        let size = largeEntries
        for start in stride(from: 0, to: size, by: 10_000) {
            _ = try await log.append(contentsOf: (start..<min(start + 10_000, size)).map(entry))
        }
        let checkpoint = try await log.checkpoint().checkpoint
        var random = SystemRandomNumberGenerator()
        var inclusionMake: [Double] = []
        var inclusionCheck: [Double] = []
        var consistencyMake: [Double] = []
        var consistencyCheck: [Double] = []
        for _ in 0..<201 {
            let index = UInt64.random(in: 0..<UInt64(size), using: &random)
            var began = DispatchTime.now().uptimeNanoseconds
            let inclusion = try await log.inclusionProof(index: index)
            inclusionMake.append(Double(DispatchTime.now().uptimeNanoseconds - began) / 1e6)
            began = DispatchTime.now().uptimeNanoseconds
            try MerkleProof.verifyInclusion(
                index: index, size: inclusion.size, leaf: inclusion.leaf, proof: inclusion.path, root: checkpoint.root)
            inclusionCheck.append(Double(DispatchTime.now().uptimeNanoseconds - began) / 1e6)
            let old = UInt64.random(in: 1..<UInt64(size), using: &random)
            began = DispatchTime.now().uptimeNanoseconds
            let consistency = try await log.consistencyProof(from: old)
            consistencyMake.append(Double(DispatchTime.now().uptimeNanoseconds - began) / 1e6)
            began = DispatchTime.now().uptimeNanoseconds
            try MerkleProof.verifyConsistency(
                oldSize: old, newSize: consistency.newSize, oldRoot: consistency.oldRoot, newRoot: checkpoint.root,
                proof: consistency.path)
            consistencyCheck.append(Double(DispatchTime.now().uptimeNanoseconds - began) / 1e6)
        }
        // verify, and its floor: SHA-256 of every leaf's bytes, read from the same table in the same chunks.
        let began = DispatchTime.now().uptimeNanoseconds
        _ = try await log.verify()
        let verifySeconds = Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9
        let floorSeconds = try await leafHashingSeconds(storage)
        let primitivesSeconds = try await primitiveFloorSeconds(storage)
        await storage.close()
        let connection = try await SQLiteConnection.open(storage: .file(path: path))
        _ = try await connection.query("PRAGMA wal_checkpoint(TRUNCATE)", [])
        try await connection.close()
        let bytes = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
        let perEntry = Double(bytes) / Double(size)
        let entryBytes = entry(12345).entityID.utf8.count
        return [
            BenchRow(
                name: "oplog inclusion proof at \(size) entries: make / check", unit: "ms",
                ours: Harness.median(inclusionMake), raw: Harness.median(inclusionCheck), peer: nil, peerName: nil,
                note:
                    """
                    medians over 201 random entries; ours = make (reads O(log² n) nodes from SQLite), raw column = \
                    check
                    """
            ),
            BenchRow(
                name: "oplog consistency proof at \(size) entries: make / check", unit: "ms",
                ours: Harness.median(consistencyMake), raw: Harness.median(consistencyCheck), peer: nil,
                peerName: nil, note: "medians over 201 random old sizes; raw column = check"),
            BenchRow(
                name: "log verify of \(size) entries (library)", unit: "entries/s",
                ours: Double(size) / verifySeconds, raw: Double(size) / floorSeconds, peer: nil, peerName: nil,
                note: """
                    every body hashed and decoded, every stored node compared, the checkpoint's signature and \
                    root; raw = reading the same rows and SHA-256 of each leaf (the floor)
                    """),
            BenchRow(
                name: "log verify of \(size) entries beside its primitives", unit: "entries/s",
                ours: Double(size) / verifySeconds, raw: Double(size) / primitivesSeconds, peer: nil, peerName: nil,
                note: """
                    raw = reading the same rows and, per entry, what verify cannot do without: SHA-256 of the \
                    leaf, one AES-256-GCM open of a sealed part's size and one HMAC-SHA-256 of an entity ID, \
                    through swift-crypto, on one thread
                    """),
            BenchRow(
                name: "oplog SQLite bytes per entry, before pruning", unit: "count", ours: perEntry, raw: nil,
                peer: nil, peerName: nil,
                note: String(
                    format: """
                        %d entries, %.1f MB: the entry row (index, leaf hash, entity hash, sealed body; entity IDs \
                        of about %d bytes), the entity index, and about one tree node per entry
                        """, size, Double(bytes) / 1e6, entryBytes)),
        ]
    }
}
