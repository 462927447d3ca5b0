import Foundation
import ShadowCore
import ShadowCrypto
import ShadowSelfTest
import ShadowTestSupport
@testable import ShadowVault
import Testing

/// The vault through its library API: contents, integrity, keys, locking.
@Suite struct TokenVaultTests {
    let directory: TemporaryDirectory
    let path: String
    let key = SecretBytes((0..<32).map { UInt8($0) })
    let clock = ManualClock(Date(timeIntervalSince1970: 1_750_000_000))

    init() throws {
        directory = try TemporaryDirectory()
        path = directory.path + "/data/vault.skv"
    }

    func makeVault(_ unlock: VaultUnlock? = nil) throws -> TokenVault {
        try TokenVault.createSync(at: path, unlock: unlock ?? .key(key), clock: clock.clock)
    }

    func entry(_ name: String, secret: String = "r.secret-token", expiresIn: Double? = nil) -> VaultEntry {
        VaultEntry(
            name: name, secret: SecretBytes(utf8: secret), provider: .apple, kind: .refreshToken,
            subject: "001234.abcdef.0042",
            expiresAt: expiresIn.map { clock.now.addingTimeInterval($0) },
            labels: ["team": "ABCDE12345", "app": "notes"])
    }

    func secret(_ entry: VaultEntry) -> String { entry.secret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }

    /// Label keys compare byte for byte, as the format says: the precomposed and decomposed
    /// spellings of "é" are two labels, kept through a read and through a rewrite of the file
    /// for another entry's sake, while a key spelled the same byte for byte is one label.
    @Test func labelKeysSpelledDifferentlyAreTwoLabels() async throws {
        let composed = "\u{E9}"
        let decomposed = "e\u{301}"
        #expect(composed == decomposed)  // one String to Swift: a Dictionary would merge them
        var labels = VaultLabels()
        labels[composed] = "precomposed"
        labels[decomposed] = "decomposed"
        #expect(labels.count == 2)
        #expect(labels.updateValue("again", forKey: "e\u{301}") == "decomposed")
        #expect(labels.keys.map { Array($0.utf8) } == [[0x65, 0xCC, 0x81], [0xC3, 0xA9]])  // byte order

        let vault = try makeVault()
        try await vault.put(
            VaultEntry(name: "k", secret: SecretBytes(utf8: "s"), provider: .other, kind: .key, labels: labels))
        try await vault.put(VaultEntry(name: "other", secret: SecretBytes(utf8: "t")))
        let read = try await TokenVault(path: path, unlock: .key(key), clock: clock.clock).entry(named: "k")
        #expect(read.labels == labels)
        #expect(read.labels[composed] == "precomposed" && read.labels[decomposed] == "again")
    }

    @Test func entriesRoundTripWithTheirMetadata() async throws {
        let vault = try makeVault()
        try await vault.put(entry("apple/refresh", expiresIn: 3600))
        clock.advance(by: 10)
        try await vault.put(
            VaultEntry(name: "drive/access", secret: SecretBytes(utf8: "ya29.x"), provider: .google, kind: .accessToken)
        )

        let read = try await TokenVault(path: path, unlock: .key(key), clock: clock.clock).entry(named: "apple/refresh")
        #expect(secret(read) == "r.secret-token")
        #expect(read.provider == .apple && read.kind == .refreshToken && read.subject == "001234.abcdef.0042")
        #expect(read.labels == ["team": "ABCDE12345", "app": "notes"])
        #expect(read.createdAt == Date(timeIntervalSince1970: 1_750_000_000))
        #expect(read.expiresAt == Date(timeIntervalSince1970: 1_750_003_600))
        #expect(!read.expired)

        let list = try await vault.list()
        #expect(list.map(\.name) == ["apple/refresh", "drive/access"])
        #expect(list[1].provider == .google && list[1].subject == nil && list[1].expiresAt == nil)

        // A replacement keeps createdAt and moves updatedAt.
        clock.advance(by: 100)
        try await vault.put(entry("apple/refresh", secret: "r.rotated"))
        let replaced = try await vault.entry(named: "apple/refresh")
        #expect(secret(replaced) == "r.rotated")
        #expect(replaced.createdAt == Date(timeIntervalSince1970: 1_750_000_000))
        #expect(replaced.updatedAt == Date(timeIntervalSince1970: 1_750_000_110))

        try await vault.remove(named: "drive/access")
        await #expect(throws: VaultError(.noSuchEntry, "")) { try await vault.entry(named: "drive/access") }
        await #expect(throws: VaultError(.noSuchEntry, "")) { try await vault.remove(named: "drive/access") }
        #expect(try await vault.list().map(\.name) == ["apple/refresh"])
    }

