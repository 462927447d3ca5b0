#if canImport(AsyncHTTPClient)
import Foundation
import ShadowHTTP
import AsyncHTTPClient
import ShadowJOSE
import ShadowJWKS
import HTTPTypes
import ShadowTestSupport
import Testing

/// AsyncHTTPClientTransport against servers that misbehave on purpose: the cap, the deadline and
/// the no-redirect rule must hold whatever they send. Every server here stops by itself.
///
/// In-process times depend on Swift's shared thread pool, which the suite's blocking CLI tests can
/// hold for seconds; so the cap tests give the request a long deadline (the cap, not the clock,
/// must end them) and the deadline tests check only that the deadline is not early. The upper
/// bounds, in a process of its own, are in NetworkCLITests.
@Suite struct TransportTests {
    let transport = AsyncHTTPClientTransport(allowLoopbackHTTP: true)
    static let cap = 256 * 1024
    static let megabyte = [UInt8](repeating: UInt8(ascii: "x"), count: 1 << 20)

    /// Sends a GET to `server` and returns the error it threw and the seconds it took.
    func failure(_ server: LoopbackHTTPServer, timeout: Duration = .seconds(120)) async -> (HTTPTransportError?, Double)
    {
        let started = Date()
        do {
            let response = try await transport.send(
                TransportRequest(url: server.url("/keys"), timeout: timeout, maxResponseBytes: Self.cap))
            Issue.record("expected a failure, got status \(response.status) with \(response.body.count) bytes")
            return (nil, Date().timeIntervalSince(started))
        } catch let error as HTTPTransportError {
            return (error, Date().timeIntervalSince(started))
        } catch {
            Issue.record("not an HTTPTransportError: \(error)")
            return (nil, Date().timeIntervalSince(started))
        }
    }

    static func head(_ fields: String) -> [UInt8] {
        Array("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\(fields)\r\n".utf8)
    }

    @Test func anEndlessBodyStopsAtTheCap() async throws {
        let server = try LoopbackHTTPServer { _ in
            .stream(interval: 0, limit: 20) { index in index == 0 ? Self.head("Connection: close\r\n") : Self.megabyte }
        }
        let (error, _) = await failure(server)
        #expect(error?.kind == .bodyTooLarge)
        // The client stopped reading: what the server got out is the cap plus what socket buffers hold.
        #expect(server.bytesStreamed < 64 << 20, "the server wrote \(server.bytesStreamed) bytes")
    }

    @Test func aHugeContentLengthFailsBeforeTheBody() async throws {
        let server = try LoopbackHTTPServer { _ in
            .stream(interval: 0, limit: 20) { index in
                index == 0 ? Self.head("Content-Length: 1000000000000\r\n") : Self.megabyte
            }
        }
        let (error, _) = await failure(server)
        #expect(error?.kind == .bodyTooLarge)
        #expect(error?.message.contains("1000000000000") == true)
        #expect(server.bytesStreamed < 64 << 20)
    }

    @Test func aChunkedBodyWithoutAnEndStopsAtTheCap() async throws {
        let chunk = Array("100000\r\n".utf8) + Self.megabyte + Array("\r\n".utf8)
        let server = try LoopbackHTTPServer { _ in
            .stream(interval: 0, limit: 20) { index in index == 0 ? Self.head("Transfer-Encoding: chunked\r\n") : chunk
            }
        }
        let (error, _) = await failure(server)
        #expect(error?.kind == .bodyTooLarge)
        #expect(server.bytesStreamed < 64 << 20)
    }

    @Test func aBodyDrippingOneByteASecondHitsTheDeadline() async throws {
        let server = try LoopbackHTTPServer { _ in
            .stream(interval: 1, limit: 30) { index in
                index == 0 ? Self.head("Content-Length: 100\r\n") : [UInt8(ascii: "{")]
            }
        }
        let (error, seconds) = await failure(server, timeout: .seconds(2))
        #expect(error?.kind == .timeout)
        #expect(seconds >= 1.9, "took \(seconds) s")
    }

    @Test func aHeadDrippingOneByteASecondHitsTheDeadline() async throws {
        let head = Self.head("Content-Length: 2\r\n") + Array("{}".utf8)
        let server = try LoopbackHTTPServer { _ in
            .stream(interval: 1, limit: 30) { index in index < head.count ? [head[index]] : nil }
        }
        let (error, seconds) = await failure(server, timeout: .seconds(2))
        #expect(error?.kind == .timeout)
        #expect(seconds >= 1.9, "took \(seconds) s")
    }

