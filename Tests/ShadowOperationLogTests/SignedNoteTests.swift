import Foundation
import ShadowCore
import ShadowOperationLog
import ShadowTestSupport
import Testing

/// C2SP signed-note and tlog-checkpoint, against the golang.org/x/mod/sumdb/note example
/// (TestVectors/c2sp/signed-note-go.json).
@Suite struct SignedNoteTests {
    struct Vector: Decodable {
        let signerKey: String
        let verifierKey: String
        let text: String
        let note: String
    }

    let vector: Vector

    init() throws {
        vector = try JSONDecoder().decode(Vector.self, from: Data(PackagePaths.vector("c2sp/signed-note-go.json")))
    }

    @Test func signerReproducesThePublishedNote() throws {
        let signer = try NoteSigner(encoded: vector.signerKey)
        #expect(signer.verifierKey == vector.verifierKey)
        // The description names the key, never its private part (the seed is in the vector's key).
        let seed = String(vector.signerKey.split(separator: "+").last!)
        #expect(!"\(signer)".contains(seed) && "\(signer)".contains("redacted"))
        #expect(try signer.sign(vector.text) == vector.note)
    }

    @Test func verifierOpensThePublishedNote() throws {
        let verifier = try NoteVerifier(encoded: vector.verifierKey)
        #expect(verifier.name == "PeterNeumann")
        #expect(verifier.keyID == 0xc74f_20a3)
        #expect(try SignedNote.open(vector.note, verifiers: [verifier]) == vector.text)
    }

