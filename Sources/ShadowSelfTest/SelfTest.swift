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

        /// Vectors computed in code, no file.
        static func computed(_ module: String, _ name: String, _ run: @escaping @Sendable () -> [VectorCase]) -> Suite {
            Suite(module: module, name: name, path: "", embedded: true) { _ in run() }
        }

        /// A compiled-in file of ShadowKeys' own, read as bytes.
        static func bytes(
            _ module: String, _ name: String, _ path: String, _ run: @escaping @Sendable ([UInt8]) -> [VectorCase]
        ) -> Suite {
            Suite(module: module, name: name, path: path, embedded: true) { run($0) }
        }

        /// A text file (an RFC example or a NIST response file).
        static func text(
            _ module: String, _ name: String, _ path: String, embedded: Bool,
            _ run: @escaping @Sendable (String) -> [VectorCase]
        ) -> Suite {
            Suite(module: module, name: name, path: path, embedded: embedded) {
                run(String(decoding: $0, as: UTF8.self))
            }
        }

        /// A Wycheproof file under `wycheproof/`, read from the vector folder.
        static func wycheproof(
            _ module: String, _ name: String, _ file: String,
            _ run: @escaping @Sendable (WycheproofFile) -> [VectorCase]
        ) -> Suite {
            Suite(module: module, name: name, path: "wycheproof/" + file, embedded: false) {
                run(try WycheproofFile(json: $0))
            }
        }
    }

    /// Every suite, in the order the table prints them.
    package static let suites: [Suite] = [
        .computed("ShadowCore", "RFC 4648 §10 base64", RFCSuites.base64),
        .text("ShadowJOSE", "RFC 7515 A.2 RS256", "rfc/rfc7515-a2-rs256.json", embedded: true, RFCSuites.rfc7515A2),
        .text("ShadowJOSE", "RFC 7515 A.3 ES256", "rfc/rfc7515-a3-es256.json", embedded: true, RFCSuites.rfc7515A3),
        .text(
            "ShadowJOSE", "RFC 7638 §3.1 thumbprint", "rfc/rfc7638-3.1-thumbprint.json", embedded: true,
            RFCSuites.rfc7638),
        .text("ShadowDPoP", "RFC 9449 DPoP proofs", "rfc/rfc9449-dpop.json", embedded: true, RFCSuites.rfc9449),
        .wycheproof(
            "ShadowJOSE", "Wycheproof ECDSA P-256 P1363 (ES256)", "ecdsa_secp256r1_sha256_p1363_test.json",
            SignatureSuites.ecdsaP1363),
        .wycheproof(
            "ShadowJOSE", "Wycheproof ECDSA P-256 DER (all refused)", "ecdsa_secp256r1_sha256_test.json",
            SignatureSuites.ecdsaDERAllRejected),
        .wycheproof(
            "ShadowJOSE", "Wycheproof RSA-2048 PKCS#1 v1.5 (RS256)", "rsa_signature_2048_sha256_test.json",
            SignatureSuites.rsaPKCS1),
        .bytes(
            "ShadowApple", "Client secret sign/verify (RFC 7515 A.3 key)", "rfc/rfc7515-a3-es256.json",
            AppleSuites.clientSecret),
        .computed("ShadowCrypto", "FIPS 180-4 SHA-256 examples", CryptoSuites.fips180Examples),
        .text(
            "ShadowCrypto", "NIST SHA256ShortMsg", "nist-cavp/SHA2/SHA256ShortMsg.rsp", embedded: false,
            CryptoSuites.sha256Messages),
        .text(
            "ShadowCrypto", "NIST SHA256LongMsg", "nist-cavp/SHA2/SHA256LongMsg.rsp", embedded: false,
            CryptoSuites.sha256Messages),
        .text(
            "ShadowCrypto", "NIST SHA256Monte", "nist-cavp/SHA2/SHA256Monte.rsp", embedded: false,
            CryptoSuites.sha256Monte),
        .wycheproof(
            "ShadowCrypto", "Wycheproof PBKDF2-HMAC-SHA256", "pbkdf2_hmacsha256_test.json", CryptoSuites.pbkdf2),
        .wycheproof("ShadowCrypto", "Wycheproof HKDF-SHA256", "hkdf_sha256_test.json", CryptoSuites.hkdf),
        .text(
            "ShadowCrypto", "NIST GCM encrypt (256, IV 96, tag 128)", "nist-cavp/GCM/gcmEncryptExtIV256.rsp",
            embedded: false, CryptoSuites.nistGCMEncrypt),
        .text(
            "ShadowCrypto", "NIST GCM decrypt (256, IV 96, tag 128)", "nist-cavp/GCM/gcmDecrypt256.rsp",
            embedded: false, CryptoSuites.nistGCMDecrypt),
        .wycheproof(
            "ShadowCrypto", "Wycheproof AES-256-GCM (IV 96, tag 128)", "aes_gcm_test.json", CryptoSuites.aesGCM),
        .bytes(
            "ShadowCrypto", "ShadowKeys envelope v1 vectors", "shadow/envelope/vectors.json", EnvelopeSuites.vectors),
        .bytes("ShadowVault", "ShadowKeys vault v1 vectors", "shadow/vault/vectors.json", VaultSuites.vectors),
        .bytes(
            "ShadowCredentials", "ShadowKeys audit log v1 vectors", "shadow/audit/vectors.json", AuditSuites.vectors),
        .bytes(
            "ShadowCredentials", "ShadowKeys database store v1 vectors", "shadow/state-db/vectors.json",
            StateDBSuites.vectors),
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
                return SuiteResult(
                    module: suite.module, name: suite.name, cases: [], error: "cannot read \(directory)/\(suite.path)")
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
        if let fromEnvironment = ProcessInfo.processInfo.environment["SHADOW_KEYS_VECTORS"] {
            candidates.append(fromEnvironment)
        }
        candidates.append(FileManager.default.currentDirectoryPath + "/TestVectors")
        if let executablePath {
            var directory = executablePath
            for _ in 0..<5 {
                guard let slash = directory.lastIndex(of: "/") else { break }
                directory = String(directory[..<slash])
                candidates.append(directory + "/TestVectors")
            }
        }
        return candidates.first {
            FileManager.default.fileExists(atPath: $0 + "/README.md")
                && FileManager.default.fileExists(atPath: $0 + "/wycheproof")
        }
    }
}
