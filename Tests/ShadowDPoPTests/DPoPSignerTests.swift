import Crypto
import CryptoExtras
import Foundation
import ShadowCore
import ShadowJOSE
import ShadowTestSupport
import Testing

@testable import ShadowDPoP

@Suite struct DPoPSignerTests {
    let now: Int64 = 1_700_000_000
    let url = "https://api.example.com/v1/files"

    func claims(_ proof: String) throws -> JSONObject {
        try CompactJWS(proof).unverifiedPayload()
    }

    @Test func es256ProofsVerifyAndCarryEveryClaim() throws {
        let signer = try DPoPSigner.es256(P256.Signing.PrivateKey())
        let proof = try signer.proof(
            method: "GET", url: url + "?page=2#top", accessToken: "token", nonce: "n-1",
            issuedAt: Date(timeIntervalSince1970: TimeInterval(now)))
        let header = try CompactJWS(proof).header
        #expect(header.type == "dpop+jwt" && header.algorithm == "ES256")
        #expect(header.json["jwk"]?.objectValue?["d"] == nil)
        let claims = try claims(proof)
        #expect(claims["htu"]?.stringValue == url)
        #expect(claims["htm"]?.stringValue == "GET")
        #expect(claims["nonce"]?.stringValue == "n-1")
        #expect(claims["ath"]?.stringValue == Base64URL.encode(SHA256.hash(data: Array("token".utf8))))
        // At least 96 bits of randomness (RFC 9449 §4.2): 16 bytes.
        #expect(try Base64URL.decode(try #require(claims["jti"]?.stringValue)).count == 16)
        let verified = try DPoPVerifier(clock: clock(at: now)).verify(
            [proof], method: "GET", url: url, accessToken: "token", boundTo: signer.thumbprint)
        #expect(verified.thumbprint == signer.thumbprint)
    }

    @Test func twoProofsNeverShareAJTI() throws {
        let signer = try DPoPSigner.es256(P256.Signing.PrivateKey())
        let ids = try (0..<100).map { _ in try claims(try signer.proof(method: "POST", url: url))["jti"] }
        #expect(Set(ids.compactMap { $0?.stringValue }).count == 100)
    }

    @Test func rs256ProofsVerify() throws {
        let signer = try DPoPSigner.rs256(TestKeys.rsa)
        let proof = try signer.proof(method: "POST", url: url, issuedAt: Date(timeIntervalSince1970: TimeInterval(now)))
        let verified = try DPoPVerifier(clock: clock(at: now)).verify([proof], method: "POST", url: url)
        #expect(verified.algorithm == .rs256)
    }

    /// A key whose private bytes the caller never hands over (a Secure Enclave key) signs through
    /// a function.
    @Test func anyP256KeySignsThroughAFunction() throws {
        let held = P256.Signing.PrivateKey()
        let signer = try DPoPSigner.p256(publicKey: held.publicKey) { digest in try held.signature(for: digest) }
        let proof = try signer.proof(method: "POST", url: url, issuedAt: Date(timeIntervalSince1970: TimeInterval(now)))
        let verified = try DPoPVerifier(clock: clock(at: now)).verify([proof], method: "POST", url: url)
        #expect(verified.thumbprint == (try JWK(p256: held.publicKey)).thumbprint)
    }

    /// The signer refuses what the verifier would refuse.
    @Test(arguments: [
        ("", "https://a.example/x", nil as String?, nil as String?),
        ("PO ST", "https://a.example/x", nil, nil),
        ("POST", "/relative", nil, nil),
        ("POST", "ftp://a.example/x", nil, nil),
        ("POST", "https://user@a.example/x", nil, nil),
        ("POST", "https://a.example/x", "", nil),
        ("POST", "https://a.example/x", nil, "quote\"inside"),
        ("POST", "https://a.example/x", nil, ""),
    ])
    func refusesWhatAVerifierWould(_ input: (String, String, String?, String?)) throws {
        let signer = try DPoPSigner.es256(P256.Signing.PrivateKey())
        #expect(throws: DPoPError(.invalidParameter, "")) {
            try signer.proof(method: input.0, url: input.1, accessToken: input.2, nonce: input.3)
        }
    }

    @Test func smallRSAKeysAreRefused() throws {
        let small = try _RSA.Signing.PrivateKey(unsafeKeySize: .init(bitCount: 1024))
        #expect(throws: DPoPError(.invalidParameter, "")) { try DPoPSigner.rs256(small) }
    }
}