    @Test func aSilentServerHitsTheDeadline() async throws {
        let server = try LoopbackHTTPServer { _ in .hang(seconds: 30) }
        let (error, seconds) = await failure(server, timeout: .seconds(1))
        #expect(error?.kind == .timeout)
        #expect(seconds >= 0.9, "took \(seconds) s")
    }

    @Test func redirectsAreAnswersNotFollowed() async throws {
        let server = try LoopbackHTTPServer { request in
            request.path == "/keys"
                ? .respond(status: 302, headers: [("Location", "/elsewhere")], body: []) : .json("{\"keys\":[]}")
        }
        let response = try await transport.send(TransportRequest(url: server.url("/keys"), timeout: .seconds(120)))
        #expect(response.status == 302)
        #expect(response.headerFields[.location] == "/elsewhere")
        #expect(server.requests.map(\.path) == ["/keys"])
    }

    @Test func aBodyAtTheCapIsAccepted() async throws {
        let body = [UInt8](repeating: UInt8(ascii: "a"), count: Self.cap)
        let server = try LoopbackHTTPServer { _ in .respond(status: 200, headers: [], body: body) }
        let response = try await transport.send(
            TransportRequest(url: server.url("/keys"), timeout: .seconds(120), maxResponseBytes: Self.cap))
        #expect(response.body == body)
        let over = try LoopbackHTTPServer { _ in .respond(status: 200, headers: [], body: body + [0x61]) }
        let (error, _) = await failure(over)
        #expect(error?.kind == .bodyTooLarge)
    }

    @Test func plainHTTPNeedsTheOptInAndALoopbackAddress() async throws {
        let strict = AsyncHTTPClientTransport(allowLoopbackHTTP: false)
        for url in [
            "http://127.0.0.1:1/keys", "http://example.com/keys", "ftp://127.0.0.1/keys",
            "https://user:pw@example.com/keys",
        ] {
            do {
                _ = try await strict.send(TransportRequest(url: url))
                Issue.record("\(url) was sent")
            } catch let error as HTTPTransportError {
                #expect(error.kind == .forbiddenURL, "\(url)")
            }
        }
    }

    @Test func httpsTrustsTheSystemStoreAndTheGivenCAOnly() async throws {
        let body = Array(#"{"keys":[]}"#.utf8)
        let server = try LoopbackHTTPSServer(body: body)
        let trusting = try AsyncHTTPClientTransport(
            options: .init(additionalTrustRootsFile: LoopbackHTTPSServer.caFile, proxy: .none))
        let response = try await trusting.send(TransportRequest(url: server.url("/keys"), timeout: .seconds(120)))
        #expect(response.status == 200 && response.body == body)

        let system = try AsyncHTTPClientTransport(options: .init(proxy: .none))
        do {
            _ = try await system.send(TransportRequest(url: server.url("/keys"), timeout: .seconds(120)))
            Issue.record("a certificate from an unknown CA was accepted")
        } catch let error as HTTPTransportError {
            #expect(error.kind == .tls, "an untrusted certificate is a TLS failure: \(error)")
        }
        #expect(throws: HTTPTransportError.self) {
            try AsyncHTTPClientTransport(options: .init(additionalTrustRootsFile: "/nonexistent/ca.pem"))
        }
    }

    @Test func aCallersClientIsUsedAsItIs() async throws {
        let server = try LoopbackHTTPServer { _ in .json("{}") }
        let client = HTTPClient(configuration: .init(redirectConfiguration: .disallow))
        let shared = AsyncHTTPClientTransport(client: client, allowLoopbackHTTP: true)
        let response = try await shared.send(TransportRequest(url: server.url("/"), timeout: .seconds(120)))
        #expect(response.status == 200)
        try await client.shutdown()
    }

    @Test func aCallersClientThatFollowsRedirectsIsCaught() async throws {
        let server = try LoopbackHTTPServer { request in
            request.path == "/keys"
                ? .respond(status: 302, headers: [("Location", "/elsewhere")], body: []) : .json("{}")
        }
        let client = HTTPClient(configuration: .init(redirectConfiguration: .follow(max: 3, allowCycles: false)))
        let shared = AsyncHTTPClientTransport(client: client, allowLoopbackHTTP: true)
        do {
            _ = try await shared.send(TransportRequest(url: server.url("/keys"), timeout: .seconds(120)))
            Issue.record("a redirected answer was returned")
        } catch let error as HTTPTransportError {
            #expect(error.message.contains("redirect"))
        }
        try await client.shutdown()
    }
}

