package import ShadowCore
package import ShadowCrypto

/// TestVectors/shadow/envelope/vectors.json (made by an independent implementation of
/// Docs/envelope-format.md): every positive vector opens and re-seals byte for byte; every
/// negative vector fails with the stated error.
package enum EnvelopeSuites {
    package static func vectors(_ bytes: [UInt8]) -> [VectorCase] {
        VectorCase.positivesAndNegatives(bytes, positive: positive, negative: negative)
    }

    package static func kek(_ object: JSONObject?) throws -> KeyEncryptionKey {
        guard let object, let kind = object["kind"]?.stringValue else { throw VectorFormatError("no kek") }
        let id = object["id"]?.stringValue ?? ""
        if kind == "raw" { return try .raw(SecretBytes(try Hex.decode(object["key_hex"]?.stringValue ?? "")), id: id) }
        let iterations = Int(object["iterations"]?.numberValue?.int64Value ?? 0)
        return try .passphrase(
            SecretBytes(utf8: object["passphrase"]?.stringValue ?? ""), id: id, iterations: iterations)
    }

    package static func context(_ value: JSONValue?) throws -> EnvelopeContext {
        let pairs = try (value?.arrayValue ?? []).map { pair -> (String, String) in
            guard let items = pair.arrayValue, items.count == 2, let key = items[0].stringValue,
                let value = items[1].stringValue
            else {
                throw VectorFormatError("malformed context pair")
            }
            return (key, value)
        }
        return try EnvelopeContext(pairs)
    }

    private static func positive(_ vector: JSONObject) -> VectorCase {
        let name = vector["name"]?.stringValue ?? "?"
        do {
            let kek = try kek(vector["kek"]?.objectValue)
            let context = try context(vector["context"])
            let envelope = try Hex.decode(vector["envelopeHex"]?.stringValue ?? "")
            let plaintext = try Hex.decode(vector["plaintextHex"]?.stringValue ?? "")
            let random = vector["randomness"]?.objectValue
            func field(_ key: String) throws -> [UInt8] { try Hex.decode(random?[key]?.stringValue ?? "") }
            let randomness = EnvelopeRandomness(
                dataKey: try field("dek"), objectID: try field("object_id"), wrapNonce: try field("wrap_nonce"),
                salt: try field("salt"))
            let opened: [UInt8]
            let resealed: [UInt8]
            if vector["form"]?.stringValue == "record" {
                opened = try Envelope.open(envelope, kek: kek, context: context)
                resealed = try Envelope.seal(plaintext, kek: kek, context: context, randomness: randomness)
            } else {
                var decryptor = EnvelopeStreamDecryptor(kek: kek, context: context)
                opened = try decryptor.update(envelope) + decryptor.finish()
                var encryptor = try EnvelopeStreamEncryptor(
                    kek: kek, context: context, chunkSize: Int(vector["chunkSize"]?.numberValue?.int64Value ?? 0),
                    randomness: randomness)
                resealed = try encryptor.update(plaintext) + encryptor.finish()
            }
            let passed = opened == plaintext && resealed == envelope
            return VectorCase(
                id: name, passed: passed,
                detail:
                    """
                    \(name): opens to the plaintext \(opened == plaintext), re-seals byte for byte \
                    \(resealed == envelope)
                    """
            )
        } catch {
            return VectorCase(id: name, passed: false, detail: "\(name): \(error)")
        }
    }

    private static func negative(_ vector: JSONObject) -> VectorCase {
        let name = vector["name"]?.stringValue ?? "?"
        let expected = vector["expect"]?.stringValue ?? "?"
        do {
            let kek = try kek(vector["kek"]?.objectValue)
            let context = try context(vector["context"])
            let envelope = try Hex.decode(vector["envelopeHex"]?.stringValue ?? "")
            let code = outcome(envelope, kek: kek, context: context)
            return VectorCase(id: name, passed: code == expected, detail: "\(name): expected \(expected), got \(code)")
        } catch {
            return VectorCase(id: name, passed: false, detail: "\(name): \(error)")
        }
    }

    /// "ok", or the error code an envelope's decryption ends with (whatever its form).
    package static func outcome(_ envelope: [UInt8], kek: KeyEncryptionKey, context: EnvelopeContext) -> String {
        do {
            if (try? Envelope.describe(envelope))?.form == .record {
                _ = try Envelope.open(envelope, kek: kek, context: context)
            } else {
                var decryptor = EnvelopeStreamDecryptor(kek: kek, context: context)
                _ = try decryptor.update(envelope) + decryptor.finish()
            }
            return "ok"
        } catch let error as ShadowCryptoError {
            return error.code.name == "malformed_input" ? "malformed" : error.code.name
        } catch {
            return "\(error)"
        }
    }
}
