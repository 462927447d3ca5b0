import Foundation
import ShadowCore
import ShadowJOSE
@testable import ShadowJWKS
import ShadowTestSupport
import ShadowHTTP
import HTTPTypes
import Testing

/// Caching headers as a hostile key server sends them. Each used to kill the process (SIGILL)
/// before the stale-if-error fallback could run.
@Suite struct HostileHeaderTests {
    let now = Date(timeIntervalSince1970: 1_700_000_000)

    /// The fields as a transport reads them from a response.
    private func headers(_ pairs: [(String, String)]) throws -> HTTPFields {
        try TransportResponse(code: 200, fields: pairs.map { (name: $0.0, value: $0.1) }, body: []).headerFields
    }

    @Test(
        arguments: [
            ([("Cache-Control", "=")], nil),
            ([("Cache-Control", "=,=,,  ,=5")], nil),
            ([("Cache-Control", "max-age=")], 0),
            ([("Cache-Control", "max-age=\"")], 0),
            ([("Cache-Control", "max-age=-1")], 0),
            ([("Cache-Control", "max-age=99999999999999999999999999999")], 2_147_483_648),
            ([("Cache-Control", "max-age=\"120\"")], 120),
            ([("Cache-Control", "MAX-AGE=7, max-age=9")], 7),
            ([("Cache-Control", "private=\"a,b\", max-age=30")], 30),
            ([("Cache-Control", "no-store, max-age=30")], 0),
            ([("Expires", "Sun, 06 Nov 99999999999999 08:49:37 GMT")], 0),
            ([("Expires", "Sun, 06 Nov 1994 08:49:37 GMT"), ("Date", "Sun, 06 Nov 99999999999999 08:49:37 GMT")], 0),
            (
                [("Expires", "Tue, 14 Nov 2023 23:13:20 GMT"), ("Date", "Tue, 14 Nov 99999999999999 22:13:20 GMT")],
                3600
            ),
            ([("Expires", "Tue, 14 Nov 2023 23:13:20 GMT"), ("Date", "Tuesday, 14-Nov-23 22:13:20 GMT")], 3600),
            ([("Expires", "Tue Nov 14 23:13:20 2023")], 3600),
            ([("Expires", "Fri, 31 Dec 9999 23:59:59 GMT")], 253_402_300_799 - 1_700_000_000),
            ([("Expires", "Sat, 01 Jan 10000 00:00:00 GMT")], 0),
            ([("Expires", "Sun, 31 Feb 2023 00:00:00 GMT")], 0),
            ([("Expires", String(repeating: "9", count: 10_000))], 0),
            // Repeated Cache-Control fields are one list; a field that holds one value counts once.
            ([("Cache-Control", "max-age=30"), ("Cache-Control", "no-store")], 0),
            ([("Cache-Control", "max-age=30"), ("cache-control", "max-age=90")], 30),
            ([("Expires", "Tue, 14 Nov 2023 23:13:20 GMT"), ("Expires", "Fri, 31 Dec 9999 23:59:59 GMT")], 3600),
            // A name that is not an HTTP token is no field at all.
            ([("Cache Control", "max-age=30")], nil),
            ([("Cache-Control\r\nX", "max-age=30")], nil),
        ] as [([(String, String)], Double?)])
    func freshnessNeverTraps(pairs: [(String, String)], expected: Double?) throws {
        #expect(HTTPCaching.freshnessLifetime(try headers(pairs), now: now) == expected, "\(pairs)")
    }

    /// A request prints without its header values or body, which carry credentials.
    @Test func aRequestPrintsNoCredential() {
        let request = TransportRequest(
            method: .post, url: "https://example.com/token", headerFields: [.authorization: "Bearer sekret-token"],
            body: Array("refresh_token=sekret-refresh".utf8))
        var dumped = ""
        dump(request, to: &dumped)
        for text in ["\(request)", String(reflecting: request), dumped] {
            #expect(!text.contains("sekret") && text.contains("POST https://example.com/token"), "\(text)")
        }
    }

