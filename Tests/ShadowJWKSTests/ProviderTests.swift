import Foundation
import ShadowCore
import ShadowJOSE
import ShadowJWKS
import ShadowTestSupport
import ShadowHTTP
import Testing

/// The key-set provider against a real loopback server, through the platform's real transport
/// (AsyncHTTPClient on Linux).
@Suite struct ProviderTests {
    let clock = ManualClock()
    let signerA: JWSSigner
    let signerB: JWSSigner
    let verifier: JWTVerifier

    init() throws {
        signerA = try JWSSigner.rs256(TestKeys.rsa, keyID: "key-a")
        signerB = try JWSSigner.rs256(TestKeys.rsa2, keyID: "key-b")
        verifier = JWTVerifier(
            policy: ClaimPolicy(issuer: "https://issuer.example", audiences: ["app.example"]), clock: clock.clock)
    }

    func jwks(_ signers: [JWSSigner]) throws -> String { TestKeys.jwksJSON(try signers.map { try $0.publicJWK() }) }

    func token(_ signer: JWSSigner) throws -> String {
        try signer.sign(claims: TokenFactory.claims(now: Int64(clock.now.timeIntervalSince1970)))
    }

    func provider(
        _ server: LoopbackHTTPServer, configure: (inout JWKSProvider.Configuration) -> Void = { _ in },
        store: (any KeySetStore)? = nil
    ) throws -> JWKSProvider {
        var configuration = JWKSProvider.Configuration(url: server.url("/keys"))
        configuration.allowLoopbackHTTP = true
        // Generous on a loaded machine; the tests about timeouts set their own.
        configuration.timeout = .seconds(30)
        configure(&configuration)
        return try JWKSProvider(
            configuration: configuration, transport: DefaultHTTPTransport(allowLoopbackHTTP: true), store: store,
            clock: clock.clock)
    }

