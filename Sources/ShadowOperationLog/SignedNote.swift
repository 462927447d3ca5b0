import Crypto
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import ShadowCore

/// An Ed25519 key that signs notes (C2SP signed-note, signature type 0x01).
public struct NoteSigner: Sendable, CustomStringConvertible {
    /// The key name: what the signature line names.
    public let name: String
    let key: Curve25519.Signing.PrivateKey

    /// A signer from a 32-byte Ed25519 seed (RFC 8032's private key).
    public init(name: String, seed: some DataProtocol) throws {
        try NoteKeys.checkName(name)
        guard seed.count == 32 else { throw NoteKeys.invalid("an Ed25519 seed is 32 bytes, not \(seed.count)") }
        self.name = name
        key = try Curve25519.Signing.PrivateKey(rawRepresentation: Array(seed))
        verifier = NoteVerifier(name: name, publicKey: Array(key.publicKey.rawRepresentation))
    }

    /// A signer from its encoded form, `PRIVATE+KEY+<name>+<key ID, 8 hex digits>+<base64(0x01 ‖ seed)>`
    /// (the form golang.org/x/mod/sumdb/note reads and writes).
    public init(encoded: String) throws {
        let prefix = "PRIVATE+KEY+"
        guard encoded.utf8.starts(with: prefix.utf8) else {
            throw NoteKeys.invalid("a signer key starts with \(prefix)")
        }
        let rest = Substring(encoded.utf8.dropFirst(prefix.utf8.count))
        let (name, material) = try NoteKeys.split(String(rest), what: "signer key")
        try self.init(name: name, seed: material)
        guard NoteKeys.formatID(keyID) == NoteKeys.idField(rest) else {
            throw NoteKeys.invalid("the signer key's ID does not match its name and key")
        }
    }

    public var description: String { "NoteSigner(\(verifierKey), private key redacted)" }

    /// SHA-256(name ‖ 0x0A ‖ 0x01 ‖ public key)[:4], big-endian.
    public var keyID: UInt32 { NoteKeys.keyID(name: name, publicKey: key.publicKey.rawRepresentation) }

    /// The verifier key others configure: `<name>+<key ID>+<base64(0x01 ‖ public key)>`.
    public var verifierKey: String {
        "\(name)+\(NoteKeys.formatID(keyID))+\(Base64.encode([0x01] + key.publicKey.rawRepresentation))"
    }

    /// The verifier for this key.
    public let verifier: NoteVerifier

    /// The signed note of `text` (which must end in a newline): the text, a blank line, one signature line.
    public func sign(_ text: String) throws -> String {
        try SignedNote.checkText(text)
        let signature = try key.signature(for: Array(text.utf8))
        return text + "\n" + SignedNote.signatureLine(name: name, keyID: keyID, signature: Array(signature)) + "\n"
    }
}

/// A trusted Ed25519 note key.
public struct NoteVerifier: Sendable, Hashable {
    public let name: String
    public let keyID: UInt32
    let publicKey: [UInt8]

    /// Parses `<name>+<key ID, 8 lowercase hex digits>+<base64(0x01 ‖ 32-byte public key)>`; the ID
    /// must be the one the name and key give.
    public init(encoded: String) throws {
        let (name, material) = try NoteKeys.split(encoded, what: "verifier key")
        guard material.count == 32 else { throw NoteKeys.invalid("an Ed25519 public key is 32 bytes") }
        guard (try? Curve25519.Signing.PublicKey(rawRepresentation: material)) != nil else {
            throw NoteKeys.invalid("the verifier key is not an Ed25519 public key")
        }
        self.name = name
        publicKey = material
        keyID = NoteKeys.keyID(name: name, publicKey: material)
        guard NoteKeys.formatID(keyID) == NoteKeys.idField(encoded[...]) else {
            throw NoteKeys.invalid("the verifier key's ID does not match its name and key")
        }
    }

    /// The verifier of a key this process holds (a signer's own): already a valid key.
    init(name: String, publicKey: [UInt8]) {
        self.name = name
        self.publicKey = publicKey
        keyID = NoteKeys.keyID(name: name, publicKey: publicKey)
    }

    /// The encoded form.
    public var encoded: String { "\(name)+\(NoteKeys.formatID(keyID))+\(Base64.encode([0x01] + publicKey))" }

    func verifies(_ signature: ArraySlice<UInt8>, text: [UInt8]) -> Bool {
        guard signature.count == 64, let key = try? Curve25519.Signing.PublicKey(rawRepresentation: publicKey) else {
            return false
        }
        return key.isValidSignature(signature, for: text)
    }
}

/// C2SP signed-note: reading and checking notes.
public enum SignedNote {
    /// The largest note read.
    public static let maxBytes = 64 << 10
    /// The most signature lines read (the format asks verifiers to accept at least 16).
    public static let maxSignatures = 64