extension TransportTests {
    /// Many verifications at once against a cold provider over real TLS. Run alone with
    /// `swift test --filter TransportTests/Stress`.
    @Suite(.tags(.stress)) struct Stress {
        @Test func aThousandColdVerificationsMakeOneRequest() async throws {
            let signer = try JWSSigner.rs256(TestKeys.rsa, keyID: "k1")
            let server = try LoopbackHTTPSServer(body: Array(TestKeys.jwksJSON([try signer.publicJWK()]).utf8))
            let transport = try AsyncHTTPClientTransport(
                options: .init(additionalTrustRootsFile: LoopbackHTTPSServer.caFile, proxy: .none))
            var configuration = JWKSProvider.Configuration(url: server.url("/keys"))
            configuration.timeout = .seconds(60)  // the suite's other tests can hold the shared thread pool for seconds
            let provider = try JWKSProvider(configuration: configuration, transport: transport)
            let now = Int64(Date().timeIntervalSince1970)
            let token = try signer.sign(claims: TokenFactory.claims(now: now))
            let verifier = JWTVerifier(
                policy: ClaimPolicy(issuer: "https://issuer.example", audiences: ["app.example"]))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<1000 { group.addTask { _ = try await verifier.verify(token, keys: provider) } }
                try await group.waitForAll()
            }
            #expect(server.requestCount == 1)
            await provider.shutdown()
        }
    }
}

