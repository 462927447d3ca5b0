import Crypto
import Foundation
import ShadowCore
import ShadowOperationLog
import ShadowTestSupport
import ShadowVault
import Testing

/// TestVectors/shadow/oplog/vectors.json, made by an independent implementation of
/// Docs/operation-log.md (Scripts/generate-oplog-vectors).
@Suite struct OperationLogVectorTests {
    struct Vectors: Decodable {
        struct Entry: Decodable {
            let operation: String
            let provider: String
            let entityType: String
            let entityId: String
            let time: Int64
            let success: Bool
            let error: String?
            let detailsJSON: String?
            let nonce: String
            let entityHash: String
            let bytes: String
            let leafHash: String
        }
        struct Note: Decodable {
            let size: UInt64
            let root: String
            let text: String
            let note: String
        }
        struct Invalid: Decodable {
            let reason: String
            let bytes: String
            let needsKey: Bool?
        }
        let key: String
        let secret: String
        let origin: String
        let verifierKey: String
        let entries: [Entry]
        let checkpoints: [Note]
        let logFile: String
        let prunedLogFile: String
        let prunedCheckpoint: Note
        let erasedLogFiles: [String]
        let witnessFile: String
        let invalidEntries: [Invalid]
        let emptyRoot: String
    }

    let vectors: Vectors
    let keys: LogKeys
    let directory: TemporaryDirectory

    init() throws {
        vectors = try JSONDecoder().decode(Vectors.self, from: Data(PackagePaths.vector("shadow/oplog/vectors.json")))
        keys = try LogKeys(secret: try Hex.decode(vectors.secret))
        directory = try TemporaryDirectory()
    }

    func entry(_ vector: Vectors.Entry) throws -> OperationEntry {
        var details: JSONObject?
        if let json = vector.detailsJSON {
            guard case .object(let object) = try StrictJSON.parse(json) else { throw LogError(.invalidParameter, "") }
            details = object
        }
        return OperationEntry(
            operation: vector.operation, provider: vector.provider, entityType: vector.entityType,
            entityID: vector.entityId, time: vector.time, success: vector.success, error: vector.error,
            details: details)
    }

    @Test func entriesEncodeDecodeAndOpenAsGiven() throws {
        #expect(vectors.entries.count == 5)
        for vector in vectors.entries {
            let bytes = try Hex.decode(vector.bytes)
            let expected = try entry(vector)
            #expect(try EntryCodec.encode(expected, keys: keys, nonce: try Hex.decode(vector.nonce)) == bytes)
            let stored = try EntryCodec.decode(bytes)
            try EntryCodec.check(bytes)
            #expect(Hex.encode(stored.entityHash) == vector.entityHash)
            #expect(stored.leafHash.hex == vector.leafHash)
            #expect(try EntryCodec.open(stored, keys: keys) == expected)
            #expect(Hex.encode(keys.entityHash(vector.entityId)) == vector.entityHash)
        }
    }