    @Test func expiredEntriesAreFlaggedOnRead() async throws {
        let vault = try makeVault()
        try await vault.put(entry("access", expiresIn: 60))
        #expect(try await vault.entry(named: "access").expired == false)
        clock.advance(by: 60)
        #expect(try await vault.entry(named: "access").expired)
        #expect(try await vault.list().first?.expired == true)
    }

    @Test func nothingAboutTheEntriesIsReadableWithoutTheKey() async throws {
        let vault = try makeVault()
        try await vault.put(entry("apple/refresh-token-for-alice", secret: "SECRET-REFRESH-VALUE"))
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        for needle in ["alice", "SECRET", "001234", "ABCDE12345", "apple", "refresh", "notes"] {
            #expect(bytes.range(of: Data(needle.utf8)) == nil, "\(needle) is visible in the file")
        }
        // Secrets print as redacted.
        let read = try await vault.entry(named: "apple/refresh-token-for-alice")
        #expect(!"\(read)".contains("SECRET") && !"\(read.secret)".contains("SECRET"))
        #expect(!"\(VaultUnlock.passphrase(SecretBytes(utf8: "hunter2")))".contains("hunter2"))
    }

    @Test func filesAndFoldersAreCreatedPrivate() async throws {
        let vault = try makeVault()
        try await vault.put(entry("a"))
        #expect(try Files.ownerAndMode(path)?.mode == 0o600)
        #expect(try Files.ownerAndMode(directory.path + "/data")?.mode == 0o700)
        #expect(TokenVault.permissionWarnings(path: path).isEmpty)
        chmod(path, 0o644)
        chmod(directory.path + "/data", 0o755)
        let warnings = TokenVault.permissionWarnings(path: path)
        #expect(warnings.count == 2 && warnings[0].contains("644") && warnings[1].contains("755"))
        // The next write puts the file back to 0600.
        try await vault.put(entry("b"))
        #expect(try Files.ownerAndMode(path)?.mode == 0o600)
    }