    /// A transport refuses a status code outside 100...599 instead of passing it on.
    @Test(arguments: [0, 99, 600, 999, -1, Int.max])
    func statusOutsideTheRangeIsRefused(code: Int) {
        #expect(throws: HTTPTransportError.self) { try TransportResponse(code: code, fields: [], body: []) }
    }

    @Test(
        arguments: [
            ("Sun, 06 Nov 99999999999999 08:49:37 GMT", nil),
            ("99999999999999999999999", 2_147_483_648),
            ("120", 120),
            ("-5", nil),
            ("Tue, 14 Nov 2023 22:23:20 GMT", 600),
            ("Tue, 14 Nov 2023 22:03:20 GMT", 0),
            ("", nil),
        ] as [(String, Double?)])
    func retryAfterNeverTraps(value: String, expected: Double?) throws {
        #expect(HTTPCaching.retryAfter(try headers([("Retry-After", value)]), now: now) == expected, "\(value)")
    }

    /// Every HTTP-date form formats back to itself, across the supported years.
    @Test func httpDatesRoundTrip() throws {
        var generator = SeededGenerator(seed: 0x0DA7_E5)
        for _ in 0..<1000 {
            let seconds = Int64.random(
                in: Timestamp.minimum.wholeSeconds...Timestamp.maximum.wholeSeconds, using: &generator)
            let time = try #require(Timestamp(wholeSeconds: seconds))
            #expect(HTTPCaching.parseHTTPDate(HTTPCaching.formatHTTPDate(time)) == time, "seed 0x0DA7E5, \(seconds)")
        }
    }

    /// Header values a server sent are echoed back only when they cannot split the request.
    @Test func validatorsWithControlCharactersAreNotEchoed() {
        #expect(HTTPCaching.isSafeToEcho("\"v1\""))
        #expect(!HTTPCaching.isSafeToEcho("\"v1\"\r\nX-Injected: 1"))
        #expect(!HTTPCaching.isSafeToEcho(String(repeating: "a", count: 2000)))
    }

    /// After a good fetch, the server turns hostile on every header at once: verification keeps
    /// using the stale set within its bound, as the documented fallback says.
    @Test func aHostileServerStillLeavesTheStaleSetServing() async throws {
        let clock = ManualClock()
        let signer = try JWSSigner.rs256(TestKeys.rsa, keyID: "key-a")
        let body = TestKeys.jwksJSON([try signer.publicJWK()])
        let hostile: [(String, String)] = [
            ("Cache-Control", "="), ("Expires", "Sun, 06 Nov 99999999999999 08:49:37 GMT"),
            ("Date", "Sun, 06 Nov 99999999999999 08:49:37 GMT"),
            ("Retry-After", "Sun, 06 Nov 99999999999999 08:49:37 GMT"),
        ]
        let server = try LoopbackHTTPServer { _ in .json(body, headers: [("Cache-Control", "max-age=60")]) }
        var configuration = JWKSProvider.Configuration(url: server.url("/keys"))
        configuration.allowLoopbackHTTP = true
        let provider = try JWKSProvider(
            configuration: configuration, transport: DefaultHTTPTransport(allowLoopbackHTTP: true), clock: clock.clock)
        let verifier = JWTVerifier(policy: ClaimPolicy(issuer: "https://issuer.example"), clock: clock.clock)
        _ = try await provider.keySet()

        server.setHandler { _ in .respond(status: 503, headers: hostile, body: []) }
        clock.advance(by: 120)
        let token = try signer.sign(claims: TokenFactory.claims(now: Int64(clock.now.timeIntervalSince1970)))
        _ = try await verifier.verify(token, keys: provider)
        #expect(server.requestCount == 2)
        #expect(try provider.status.snapshot.lastFailure?.contains("503") == true)

        // A 200 with the same headers is a good fetch whose freshness is clamped, not a crash.
        server.setHandler { _ in .json(body, headers: hostile) }
        clock.advance(by: 301)
        _ = try await verifier.verify(
            try signer.sign(claims: TokenFactory.claims(now: Int64(clock.now.timeIntervalSince1970))), keys: provider)
        #expect(server.requestCount == 3)
        #expect(try provider.status.snapshot.expiresAt == clock.now.addingTimeInterval(60))
    }
}