@Suite struct HTTPTargetURITests {
    @Test(arguments: [
        ("https://example.com/a", "https://example.com/a"),
        ("HTTPS://EXAMPLE.com/a", "https://example.com/a"),
        ("https://example.com", "https://example.com/"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("http://example.com:80/a", "http://example.com/a"),
        ("https://example.com:80/a", "https://example.com:80/a"),
        ("https://example.com:/a", "https://example.com/a"),
        ("https://example.com/a?b=c#d", "https://example.com/a"),
        ("https://example.com/%7euser/%2f", "https://example.com/~user/%2F"),
        ("https://example.com/a/./b/../c", "https://example.com/a/c"),
        ("https://example.com/a/b/..", "https://example.com/a/"),
        ("https://[::1]:8443/x", "https://[::1]:8443/x"),
        ("https://127.0.0.1/x", "https://127.0.0.1/x"),
    ])
    func normalizes(_ pair: (String, String)) {
        #expect(HTTPTargetURI.normalized(pair.0) == pair.1)
    }

    @Test(
        arguments: [
            ("", .empty), ("https://example.com/" + String(repeating: "a", count: 8173), .tooLong),
            ("/a", .noScheme), ("example.com/a", .noScheme), ("ftp://example.com/a", .scheme),
            ("localhost:8080/a", .scheme), ("https:/example.com", .notAbsolute),
            ("https://user@example.com/", .userInformation),
            ("https:///a", .host), ("https://exa mple.com/", .notPrintable(offset: 11)),
            ("https://example.com/a b", .notPrintable(offset: 21)), ("https://example.com:65536/", .port),
            ("https://example.com:8x/", .port), ("https://example.com:123456/", .port),
            ("https://example.com/%zz", .percentEncoding),
            ("https://example.com/%4", .percentEncoding), ("https://ex%41mple.com/", .host),
            ("https://example.com/<>", .pathCharacter(UInt8(ascii: "<"))), ("https://[::1/x", .ipv6Host),
            ("https://[::g]/x", .ipv6Host), ("https://[::1]x/", .ipv6Host),
            ("https://bücher.example/", .notPrintable(offset: 9)),
        ] as [(String, HTTPTargetURI.Refusal)])
    func refuses(_ pair: (String, HTTPTargetURI.Refusal)) {
        #expect(HTTPTargetURI.normalized(pair.0) == nil)
        guard case .failure(let refusal) = HTTPTargetURI.normalize(pair.0) else {
            Issue.record("\(pair.0) normalized")
            return
        }
        #expect(refusal == pair.1)
    }

    @Test func theLongestURLIsNormalized() {
        let url = "https://example.com/" + String(repeating: "a", count: HTTPTargetURI.maxBytes - 20)
        #expect(HTTPTargetURI.normalized(url) == url)
    }

    @Test func aSignerNamesWhyItRefusesAURL() throws {
        let signer = try DPoPSigner.es256(P256.Signing.PrivateKey())
        let error = #expect(throws: DPoPError.self) {
            try signer.proof(method: "GET", url: "https://example.com:70000/x")
        }
        #expect(error?.code == .invalidParameter)
        #expect(error?.reason == "htu is not an absolute http(s) URL: the port is not 0 to 65535")
    }

    @Test func aVerifierNamesWhyHtuIsNoURL() throws {
        let key = P256.Signing.PrivateKey()
        let url = "https://example.com/x"
        let header = try DPoPSigner.es256(key).proof(method: "GET", url: url).split(separator: ".")[0]
        let claims =
            #"{"jti":"a","htm":"GET","htu":"https://example.com/%x","iat":\#(Int(Date().timeIntervalSince1970))}"#
        let input = header + "." + Base64URL.encode(Array(claims.utf8))
        let signature = try key.signature(for: Array(input.utf8)).rawRepresentation
        let proof = input + "." + Base64URL.encode(Array(signature))
        let error = #expect(throws: DPoPError.self) { try DPoPVerifier().verify(proof, method: "GET", url: url) }
        #expect(error?.code == .uriMismatch)
        #expect(
            error?.reason
                == #"htu is "https://example.com/%x" (a % in the path is not followed by two hex digits); "#
                + #"the request's URI is "https://example.com/x""#)
    }
}

@Suite struct DPoPNonceTests {
    let key = SymmetricKey(size: .bits256)

    @Test func aNonceLastsItsPeriodAndTheNext() throws {
        let issued = try DPoPNonces(key: key, period: 300, clock: clock(at: 1_700_000_100)).current()
        for (seconds, accepted) in [
            (1_700_000_100, true), (1_700_000_399, true), (1_700_000_400, true), (1_700_000_699, true),
            (1_700_000_700, false), (1_700_000_000, false),
        ] as [(Int64, Bool)] {
            #expect(try DPoPNonces(key: key, period: 300, clock: clock(at: seconds)).accepts(issued) == accepted)
        }
    }