    /// Checks `note` against `verifiers` and returns its text (ending in a newline).
    ///
    /// Signatures by unknown keys (name and ID not both matching a verifier) are ignored; a
    /// signature by a known key that does not verify rejects the note; at least one known key
    /// must have signed.
    /// - Throws: ``LogErrorCode/badCheckpoint`` naming the rule that failed.
    public static func open(_ note: String, verifiers: [NoteVerifier]) throws -> String {
        let bytes = Array(note.utf8)
        guard bytes.count <= maxBytes else { throw bad("the note is over \(maxBytes) bytes") }
        for scalar in note.unicodeScalars where scalar.value < 0x20 && scalar != "\n" {
            throw bad("the note holds a control character")
        }
        guard bytes.last == 0x0A else { throw bad("the note does not end in a newline") }
        // The text ends at the last blank line: find the last "\n\n".
        var split: Int?
        var index = bytes.count - 2
        while index >= 0 {
            if bytes[index] == 0x0A, index + 1 < bytes.count, bytes[index + 1] == 0x0A {
                split = index
                break
            }
            index -= 1
        }
        guard let split else { throw bad("the note has no blank line before its signatures") }
        let text = Array(bytes[...split])
        let lines = bytes[(split + 2)...].split(separator: 0x0A, omittingEmptySubsequences: false).dropLast()
        guard !lines.isEmpty else { throw bad("the note has no signature") }
        guard lines.count <= maxSignatures else { throw bad("the note has over \(maxSignatures) signatures") }
        var verified = false
        for line in lines {
            let (name, keyID, signature) = try parseSignatureLine(String(decoding: line, as: UTF8.self))
            for verifier in verifiers where verifier.name.exactlyEquals(name) && verifier.keyID == keyID {
                guard verifier.verifies(signature[...], text: text) else {
                    throw bad("the signature by \(name) does not verify")
                }
                verified = true
            }
        }
        guard verified else { throw bad("no trusted key signed the note") }
        return String(decoding: text, as: UTF8.self)
    }

    /// `— <name> <base64(key ID ‖ signature)>`
    static func signatureLine(name: String, keyID: UInt32, signature: [UInt8]) -> String {
        "\u{2014} \(name) \(Base64.encode(BigEndian.bytes(keyID) + signature))"
    }