    @Test func creatingOverAnExistingVaultOrOpeningAMissingOneFails() async throws {
        _ = try makeVault()
        #expect(throws: VaultError(.alreadyExists, "")) { try makeVault() }
        let missing = TokenVault(path: directory.path + "/none.skv", unlock: .key(key))
        await #expect(throws: VaultError(.notFound, "")) { try await missing.list() }
        // A write to a missing vault is refused before its lock file is made: nothing is left.
        await #expect(throws: VaultError(.notFound, "")) { try await missing.put(entry("a")) }
        #expect(try Files.ownerAndMode(directory.path + "/none.skv.lock") == nil)
        #expect(try Files.ownerAndMode(directory.path + "/none.skv") == nil)
        #expect(throws: VaultError(.invalidParameter, "")) {
            try TokenVault.createSync(at: directory.path + "/short", unlock: .key(SecretBytes([1, 2, 3])))
        }
        #expect(throws: VaultError(.invalidParameter, "")) {
            try TokenVault.createSync(
                at: directory.path + "/weak", unlock: .passphrase(SecretBytes(utf8: "pw")), iterations: 99_999)
        }
    }

    @Test func entryNamesAreChecked() async throws {
        let vault = try makeVault()
        for name in ["", String(repeating: "n", count: 256), "tab\there", "new\nline", "del\u{7F}"] {
            await #expect(throws: VaultError(.invalidParameter, ""), "\(name.debugDescription)") {
                try await vault.put(entry(name))
            }
        }
        try await vault.put(entry(String(repeating: "n", count: 255)))
        try await vault.put(entry("ünïcødé/名前"))
        #expect(try await vault.list().count == 2)
        // Names compare byte for byte: precomposed and decomposed "é" are two entries.
        try await vault.put(entry("caf\u{E9}", secret: "one"))
        try await vault.put(entry("cafe\u{301}", secret: "two"))
        #expect(secret(try await vault.entry(named: "caf\u{E9}")) == "one")
        #expect(secret(try await vault.entry(named: "cafe\u{301}")) == "two")
        #expect(try await vault.list().count == 4)
        // Sizes the format cannot hold are refused.
        var huge = entry("huge")
        huge.secret = SecretBytes([UInt8](repeating: 1, count: (1 << 20) + 1))
        await #expect(throws: VaultError(.invalidParameter, "")) { try await vault.put(huge) }
        var longLabel = entry("label")
        longLabel.labels = [String(repeating: "k", count: 256): "v"]
        await #expect(throws: VaultError(.invalidParameter, "")) { try await vault.put(longLabel) }
    }

    @Test func aWrongKeyOrPassphraseIsNotCorruption() async throws {
        _ = try makeVault()
        var other = Array(0..<32).map { UInt8($0) }
        other[31] ^= 1
        await #expect(throws: VaultError(.wrongKey, "")) {
            try await TokenVault(path: path, unlock: .key(SecretBytes(other))).list()
        }
        await #expect(throws: VaultError(.wrongKey, "")) {
            try await TokenVault(path: path, unlock: .passphrase(SecretBytes(utf8: "pw"))).list()
        }
        await #expect(throws: VaultError(.wrongKey, "")) {
            try await TokenVault(path: path, unlock: .key(SecretBytes([1]))).list()
        }

        let phrasePath = directory.path + "/phrase.skv"
        try TokenVault.createSync(at: phrasePath, unlock: .passphrase(SecretBytes(utf8: "correct horse")))
        await #expect(throws: VaultError(.wrongKey, "")) {
            try await TokenVault(path: phrasePath, unlock: .passphrase(SecretBytes(utf8: "correct horsf"))).list()
        }
        await #expect(throws: VaultError(.wrongKey, "")) {
            try await TokenVault(path: phrasePath, unlock: .key(key)).list()
        }
        #expect(
            try await TokenVault(path: phrasePath, unlock: .passphrase(SecretBytes(utf8: "correct horse"))).list()
                .isEmpty)
    }

    @Test func everyFlippedByteAndEveryTruncationIsCorruption() async throws {
        let vault = try makeVault()
        try await vault.put(entry("apple/refresh", expiresIn: 60))
        let original = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let damaged = directory.path + "/damaged.skv"
        let reader = TokenVault(path: damaged, unlock: .key(key))
        func outcome(_ bytes: [UInt8]) -> VaultError.Code? {
            guard FileManager.default.createFile(atPath: damaged, contents: Data(bytes)) else { return .io }
            do {
                _ = try reader.contents()
                return nil
            } catch let error as VaultError {
                return error.code
            } catch {
                return .io
            }
        }
        #expect(outcome(original) == nil)
        for index in original.indices {
            for mask: UInt8 in [0x01, 0x80] {
                var bytes = original
                bytes[index] ^= mask
                let code = outcome(bytes)
                #expect(
                    code == .corrupted, "flipping bit \(mask) of byte \(index) gave \(code.map(\.name) ?? "success")")
            }
        }
        for length in 0..<original.count {
            let code = outcome(Array(original[..<length]))
            #expect(code == .corrupted, "truncating to \(length) bytes gave \(code.map(\.name) ?? "success")")
        }
        #expect(outcome(original + [0]) == .corrupted)
    }

    @Test func splicedVaultsAndStaleBodiesAreCorruption() async throws {
        let vault = try makeVault()
        try await vault.put(entry("one", secret: "first-secret"))
        let older = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        clock.advance(by: 1)
        try await vault.put(entry("one", secret: "other-secret"))
        let newer = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(older.count == newer.count)

        let otherPath = directory.path + "/other.skv"
        let other = try TokenVault.createSync(at: otherPath, unlock: .key(key), clock: clock.clock)
        try await other.put(entry("one", secret: "other-secret"))
        try await other.put(entry("one", secret: "other-secret"))
        let foreign = [UInt8](try Data(contentsOf: URL(fileURLWithPath: otherPath)))
        #expect(foreign.count == newer.count)

        let spliced = directory.path + "/spliced.skv"
        for bytes in [
            // This header, another vault's body.
            Array(newer[..<Self.keyVaultHeaderBytes] + foreign[Self.keyVaultHeaderBytes...]),
            Array(foreign[..<Self.keyVaultHeaderBytes] + newer[Self.keyVaultHeaderBytes...]),
            // This header, this vault's older body.
            Array(newer[..<Self.keyVaultHeaderBytes] + older[Self.keyVaultHeaderBytes...]),
        ] {
            #expect(FileManager.default.createFile(atPath: spliced, contents: Data(bytes)))
            #expect(throws: VaultError(.corrupted, "")) { try TokenVault(path: spliced, unlock: .key(key)).contents() }
        }
    }

    /// A key vault's header: magic 4, version 1, kind 1, id 16, generation 8, nonce 12, body
    /// length 4, key check 32, digest 32.
    static let keyVaultHeaderBytes = 110

    @Test func everyWriteRaisesTheGeneration() async throws {
        let vault = try makeVault()
        #expect(try TokenVault.headerInfo(path: path).generation == 1)
        try await vault.put(entry("a"))
        try await vault.put(entry("a"))
        try await vault.remove(named: "a")
        let info = try TokenVault.headerInfo(path: path)
        #expect(info.generation == 4 && info.keyKind == "key" && info.iterations == nil && info.version == 1)
        #expect(try vault.contents().generation == 4)
        // A failed change writes nothing.
        await #expect(throws: VaultError(.noSuchEntry, "")) { try await vault.remove(named: "a") }
        #expect(try TokenVault.headerInfo(path: path).generation == 4)
    }

    @Test func rekeyChangesTheKeyKindAndIterationsAtomically() async throws {
        let vault = try makeVault()
        try await vault.put(entry("apple/refresh"))
        let before = try TokenVault.headerInfo(path: path)
        let passphrase = VaultUnlock.passphrase(SecretBytes(utf8: "correct horse battery staple"))
        try await vault.rekey(to: passphrase, iterations: 120_000)

        let after = try TokenVault.headerInfo(path: path)
        #expect(after.keyKind == "passphrase" && after.iterations == 120_000 && after.saltBytes == 16)
        #expect(after.vaultID == before.vaultID && after.generation == before.generation + 1)
        await #expect(throws: VaultError(.wrongKey, "")) { try await vault.list() }
        let reopened = TokenVault(path: path, unlock: passphrase)
        #expect(secret(try await reopened.entry(named: "apple/refresh")) == "r.secret-token")

        // And back to a key; a passphrase rekey draws a fresh salt.
        try await reopened.rekey(to: passphrase, iterations: 100_000)
        let saltChanged = try TokenVault.headerInfo(path: path)
        #expect(saltChanged.iterations == 100_000)
        try await reopened.rekey(to: .key(key))
        #expect(try await vault.list().map(\.name) == ["apple/refresh"])
        await #expect(throws: VaultError(.invalidParameter, "")) { try await vault.rekey(to: .key(SecretBytes([0]))) }
    }

    @Test func sectionsRoundTrip() throws {
        let vault = try makeVault()
        try vault.update { contents in
            try contents.setSection("state", ["subjects": .array([.string("a"), .int(3)]), "version": .int(1)])
            try contents.setSection("another", .array([]))
        }
        try vault.putSync(entry("a"))  // a write that does not touch the sections keeps them
        let contents = try vault.contents()
        #expect(contents.sectionNames == ["another", "state"])
        let state = try contents.section("state")
        #expect(state?.objectValue?["version"]?.numberValue?.int64Value == 1)
        #expect(state?.objectValue?["subjects"]?.arrayValue?.count == 2)
        try vault.update { try $0.setSection("another", nil) }
        #expect(try vault.contents().sectionNames == ["state"])
    }

    @Test func aHeldLockTimesOutWithAClearError() throws {
        let vault = try makeVault()
        let holder = try #require(try FileLock.acquire(path + ".lock", timeout: 1))
        defer { holder.release() }
        let impatient = TokenVault(path: path, unlock: .key(key), lockTimeout: .milliseconds(200))
        #expect(throws: VaultError(.lockTimeout, "")) { try impatient.putSync(entry("x")) }
        // Reads take no lock.
        #expect(try vault.contents().count == 0)
    }

    @Test func aKilledWritersTemporaryFileIsRemovedByTheNextWriter() async throws {
        let vault = try makeVault()
        let leftover = directory.path + "/data/.vault.skv.tmp-12345"
        #expect(FileManager.default.createFile(atPath: leftover, contents: Data("half".utf8)))
        try await vault.put(entry("a"))
        #expect(!FileManager.default.fileExists(atPath: leftover))
    }
}