    @Test func invalidEntriesAreRefused() throws {
        #expect(vectors.invalidEntries.count == 13)
        for vector in vectors.invalidEntries {
            let bytes = try Hex.decode(vector.bytes)
            if vector.needsKey == true {
                #expect(throws: LogError(.tampered, ""), "\(vector.reason)") {
                    try EntryCodec.open(try EntryCodec.decode(bytes), keys: keys)
                }
            } else {
                #expect(throws: LogError(.tampered, ""), "\(vector.reason)") { try EntryCodec.decode(bytes) }
                #expect(throws: LogError(.tampered, ""), "\(vector.reason)") { try EntryCodec.check(bytes) }
            }
        }
    }

    /// A log whose entry keeps every clear rule but whose sealed part does not open, breaks its
    /// rules, or does not match its entity hash (a writer without the right key) is refused by
    /// `verify`, which opens every sealed part, as `entry(at:)` refuses it.
    @Test func verifyOpensEverySealedPart() async throws {
        let key = VaultUnlock.key(SecretBytes(try Hex.decode(vectors.key)))
        for (number, vector) in vectors.invalidEntries.enumerated() where vector.needsKey == true {
            let path = try directory.write("sealed-\(number)", Data(try Hex.decode(vectors.logFile)))
            let storage = try await FileLogStorage.open(path: path, unlock: key)
            _ = try await storage.append([try Hex.decode(vector.bytes)])
            let log = try OperationLog(storage: storage)
            await #expect(throws: LogError(.tampered, ""), "\(vector.reason)") { _ = try await log.verify() }
            await #expect(throws: LogError(.tampered, ""), "\(vector.reason)") { _ = try await log.entry(at: 5) }
        }
    }

    @Test func theSignerMakesTheSameCheckpoints() throws {
        let signer = try keys.signer(origin: vectors.origin)
        #expect(signer.verifierKey == vectors.verifierKey)
        for vector in vectors.checkpoints {
            let checkpoint = try Checkpoint(
                origin: vectors.origin, size: vector.size, root: try #require(TreeHash(bytes: Hex.decode(vector.root))))
            #expect(checkpoint.text == vector.text)
            #expect(try signer.sign(checkpoint.text) == vector.note)
            let verifier = try NoteVerifier(encoded: vectors.verifierKey)
            #expect(try SignedNote.open(vector.note, verifiers: [verifier]) == vector.text)
        }
        #expect(TreeHash.empty.hex == vectors.emptyRoot)
    }

    @Test func theLogFilesReadAndVerify() async throws {
        let key = VaultUnlock.key(SecretBytes(try Hex.decode(vectors.key)))
        for (name, file, pruned, note, count) in [
            ("log", vectors.logFile, UInt64(0), vectors.checkpoints.last?.note, 2),
            ("pruned", vectors.prunedLogFile, 2, vectors.prunedCheckpoint.note, 3),
        ] {
            let path = try directory.write(name, Data(try Hex.decode(file)))
            let log = try OperationLog(storage: try await FileLogStorage.open(path: path, unlock: key))
            let report = try await log.verify()
            #expect(report.size == 5 && report.pruned == pruned && report.checkpoints == count)
            #expect(report.root.hex == vectors.checkpoints.last?.root)
            #expect(try await log.checkpoint().note == note)
            #expect(try await log.checkpoint().checkpoint.prunedBefore == pruned)
            for (index, vector) in vectors.entries.enumerated() where UInt64(index) >= pruned {
                #expect(try await log.entry(at: UInt64(index)) == entry(vector))
            }
        }
    }

    /// An entry replaced by its leaf hash past the signed pruned boundary (or with none signed) is
    /// selective erasure: refused by verify and by a read of it.
    @Test func erasedEntriesAreTampering() async throws {
        let key = VaultUnlock.key(SecretBytes(try Hex.decode(vectors.key)))
        for (number, file) in vectors.erasedLogFiles.enumerated() {
            let path = try directory.write("erased-\(number)", Data(try Hex.decode(file)))
            let log = try OperationLog(storage: try await FileLogStorage.open(path: path, unlock: key))
            await #expect(throws: LogError(.tampered, ""), "file \(number)") { _ = try await log.verify() }
        }
    }

    @Test func thePrunedCheckpointIsSignedAsTheDocumentSays() throws {
        let signer = try keys.signer(origin: vectors.origin)
        let vector = vectors.prunedCheckpoint
        let checkpoint = try Checkpoint(
            origin: vectors.origin, size: vector.size, root: try #require(TreeHash(bytes: try Hex.decode(vector.root))),
            prunedBefore: 2)
        #expect(checkpoint.text == vector.text)
        #expect(try SignedCheckpoint(checkpoint: checkpoint, signer: signer).note == vector.note)
        #expect(try Checkpoint(text: vector.text) == checkpoint)
        #expect(throws: LogError.self) {
            try Checkpoint(origin: "o", size: 1, root: checkpoint.root, extensions: ["pruned \u{301}1"])
        }
        for size in ["+5", "05", "\u{FF15}"] {
            let text = vector.text.replacingOccurrences(of: "\n\(vector.size)\n", with: "\n\(size)\n")
            #expect(text != vector.text)
            #expect(throws: LogError.self, "\(size)") { try Checkpoint(text: text) }
        }
        // A line that begins with the bytes `pruned ` is the pruned line, whatever follows (a
        // combining mark after the space made it an ordinary extension to `hasPrefix`).
        for bad in [
            "pruned 0\n", "pruned 6\n", "pruned 02\n", "pruned 2\nextra\n", "pruned x\n", "pruned \u{301}2\n",
            "pruned +2\n", "pruned \u{301}2\nextra\n",
        ] {
            let text = vector.text.replacingOccurrences(of: "pruned 2\n", with: bad)
            #expect(throws: LogError.self, "\(bad)") { try Checkpoint(text: text) }
        }
    }

    @Test func theWitnessFileReads() throws {
        let path = try directory.write("witness", vectors.witnessFile)
        let record = try #require(try Witness(path: path, keys: keys).read())
        #expect(record.origin == vectors.origin && record.size == 5)
        #expect(record.root.hex == vectors.checkpoints.last?.root)
        #expect(record.vault == VaultMark(id: "00112233445566778899aabbccddeeff", generation: 7))
        #expect(record.state?.count == 3)
        // Written back, it is the same bytes.
        try Witness(path: path, keys: keys).write(record)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == vectors.witnessFile)
    }

    /// A witness file is read as written, by its bytes (Docs/operation-log.md, "The witness"): the
    /// vector's lines changed and authenticated again with the witness key (derived here as the
    /// document says) are refused. `UInt64` took `+5`, and the lines were read in any order and
    /// split by Character.
    @Test func aWitnessFileIsReadOnlyAsWritten() throws {
        let witnessKey = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: try Hex.decode(vectors.secret)),
            info: Array("shadow-keys oplog v1 witness".utf8), outputByteCount: 32)
        func authenticated(_ body: String) -> String {
            let mac = HMAC<SHA256>.authenticationCode(for: Array(body.utf8), using: witnessKey)
            return body + "mac " + Data(mac).base64EncodedString() + "\n"
        }
        let lines = vectors.witnessFile.split(separator: "\n").map(String.init)
        let body = lines.dropLast().map { $0 + "\n" }.joined()
        // The key derived from the document opens the vector as it is.
        #expect(authenticated(body) == vectors.witnessFile)
        let path = directory.path + "/edited-witness"
        var edits = [
            ("size 5", "size +5"), ("size 5", "size 05"), ("vault 0011", "vault +011"), (" 7\n", " +7\n"),
            ("00112233445566778899aabbccddeeff", "00112233445566778899AABBCCDDEEFF"), ("state 3", "state +3"),
            ("state 3 50d8", "state 3 50D8"), ("origin ", "origin  "), ("size 5\n", "size 5 \n"),
            ("\nsize", "\r\nsize"),
        ].map { body.replacingOccurrences(of: $0.0, with: $0.1) }
        // The vault line before the size line; the state line twice.
        edits.append(
            lines[0] + "\n" + lines[1] + "\n" + lines[4] + "\n" + lines[2] + "\n" + lines[3] + "\n" + lines[5] + "\n")
        edits.append(body + lines[5] + "\n")
        for edited in edits {
            #expect(edited != body)
            try Data(authenticated(edited).utf8).write(to: URL(fileURLWithPath: path))
            #expect(throws: LogError(.tampered, ""), "\(edited.debugDescription)") {
                try Witness(path: path, keys: keys).read()
            }
        }
        // The writer refuses what the reader would.
        let record = try #require(try Witness(path: path + "-vector", keys: keys).readVector(vectors.witnessFile))
        for bad in [
            WitnessRecord(origin: "two words", size: 1, root: record.root),
            WitnessRecord(
                origin: record.origin, size: 1, root: record.root,
                vault: VaultMark(id: "00112233445566778899AABBCCDDEEFF", generation: 1)),
            WitnessRecord(
                origin: record.origin, size: 1, root: record.root,
                state: StateMark(count: -1, last: Array(repeating: 0, count: 32))),
        ] {
            #expect(throws: LogError(.invalidParameter, "")) { try Witness(path: path + "-bad", keys: keys).write(bad) }
        }
        #expect(!FileManager.default.fileExists(atPath: path + "-bad"))
    }
}

extension Witness {
    /// The record of `text`, written to this witness's path and read back.
    fileprivate func readVector(_ text: String) throws -> WitnessRecord? {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return try read()
    }
}