@Suite struct ProxySettingsTests {
    @Test func theProxyVariablesAreReadInCurlsOrder() throws {
        let lower = ProxySettings.fromEnvironment([
            "https_proxy": "http://lower:3128", "HTTPS_PROXY": "http://upper:3128", "ALL_PROXY": "all:1",
        ])
        #expect(try lower.server(forHost: "example.com") == .init(host: "lower", port: 3128))
        let upper = ProxySettings.fromEnvironment(["https_proxy": "", "HTTPS_PROXY": "upper:8080"])
        #expect(try upper.server(forHost: "example.com") == .init(host: "upper", port: 8080))
        let all = ProxySettings.fromEnvironment(["all_proxy": "fallback"])
        #expect(try all.server(forHost: "example.com") == .init(host: "fallback", port: 1080))
        #expect(try ProxySettings.fromEnvironment([:]).server(forHost: "example.com") == nil)
        // curl reads only the lower-case http_proxy, and plain http never goes through a proxy here.
        #expect(
            try ProxySettings.fromEnvironment(["HTTP_PROXY": "p:1", "http_proxy": "p:1"]).server(forHost: "example.com")
                == nil)
    }

    @Test func credentialsAndBracketedHostsAreParsed() throws {
        let settings = ProxySettings.fromEnvironment(["HTTPS_PROXY": "http://us%40er:p%3Ass@[::1]:3128/ignored"])
        #expect(
            try settings.server(forHost: "example.com")
                == .init(host: "::1", port: 3128, username: "us@er", password: "p:ss"))
    }

    @Test func aProxyPasswordIsNeverPrinted() throws {
        let settings = ProxySettings.fromEnvironment(["HTTPS_PROXY": "http://user:hunter2@proxy.example:3128"])
        let server = try #require(try settings.server(forHost: "example.com"))
        for text in ["\(server)", String(reflecting: server), "\(settings)"] {
            #expect(!text.contains("hunter2"), "\(text)")
        }
        #expect("\(server)" == "user:***@proxy.example:3128")
        // A user name with a terminal escape, percent-encoded in the variable, is printed escaped.
        let escaped = ProxySettings.fromEnvironment(["HTTPS_PROXY": "http://a%1B%5B2J:pw@proxy.example:3128"])
        let withEscape = try #require(try escaped.server(forHost: "example.com"))
        #expect(withEscape.username == "a\u{1B}[2J" && !"\(withEscape)".contains("\u{1B}"), "\(withEscape)")
    }

    @Test func unusableProxiesAreRefusedByName() {
        for value in [
            "https://proxy:443", "socks5://proxy:1080", "http://proxy:0", "http://proxy:65536", "http://proxy:x",
            "http://", "http://[::1", "http://a%zz@p:1", "http://proxy:+80", "http://proxy:-0",
        ] {
            let settings = ProxySettings.fromEnvironment(["HTTPS_PROXY": value])
            #expect(throws: HTTPTransportError.self, "\(value)") { try settings.server(forHost: "example.com") }
            if case .failure(let error)? = settings.https {
                #expect(error.message.hasPrefix("HTTPS_PROXY "), "\(error.message)")
            }
        }
    }

    @Test func noProxyMatchesHostsDomainsAndRanges() throws {
        let settings = ProxySettings.fromEnvironment([
            "HTTPS_PROXY": "p:1", "no_proxy": " example.com, .internal ,10.0.0.0/8,[::1],", "NO_PROXY": "ignored.test",
        ])
        for host in ["example.com", "EXAMPLE.com.", "api.example.com", "svc.internal", "internal", "10.1.2.3"] {
            #expect(try settings.server(forHost: host) == nil, "\(host)")
        }
        for host in ["notexample.com", "example.com.evil", "11.0.0.1", "ignored.test", "appleid.apple.com"] {
            #expect(try settings.server(forHost: host) != nil, "\(host)")
        }
        let everything = ProxySettings.fromEnvironment(["HTTPS_PROXY": "p:1", "NO_PROXY": "*"])
        #expect(try everything.server(forHost: "appleid.apple.com") == nil)
    }

    /// NO_PROXY entries and hosts compare by bytes, ignoring ASCII case only: `lowercased()` made
    /// a Kelvin sign (U+212A) `k`, and String equality made NFC and NFD spellings one name.
    @Test func noProxyComparesBytesIgnoringASCIICaseOnly() throws {
        let settings = ProxySettings.fromEnvironment([
            "HTTPS_PROXY": "p:1", "NO_PROXY": "ex\u{212A}.com,\u{E9}.test,Upper.EXAMPLE\n,+10.0.0.0/8,192.168.0.0/+16",
        ])
        for host in ["upper.example", "API.Upper.Example."] {
            #expect(try settings.server(forHost: host) == nil, "\(host)")
        }
        for host in ["exk.com", "EXK.com", "e\u{301}.test", "10.1.2.3", "192.168.1.1"] {
            #expect(try settings.server(forHost: host) != nil, "\(host)")
        }
        // The same bytes match, whatever they are.
        #expect(try settings.server(forHost: "\u{E9}.test") == nil)
        #expect(!ProxySettings.fromEnvironment(["NO_PROXY": "1.2.3.4/8"]).bypasses("+1.2.3.4"))
        // A bracket is one byte: with a mark after it, it is still a bracket, and the mark stays.
        let marked = ProxySettings.fromEnvironment(["NO_PROXY": "[\u{301}::1]"])
        #expect(marked.noProxy == ["\u{301}::1"] && !marked.bypasses("::1") && marked.bypasses("[\u{301}::1]"))
    }

    @Test func aProxyValueIsReadByBytes() throws {
        let capitals = ProxySettings.fromEnvironment(["HTTPS_PROXY": " HTTP://proxy.example:3128/path\n"])
        #expect(try capitals.server(forHost: "example.com") == .init(host: "proxy.example", port: 3128))
        for value in ["http://prox\u{1}y:80", "http://pr\u{F6}xy:80", "http://a%+f@p:1", "http://a%f@p:1"] {
            let settings = ProxySettings.fromEnvironment(["HTTPS_PROXY": value])
            #expect(throws: HTTPTransportError.self, "\(value.debugDescription)") {
                try settings.server(forHost: "example.com")
            }
        }
    }

    /// The host the NO_PROXY check sees is the one the client connects to: Foundation's parse of
    /// the URL, with its escapes decoded and an internationalized name in its xn-- form.
    @Test func theProxyCheckSeesTheHostTheClientConnectsTo() {
        let cases: [(String, String, String)] = [
            ("https://ex%61mple.com/a", "https", "example.com"),
            ("HTTPS://h\u{E4}.example/", "https", "xn--h-0fa.example"),
            ("https://[::1]:8443/x", "https", "::1"),
            ("https://user@host.example:443/", "https", "host.example"),
        ]
        for (url, scheme, host) in cases {
            let found = AsyncHTTPClientTransport.schemeAndHost(url)
            #expect(found.scheme == scheme && found.host == host, "\(url): \(found)")
        }
    }
}
#endif
