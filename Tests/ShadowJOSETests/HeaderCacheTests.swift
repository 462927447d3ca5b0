import Foundation
import ShadowCore
@testable import ShadowJOSE
import ShadowTestSupport
import Testing

/// A verifier keeps the parsed headers of tokens whose signature verified (Docs/architecture.md,
/// "One verification, step by step"); a kept header is checked as a parsed one is, by every copy.
@Suite struct HeaderCacheTests {
    let now: Int64 = 1_700_000_000
    let keys: JWKSet
    let verifier: JWTVerifier

    init() throws {
        keys = try JWKSet(keys: [
            try JWSSigner.rs256(TestKeys.rsa, keyID: "rsa-1").publicJWK(),
            JWSSigner.es256(TestKeys.p256, keyID: "ec-1").publicJWK(),
        ])
        verifier = JWTVerifier(
            policy: ClaimPolicy(issuer: "https://issuer.example", audiences: ["app.example"]),
            clock: .fixed(Date(timeIntervalSince1970: TimeInterval(now))))
    }

    /// Two tokens with the same header text and different payloads.
    func pair(header: String) throws -> (String, String) {
        let other = TokenFactory.claims(now: now, extra: ["jti": "second"])
        return (
            try TokenFactory.raw(
                header: header, payload: TokenFactory.claims(now: now).serialized(), rsa: TestKeys.rsa),
            try TokenFactory.raw(header: header, payload: other.serialized(), rsa: TestKeys.rsa)
        )
    }

    func expectRefused(_ token: String, _ code: JOSEError.Code, by verifier: JWTVerifier) {
        #expect(throws: JOSEError(code, "")) { try verifier.verify(token, keys: keys) }
    }

    @Test func aKeptHeaderIsCheckedForTheAlgorithmCritAndTyp() throws {
        // The algorithm's allow-list.
        let (rs, rsAgain) = try pair(header: #"{"alg":"RS256","kid":"rsa-1"}"#)
        _ = try verifier.verify(rs, keys: keys)
        #expect(verifier.headers.count == 1)
        var esOnly = verifier
        esOnly.algorithms = [.es256]
        expectRefused(rsAgain, .disallowedAlgorithm, by: esOnly)
        // crit: kept by a verifier that understands the extension, refused by one that does not.
        let (critical, criticalAgain) = try pair(header: #"{"alg":"RS256","kid":"rsa-1","crit":["exp"],"exp":1}"#)
        var understanding = verifier
        understanding.understoodCriticalHeaders = ["exp"]
        _ = try understanding.verify(critical, keys: keys)
        #expect(verifier.headers.count == 2, "the copies share one cache")
        expectRefused(criticalAgain, .unsupportedCriticalHeader, by: verifier)
        // typ.
        let (typed, typedAgain) = try pair(header: #"{"alg":"RS256","kid":"rsa-1","typ":"at+jwt"}"#)
        _ = try verifier.verify(typed, keys: keys)
        var wantsJWT = verifier
        wantsJWT.expectedType = "JWT"
        expectRefused(typedAgain, .claimsRejected, by: wantsJWT)
        #expect(try verifier.verify(typedAgain, keys: keys).claims.jwtID == "second")
    }

    @Test func aHeaderIsKeptOnlyOnceASignatureUnderItVerified() throws {
        let (token, _) = try pair(header: #"{"alg":"RS256","kid":"rsa-1","x":1}"#)
        let last = token.last == "A" ? "Q" : "A"
        let forged = String(token.dropLast()) + String(last)
        expectRefused(forged, .invalidSignature, by: verifier)
        #expect(verifier.headers.count == 0, "a forged token placed nothing")
        // An unknown kid or a refused algorithm places nothing either.
        let (unknownKey, _) = try pair(header: #"{"alg":"RS256","kid":"nobody"}"#)
        expectRefused(unknownKey, .unknownKey, by: verifier)
        #expect(verifier.headers.count == 0)
        _ = try verifier.verify(token, keys: keys)
        #expect(verifier.headers.count == 1)
        // Claims that fail keep the header (its signature verified) and still fail.
        var late = verifier
        late.clock = .fixed(Date(timeIntervalSince1970: TimeInterval(now + 86_400 * 365)))
        expectRefused(token, .claimsRejected, by: late)
    }

    @Test func aLongHeaderIsNotKept() throws {
        let padding = String(repeating: "p", count: JWTVerifier.maxCachedHeaderBytes)
        let (token, again) = try pair(header: #"{"alg":"RS256","kid":"rsa-1","pad":"\#(padding)"}"#)
        _ = try verifier.verify(token, keys: keys)
        _ = try verifier.verify(again, keys: keys)
        #expect(verifier.headers.count == 0)
    }
}