    @Test func instancesWithTheSameKeyAgreeAndOthersDoNot() throws {
        let one = try DPoPNonces(key: key, clock: clock(at: 1_700_000_000))
        let two = try DPoPNonces(key: key, clock: clock(at: 1_700_000_000))
        let other = try DPoPNonces(key: SymmetricKey(size: .bits256), clock: clock(at: 1_700_000_000))
        #expect(one.current() == two.current())
        #expect(two.accepts(one.current()))
        #expect(!other.accepts(one.current()))
        #expect(!one.accepts(one.current() + "A"))
        #expect(!one.accepts("not a nonce"))
    }

    @Test func settingsAreRangeChecked() {
        #expect(throws: DPoPError(.invalidParameter, "")) { try DPoPNonces(key: key, period: 9) }
        #expect(throws: DPoPError(.invalidParameter, "")) { try DPoPNonces(key: SymmetricKey(size: .bits128)) }
    }
}

@Suite struct DPoPReplayCacheTests {
    @Test func aKeyIsAcceptedOnceUntilItExpires() async throws {
        let cache = DPoPMemoryReplayCache()
        #expect(try await cache.firstUse(of: [1], until: 2_000, now: 1_000))
        #expect(try await !cache.firstUse(of: [1], until: 2_000, now: 1_500))
        #expect(try await cache.firstUse(of: [2], until: 2_000, now: 1_500))
        #expect(try await cache.firstUse(of: [1], until: 3_000, now: 2_001))
    }

    @Test func aFullCacheRefusesRatherThanForgets() async throws {
        let cache = DPoPMemoryReplayCache(capacity: 2)
        #expect(try await cache.firstUse(of: [1], until: 2_000, now: 1_000))
        #expect(try await cache.firstUse(of: [2], until: 2_000, now: 1_000))
        await #expect(throws: DPoPError(.unavailable, "")) {
            try await cache.firstUse(of: [3], until: 2_000, now: 1_000)
        }
        // Once the first two expire, there is room again.
        #expect(try await cache.firstUse(of: [3], until: 4_000, now: 2_001))
    }

    /// A full cache looks for expired keys at most once a second: a flood while it is full costs
    /// one pass over the keys a second, not one a proof. An expired key used again takes its own
    /// place, full or not.
    @Test func aFullCacheLooksForExpiredKeysOnceASecond() async throws {
        let cache = DPoPMemoryReplayCache(capacity: 2)
        #expect(try await cache.firstUse(of: [1], until: 1_100, now: 1_000))
        #expect(try await cache.firstUse(of: [2], until: 5_000, now: 1_000))
        await #expect(throws: DPoPError(.unavailable, "")) {  // looks, finds none expired
            try await cache.firstUse(of: [3], until: 9_000, now: 1_000)
        }
        await #expect(throws: DPoPError(.unavailable, "")) {  // [1] has expired, but no look until 2,000
            try await cache.firstUse(of: [3], until: 9_000, now: 1_500)
        }
        #expect(try await cache.firstUse(of: [3], until: 9_000, now: 2_000))
        #expect(try await !cache.firstUse(of: [2], until: 9_000, now: 2_000))
        #expect(try await cache.firstUse(of: [2], until: 9_000, now: 5_001))
        #expect(try await !cache.firstUse(of: [2], until: 9_000, now: 5_002))
        await #expect(throws: DPoPError(.unavailable, "")) {
            try await cache.firstUse(of: [4], until: 9_000, now: 5_002)
        }
    }

    @Test func theVerifierRefusesTheSecondUseOfAProof() async throws {
        let signer = try DPoPSigner.es256(P256.Signing.PrivateKey())
        let url = "https://api.example.com/x"
        let proof = try signer.proof(method: "POST", url: url, issuedAt: Date(timeIntervalSince1970: 1_700_000_000))
        let verifier = DPoPVerifier(clock: clock(at: 1_700_000_001))
        let cache = DPoPMemoryReplayCache()
        _ = try await verifier.verify([proof], method: "POST", url: url, replay: cache)
        await #expect(throws: DPoPError(.replayed, "")) {
            try await verifier.verify([proof], method: "POST", url: url, replay: cache)
        }
    }

    @Test func settingsAreRangeChecked() throws {
        let signer = try DPoPSigner.es256(P256.Signing.PrivateKey())
        let proof = try signer.proof(method: "POST", url: "https://a.example/")
        for verifier in [DPoPVerifier(maxAge: 0), DPoPVerifier(leeway: 301), DPoPVerifier(maxProofBytes: 100)] {
            #expect(throws: DPoPError(.invalidParameter, "")) {
                try verifier.verify([proof], method: "POST", url: "https://a.example/")
            }
        }
    }
}
