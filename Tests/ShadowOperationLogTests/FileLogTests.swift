import Foundation
import ShadowCore
import ShadowOperationLog
import ShadowTestSupport
import ShadowVault
import Testing

/// The operation log in its append-only file: appends, reads, proofs, pruning, and every way
/// of editing the file that `verify` must catch.
@Suite struct FileLogTests {
    let directory: TemporaryDirectory
    let path: String

    init() throws {
        directory = try TemporaryDirectory()
        path = directory.path + "/ops.log"
    }

    func open(create: Bool = true) async throws -> OperationLog {
        try OperationLog(
            storage: try await FileLogStorage.open(
                path: path, unlock: LogFixtures.unlock, create: create, origin: create ? LogFixtures.origin : nil))
    }

    func fill(_ log: OperationLog, batches: [Int]) async throws {
        var number = 0
        for count in batches {
            _ = try await log.append(
                contentsOf: (number..<(number + count)).map { LogFixtures.entry($0, success: $0 % 7 != 3) })
            number += count
        }
    }

    @Test func appendsReadBackAndVerify() async throws {
        let log = try await open()
        try await fill(log, batches: [1, 5, 10])
        let reopened = try await open(create: false)
        #expect(try await reopened.size() == 16)
        for number in 0..<16 {
            #expect(try await reopened.entry(at: UInt64(number)) == LogFixtures.entry(number, success: number % 7 != 3))
        }
        let report = try await reopened.verify()
        #expect(report.size == 16)
        #expect(report.checkpoints == 3)
        let checkpoint = try await reopened.checkpoint()
        #expect(checkpoint.checkpoint.origin == LogFixtures.origin)
        #expect(checkpoint.checkpoint.root == report.root)
        // Anyone with the verifier key checks the checkpoint; the entity is found by its keyed hash.
        #expect(try SignedNote.open(checkpoint.note, verifiers: [reopened.verifier]) == checkpoint.checkpoint.text)
        #expect(try await reopened.indices(ofEntity: "Documents/report-4.pdf") == [4])
    }

    @Test func anEntityIsReadAPageAtATime() async throws {
        try await LogFixtures.pagesThroughAnEntity(try await open(), count: 10)
    }

