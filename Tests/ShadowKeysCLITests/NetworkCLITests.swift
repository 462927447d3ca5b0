import Crypto
import Foundation
import ShadowCore
import ShadowJOSE
import ShadowTestSupport
import Testing

/// The lean binary's own HTTP client, as scripts meet it: hostile servers cost a bounded time and
/// memory, https works with a given CA, and no helper program or networking library is involved.
@Suite(.tags(.multiProcess), .ownThreads) struct NetworkCLITests {
    let cache: TemporaryDirectory
    let environment: [String: String]

    init() throws {
        cache = try TemporaryDirectory()
        environment = ["XDG_CACHE_HOME": cache.path]
    }

    private func fetch(
        _ url: String, _ extra: [String] = [], environment extraEnvironment: [String: String] = [:]
    ) throws -> (CLIResult, Double) {
        let started = Date()
        let result = try CLIRunner.run(
            ["jwks", "fetch", url] + extra, environment: environment.merging(extraEnvironment) { $1 }, timeout: 30)
        return (result, Date().timeIntervalSince(started))
    }

    static func head(_ fields: String) -> [UInt8] {
        Array("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\(fields)\r\n".utf8)
    }
    static let megabyte = [UInt8](repeating: UInt8(ascii: "x"), count: 1 << 20)

    @Test func anEndlessBodyEndsInExit13WithBoundedMemory() throws {
        let server = try LoopbackHTTPServer { _ in
            .stream(interval: 0, limit: 30) { index in index == 0 ? Self.head("Connection: close\r\n") : Self.megabyte }
        }
        // The cap ends it ("exceeds"), not the 5 s deadline ("within"), however loaded the machine.
        let (result, _) = try fetch(server.url("/keys"), ["--allow-http-loopback"])
        #expect(result.status == 13, "\(result.stderr)")
        #expect(result.stderr.contains("exceeds"), "\(result.stderr)")
        #expect(result.peakMemoryKiB > 0 && result.peakMemoryKiB < 64 * 1024, "peak RSS \(result.peakMemoryKiB) KiB")
    }

    @Test func aChunkedBodyWithoutAnEndEndsInExit13WithBoundedMemory() throws {
        let chunk = Array("100000\r\n".utf8) + Self.megabyte + Array("\r\n".utf8)
        let server = try LoopbackHTTPServer { _ in
            .stream(interval: 0, limit: 30) { index in index == 0 ? Self.head("Transfer-Encoding: chunked\r\n") : chunk
            }
        }
        let (result, _) = try fetch(server.url("/keys"), ["--allow-http-loopback"])
        #expect(result.status == 13, "\(result.stderr)")
        #expect(result.stderr.contains("exceeds"), "\(result.stderr)")
        #expect(result.peakMemoryKiB < 64 * 1024, "peak RSS \(result.peakMemoryKiB) KiB")
    }

    /// The fetch deadline is 5 s: a server that would drip a byte a second for 30 s gets exit 13
    /// ("within": the deadline ended it), not before the deadline, and before the server was done.
    @Test func aSlowDripEndsInExit13WithinTheDeadline() throws {
        let server = try LoopbackHTTPServer { _ in
            .stream(interval: 1, limit: 30) { index in
                index == 0 ? Self.head("Content-Length: 100000\r\n") : [UInt8(ascii: " ")]
            }
        }
        let (result, seconds) = try fetch(server.url("/keys"), ["--allow-http-loopback"])
        #expect(result.status == 13, "\(result.stderr)")
        #expect(result.stderr.contains("within"), "\(result.stderr)")
        #expect(seconds >= 4.5, "took \(seconds) s")
        let dripped = server.bytesStreamed - Self.head("Content-Length: 100000\r\n").count
        #expect(dripped < 28, "the server dripped \(dripped) of its 30 bytes: the client never left")
        #expect(result.peakMemoryKiB < 64 * 1024, "peak RSS \(result.peakMemoryKiB) KiB")
    }

    @Test func aRedirectIsNotFollowed() throws {
        let server = try LoopbackHTTPServer { request in
            request.path == "/keys"
                ? .respond(status: 302, headers: [("Location", "/elsewhere")], body: []) : .json(#"{"keys":[]}"#)
        }
        let (result, _) = try fetch(server.url("/keys"), ["--allow-http-loopback"])
        #expect(result.status == 13, "\(result.stderr)")
        #expect(result.stderr.contains("302"), "\(result.stderr)")
        #expect(server.requests.map(\.path) == ["/keys"])
    }

    #if canImport(NIOSSL)
    /// Apple requires TLS 1.3 for every call: against a server that speaks TLS 1.2 only, each
    /// Apple call and Apple's key set (a mirror included) fail before any request is sent, naming
    /// TLS; a key set that is not Apple's is still fetched from the same server.
    @Test func everyAppleCallRequiresTLS13() throws {
        let signer = try JWSSigner.rs256(TestKeys.rsa, keyID: "tls-key")
        let server = try LoopbackHTTPSServer(
            body: Array(TestKeys.jwksJSON([try signer.publicJWK()]).utf8), tls12Only: true)
        let ca = ["--ca-file", LoopbackHTTPSServer.caFile]
        let (generic, _) = try fetch(server.url("/keys"), ca)
        #expect(generic.status == 0, "a TLS 1.2 server serves a key set that is not Apple's: \(generic.stderr)")
        let served = server.requestCount
        #expect(served == 1)

        let p8 = try cache.write("AuthKey.p8", P256.Signing.PrivateKey().pemRepresentation, mode: 0o600)
        let credentials = [
            "--p8", p8, "--team-id", "TEAM123456", "--key-id", "KEY1234567", "--client-id", "com.example.app",
        ]
        let refresh = try cache.write("refresh.txt", "r.token\n", mode: 0o600)
        let token = try signer.sign(claims: TokenFactory.claims(now: Int64(Date().timeIntervalSince1970)))
        let calls: [(arguments: [String], stdin: String?)] = [
            (["apple", "refresh", "--token-file", refresh, "--base-url", server.url("")] + credentials + ca, nil),
            (
                ["apple", "revoke", "--token-file", refresh, "--kind", "refresh", "--base-url", server.url("")]
                    + credentials + ca, nil
            ),
            (["apple", "token", "--code-stdin", "--base-url", server.url("")] + credentials + ca, "code\n"),
            (["verify-token", "--apple", "--aud", "app.example", "--jwks", server.url("/apple-keys")] + ca, token),
        ]
        for call in calls {
            let result = try CLIRunner.run(
                call.arguments, stdin: call.stdin, environment: ["XDG_CACHE_HOME": cache.path])
            #expect(result.status != 0, "\(call.arguments.prefix(2)) succeeded over TLS 1.2")
            #expect(result.stderr.contains("TLS"), "\(call.arguments.prefix(2)): \(result.stderr)")
        }
        #expect(server.requestCount == served, "a request reached the TLS 1.2 server")
    }

    @Test func httpsWorksWithTheGivenCAAndFailsClosedWithout() throws {
        let signer = try JWSSigner.rs256(TestKeys.rsa, keyID: "tls-key")
        let server = try LoopbackHTTPSServer(
            headers: [("Cache-Control", "max-age=600")], body: Array(TestKeys.jwksJSON([try signer.publicJWK()]).utf8))
        let (untrusted, _) = try fetch(server.url("/keys"))
        #expect(untrusted.status == 13, "\(untrusted.stderr)")
        #expect(untrusted.stderr.lowercased().contains("certificate"), "\(untrusted.stderr)")

        let (trusted, _) = try fetch(server.url("/keys"), ["--ca-file", LoopbackHTTPSServer.caFile])
        #expect(trusted.status == 0, "\(trusted.stderr)")
        let (missing, _) = try fetch(server.url("/keys"), ["--ca-file", cache.path + "/absent.pem"])
        #expect(missing.status == 66, "\(missing.stderr)")

        // Warm cache: verify-token makes no request.
        let token = try signer.sign(claims: TokenFactory.claims(now: Int64(Date().timeIntervalSince1970)))
        let before = server.requestCount
        let verified = try CLIRunner.run(
            [
                "verify-token", "-", "--jwks", server.url("/keys"), "--aud", "app.example", "--iss",
                "https://issuer.example",
            ], stdin: token, environment: environment)
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(server.requestCount == before)
    }
    #endif

    @Test func anUnusableProxyIsAUsageErrorNamingTheVariable() throws {
        let (result, _) = try fetch("https://127.0.0.1:9/keys", environment: ["HTTPS_PROXY": "socks5://127.0.0.1:1080"])
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.stderr.contains("HTTPS_PROXY"), "\(result.stderr)")
    }

    /// One executable: a program named by the old helper variable or left beside the binary is never run.
    @Test func noHelperProgramIsEverRun() throws {
        let marker = cache.path + "/ran"
        let fake = cache.path + "/fake-fetch"
        try "#!/bin/sh\ntouch \(marker)\n".write(toFile: fake, atomically: true, encoding: .utf8)
        chmod(fake, 0o755)
        let server = try LoopbackHTTPServer { _ in .json(#"{"keys":[]}"#) }
        _ = try fetch(server.url("/keys"), ["--allow-http-loopback"], environment: ["SHADOW_KEYS_FETCH": fake])
        #expect(!FileManager.default.fileExists(atPath: marker))
        #expect(server.requestCount == 1)
        #expect(
            !Sources.mentions("shadow-keys-fetch") && !Sources.mentions("SHADOW_KEYS_FETCH"),
            "the sources still name the helper")
    }
}

/// Looks through the package's own sources.
enum Sources {
    /// True when a file under Sources/ contains `text`.
    static func mentions(_ text: String) -> Bool {
        let root = PackagePaths.root.appendingPathComponent("Sources")
        guard let files = FileManager.default.enumerator(atPath: root.path) else { return false }
        for case let file as String in files where file.hasSuffix(".swift") {
            if let contents = try? String(contentsOfFile: root.appendingPathComponent(file).path, encoding: .utf8),
                contents.contains(text)
            {
                return true
            }
        }
        return false
    }
}