    func expectCode(_ code: JOSEError.Code, _ body: () async throws -> Void) async {
        do {
            try await body()
            Issue.record("expected \(code)")
        } catch let error as JOSEError {
            #expect(error.code == code, "\(error)")
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func fetchesOnceAndServesFromCacheWhileFresh() async throws {
        let body = try jwks([signerA])
        let server = try LoopbackHTTPServer { _ in .json(body, headers: [("Cache-Control", "public, max-age=600")]) }
        let provider = try provider(server)
        for _ in 0..<20 { _ = try await verifier.verify(try token(signerA), keys: provider) }
        #expect(server.requestCount == 1)
        let request = try #require(server.requests.first)
        #expect(request.method == "GET")
        #expect(request.headers["user-agent"]?.hasPrefix("shadow-keys") == true)
        #expect(request.headers["if-none-match"] == nil)
        let status = try provider.status
        #expect(status.snapshot.expiresAt == clock.now.addingTimeInterval(600))
        clock.advance(by: 599)
        _ = try await verifier.verify(try token(signerA), keys: provider)
        #expect(server.requestCount == 1)
        clock.advance(by: 1)
        _ = try await verifier.verify(try token(signerA), keys: provider)
        #expect(server.requestCount == 2)
    }

    @Test(
        arguments: [
            (["Cache-Control: max-age=5"], 60.0),
            (["Cache-Control: max-age=999999"], 86400),
            (["Cache-Control: no-cache"], 60),
            ([], 3600),
            (["Expires: Tue, 14 Nov 2023 22:43:20 GMT", "Date: Tue, 14 Nov 2023 22:13:20 GMT"], 1800),
            (["Expires: garbage"], 60),
            (["Cache-Control: max-age=120", "Expires: Tue, 14 Nov 2023 22:43:20 GMT"], 120),
        ] as [([String], Double)])
    func freshnessFromHeadersIsClamped(headerLines: [String], ttl: Double) async throws {
        let body = try jwks([signerA])
        let headers = headerLines.map { line in
            let parts = line.split(separator: ":", maxSplits: 1)
            return (String(parts[0]), String(parts[1].dropFirst()))
        }
        let server = try LoopbackHTTPServer { _ in .json(body, headers: headers) }
        let provider = try provider(server)
        _ = try await provider.keySet()
        #expect(try provider.status.snapshot.expiresAt == clock.now.addingTimeInterval(ttl))
    }

    @Test func conditionalRefreshAnd304ExtendFreshness() async throws {
        let body = try jwks([signerA])
        let server = try LoopbackHTTPServer { request in
            if request.headers["if-none-match"] == "\"v1\"" {
                return .respond(status: 304, headers: [("Cache-Control", "max-age=300")], body: [])
            }
            return .json(
                body,
                headers: [
                    ("ETag", "\"v1\""), ("Last-Modified", "Tue, 14 Nov 2023 22:13:20 GMT"),
                    ("Cache-Control", "max-age=60"),
                ])
        }
        let provider = try provider(server)
        _ = try await provider.keySet()
        clock.advance(by: 61)
        _ = try await verifier.verify(try token(signerA), keys: provider)
        #expect(server.requestCount == 2)
        let second = server.requests[1]
        #expect(second.headers["if-none-match"] == "\"v1\"")
        #expect(second.headers["if-modified-since"] == "Tue, 14 Nov 2023 22:13:20 GMT")
        #expect(try provider.status.snapshot.expiresAt == clock.now.addingTimeInterval(300))
    }

    @Test func unknownKidRefreshesAtMostOncePerCooldown() async throws {
        let body = try jwks([signerA])
        let server = try LoopbackHTTPServer { _ in .json(body) }
        let provider = try provider(server)
        _ = try await provider.keySet()
        clock.advance(by: 31)
        // Many random kids: the first refreshes, every other is answered at once.
        for index in 0..<500 {
            let forged = try JWSSigner.rs256(TestKeys.rsa, keyID: "random-\(index)").sign(
                claims: TokenFactory.claims(now: Int64(clock.now.timeIntervalSince1970)))
            await expectCode(.unknownKey) { _ = try await verifier.verify(forged, keys: provider) }
        }
        #expect(server.requestCount == 2)
        let negative = try provider.status.snapshot.unknownKeyIDs
        #expect(negative.count == 500)
        clock.advance(by: 31)
        let again = try JWSSigner.rs256(TestKeys.rsa, keyID: "random-new").sign(
            claims: TokenFactory.claims(now: Int64(clock.now.timeIntervalSince1970)))
        await expectCode(.unknownKey) { _ = try await verifier.verify(again, keys: provider) }
        #expect(server.requestCount == 3)
    }

    @Test func negativeCacheIsBounded() async throws {
        let body = try jwks([signerA])
        let server = try LoopbackHTTPServer { _ in .json(body) }
        let provider = try provider(server) { $0.negativeCacheSize = 10 }
        _ = try await provider.keySet()
        for index in 0..<50 {
            await expectCode(.unknownKey) { _ = try await provider.key(for: "k\(index)", algorithm: .rs256) }
        }
        let negative = try provider.status.snapshot.unknownKeyIDs
        #expect(negative.count == 10)
        #expect(negative.last?.keyID == "k49")
    }

    @Test func rotationAddsNewKeysAndDropsOldOnesAtOnce() async throws {
        let first = try jwks([signerA])
        let second = try jwks([signerB])
        let server = try LoopbackHTTPServer { _ in .json(first) }
        let provider = try provider(server)
        _ = try await verifier.verify(try token(signerA), keys: provider)
        server.setHandler { _ in .json(second) }
        clock.advance(by: 31)
        // A token from the new key: unknown kid → one refresh → verifies.
        _ = try await verifier.verify(try token(signerB), keys: provider)
        #expect(server.requestCount == 2)
        // The dropped key stops verifying at once.
        await expectCode(.unknownKey) { _ = try await verifier.verify(try token(signerA), keys: provider) }
    }

    @Test(arguments: [
        "500", "429", "hang", "reset", "close", "oversize", "invalid-json", "unsupported-only", "empty", "redirect",
    ])
    func failedRefreshServesStaleThenFailsClosed(fault: String) async throws {
        let body = try jwks([signerA])
        let server = try LoopbackHTTPServer { _ in .json(body, headers: [("Cache-Control", "max-age=60")]) }
        // Short enough for "hang" to time out, long enough for the first fetch on a loaded machine.
        let provider = try provider(server) { if fault == "hang" { $0.timeout = .seconds(3) } }
        _ = try await verifier.verify(try token(signerA), keys: provider)
        server.setHandler { _ in
            switch fault {
            case "500": return .json(#"{"error":"boom"}"#, status: 500)
            case "429": return .json("{}", status: 429, headers: [("Retry-After", "120")])
            case "hang": return .hang(seconds: 30)
            case "reset": return .reset
            case "close": return .close
            case "oversize": return .json(String(repeating: " ", count: 300 * 1024) + body)
            case "invalid-json": return .json("{\"keys\":[")
            case "unsupported-only":
                return .json(
                    #"{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"h"},{"kty":"EC","crv":"P-521","x":"AA","y":"AA"}]}"#)
            case "empty": return .json(#"{"keys":[]}"#)
            default: return .respond(status: 302, headers: [("Location", "https://elsewhere.example/keys")], body: [])
            }
        }
        clock.advance(by: 61)
        // The refresh fails; the last good set keeps serving.
        _ = try await verifier.verify(try token(signerA), keys: provider)
        #expect(server.requestCount == 2)
        let snapshot = try provider.status.snapshot
        #expect(snapshot.lastFailure != nil)
        // No retry before the cooldown (or Retry-After): callers are answered from the stale set.
        _ = try await verifier.verify(try token(signerA), keys: provider)
        #expect(server.requestCount == 2)
        if fault == "429" { #expect(snapshot.retryNotBefore == clock.now.addingTimeInterval(120)) }
        // Past the staleness limit: keys unavailable, never a signature error.
        clock.advance(by: 86400)
        await expectCode(.keysUnavailable) { _ = try await verifier.verify(try token(signerA), keys: provider) }
    }

    @Test func firstFetchFailureIsKeysUnavailable() async throws {
        let server = try LoopbackHTTPServer { _ in .json("{}", status: 503) }
        let provider = try provider(server)
        await expectCode(.keysUnavailable) { _ = try await verifier.verify(try token(signerA), keys: provider) }
        do {
            _ = try await provider.keySet()
        } catch let error as JOSEError {
            #expect(error.reason.contains("HTTP status 503"))
        }
    }

    @Test func timeoutIsEnforced() async throws {
        // The server would hold the connection for 60 s without answering. The failure must be
        // the 3 s deadline's, not the connection closing when the server gives up, and the request
        // must have reached the server (3 s, not less: on a loaded machine a shorter deadline can
        // pass before the server reads the request). Wall time is not asserted: under a loaded
        // test run it measures scheduling, not the transport.
        let server = try LoopbackHTTPServer { _ in .hang(seconds: 60) }
        let provider = try provider(server) { $0.timeout = .seconds(3) }
        await expectCode(.keysUnavailable) { _ = try await provider.keySet() }
        let failure = try provider.status.snapshot.lastFailure
        #expect(failure?.contains("within 3.0 s") == true, "\(failure ?? "nil")")
        #expect(server.requestCount == 1)
    }

    @Test func onlyHTTPSOrOptedInLoopbackHTTP() throws {
        #expect(throws: HTTPTransportError.self) {
            try JWKSProvider(configuration: .init(url: "http://example.com/keys"), transport: nil)
        }
        #expect(throws: HTTPTransportError.self) {
            try JWKSProvider(configuration: .init(url: "http://127.0.0.1:1/keys"), transport: nil)
        }
        var loopback = JWKSProvider.Configuration(url: "http://127.0.0.1:1/keys")
        loopback.allowLoopbackHTTP = true
        #expect(throws: Never.self) { try JWKSProvider(configuration: loopback, transport: nil) }
        var named = JWKSProvider.Configuration(url: "http://localhost:1/keys")
        named.allowLoopbackHTTP = true
        #expect(throws: HTTPTransportError.self) { try JWKSProvider(configuration: named, transport: nil) }
        for url in ["ftp://example.com/keys", "https://user:pw@example.com/keys", "not a url", "https:///keys"] {
            #expect(throws: HTTPTransportError.self, "\(url)") {
                try JWKSProvider(configuration: .init(url: url), transport: nil)
            }
        }
        #expect(throws: Never.self) {
            try JWKSProvider(configuration: .init(url: "https://appleid.apple.com/auth/keys"), transport: nil)
        }
        #expect(URLPolicy.isLoopback("127.0.0.1") && URLPolicy.isLoopback("[::1]") && URLPolicy.isLoopback("127.1.2.3"))
        #expect(
            !URLPolicy.isLoopback("128.0.0.1") && !URLPolicy.isLoopback("127.0.0.1.example.com")
                && !URLPolicy.isLoopback("localhost") && !URLPolicy.isLoopback("127.+0.0.1")
                && !URLPolicy.isLoopback("127.0.0.256") && !URLPolicy.isLoopback("127.0.0.0001"))
    }

    @Test func shutdownStopsTheProvider() async throws {
        let body = try jwks([signerA])
        let server = try LoopbackHTTPServer { _ in .json(body) }
        var configuration = JWKSProvider.Configuration(url: server.url("/keys"))
        configuration.allowLoopbackHTTP = true
        let count = try await withJWKSProvider(
            configuration: configuration, transport: DefaultHTTPTransport(allowLoopbackHTTP: true)
        ) { provider in
            try await provider.keySet().keys.count
        }
        #expect(count == 1)
        let provider = try provider(server)
        await provider.shutdown()
        do {
            _ = try await provider.keySet()
            Issue.record("a shut-down provider answered")
        } catch let error as JWKSError {
            #expect(error.code == .shutDown)
        }
    }
}

extension ProviderTests {
    /// Many callers at once against one provider. Run alone with `swift test --filter ProviderTests/Stress`.
    @Suite(.tags(.stress)) struct Stress {
        let fixture: ProviderTests
        init() throws { fixture = try ProviderTests() }

        @Test func concurrentCallersShareOneFetch() async throws {
            let body = try fixture.jwks([fixture.signerA])
            let server = try LoopbackHTTPServer { _ in
                Thread.sleep(forTimeInterval: 0.2)
                return .json(body)
            }
            let provider = try fixture.provider(server)
            let token = try fixture.token(fixture.signerA)
            let verifier = fixture.verifier
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<200 { group.addTask { _ = try await verifier.verify(token, keys: provider) } }
                try await group.waitForAll()
            }
            #expect(server.requestCount == 1)
        }
    }
}