    @Test func concurrentAppendsShareWritesAndGetDistinctIndices() async throws {
        let log = try await open()
        let indices = try await withThrowingTaskGroup(of: UInt64.self) { group in
            for number in 0..<200 { group.addTask { try await log.append(LogFixtures.entry(number)) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(Set(indices) == Set(0..<200))
        let report = try await log.verify()
        #expect(report.size == 200)
        #expect(report.checkpoints < 200, "appends that arrive together are written together")
    }

    @Test func proofsVerifyAgainstCheckpoints() async throws {
        let log = try await open()
        try await fill(log, batches: [3, 4])
        let old = try await log.checkpoint().checkpoint
        try await fill(log, batches: [9])
        let new = try await log.checkpoint().checkpoint
        for index in UInt64(0)..<new.size {
            let proof = try await log.inclusionProof(index: index)
            try proof.verify()
            #expect(proof.root == new.root)
        }
        let consistency = try await log.consistencyProof(from: old.size)
        #expect(consistency.oldRoot == old.root && consistency.newRoot == new.root)
        try consistency.verify()
        let older = try await log.inclusionProof(index: 2, size: old.size)
        #expect(older.root == old.root)
        await #expect(throws: LogError(.invalidParameter, "")) { try await log.inclusionProof(index: 16) }
        await #expect(throws: LogError(.invalidParameter, "")) { try await log.consistencyProof(from: 17) }
    }

    @Test func pruningKeepsTheTree() async throws {
        let log = try await open()
        try await fill(log, batches: [10, 10])
        let before = try await log.verify()
        #expect(try await log.prune(before: 12) == 12)
        let after = try await log.verify()
        #expect(after.root == before.root && after.pruned == 12)
        await #expect(throws: LogError(.pruned, "")) { try await log.entry(at: 11) }
        #expect(try await log.entry(at: 12) == LogFixtures.entry(12))
        try await log.inclusionProof(index: 3).verify()
        // Later appends go on after a prune, and the file still verifies when reopened.
        try await fill(log, batches: [2])
        #expect(try await open(create: false).verify().size == 22)
    }

    @Test func wrongKeyAndForeignFilesAreRefused() async throws {
        let log = try await open()
        try await fill(log, batches: [2])
        await #expect(throws: LogError(.wrongKey, "")) {
            try await FileLogStorage.open(path: path, unlock: .key(SecretBytes([UInt8](repeating: 9, count: 32))))
        }
        let other = try directory.write("other", "not a log at all")
        await #expect(throws: LogError(.notALog, "")) {
            try await FileLogStorage.open(path: other, unlock: LogFixtures.unlock)
        }
        await #expect(throws: LogError(.notFound, "")) {
            try await FileLogStorage.open(path: directory.path + "/missing", unlock: LogFixtures.unlock)
        }
        await #expect(throws: LogError(.invalidParameter, "")) {
            try await FileLogStorage.open(path: path, unlock: LogFixtures.unlock, origin: "example.com/another")
        }
    }

    // MARK: Editing the file

    /// The file's records: (offset, type, length).
    func records() throws -> (bytes: [UInt8], records: [(offset: Int, type: UInt8, length: Int)]) {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let originLength = Int(bytes[5])
        let sealedLength = Int(bytes[6 + originLength]) << 8 | Int(bytes[7 + originLength])
        var offset = 8 + originLength + sealedLength + 32
        var found: [(Int, UInt8, Int)] = []
        while offset < bytes.count {
            let length = bytes[(offset + 1)..<(offset + 5)].reduce(0) { $0 << 8 | Int($1) }
            found.append((offset, bytes[offset], length))
            offset += 5 + length
        }
        return (bytes, found)
    }

    func write(_ bytes: [UInt8]) throws { try Data(bytes).write(to: URL(fileURLWithPath: path)) }

    func expectTampered(_ what: String) async {
        await #expect(throws: LogError(.tampered, ""), "\(what)") {
            _ = try await open(create: false).verify()
        }
    }

    @Test func aFlippedBitInAnyEntryIsCaught() async throws {
        try await fill(try await open(), batches: [4, 4])
        let (bytes, records) = try records()
        for record in records where record.type == 1 {
            for position in [
                record.offset + 5, record.offset + 5 + record.length / 2, record.offset + 4 + record.length,
            ] {
                var edited = bytes
                edited[position] ^= 0x01
                try write(edited)
                await expectTampered("bit flipped at byte \(position)")
            }
        }
    }

    @Test func deletedReorderedAndTruncatedEntriesAreCaught() async throws {
        try await fill(try await open(), batches: [4, 4])
        let (bytes, records) = try records()
        let entries = records.filter { $0.type == 1 }
        func span(_ record: (offset: Int, type: UInt8, length: Int)) -> Range<Int> {
            record.offset..<(record.offset + 5 + record.length)
        }
        // Deleted: the second entry's record cut out.
        var deleted = bytes
        deleted.removeSubrange(span(entries[1]))
        try write(deleted)
        await expectTampered("deleted entry")
        // Reordered: the first two entries swapped.
        var reordered = Array(bytes[..<entries[0].offset])
        reordered += bytes[span(entries[1])] + bytes[span(entries[0])]
        reordered += bytes[entries[1].offset + 5 + entries[1].length..<bytes.count]
        try write(reordered)
        await expectTampered("reordered entries")
        // Truncated inside the last checkpoint: the last batch never finished, so readers see
        // the first batch only; its checkpoint still verifies.
        try write(Array(bytes.dropLast(10)))
        #expect(try await open(create: false).verify().size == 4)
        // A checkpoint removed with its batch's entries left in place: entries after the last
        // checkpoint are an unfinished batch, and a writer cuts them off on its next append.
        let log = try await open(create: false)
        _ = try await log.append(LogFixtures.entry(100))
        #expect(try await log.verify().size == 5)
        // An extra entry record forged into the middle of a batch.
        try write(bytes)
        var forged = bytes
        let extra = Array(bytes[span(entries[0])])
        forged.insert(contentsOf: extra, at: entries[2].offset)
        try write(forged)
        await expectTampered("inserted entry")
    }

    /// A batch the file refuses leaves the tree in memory as the file is: the next append's
    /// checkpoint, and a fresh reading of the file, cover exactly the entries written.
    @Test func aRefusedBatchLeavesNoLeafBehind() async throws {
        let storage = try await FileLogStorage.open(
            path: path, unlock: LogFixtures.unlock, create: true, origin: LogFixtures.origin)
        let log = try OperationLog(storage: storage)
        try await fill(log, batches: [3])
        await #expect(throws: LogError(.invalidParameter, "")) {
            try await storage.append([[1, 2, 3], [UInt8](repeating: 0, count: EntryCodec.maxBytes + 1)])
        }
        #expect(try await log.size() == 3)
        _ = try await log.append(LogFixtures.entry(3))
        #expect(try await log.verify().size == 4)
        #expect(try await open(create: false).verify().size == 4)
    }

    @Test func aCheckpointWithABadSignatureIsCaught() async throws {
        try await fill(try await open(), batches: [3])
        let (bytes, records) = try records()
        let checkpoint = records.last!
        var edited = bytes
        edited[checkpoint.offset + 4 + checkpoint.length - 3] ^= 0x02
        try write(edited)
        await expectTampered("checkpoint signature")
    }

    @Test func entriesAreRefusedBeforeTheyAreWritten() async throws {
        let log = try await open()
        var bad = LogFixtures.entry(1)
        bad.operation = "up load"
        await #expect(throws: LogError(.invalidParameter, "")) { try await log.append(bad) }
        bad = LogFixtures.entry(1)
        bad.error = "an error on success"
        await #expect(throws: LogError(.invalidParameter, "")) { try await log.append(bad) }
        bad = LogFixtures.entry(1)
        bad.entityID = String(repeating: "x", count: 1025)
        await #expect(throws: LogError(.invalidParameter, "")) { try await log.append(bad) }
        bad = LogFixtures.entry(1)
        bad.time = -1
        await #expect(throws: LogError(.invalidParameter, "")) { try await log.append(bad) }
        #expect(try await log.size() == 0)
        #expect(try await log.verify().size == 0)
    }
}