    static func parseSignatureLine(_ line: String) throws -> (name: String, keyID: UInt32, signature: [UInt8]) {
        // By bytes: a key name may begin with a combining mark, which a Character holds with
        // the space before it.
        let prefix = "\u{2014} ".utf8
        guard line.utf8.starts(with: prefix) else {
            throw bad("a signature line does not start with an em dash and a space")
        }
        let fields = Substring(line.utf8.dropFirst(prefix.count)).split(
            byte: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard fields.count == 2 else { throw bad("a signature line is not a key name and a signature") }
        try NoteKeys.checkName(String(fields[0]))
        guard let blob = Base64.decode(fields[1]), blob.count > 4 else {
            throw bad("a signature is not base64 of a key ID and a signature")
        }
        let keyID = blob[0..<4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return (String(fields[0]), keyID, Array(blob[4...]))
    }

    /// A note text is non-empty UTF-8 ending in a newline, without other control characters.
    static func checkText(_ text: String) throws {
        guard text.hasSuffix("\n") else { throw LogError(.invalidParameter, "a note's text ends in a newline") }
        for scalar in text.unicodeScalars where scalar.value < 0x20 && scalar != "\n" {
            throw LogError(.invalidParameter, "a note's text holds a control character")
        }
    }

    static func bad(_ reason: String) -> LogError { LogError(.badCheckpoint, reason) }
}

enum NoteKeys {
    /// Key names are non-empty, without '+' or any space, checked scalar by scalar (a `+` or a
    /// space followed by a combining mark is one Character, and not equal to either).
    static func checkName(_ name: String) throws {
        guard !name.isEmpty, name.utf8.count <= 256 else { throw invalid("a key name is 1 to 256 bytes") }
        for scalar in name.unicodeScalars where scalar == "+" || scalar.properties.isWhitespace {
            throw invalid("a key name holds no '+' and no space")
        }
        for scalar in name.unicodeScalars where scalar.value < 0x20 || scalar.value == 0x7F {
            throw invalid("a key name holds no control character")
        }
    }

    static func keyID(name: String, publicKey: some DataProtocol) -> UInt32 {
        var hasher = SHA256()
        hasher.update(data: Array(name.utf8) + [0x0A, 0x01])
        hasher.update(data: publicKey)
        return hasher.finalize().prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    static func formatID(_ id: UInt32) -> String {
        let hex = String(id, radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }

    /// The ID field of `name+id+material`.
    static func idField(_ encoded: Substring) -> Substring {
        let parts = encoded.split(byte: UInt8(ascii: "+"), maxSplits: 2, omittingEmptySubsequences: false)
        return parts.count == 3 ? parts[1] : ""
    }

    /// `name+id+base64(0x01 ‖ material)`: the name and the key material (type byte removed).
    static func split(_ encoded: String, what: String) throws -> (String, [UInt8]) {
        let parts = encoded.split(byte: UInt8(ascii: "+"), maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw invalid("a \(what) is <name>+<key ID>+<base64 key>") }
        try checkName(String(parts[0]))
        // By bytes: Character.isHexDigit also holds for the fullwidth forms of the digits and letters.
        guard parts[1].utf8.count == 8,
            parts[1].utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else {
            throw invalid("a \(what)'s key ID is 8 lowercase hex digits")
        }
        guard let material = Base64.decode(parts[2]), material.first == 0x01 else {
            throw invalid("a \(what) is not an Ed25519 key (type 0x01) in base64")
        }
        return (String(parts[0]), Array(material.dropFirst()))
    }

    static func invalid(_ reason: String) -> LogError { LogError(.invalidParameter, reason) }
}

/// A C2SP tlog-checkpoint: the note text `<origin>\n<size>\n<base64 root>\n` and any extension lines.
public struct Checkpoint: Sendable, Hashable {
    public let origin: String
    public let size: UInt64
    public let root: TreeHash
    public let extensions: [String]

    /// The pruned boundary this checkpoint signs (Docs/operation-log.md, "Pruning"): entries
    /// before it may have lost their bytes; every entry from it on must still have them. 0 (no
    /// extension line) when nothing was pruned.
    public let prunedBefore: UInt64

    /// A checkpoint; a non-zero `prunedBefore` (at most `size`) is written as the extension line
    /// `pruned <N>` after any others.
    public init(
        origin: String, size: UInt64, root: TreeHash, extensions: [String] = [], prunedBefore: UInt64 = 0
    ) throws {
        // By bytes: a String takes CR LF for one character, which contains("\n") does not find.
        func isLine(_ text: String) -> Bool { !text.isEmpty && !text.utf8.contains { $0 < 0x20 } }
        guard isLine(origin), origin.utf8.count <= 255 else {
            throw LogError(.invalidParameter, "a log origin is one line of 1 to 255 bytes without control characters")
        }
        guard size <= UInt64(Int64.max) else { throw LogError(.invalidParameter, "a tree size is at most 2^63 - 1") }
        for line in extensions where !isLine(line) || Self.isPrunedLine(line) {
            throw LogError(
                .invalidParameter,
                "a checkpoint extension is one non-empty line without control characters (the pruned line aside)")
        }
        guard prunedBefore <= size else {
            throw LogError(.invalidParameter, "the pruned boundary \(prunedBefore) is past the tree's \(size) entries")
        }
        (self.origin, self.size, self.root, self.extensions) = (origin, size, root, extensions)
        self.prunedBefore = prunedBefore
    }

    static let prunedPrefix = "pruned "

    /// Whether `line` begins with the bytes `pruned ` (by bytes: `hasPrefix` compares
    /// Characters, and `pruned ` followed by a combining mark is not that prefix as a String).
    static func isPrunedLine(_ line: some StringProtocol) -> Bool { line.utf8.starts(with: prunedPrefix.utf8) }

    /// The note text.
    public var text: String {
        let pruned = prunedBefore > 0 ? [Self.prunedPrefix + String(prunedBefore)] : []
        return ([origin, String(size), root.base64] + extensions + pruned).map { $0 + "\n" }.joined()
    }

    /// The value of 1 to 19 ASCII digits and nothing else (`UInt64` takes a sign).
    static func decimal(_ text: Substring) -> UInt64? {
        guard (1...19).contains(text.utf8.count), text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
            return nil
        }
        return UInt64(text)
    }

    /// Parses a checkpoint's note text (already opened with ``SignedNote/open(_:verifiers:)``).
    public init(text: String) throws {
        func bad(_ reason: String) -> LogError { LogError(.badCheckpoint, "the checkpoint: \(reason)") }
        guard text.hasSuffix("\n") else { throw bad("it does not end in a newline") }
        let lines = text.dropLast().split(byte: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        guard lines.count >= 3 else { throw bad("it has \(lines.count) lines, not at least 3") }
        let sizeText = lines[1]
        guard sizeText.utf8.elementsEqual("0".utf8) || sizeText.utf8.first != UInt8(ascii: "0"),
            let size = Self.decimal(sizeText), size <= UInt64(Int64.max)
        else { throw bad("the tree size is not a decimal number without leading zeros up to 2^63 - 1") }
        guard let root = TreeHash(base64: lines[2]) else { throw bad("the root is not base64 of 32 bytes") }
        var extensions = lines.dropFirst(3).map(String.init)
        var pruned: UInt64 = 0
        if let last = extensions.last, Self.isPrunedLine(last) {
            let digits = Substring(last.utf8.dropFirst(Self.prunedPrefix.utf8.count))
            guard digits.utf8.first != UInt8(ascii: "0"), let value = Self.decimal(digits), value >= 1, value <= size
            else { throw bad("the pruned line is not a number from 1 to the tree size") }
            pruned = value
            extensions.removeLast()
        }
        guard !extensions.contains(where: Self.isPrunedLine) else {
            throw bad("a pruned line that is not the last line")
        }
        do {
            try self.init(
                origin: String(lines[0]), size: size, root: root, extensions: extensions, prunedBefore: pruned)
        } catch let error as LogError {
            throw bad(error.reason)
        }
    }
}