    @Test func changedNotesAreRefused() throws {
        let verifier = try NoteVerifier(encoded: vector.verifierKey)
        let changed = [
            vector.note.replacingOccurrences(of: "cryptography", with: "cryptographY"),
            vector.note.replacingOccurrences(of: "x08go", with: "x08gp"),
            String(vector.note.dropLast()),  // no final newline
            vector.note.replacingOccurrences(of: "\n\n", with: "\n"),  // no blank line
            vector.note.replacingOccurrences(of: "\u{2014} ", with: "- "),
            vector.note.replacingOccurrences(of: "problem,", with: "problem,\u{7}"),
            vector.text + "\n",  // no signature
        ]
        for note in changed {
            #expect(throws: LogError.self, "\(note.debugDescription)") {
                try SignedNote.open(note, verifiers: [verifier])
            }
        }
    }

    /// Key names are checked and split scalar by scalar and byte by byte: a `+` or a space
    /// followed by a combining mark is one Character, equal to neither.
    @Test func keyNamesAreReadByTheirScalars() throws {
        let seed = [UInt8](repeating: 5, count: 32)
        for name in ["a+\u{301}b", "a \u{301}b", "a\u{2003}b"] {
            #expect(throws: LogError.self, "\(name.debugDescription)") { try NoteSigner(name: name, seed: seed) }
        }
        // A name may begin with a combining mark (C2SP signed-note forbids only spaces and '+'):
        // its keys and its notes read back.
        let signer = try NoteSigner(name: "\u{301}log.example", seed: seed)
        let verifier = try NoteVerifier(encoded: signer.verifierKey)
        #expect(verifier.name.utf8.elementsEqual("\u{301}log.example".utf8) && verifier.keyID == signer.keyID)
        #expect(try SignedNote.open(try signer.sign("text\n"), verifiers: [verifier]) == "text\n")
        let encoded =
            "PRIVATE+KEY+\u{301}log.example+" + String(signer.verifierKey.split(separator: "+")[1]) + "+"
            + Base64.encode([0x01] + seed)
        #expect(try NoteSigner(encoded: encoded).verifierKey == signer.verifierKey)
    }

    /// A signature line names its key by the name's bytes: the same signature under another
    /// spelling of the name (decomposed where the key's is precomposed) is not that key's.
    @Test func aSignatureLineMatchesItsKeyByTheNamesBytes() throws {
        let signer = try NoteSigner(name: "caf\u{E9}.example", seed: [UInt8](repeating: 9, count: 32))
        let verifier = try NoteVerifier(encoded: signer.verifierKey)
        let note = try signer.sign("text\n")
        #expect(try SignedNote.open(note, verifiers: [verifier]) == "text\n")
        let respelled = note.replacingOccurrences(of: "caf\u{E9}.example", with: "cafe\u{301}.example")
        #expect(!respelled.utf8.elementsEqual(note.utf8))
        #expect(throws: LogError.self) { try SignedNote.open(respelled, verifiers: [verifier]) }
    }

    @Test func unknownKeysAreIgnoredButOneKnownKeyMustSign() throws {
        let verifier = try NoteVerifier(encoded: vector.verifierKey)
        let other = try NoteSigner(name: "example.com/other", seed: [UInt8](repeating: 7, count: 32))
        // A second signature by an unknown key does not matter.
        let signedTwice = vector.note + (try other.sign(vector.text)).split(separator: "\n").last! + "\n"
        #expect(try SignedNote.open(signedTwice, verifiers: [verifier]) == vector.text)
        // Only an unknown key signed: refused.
        #expect(throws: LogError(.badCheckpoint, "")) {
            try SignedNote.open(try other.sign(vector.text), verifiers: [verifier])
        }
        // A known name with a different key ID is another key: ignored, so nothing trusted signed.
        let impostor = try NoteSigner(name: "PeterNeumann", seed: [UInt8](repeating: 9, count: 32))
        #expect(throws: LogError(.badCheckpoint, "")) {
            try SignedNote.open(try impostor.sign(vector.text), verifiers: [verifier])
        }
    }

    @Test func malformedKeysAreRefused() {
        let key = vector.verifierKey
        for bad in [
            "", "PeterNeumann", key.replacingOccurrences(of: "c74f20a3", with: "c74f20a4"),
            key.replacingOccurrences(of: "c74f20a3", with: "C74F20A3"),
            "Peter Neumann+c74f20a3+" + key.split(separator: "+")[2],
            key.replacingOccurrences(of: "+ARpc", with: "+AhRpc"), String(key.dropLast(4)),
        ] {
            #expect(throws: LogError.self, "\(bad)") { try NoteVerifier(encoded: bad) }
        }
        // Fullwidth digits and letters are hex digits to Character, not to the format.
        let fullwidth = key.replacingOccurrences(of: "c74f20a3", with: "\u{FF43}74\u{FF46}20\u{FF41}3")
        let error = #expect(throws: LogError.self) { try NoteVerifier(encoded: fullwidth) }
        #expect(error?.reason == "a verifier key's key ID is 8 lowercase hex digits")
    }

    @Test func checkpointTextRoundTripsAndIsStrict() throws {
        let root = TreeHash.leaf([1, 2, 3])
        let checkpoint = try Checkpoint(origin: "example.com/log", size: 42, root: root, extensions: ["x y"])
        #expect(checkpoint.text == "example.com/log\n42\n\(root.base64)\nx y\n")
        #expect(try Checkpoint(text: checkpoint.text) == checkpoint)
        for bad in [
            "example.com/log\n042\n\(root.base64)\n", "example.com/log\n-1\n\(root.base64)\n",
            "example.com/log\n42\n\(root.base64)", "example.com/log\n42\n\(String(root.base64.dropLast(2)))\n",
            "example.com/log\n9223372036854775808\n\(root.base64)\n", "\n42\n\(root.base64)\n", "example.com/log\n42\n",
            "example.com/log\n+42\n\(root.base64)\n",
        ] {
            #expect(throws: LogError(.badCheckpoint, ""), "\(bad.debugDescription)") { try Checkpoint(text: bad) }
        }
    }

    /// An origin or extension is one line by its bytes: CR LF, which a String holds as one
    /// character that is not "\n", is refused like any other control character, so no checkpoint
    /// text is written that another reader splits into other lines.
    @Test func aCheckpointLineHoldsNoControlCharacter() throws {
        let root = TreeHash.leaf([1])
        for origin in ["a\r\nb", "a\nb", "a\rb", "a\u{0}b", "a\tb", ""] {
            #expect(throws: LogError(.invalidParameter, ""), "\(origin.debugDescription)") {
                try Checkpoint(origin: origin, size: 1, root: root)
            }
            if !origin.isEmpty {
                #expect(throws: LogError(.invalidParameter, ""), "\(origin.debugDescription)") {
                    try Checkpoint(origin: "example.com/log", size: 1, root: root, extensions: [origin])
                }
            }
        }
        #expect(try Checkpoint(origin: "example.com/l\u{7F}g", size: 1, root: root).origin == "example.com/l\u{7F}g")
    }
}