/// TestVectors/shadow/vault, made by an independent implementation of Docs/vault-format.md.
/// Section values are checked as I-JSON when a body is read, whoever reads them later; the
/// writer refuses what the reader would.
@Suite struct VaultSectionTests {
    private func body(section name: String, json: String) -> [UInt8] {
        var out: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1]
        out.append(UInt8(name.utf8.count))
        out += name.utf8
        let value = Array(json.utf8)
        out += withUnsafeBytes(of: UInt32(value.count).bigEndian) { Array($0) }
        return out + value
    }

    @Test(arguments: ["{", "{\"a\":1,\"a\":2}", "\"\\ud800\"", "[1,]"])
    func aSectionThatIsNotIJSONIsCorruption(json: String) {
        #expect(throws: VaultError(.corrupted, "")) { try VaultContents.decode(body(section: "state", json: json)) }
    }

    @Test func validSectionsReadAndTheWriterRefusesWhatTheReaderWould() throws {
        let contents = try VaultContents.decode(body(section: "state", json: #"{"a":[1,"x"]}"#))
        #expect(try contents.section("state") == ["a": [1, "x"]])
        var writable = VaultContents()
        var deep: JSONValue = 1
        for _ in 0..<70 { deep = .array([deep]) }
        #expect(throws: VaultError(.invalidParameter, "")) { try writable.setSection("deep", deep) }
        #expect(throws: VaultError(.invalidParameter, "")) {
            try writable.setSection(String(repeating: "n", count: 256), 1)
        }
        var shallow: JSONValue = 1
        for _ in 0..<63 { shallow = .array([shallow]) }
        try writable.setSection("ok", shallow)
        #expect(try VaultContents.decode(writable.encode()).section("ok") == shallow)
    }
}

@Suite struct VaultVectorTests {
    @Test func everyVectorOpensReSealsOrFailsAsStated() throws {
        let cases = VaultSuites.vectors(try PackagePaths.vector("shadow/vault/vectors.json"))
        #expect(cases.count == 32)
        for result in cases { #expect(result.passed, "\(result.detail)") }
    }
}

extension TokenVaultTests {
    /// Writers putting at once. Run alone with `swift test --filter TokenVaultTests/Stress`.
    @Suite(.tags(.stress)) struct Stress {
        let fixture: TokenVaultTests
        init() throws { fixture = try TokenVaultTests() }

        @Test func concurrentWritersLoseNoUpdate() async throws {
            _ = try fixture.makeVault()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<4 {
                    group.addTask {
                        // Separate handles open separate descriptions, so flock serialises them as it does processes.
                        let handle = TokenVault(path: fixture.path, unlock: .key(fixture.key))
                        for index in 0..<10 { try await handle.put(fixture.entry("w\(writer)-\(index)")) }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await TokenVault(path: fixture.path, unlock: .key(fixture.key)).list().count == 40)
            #expect(try TokenVault.headerInfo(path: fixture.path).generation == 41)
        }
    }
}
