#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The known-answer tests behind `shadow-keys selftest`.
///
/// Small RFC examples are compiled in; the standard vector files (Wycheproof, NIST CAVP) are read
/// from a TestVectors directory.
package enum SelfTest {
    /// One suite: where its vectors come from and how to run them.
    package struct Suite: Sendable {
        package let module: String
        package let name: String
        /// Path under TestVectors/.
        package let path: String
        /// Whether the file is compiled into the binary.
        package let embedded: Bool
        package let run: @Sendable ([UInt8]) throws -> [VectorCase]
    }

    /// Every suite, in the order the table prints them.
    package static let suites: [Suite] = [
        Suite(module: "ShadowCore", name: "RFC 4648 §10 base64", path: "", embedded: true) { _ in RFCSuites.base64() },
        Suite(module: "ShadowJOSE", name: "RFC 7515 A.2 RS256", path: "rfc/rfc7515-a2-rs256.json", embedded: true) {
            RFCSuites.rfc7515A2(String(decoding: $0, as: UTF8.self))
        },
        Suite(module: "ShadowJOSE", name: "RFC 7515 A.3 ES256", path: "rfc/rfc7515-a3-es256.json", embedded: true) {
            RFCSuites.rfc7515A3(String(decoding: $0, as: UTF8.self))
        },
        Suite(module: "ShadowJOSE", name: "RFC 7638 §3.1 thumbprint", path: "rfc/rfc7638-3.1-thumbprint.json", embedded: true) {
            RFCSuites.rfc7638(String(decoding: $0, as: UTF8.self))
        },
        Suite(module: "ShadowJOSE", name: "Wycheproof ECDSA P-256 P1363 (ES256)", path: "wycheproof/ecdsa_secp256r1_sha256_p1363_test.json", embedded: false) {
            SignatureSuites.ecdsaP1363(try WycheproofFile(json: $0))
        },
        Suite(module: "ShadowJOSE", name: "Wycheproof ECDSA P-256 DER (all refused)", path: "wycheproof/ecdsa_secp256r1_sha256_test.json", embedded: false) {
            SignatureSuites.ecdsaDERAllRejected(try WycheproofFile(json: $0))
        },
        Suite(module: "ShadowJOSE", name: "Wycheproof RSA-2048 PKCS#1 v1.5 (RS256)", path: "wycheproof/rsa_signature_2048_sha256_test.json", embedded: false) {
            SignatureSuites.rsaPKCS1(try WycheproofFile(json: $0))
        },
        Suite(module: "ShadowApple", name: "Client secret sign/verify (RFC 7515 A.3 key)", path: "rfc/rfc7515-a3-es256.json", embedded: true) {
            AppleSuites.clientSecret($0)
        },
        Suite(module: "ShadowCrypto", name: "FIPS 180-4 SHA-256 examples", path: "", embedded: true) { _ in CryptoSuites.fips180Examples() },
        Suite(module: "ShadowCrypto", name: "NIST SHA256ShortMsg", path: "nist-cavp/SHA2/SHA256ShortMsg.rsp", embedded: false) {
            CryptoSuites.sha256Messages(String(decoding: $0, as: UTF8.self))
        },
        Suite(module: "ShadowCrypto", name: "NIST SHA256LongMsg", path: "nist-cavp/SHA2/SHA256LongMsg.rsp", embedded: false) {
            CryptoSuites.sha256Messages(String(decoding: $0, as: UTF8.self))
        },
        Suite(module: "ShadowCrypto", name: "NIST SHA256Monte", path: "nist-cavp/SHA2/SHA256Monte.rsp", embedded: false) {
            CryptoSuites.sha256Monte(String(decoding: $0, as: UTF8.self))
        },
        Suite(module: "ShadowCrypto", name: "Wycheproof PBKDF2-HMAC-SHA256", path: "wycheproof/pbkdf2_hmacsha256_test.json", embedded: false) {
            CryptoSuites.pbkdf2(try WycheproofFile(json: $0))
        },
        Suite(module: "ShadowCrypto", name: "Wycheproof HKDF-SHA256", path: "wycheproof/hkdf_sha256_test.json", embedded: false) {
            CryptoSuites.hkdf(try WycheproofFile(json: $0))
        },
        Suite(module: "ShadowCrypto", name: "NIST GCM encrypt (256, IV 96, tag 128)", path: "nist-cavp/GCM/gcmEncryptExtIV256.rsp", embedded: false) {
            CryptoSuites.nistGCMEncrypt(String(decoding: $0, as: UTF8.self))
        },
        Suite(module: "ShadowCrypto", name: "NIST GCM decrypt (256, IV 96, tag 128)", path: "nist-cavp/GCM/gcmDecrypt256.rsp", embedded: false) {
            CryptoSuites.nistGCMDecrypt(String(decoding: $0, as: UTF8.self))
        },
        Suite(module: "ShadowCrypto", name: "Wycheproof AES-256-GCM (IV 96, tag 128)", path: "wycheproof/aes_gcm_test.json", embedded: false) {
            CryptoSuites.aesGCM(try WycheproofFile(json: $0))
        },
        Suite(module: "ShadowCrypto", name: "ShadowKeys envelope v1 vectors", path: "shadow/envelope/vectors.json", embedded: true) {
            EnvelopeSuites.vectors($0)
        },
        Suite(module: "ShadowVault", name: "ShadowKeys vault v1 vectors", path: "shadow/vault/vectors.json", embedded: true) {
            VaultSuites.vectors($0)
        },
        Suite(module: "ShadowCredentials", name: "ShadowKeys audit log v1 vectors", path: "shadow/audit/vectors.json", embedded: true) {
            AuditSuites.vectors($0)
        },
    ]

    /// Runs every suite. Files not compiled in are read from `directory`; without one, those
    /// suites are skipped (a missing file inside a given directory is an error). With
    /// `builtinOnly`, only compiled-in suites are listed.
    package static func run(vectorsDirectory directory: String?, builtinOnly: Bool = false) -> [SuiteResult] {
        suites.filter { $0.embedded || !builtinOnly }.map { suite in
            let bytes: [UInt8]
            if suite.path.isEmpty {
                bytes = []
            } else if suite.embedded, let text = EmbeddedVectors.files[suite.path] {
                bytes = Array(text.utf8)
            } else if let directory, let data = FileManager.default.contents(atPath: directory + "/" + suite.path) {
                bytes = [UInt8](data)
            } else if let directory {
                return SuiteResult(module: suite.module, name: suite.name, cases: [], error: "cannot read \(directory)/\(suite.path)")
            } else {
                return SuiteResult(module: suite.module, name: suite.name, cases: [], skipped: "no vector folder")
            }
            do {
                return SuiteResult(module: suite.module, name: suite.name, cases: try suite.run(bytes))
            } catch {
                return SuiteResult(module: suite.module, name: suite.name, cases: [], error: "\(error)")
            }
        }
    }

    /// Finds the TestVectors directory: `$SHADOW_KEYS_VECTORS`, `./TestVectors`, or the package
    /// checkout the executable was built in (`.build/<config>/shadow-keys`).
    package static func locateVectors(executablePath: String?) -> String? {
        var candidates: [String] = []
        if let fromEnvironment = ProcessInfo.processInfo.environment["SHADOW_KEYS_VECTORS"] { candidates.append(fromEnvironment) }
        candidates.append(FileManager.default.currentDirectoryPath + "/TestVectors")
        if let executablePath {
            var directory = executablePath
            for _ in 0..<5 {
                guard let slash = directory.lastIndex(of: "/") else { break }
                directory = String(directory[..<slash])
                candidates.append(directory + "/TestVectors")
            }
        }
        return candidates.first { FileManager.default.fileExists(atPath: $0 + "/README.md") && FileManager.default.fileExists(atPath: $0 + "/wycheproof") }
    }
}
