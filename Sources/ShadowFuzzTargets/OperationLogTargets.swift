#if canImport(Darwin)
import Darwin
#else
import Glibc
#endif
import ShadowCore
import ShadowOperationLog
import ShadowVault

enum OperationLogTargets {
    static let keys = must("the fixed log keys") { try LogKeys(secret: [UInt8](repeating: 0x42, count: 32)) }
    static let verifier = must("the fixed note signer") { try keys.signer(origin: "example.com/fuzz").verifier }
    static let unlock = VaultUnlock.key(SecretBytes([UInt8](repeating: 7, count: 32)))
    static let path = "/tmp/shadow-keys-fuzz-oplog-\(getpid())"

    /// The first byte picks the reader: 0 entry bytes (the quick check and the full decode agree;
    /// opened with a fixed key, re-sealed and read back to the same entry), 1 a signed note, and
    /// its text as a checkpoint (round trip), 2 a witness file's lines, authenticated here (one
    /// that reads is written back to the same bytes), 3 a whole log file (opened with a fixed
    /// key; its tree and checkpoints checked).
    static let oplog: FuzzTargets.Harness = { data in
        let input = Input(data)
        switch input.mode % 4 {
        case 0:
            let checked = (try? EntryCodec.check(input.rest)) != nil
            precondition(checked == ((try? EntryCodec.decode(input.rest)) != nil), "check and decode disagree")
            let verified = (try? EntryCodec.verify(input.rest, keys: keys)) != nil
            let opened = try? EntryCodec.open(try EntryCodec.decode(input.rest), keys: keys)
            precondition(verified == (opened != nil), "verify and decode-then-open disagree")
            guard let stored = try? EntryCodec.decode(input.rest) else { return }
            precondition(TreeHash.leaf(input.rest) == stored.leafHash)
            guard let entry = try? EntryCodec.open(stored, keys: keys) else { return }
            let again = must("re-sealing an entry that opened") {
                try EntryCodec.encode(entry, keys: keys, nonce: [UInt8](repeating: 1, count: 12))
            }
            precondition(
                must("reading it back") { try EntryCodec.open(try EntryCodec.decode(again), keys: keys) } == entry)
        case 1:
            // A signature cannot be forged, so the checkpoint reader also gets the bytes as note text.
            let note = String(decoding: input.rest, as: UTF8.self)
            let text = (try? SignedNote.open(note, verifiers: [verifier])) ?? note
            guard let checkpoint = try? Checkpoint(text: text) else { return }
            precondition(checkpoint.text == text, "a checkpoint's text changed in a round trip")
        case 2:
            // The bytes are a witness file's lines before its MAC line, authenticated here with
            // the log's key (a MAC cannot be guessed), so the reader's field checks are reached.
            let file = path + ".witness"
            defer { unlink(file) }
            let mac = keys.witnessMAC(input.rest[...])
            let bytes = Array(input.rest) + Array("mac \(Base64.encode(mac))\n".utf8)
            guard (try? Files.writeAtomically(file, bytes)) != nil else { return }
            let witness = Witness(path: file, keys: keys)
            guard let record = try? witness.read() else { return }
            must("writing a witness record back") { try witness.write(record) }
            let written = must("reading the file written") { try Files.read(file, limit: 1 << 16) }
            precondition(written == bytes, "a witness file read is not the file its record writes")
        default:
            defer {
                unlink(path)
                unlink(path + ".lock")
            }
            guard (try? Files.writeAtomically(path, input.rest)) != nil else { return }
            guard let storage = try? FileLogStorage.openSync(path: path, unlock: unlock) else { return }
            _ = storage.size
        }
    }
}
