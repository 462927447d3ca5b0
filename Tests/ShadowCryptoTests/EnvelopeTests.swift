import Foundation
import ShadowCore
@testable import ShadowCrypto
import ShadowTestSupport
import Testing

@Suite struct EnvelopeTests {
    let kek = try! KeyEncryptionKey.raw(SecretBytes([UInt8](repeating: 7, count: 32)), id: "kek-a")
    let otherKEK = try! KeyEncryptionKey.raw(SecretBytes([UInt8](repeating: 9, count: 32)), id: "kek-b")
    let context: EnvelopeContext = ["profileId": "p1", "entityId": "e1", "entityType": "note", "version": "2"]

    /// Seeded, so a failure repeats exactly: every message below names the seed.
    static let seed: UInt64 = 0xE1_7E10
    private func random(_ count: Int, _ generator: inout SeededGenerator) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    private func expectCode(_ code: ShadowCryptoError.Code, _ body: () throws -> Void) {
        do {
            try body()
            Issue.record("expected \(code)")
        } catch let error as ShadowCryptoError {
            #expect(error.code == code, "\(error)")
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test(arguments: [0, 1, 31, 1000, 1 << 20])
    func recordsRoundTrip(size: Int) throws {
        var generator = SeededGenerator(seed: Self.seed)
        let plaintext = random(size, &generator)
        let envelope = try Envelope.seal(plaintext, kek: kek, context: context)
        #expect(envelope.count == 4 + 1 + 1 + 4 + 16 + 2 + 5 + 12 + 48 + 32 + size + 16)
        #expect(try Envelope.open(envelope, kek: kek, context: context) == plaintext)
        // Two seals of the same plaintext differ (fresh data key, object id, nonce).
        #expect(try Envelope.seal(plaintext, kek: kek, context: context) != envelope)
    }

    @Test func recordsAreLimitedToOneMebibyte() {
        expectCode(.invalidParameter) { _ = try Envelope.seal([UInt8](repeating: 0, count: (1 << 20) + 1), kek: kek) }
    }

    @Test(
        arguments: [(64, 0), (64, 1), (64, 64), (64, 65), (64, 640), (4096, 100_000), (65536, 200_001)] as [(Int, Int)])
    func streamsRoundTripWhateverTheSplits(chunkSize: Int, size: Int) throws {
        var generator = SeededGenerator(seed: Self.seed ^ UInt64(chunkSize) ^ UInt64(size) << 20)
        let plaintext = random(size, &generator)
        var encryptor = try EnvelopeStreamEncryptor(kek: kek, context: context, chunkSize: chunkSize)
        var envelope: [UInt8] = []
        var offset = 0
        while offset < plaintext.count {
            let step = Int.random(in: 1...max(1, chunkSize * 3), using: &generator)
            envelope += try encryptor.update(plaintext[offset..<min(plaintext.count, offset + step)])
            offset += step
        }
        envelope += try encryptor.finish()
        let chunks = max(1, (size + chunkSize - 1) / chunkSize)
        #expect(envelope.count == encryptor.header.count + size + 16 * chunks)
        var decryptor = EnvelopeStreamDecryptor(kek: kek, context: context)
        var opened: [UInt8] = []
        offset = 0
        while offset < envelope.count {
            let step = Int.random(in: 1...max(1, chunkSize * 2), using: &generator)
            opened += try decryptor.update(envelope[offset..<min(envelope.count, offset + step)])
            offset += step
        }
        opened += try decryptor.finish()
        #expect(opened == plaintext, "chunk size \(chunkSize), size \(size), seed \(Self.seed)")
    }

    /// Docs/envelope-format.md: the last chunk holds 1 to C bytes, 0 only for an empty stream. A
    /// stream sealed (with the key) to end in an empty chunk after full ones is refused, so a
    /// plaintext has exactly one encoding.
    @Test func anEmptyFinalChunkAfterFullChunksIsRefused() throws {
        let randomness = EnvelopeRandomness(
            dataKey: Array(repeating: 1, count: 32), objectID: Array(repeating: 2, count: 16),
            wrapNonce: Array(repeating: 3, count: 12), salt: [])
        let sealer = try EnvelopeSealer(
            form: .stream, chunkSize: 64, kek: kek, context: context, randomness: randomness)
        let full = [UInt8](repeating: 0x61, count: 64)
        let canonical =
            sealer.header.serialized + (try sealer.seal(full, counter: 0, last: false))
            + (try sealer.seal(full, counter: 1, last: true))
        var reader = EnvelopeStreamDecryptor(kek: kek, context: context)
        #expect(try reader.update(canonical) + reader.finish() == full + full)
        let padded =
            sealer.header.serialized + (try sealer.seal(full, counter: 0, last: false))
            + (try sealer.seal(full, counter: 1, last: false))
            + (try sealer.seal([UInt8](), counter: 2, last: true))
        var strict = EnvelopeStreamDecryptor(kek: kek, context: context)
        expectCode(.authenticationFailed) { _ = try strict.update(padded) + strict.finish() }
        // The empty stream's one chunk is empty, and valid.
        var empty = try EnvelopeStreamEncryptor(kek: kek, context: context, chunkSize: 64)
        let sealedEmpty = try empty.update([UInt8]()) + empty.finish()
        var opener = EnvelopeStreamDecryptor(kek: kek, context: context)
        #expect(try opener.update(sealedEmpty) + opener.finish() == [])
    }

    @Test func plaintextIsReleasedOnlyChunkByAuthenticatedChunk() throws {
        var encryptor = try EnvelopeStreamEncryptor(kek: kek, chunkSize: 64)
        let envelope = try encryptor.update([UInt8](repeating: 1, count: 200)) + encryptor.finish()
        var decryptor = EnvelopeStreamDecryptor(kek: kek)
        let headerLength = encryptor.header.count
        // Up to one full chunk plus its tag: nothing can be released yet (it may be the last).
        #expect(try decryptor.update(envelope[0..<(headerLength + 80)]).isEmpty)
        #expect(try decryptor.update(envelope[(headerLength + 80)..<(headerLength + 81)]).count == 64)
    }

    @Test func everyTamperedByteIsCaught() throws {
        let envelope = try Envelope.seal(Array("record".utf8), kek: kek, context: context)
        for index in envelope.indices {
            var changed = envelope
            changed[index] ^= 0x40
            do {
                _ = try Envelope.open(changed, kek: kek, context: context)
                Issue.record("byte \(index) changed and the record still opened")
            } catch let error as ShadowCryptoError {
                #expect(error.code == .authenticationFailed || error.code == .malformedInput, "byte \(index): \(error)")
            }
        }
    }

    @Test func authenticationFailuresShareOneMessage() throws {
        let envelope = try Envelope.seal(Array("x".utf8), kek: kek, context: context)
        var messages = Set<String>()
        for attempt in [
            { try Envelope.open(envelope, kek: otherKEK, context: context) },
            { try Envelope.open(envelope, kek: kek, context: ["profileId": "p2"]) },
            { try Envelope.open(envelope.dropLast(), kek: kek, context: context) },
        ] as [() throws -> [UInt8]] {
            do {
                _ = try attempt()
            } catch let error as ShadowCryptoError {
                #expect(error.code == .authenticationFailed)
                messages.insert(error.reason)
            }
        }
        #expect(messages.count == 1)
    }

    @Test func rewrapKeepsThePayloadAndChangesTheKey() throws {
        var encryptor = try EnvelopeStreamEncryptor(kek: kek, context: context, chunkSize: 64)
        var generator = SeededGenerator(seed: Self.seed)
        let plaintext = random(300, &generator)
        let envelope = try encryptor.update(plaintext) + encryptor.finish()
        let passphrase = try KeyEncryptionKey.passphrase(SecretBytes(utf8: "new passphrase"), id: "pw")
        let rewrapped = try Envelope.rewrap(envelope, from: kek, to: passphrase, context: context)
        let oldHeader = try Envelope.describe(envelope).headerBytes
        let newHeader = try Envelope.describe(rewrapped)
        #expect(newHeader.keyKind == .passphrase && newHeader.keyID == "pw" && newHeader.iterations == 100_000)
        #expect(Array(rewrapped[newHeader.headerBytes...]) == Array(envelope[oldHeader...]), "the body is untouched")
        #expect(Array(rewrapped[0..<26]) == Array(envelope[0..<26]), "the stable header bytes are untouched")
        var decryptor = EnvelopeStreamDecryptor(kek: passphrase, context: context)
        #expect(try decryptor.update(rewrapped) + decryptor.finish() == plaintext)
        var old = EnvelopeStreamDecryptor(kek: kek, context: context)
        expectCode(.invalidParameter) { _ = try old.update(rewrapped) }
        // Rewrapping needs the old key and the right context.
        expectCode(.authenticationFailed) {
            _ = try Envelope.rewrap(envelope, from: otherKEK, to: passphrase, context: context)
        }
        expectCode(.authenticationFailed) {
            _ = try Envelope.rewrap(envelope, from: kek, to: passphrase, context: .none)
        }
    }

    @Test func describeNeedsNoKey() throws {
        let record = try Envelope.seal([1, 2, 3], kek: kek)
        let description = try Envelope.describe(record)
        #expect(
            description.form == .record && description.keyKind == .raw && description.keyID == "kek-a"
                && description.chunkSize == nil)
        expectCode(.malformedInput) { _ = try Envelope.describe(Array("SKEV".utf8)) }
        expectCode(.malformedInput) {
            _ = try Envelope.describe(Array("PK\u{3}\u{4}and more bytes than a header prefix".utf8))
        }
    }

    @Test func keyKindsMustMatch() throws {
        let passphrase = try KeyEncryptionKey.passphrase(SecretBytes(utf8: "pw"))
        let envelope = try Envelope.seal([1], kek: passphrase)
        expectCode(.invalidParameter) { _ = try Envelope.open(envelope, kek: kek) }
        expectCode(.invalidParameter) { _ = try Envelope.open(try Envelope.seal([1], kek: kek), kek: passphrase) }
        #expect(try Envelope.open(envelope, kek: passphrase) == [1])
    }

    @Test func parametersAreChecked() {
        expectCode(.invalidParameter) { _ = try KeyEncryptionKey.raw(SecretBytes([UInt8](repeating: 0, count: 16))) }
        expectCode(.weakParameters) { _ = try KeyEncryptionKey.passphrase(SecretBytes(utf8: "pw"), iterations: 99_999) }
        expectCode(.invalidParameter) { _ = try KeyEncryptionKey.passphrase(SecretBytes([UInt8]())) }
        expectCode(.invalidParameter) {
            _ = try KeyEncryptionKey.raw(
                SecretBytes([UInt8](repeating: 0, count: 32)), id: String(repeating: "x", count: 256))
        }
        for size in [0, 32, 100, 1 << 25] {
            expectCode(.invalidParameter) { _ = try EnvelopeStreamEncryptor(kek: kek, chunkSize: size) }
        }
        expectCode(.invalidParameter) { _ = try EnvelopeContext([("a", "1"), ("a", "2")]) }
        expectCode(.invalidParameter) { _ = try EnvelopeContext([("", "1")]) }
        expectCode(.invalidParameter) { _ = try EnvelopeContext([("k", String(repeating: "v", count: 4097))]) }
    }

    @Test func secretsDoNotPrintThemselves() throws {
        let secret = SecretBytes(utf8: "hunter2-correct-horse")
        #expect(!"\(secret)".contains("hunter2"))
        #expect(!String(reflecting: secret).contains("hunter2"))
        let passphrase = try KeyEncryptionKey.passphrase(secret, id: "x")
        #expect(!"\(passphrase)".contains("hunter2"))
    }

    @Test func filesAreAtomicAndConstantMemory() throws {
        let directory = try TemporaryDirectory()
        var generator = SeededGenerator(seed: Self.seed)
        let plaintext = random(300_000, &generator)
        let input = try directory.write("plain", Data(plaintext))
        let sealedPath = directory.path + "/sealed"
        let inFD = open(input, O_RDONLY)
        try EnvelopeFiles.encrypt(input: inFD, toFile: sealedPath, kek: kek, context: context, chunkSize: 4096)
        close(inFD)
        #expect(try Files.ownerAndMode(sealedPath)?.mode == 0o600)
        let outPath = directory.path + "/opened"
        let sealedFD = open(sealedPath, O_RDONLY)
        try EnvelopeFiles.decrypt(input: sealedFD, toFile: outPath, kek: kek, context: context)
        close(sealedFD)
        #expect(try Data(contentsOf: URL(fileURLWithPath: outPath)) == Data(plaintext))
        // A truncated envelope leaves no output and no temporary file.
        var sealed = try Data(contentsOf: URL(fileURLWithPath: sealedPath))
        sealed.removeLast(100)
        let truncated = try directory.write("truncated", sealed)
        let truncatedFD = open(truncated, O_RDONLY)
        defer { close(truncatedFD) }
        #expect(throws: ShadowCryptoError.self) {
            try EnvelopeFiles.decrypt(input: truncatedFD, toFile: directory.path + "/never", kek: kek, context: context)
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(!names.contains("never"))
        #expect(!names.contains { $0.hasPrefix(".never") }, "\(names)")
    }
}

@Suite struct PBKDF2AndIntegrityTests {
    @Test func safeAPIRefusesWeakParameters() {
        #expect(throws: ShadowCryptoError.self) {
            try PBKDF2.deriveKey(
                passphrase: SecretBytes(utf8: "pw"), salt: [UInt8](repeating: 1, count: 16), iterations: 99_999)
        }
        #expect(throws: ShadowCryptoError.self) {
            try PBKDF2.deriveKey(passphrase: SecretBytes(utf8: "pw"), salt: [UInt8](repeating: 1, count: 15))
        }
        #expect(throws: Never.self) {
            try PBKDF2.deriveKey(passphrase: SecretBytes(utf8: "pw"), salt: [UInt8](repeating: 1, count: 16))
        }
    }

    @Test func outputLengthIsConfigurable() throws {
        let salt = [UInt8](repeating: 1, count: 16)
        let short = try PBKDF2.deriveKey(passphrase: SecretBytes(utf8: "pw"), salt: salt, length: 16)
        let long = try PBKDF2.deriveKey(passphrase: SecretBytes(utf8: "pw"), salt: salt, length: 64)
        #expect(short.count == 16 && long.count == 64)
        #expect(short.withUnsafeBytes { Array($0) } == long.withUnsafeBytes { Array($0.prefix(16)) })
    }

    @Test func streamingHashesMatchOneShot() throws {
        let directory = try TemporaryDirectory()
        let bytes = (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let path = try directory.write("data", Data(bytes))
        #expect(try Integrity.sha256(path: path) == Integrity.sha256(bytes))
        let key = SecretBytes([UInt8](repeating: 0x0b, count: 20))
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        #expect(try Integrity.hmacSHA256(key: key, fileDescriptor: fd) == Integrity.hmacSHA256(key: key, bytes))
    }

    @Test func hmacMatchesRFC4231() {
        // RFC 4231 §4.2, test case 1.
        let key = SecretBytes([UInt8](repeating: 0x0b, count: 20))
        #expect(
            Integrity.hex(Integrity.hmacSHA256(key: key, Array("Hi There".utf8)))
                == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        #expect(Integrity.base64(Integrity.sha256(Array("abc".utf8))) == "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=")
        #expect(Integrity.matches([1, 2], [1, 2]) && !Integrity.matches([1, 2], [1, 3]))
    }
}
