import Foundation
import ShadowCore
import ShadowCrypto
import ShadowSelfTest
import ShadowTestSupport
import Testing

/// Standard and ShadowKeys vectors through ShadowCrypto; each case reports its id when it fails.
@Suite struct CryptoVectorTests {
    private func text(_ path: String) throws -> String {
        String(decoding: try PackagePaths.vector(path), as: UTF8.self)
    }

    private func expectAllPass(_ cases: [VectorCase], count: Int, _ name: String) {
        #expect(cases.count == count, "\(name) ran \(cases.count) cases")
        for result in cases { #expect(result.passed, "\(name) \(result.detail)") }
    }

    @Test func sha256() throws {
        expectAllPass(CryptoSuites.sha256Messages(try text("nist-cavp/SHA2/SHA256ShortMsg.rsp")), count: 65, "ShortMsg")
        expectAllPass(CryptoSuites.sha256Messages(try text("nist-cavp/SHA2/SHA256LongMsg.rsp")), count: 64, "LongMsg")
        expectAllPass(CryptoSuites.sha256Monte(try text("nist-cavp/SHA2/SHA256Monte.rsp")), count: 100, "Monte")
        expectAllPass(CryptoSuites.fips180Examples(), count: 3, "FIPS 180-4")
    }

    @Test func aesGCM() throws {
        let decrypt = try text("nist-cavp/GCM/gcmDecrypt256.rsp")
        let failing = NISTResponseFile(decrypt).cases.filter {
            $0.section["IVlen"] == "96" && $0.section["Taglen"] == "128" && $0.fails
        }
        #expect(failing.count > 100, "the decrypt file's FAIL cases must be exercised")
        expectAllPass(CryptoSuites.nistGCMDecrypt(decrypt), count: 375, "NIST GCM decrypt")
        expectAllPass(
            CryptoSuites.nistGCMEncrypt(try text("nist-cavp/GCM/gcmEncryptExtIV256.rsp")), count: 375,
            "NIST GCM encrypt")
        let wycheproof = try WycheproofFile(json: PackagePaths.vector("wycheproof/aes_gcm_test.json"))
        let cases = CryptoSuites.aesGCM(wycheproof)
        #expect(cases.count == 66)
        for result in cases { #expect(result.passed, "\(result.detail)") }
    }

    @Test func pbkdf2AndHKDF() throws {
        let pbkdf2 = CryptoSuites.pbkdf2(
            try WycheproofFile(json: PackagePaths.vector("wycheproof/pbkdf2_hmacsha256_test.json")))
        expectAllPass(pbkdf2, count: 60, "PBKDF2")
        let hkdf = CryptoSuites.hkdf(try WycheproofFile(json: PackagePaths.vector("wycheproof/hkdf_sha256_test.json")))
        expectAllPass(hkdf, count: 86, "HKDF")
    }

    @Test func rfc7914PBKDF2() throws {
        // RFC 7914 §11, first vector: P = "passwd", S = "salt", c = 1, dkLen = 64.
        let key = try PBKDF2.deriveKeyUnsafe(
            passphrase: SecretBytes(utf8: "passwd"), salt: Array("salt".utf8), unsafeIterations: 1, length: 64)
        #expect(
            key.withUnsafeBytes { Hex.encode($0) }
                == "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc"
                + "49ca9cccf179b645991664b39d77ef317c71b845b1e30bd509112041d3a19783"
        )
    }

    @Test func envelopeVectors() throws {
        let bytes = try PackagePaths.vector("shadow/envelope/vectors.json")
        let cases = EnvelopeSuites.vectors(bytes)
        #expect(cases.count == 28)
        for result in cases { #expect(result.passed, "\(result.detail)") }
    }
}
