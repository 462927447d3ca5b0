import Foundation
import ShadowCore
import ShadowCrypto

enum CryptoTargets {
    /// An envelope header: what parses serializes to exactly the bytes it was read from.
    static let envelopeHeader: FuzzTargets.Harness = { data in
        guard let (header, length) = (try? EnvelopeHeader.parse(Array(data))) ?? nil else { return }
        precondition(
            header.serialized.elementsEqual(data.prefix(length)), "an envelope header does not serialize to its bytes")
        _ = try? Envelope.describe(Array(data))
    }

    /// The vectors' raw key (TestVectors/shadow/envelope), so seeds from them open.
    static let kek: KeyEncryptionKey = {
        guard let key = try? KeyEncryptionKey.raw(SecretBytes((0..<32).map { UInt8($0) })) else {
            preconditionFailure("fixed key")
        }
        return key
    }()

    static let contexts: [EnvelopeContext] = [
        .none, ["profileId": "p-7f3a", "entityId": "e-0042"], ["profileId": "p-7f3a"],
    ]

    /// Byte 0 picks the context (bits 0-1) and the piece size (bits 2-7); the rest is an
    /// envelope, opened as a record and as a stream fed in pieces of that size. Passphrase
    /// envelopes are only parsed: their key derivation is deliberately slow.
    static let envelope: FuzzTargets.Harness = { data in
        let input = Input(data)
        let context = contexts[Int(input.mode & 3) % contexts.count]
        if let description = try? Envelope.describe(input.rest), description.keyKind == .passphrase { return }
        if let opened = try? Envelope.open(input.rest, kek: kek, context: context) {
            precondition(opened.count <= Envelope.maxRecordBytes)
        }
        var decryptor = EnvelopeStreamDecryptor(kek: kek, context: context)
        let piece = max(1, Int(input.mode >> 2) * 7)
        var plaintext: [UInt8] = []
        do {
            var offset = 0
            while offset < input.rest.count {
                let end = min(offset + piece, input.rest.count)
                plaintext += try decryptor.update(input.rest[offset..<end])
                offset = end
            }
            plaintext += try decryptor.finish()
        } catch {
            return
        }
        // A stream that authenticates re-encrypts (same key and context) and opens to the same bytes.
        guard var encryptor = try? EnvelopeStreamEncryptor(kek: kek, context: context, chunkSize: 64) else {
            preconditionFailure("encryptor")
        }
        guard let sealed = try? encryptor.update(plaintext) + encryptor.finish() else {
            preconditionFailure("re-encryption failed")
        }
        var again = EnvelopeStreamDecryptor(kek: kek, context: context)
        precondition((try? again.update(sealed) + again.finish()) == plaintext, "a stream did not round-trip")
    }

    /// A manifest: every line it parses formats and parses back to the same digest and name.
    static let manifest: FuzzTargets.Harness = { data in
        let (lines, _) = ChecksumManifest.parse(manifest: Array(data))
        for line in lines {
            precondition(line.digest.count == 32)
            let formatted = ChecksumManifest.format(digest: line.digest, name: line.name)
            precondition(ChecksumManifest.parse(formatted) == line, "a manifest line does not round-trip")
        }
    }
}
