import Foundation
import ShadowCore
import ShadowJOSE
import ShadowSelfTest
import ShadowTestSupport
import Testing

/// Standard vectors through the JWS layer; each case reports its tcId when it fails.
@Suite struct VectorTests {
    @Test(arguments: [
        "ecdsa_secp256r1_sha256_p1363_test.json", "ecdsa_secp256r1_sha256_test.json",
        "rsa_signature_2048_sha256_test.json",
    ])
    func wycheproof(file: String) throws {
        let vectors = try WycheproofFile(json: PackagePaths.vector("wycheproof/" + file))
        let cases: [VectorCase]
        switch file {
        case "ecdsa_secp256r1_sha256_p1363_test.json": cases = SignatureSuites.ecdsaP1363(vectors)
        case "ecdsa_secp256r1_sha256_test.json": cases = SignatureSuites.ecdsaDERAllRejected(vectors)
        default: cases = SignatureSuites.rsaPKCS1(vectors)
        }
        let expectedCount = vectors.groups.reduce(0) { $0 + $1.tests.count }
        #expect(cases.count == expectedCount)
        #expect(cases.count > 250)
        for result in cases {
            #expect(result.passed, "\(file) \(result.detail)")
        }
    }

    @Test func rsaAcceptableMissingNullIsRejectedAsDocumented() throws {
        let vectors = try WycheproofFile(json: PackagePaths.vector("wycheproof/rsa_signature_2048_sha256_test.json"))
        let acceptable = vectors.groups.flatMap { group in
            group.tests.filter { $0.result == .acceptable }.map { (group, $0) }
        }
        #expect(acceptable.map(\.1.tcId) == [8])
        for (group, test) in acceptable {
            let key = try JWK(json: try #require(group.fields["keyJwk"]?.objectValue))
            #expect(throws: JOSEError(.invalidSignature, "")) {
                try key.verifySignature(try test.bytes("sig"), signingInput: try test.bytes("msg"), algorithm: .rs256)
            }
        }
    }

    @Test func wycheproofValidCasesReallyVerify() throws {
        // Guards the grader: a valid vector must verify directly through the key.
        let vectors = try WycheproofFile(json: PackagePaths.vector("wycheproof/ecdsa_secp256r1_sha256_p1363_test.json"))
        let group = try #require(vectors.groups.first)
        let key = try JWK(json: try #require(group.fields["publicKeyJwk"]?.objectValue))
        let valid = try #require(group.tests.first { $0.result == .valid })
        #expect(throws: Never.self) {
            try key.verifySignature(try valid.bytes("sig"), signingInput: try valid.bytes("msg"), algorithm: .es256)
        }
        var message = try valid.bytes("msg")
        message.append(0)
        #expect(throws: JOSEError.self) {
            try key.verifySignature(try valid.bytes("sig"), signingInput: message, algorithm: .es256)
        }
    }

    @Test(arguments: ["rfc/rfc7515-a2-rs256.json", "rfc/rfc7515-a3-es256.json", "rfc/rfc7638-3.1-thumbprint.json"])
    func rfcExamples(path: String) throws {
        let text = String(decoding: try PackagePaths.vector(path), as: UTF8.self)
        let cases: [VectorCase]
        switch path {
        case "rfc/rfc7515-a2-rs256.json": cases = RFCSuites.rfc7515A2(text)
        case "rfc/rfc7515-a3-es256.json": cases = RFCSuites.rfc7515A3(text)
        default: cases = RFCSuites.rfc7638(text)
        }
        #expect(!cases.isEmpty)
        for result in cases { #expect(result.passed, "\(path) \(result.id): \(result.detail)") }
    }

    /// Both ways: every embedded text equals its file, and every file of the embedded folders
    /// is embedded (a new vector file cannot go unnoticed by the selftest).
    @Test func embeddedVectorsMatchTheFiles() throws {
        #expect(!EmbeddedVectors.files.isEmpty)
        for (path, text) in EmbeddedVectors.files {
            let file = String(decoding: try PackagePaths.vector(path), as: UTF8.self)
            #expect(text == file, "\(path) differs from TestVectors/\(path); run Scripts/embed-vectors")
        }
        var onDisk: Set<String> = []
        for folder in EmbeddedVectors.folders {
            let names = try FileManager.default.contentsOfDirectory(
                atPath: PackagePaths.vectors.appendingPathComponent(folder).path)
            onDisk.formUnion(names.filter { $0.hasSuffix(".json") }.map { "\(folder)/\($0)" })
        }
        #expect(
            onDisk == Set(EmbeddedVectors.files.keys),
            "not embedded: \(onDisk.subtracting(EmbeddedVectors.files.keys).sorted()); run Scripts/embed-vectors")
    }

    @Test func selftestRunsEverySuiteFromTheVectorDirectory() {
        let results = SelfTest.run(vectorsDirectory: PackagePaths.vectors.path)
        #expect(results.count == SelfTest.suites.count)
        for result in results {
            #expect(
                result.succeeded,
                "\(result.name): \(result.error ?? "") \(result.cases.filter { !$0.passed }.map(\.detail))")
        }
        let missing = SelfTest.run(vectorsDirectory: "/nonexistent")
        #expect(missing.contains { $0.error != nil && !$0.succeeded })
    }
}
