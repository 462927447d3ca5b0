import Crypto
import Foundation
import ShadowCore
import ShadowJOSE
@testable import ShadowJWKS
import ShadowTestSupport
import ShadowHTTP
import Testing

@Suite struct FileStoreTests {
    let directory: TemporaryDirectory
    let url = "https://keys.example/jwks"

    init() throws { directory = try TemporaryDirectory() }

    func sample() throws -> KeySetSnapshot {
        var snapshot = KeySetSnapshot()
        snapshot.body = Array(TestKeys.jwksJSON([try TestKeys.jwk(TestKeys.rsa, kid: "a")]).utf8)
        snapshot.fetchedAt = Date(timeIntervalSince1970: 1_700_000_000.25)
        snapshot.expiresAt = Date(timeIntervalSince1970: 1_700_003_600)
        snapshot.etag = "\"v1\""
        snapshot.lastAttempt = snapshot.fetchedAt
        snapshot.unknownKeyIDs = [.init(keyID: "x\u{212A}", at: Date(timeIntervalSince1970: 1_700_000_001))]
        return snapshot
    }

    @Test func roundTripsWithOwnerOnlyModes() throws {
        let store = FileKeySetStore(url: url, directory: directory.path + "/cache/jwks")
        try store.save(try sample())
        #expect(store.load() == (try sample()))
        #expect(try Files.ownerAndMode(store.path)?.mode == 0o600)
        #expect(try Files.ownerAndMode(directory.path + "/cache/jwks")?.mode == 0o700)
        // No temporary files are left behind.
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: directory.path + "/cache/jwks").filter {
                $0.hasPrefix(".")
            }.isEmpty)
    }

    @Test func refusesTamperedLooseOrForeignFiles() throws {
        let store = FileKeySetStore(url: url, directory: directory.path)
        try store.save(try sample())
        let text = try String(contentsOfFile: store.path, encoding: .utf8)
        // A changed byte breaks the digest.
        try text.replacingOccurrences(of: "v1", with: "v2").write(toFile: store.path, atomically: true, encoding: .utf8)
        chmod(store.path, 0o600)
        #expect(store.load() == nil)
        // A group-writable file is ignored.
        try store.save(try sample())
        chmod(store.path, 0o664)
        #expect(store.load() == nil)
        chmod(store.path, 0o600)
        #expect(store.load() != nil)
        // A file for another URL is ignored.
        let other = FileKeySetStore(url: "https://other.example/jwks", directory: directory.path)
        try FileManager.default.copyItem(atPath: store.path, toPath: other.path)
        #expect(other.load() == nil)
        // Truncated or garbage files are ignored.
        try Data(text.utf8.prefix(40)).write(to: URL(fileURLWithPath: store.path))
        #expect(store.load() == nil)
    }

    @Test func formatMatchesTheBundledVector() throws {
        let vector = try #require(
            try StrictJSON.parse(PackagePaths.vector("shadow/jwks-cache/cache-v1.json")).objectValue)
        let fileText = String(
            decoding: try PackagePaths.vector("shadow/jwks-cache/" + (vector["file"]?.stringValue ?? "")), as: UTF8.self
        )
        let snapshot = try FileKeySetStore.decode(Array(fileText.utf8), url: vector["url"]?.stringValue ?? "")
        #expect(snapshot.etag == vector["etag"]?.stringValue)
        #expect(snapshot.body.map { String(decoding: $0, as: UTF8.self) } == vector["body"]?.stringValue)
        #expect(
            snapshot.fetchedAt?.timeIntervalSince1970
                == vector["fetchedAtMs"]?.numberValue.map { $0.doubleValue / 1000 })
        // Our encoder produces the vector byte for byte.
        #expect(FileKeySetStore.encode(snapshot, url: vector["url"]?.stringValue ?? "") == fileText)
        let tampered = String(
            decoding: try PackagePaths.vector("shadow/jwks-cache/" + (vector["tamperedFile"]?.stringValue ?? "")),
            as: UTF8.self)
        #expect(throws: (any Error).self) {
            try FileKeySetStore.decode(Array(tampered.utf8), url: vector["url"]?.stringValue ?? "")
        }
        let flipped = fileText.replacingOccurrences(of: "\"version\":1", with: "\"version\":2")
        #expect(throws: (any Error).self) {
            try FileKeySetStore.decode(Array(flipped.utf8), url: vector["url"]?.stringValue ?? "")
        }
    }

    /// A cache file is read only in the form Docs/jwks-caching.md lays down: a file whose members
    /// are reordered, added or missing, or whose integer is written `1.0`, with a correct
    /// `sha256` over its own text, is refused (it was read: the digest was over its members as
    /// they came).
    @Test func aCacheFileIsReadOnlyInItsCanonicalForm() throws {
        let vector = try #require(
            try StrictJSON.parse(PackagePaths.vector("shadow/jwks-cache/cache-v1.json")).objectValue)
        let url = try #require(vector["url"]?.stringValue)
        let fileText = String(
            decoding: try PackagePaths.vector("shadow/jwks-cache/" + (vector["file"]?.stringValue ?? "")), as: UTF8.self
        )
        // `text` (members before sha256, as written) with its digest appended as the format does.
        func hashed(_ text: String) -> [UInt8] {
            let digest = SHA256.hash(data: Array(text.utf8)).map { String(format: "%02x", $0) }.joined()
            return Array((String(text.dropLast()) + ",\"sha256\":\"\(digest)\"}").utf8)
        }
        let canonical = String(fileText[..<fileText.range(of: ",\"sha256\"")!.lowerBound]) + "}"
        #expect(hashed(canonical) == Array(fileText.utf8))
        #expect(throws: Never.self) { try FileKeySetStore.decode(hashed(canonical), url: url) }
        let edits = [
            canonical.replacingOccurrences(of: "\"version\":1", with: "\"version\":1.0"),
            canonical.replacingOccurrences(of: "{\"body\"", with: "{\"aaa\":1,\"body\""),
            canonical.replacingOccurrences(of: ",\"version\":1}", with: "}").replacingOccurrences(
                of: "{", with: "{\"version\":1,", options: [],
                range: canonical.startIndex..<canonical.index(after: canonical.startIndex)),
            canonical.replacingOccurrences(of: "\"format\"", with: " \"format\""),
        ]
        for edited in edits {
            #expect(edited != canonical)
            #expect(throws: FileKeySetStore.FormatError.self, "\(edited)") {
                try FileKeySetStore.decode(hashed(edited), url: url)
            }
        }
    }

    /// Whatever this writer writes, this reader reads: times anywhere in the range (each taken to
    /// the millisecond, as the file keeps them) and text that needs escapes or is not ASCII.
    @Test func everyFileTheWriterMakesReadsBack() throws {
        var generator = SystemRandomNumberGenerator()
        let lowest = Timestamp.range.lowerBound, highest = Timestamp.range.upperBound
        var milliseconds: [Int64] = [lowest, lowest + 1, -1, 0, 1, 1_700_000_000_123, highest - 1, highest]
        for _ in 0..<2000 { milliseconds.append(Int64.random(in: lowest...highest, using: &generator)) }
        let texts = ["", "\"quoted\" \\ back", "tab\tnew\nline\u{1}\u{7F}", "\u{2028}\u{2029}", "e\u{301} \u{E9} 😀"]
        for (index, ms) in milliseconds.enumerated() {
            let date = Date(timeIntervalSince1970: Double(ms) / 1000)
            var snapshot = KeySetSnapshot()
            snapshot.body = Array("{\"keys\":[]}".utf8)
            (snapshot.fetchedAt, snapshot.expiresAt, snapshot.lastAttempt, snapshot.retryNotBefore) =
                (date, date, date, date)
            snapshot.etag = texts[index % texts.count]
            snapshot.lastFailure = texts[(index + 1) % texts.count]
            snapshot.lastModified = texts[(index + 2) % texts.count]
            snapshot.unknownKeyIDs = [.init(keyID: texts[(index + 3) % texts.count], at: date)]
            let file = FileKeySetStore.encode(snapshot, url: url)
            let read = try FileKeySetStore.decode(Array(file.utf8), url: url)
            #expect(read.fetchedAt.flatMap(Timestamp.init)?.milliseconds == ms, "\(ms)")
            #expect(read.etag == snapshot.etag && read.lastFailure == snapshot.lastFailure)
            #expect(FileKeySetStore.encode(read, url: url) == file)
        }
    }

    @Test func cooldownAndNegativeCacheHoldAcrossProviders() async throws {
        let body = TestKeys.jwksJSON([try TestKeys.jwk(TestKeys.rsa, kid: "a")])
        let server = try LoopbackHTTPServer { _ in .json(body) }
        let clock = ManualClock()
        var configuration = JWKSProvider.Configuration(url: server.url("/keys"))
        configuration.allowLoopbackHTTP = true
        func freshProvider() throws -> JWKSProvider {
            try JWKSProvider(
                configuration: configuration, transport: DefaultHTTPTransport(allowLoopbackHTTP: true),
                store: FileKeySetStore(url: configuration.url, directory: directory.path), clock: clock.clock)
        }
        _ = try await freshProvider().keySet()
        #expect(server.requestCount == 1)
        // Each "process" is a new provider reading the same file: no fetch while fresh.
        for _ in 0..<5 { _ = try await freshProvider().key(for: "a", algorithm: .rs256) }
        #expect(server.requestCount == 1)
        // Twenty random kids inside one cooldown: at most one extra fetch in all.
        clock.advance(by: 31)
        for index in 0..<20 {
            do {
                _ = try await freshProvider().key(for: "random-\(index)", algorithm: .rs256)
                Issue.record("unknown kid accepted")
            } catch let error as JOSEError {
                #expect(error.code == .unknownKey)
            }
        }
        #expect(server.requestCount == 2)
        let stored = try #require(FileKeySetStore(url: configuration.url, directory: directory.path).load())
        #expect(stored.unknownKeyIDs.count == 20)
    }
}
