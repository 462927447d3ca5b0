import Crypto
import ShadowCore
import ShadowCrypto

/// Standard vectors for the primitives ShadowCrypto uses, run through ShadowCrypto's API.
package enum CryptoSuites {
    /// Wycheproof `pbkdf2_hmacsha256_test.json` through `PBKDF2.deriveKeyUnsafe` (the vectors
    /// use counts below the safe minimum).
    package static func pbkdf2(_ file: WycheproofFile) -> [VectorCase] {
        file.grade { _, test in
            guard let iterations = test.fields["iterationCount"]?.numberValue?.int64Value,
                let length = test.fields["dkLen"]?.numberValue?.int64Value
            else {
                throw VectorFormatError("tcId \(test.tcId): no iterationCount/dkLen")
            }
            let key = try PBKDF2.deriveKeyUnsafe(
                passphrase: SecretBytes(try test.bytes("password")), salt: try test.bytes("salt"),
                unsafeIterations: Int(iterations), length: Int(length))
            return key.withUnsafeBytes { Array($0) } == (try test.bytes("dk"))
        }
    }

    /// Wycheproof `aes_gcm_test.json`, the groups ShadowKeys uses (256-bit key, 96-bit IV, 128-bit
    /// tag), through `AES256GCM`: valid cases must seal to the expected bytes and open; invalid
    /// ones must not open.
    package static func aesGCM(_ file: WycheproofFile) -> [VectorCase] {
        let groups = file.groups.filter { group in
            group.fields["keySize"]?.numberValue?.int64Value == 256
                && group.fields["ivSize"]?.numberValue?.int64Value == 96
                && group.fields["tagSize"]?.numberValue?.int64Value == 128
        }
        return WycheproofFile(algorithm: file.algorithm, groups: groups).grade { _, test in
            let key = SymmetricKey(data: try test.bytes("key"))
            let iv = try test.bytes("iv"), aad = try test.bytes("aad"), message = try test.bytes("msg")
            let sealed = try test.bytes("ct") + (try test.bytes("tag"))
            guard let opened = try? AES256GCM.open(sealed, key: key, nonce: iv, aad: aad) else { return false }
            guard opened == message else { return false }
            // An accepted case must also seal to exactly the vector's bytes.
            return try AES256GCM.seal(message, key: key, nonce: iv, aad: aad) == sealed
        }
    }

    /// Wycheproof `hkdf_sha256_test.json` through swift-crypto's HKDF, which the envelope key schedule uses.
    package static func hkdf(_ file: WycheproofFile) -> [VectorCase] {
        file.grade { _, test in
            guard let size = test.fields["size"]?.numberValue?.int64Value else {
                throw VectorFormatError("tcId \(test.tcId): no size")
            }
            guard size <= 255 * 32 else { return false }  // beyond RFC 5869's limit: refused
            let okm = HKDF<SHA256>.deriveKey(
                inputKeyMaterial: SymmetricKey(data: try test.bytes("ikm")), salt: try test.bytes("salt"),
                info: try test.bytes("info"), outputByteCount: Int(size))
            return okm.withUnsafeBytes { Array($0) } == (try test.bytes("okm"))
        }
    }

    /// NIST `gcmEncryptExtIV256.rsp`, sections with a 96-bit IV and a 128-bit tag.
    package static func nistGCMEncrypt(_ text: String) -> [VectorCase] {
        gcmCases(text).map { test in
            check("Count \(test.id) \(test.section.description)") {
                let sealed = try AES256GCM.seal(
                    try test.bytes("PT"), key: SymmetricKey(data: try test.bytes("Key")), nonce: try test.bytes("IV"),
                    aad: try test.bytes("AAD"))
                return sealed == (try test.bytes("CT")) + (try test.bytes("Tag"))
            }
        }
    }

    /// NIST `gcmDecrypt256.rsp`, sections with a 96-bit IV and a 128-bit tag; FAIL cases must not open.
    package static func nistGCMDecrypt(_ text: String) -> [VectorCase] {
        gcmCases(text).map { test in
            check("Count \(test.id) \(test.section.description)") {
                let opened = try? AES256GCM.open(
                    (try test.bytes("CT")) + (try test.bytes("Tag")), key: SymmetricKey(data: try test.bytes("Key")),
                    nonce: try test.bytes("IV"), aad: try test.bytes("AAD"))
                return test.fails ? opened == nil : opened == (try test.bytes("PT"))
            }
        }
    }

    private static func gcmCases(_ text: String) -> [NISTResponseFile.Case] {
        NISTResponseFile(text).cases.filter {
            $0.section["Keylen"] == "256" && $0.section["IVlen"] == "96" && $0.section["Taglen"] == "128"
        }
    }

    /// NIST `SHA256ShortMsg.rsp` / `SHA256LongMsg.rsp` through `Integrity.sha256`.
    package static func sha256Messages(_ text: String) -> [VectorCase] {
        NISTResponseFile(text).cases.filter { $0.fields["Msg"] != nil }.map { test in
            check("Len \(test.fields["Len"] ?? "?")") {
                guard let bits = Int(test.fields["Len"] ?? "") else { throw VectorFormatError("no Len") }
                let message = Array(try test.bytes("Msg").prefix(bits / 8))
                return Integrity.sha256(message) == (try test.bytes("MD"))
            }
        }
    }

    /// NIST `SHA256Monte.rsp`: 100 checkpoints of 1000 chained hashes (SHAVS §6.4).
    package static func sha256Monte(_ text: String) -> [VectorCase] {
        let file = NISTResponseFile(text)
        guard var seed = try? file.cases.first(where: { $0.fields["Seed"] != nil })?.bytes("Seed") else {
            return [VectorCase(id: "seed", passed: false, detail: "no Seed")]
        }
        return file.cases.filter { $0.fields["MD"] != nil }.map { checkpoint in
            var md = [seed, seed, seed]
            for _ in 3..<1003 {
                let next = Integrity.sha256(md[0] + md[1] + md[2])
                md = [md[1], md[2], next]
            }
            seed = md[2]
            let expected = (try? checkpoint.bytes("MD")) ?? []
            return VectorCase(
                id: "COUNT \(checkpoint.id)", passed: md[2] == expected,
                detail: "Monte Carlo checkpoint \(checkpoint.id)")
        }
    }

    /// FIPS 180-4 (and its example document) SHA-256 examples.
    package static func fips180Examples() -> [VectorCase] {
        let examples: [(String, [UInt8], String)] = [
            ("\"abc\"", Array("abc".utf8), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            (
                "448-bit message", Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8),
                "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
            ),
            (
                "one million \"a\"", [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000),
                "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
            ),
        ]
        return examples.map { name, message, digest in
            VectorCase(
                id: name, passed: Integrity.hex(Integrity.sha256(message)) == digest,
                detail: "SHA-256 of \(name) should be \(digest)")
        }
    }

    private static func check(_ id: String, _ body: () throws -> Bool) -> VectorCase {
        do { return VectorCase(id: id, passed: try body(), detail: id) } catch {
            return VectorCase(id: id, passed: false, detail: "\(id): \(error)")
        }
    }
}
