import Crypto
import Foundation
import ShadowCore
import ShadowJOSE
import Testing

@Suite struct ClaimPolicyTests {
    let now = 1_700_000_000.0

    private func failures(_ claims: JSONObject, _ policy: ClaimPolicy, at time: Double? = nil) -> [ClaimFailure] {
        policy.evaluate(JWTClaims(claims), now: Date(timeIntervalSince1970: time ?? now))
    }

    private func rules(_ claims: JSONObject, _ policy: ClaimPolicy, at time: Double? = nil) -> [String] {
        failures(claims, policy, at: time).map { "\($0.claim):\($0.rule)" }
    }

    @Test(
        arguments: [
            (1_700_000_000, "1700000000"), (422.6055245399475, "422.606"), (-0.0004, "0.000"), (-1.5, "-1.500"),
            (0.05, "0.050"), (1795894510.6055245, "1795894510.606"), (1e300, "1e+300"),
        ] as [(Double, String)])
    func timesInMessagesAreWholeOrToTheMillisecond(_ pair: (Double, String)) {
        #expect(ClaimPolicy.format(pair.0) == pair.1)
    }

    @Test func expiryBoundaryWithLeeway() {
        let policy = ClaimPolicy(leeway: 60)
        let claims: JSONObject = ["exp": .int(Int64(now))]
        #expect(rules(claims, policy, at: now + 59) == [])
        #expect(rules(claims, policy, at: now + 60) == ["exp:expired"])
        #expect(rules(claims, ClaimPolicy(leeway: 0), at: now - 1) == [])
        #expect(rules(claims, ClaimPolicy(leeway: 0), at: now) == ["exp:expired"])
        let failure = failures(claims, policy, at: now + 372)[0]
        #expect(failure.message == "exp 1700000000 is 372 s before now 1700000372, leeway 60 s")
        #expect(failure.actual == "1700000000")
    }

    @Test func expiryIsRequiredByDefault() {
        #expect(rules([:], ClaimPolicy()) == ["exp:missing"])
        #expect(rules([:], ClaimPolicy(requireExpiration: false)) == [])
        #expect(rules(["exp": "1700000000"], ClaimPolicy()) == ["exp:wrong_type"])
        #expect(rules(["exp": .null], ClaimPolicy()) == ["exp:wrong_type"])
    }

    @Test func notBeforeBoundaryWithLeeway() {
        let claims: JSONObject = ["nbf": .int(Int64(now)), "exp": .int(Int64(now) + 3600)]
        #expect(rules(claims, ClaimPolicy(), at: now - 60) == [])
        #expect(rules(claims, ClaimPolicy(), at: now - 61) == ["nbf:not_yet_valid"])
        #expect(rules(claims, ClaimPolicy(leeway: 0), at: now) == [])
        #expect(rules(claims, ClaimPolicy(leeway: 0), at: now - 0.5) == ["nbf:not_yet_valid"])
    }

    @Test func issuedAtMayNotBeInTheFuture() {
        let claims: JSONObject = ["iat": .int(Int64(now)), "exp": .int(Int64(now) + 3600)]
        #expect(rules(claims, ClaimPolicy(), at: now - 60) == [])
        #expect(rules(claims, ClaimPolicy(), at: now - 61) == ["iat:issued_in_future"])
    }

    @Test func maximumAgeBoundaryWithLeeway() {
        let policy = ClaimPolicy(leeway: 60, maxAge: 600)
        let claims: JSONObject = ["iat": .int(Int64(now)), "exp": .int(Int64(now) + 86400)]
        #expect(rules(claims, policy, at: now + 660) == [])
        #expect(rules(claims, policy, at: now + 661) == ["iat:too_old"])
        #expect(rules(["exp": .int(Int64(now) + 60)], policy) == ["iat:missing"])
    }

    @Test func fractionalNumericDates() {
        let claims: JSONObject = ["exp": .number(JSONNumber(now + 0.5)!)]
        #expect(rules(claims, ClaimPolicy(leeway: 0), at: now + 0.25) == [])
        #expect(rules(claims, ClaimPolicy(leeway: 0), at: now + 0.5) == ["exp:expired"])
    }

    @Test func issuerIsExact() {
        let policy = ClaimPolicy(issuer: "https://appleid.apple.com", requireExpiration: false)
        #expect(rules(["iss": "https://appleid.apple.com"], policy) == [])
        #expect(rules(["iss": "https://appleid.apple.com/"], policy) == ["iss:mismatch"])
        #expect(rules(["iss": "HTTPS://APPLEID.APPLE.COM"], policy) == ["iss:mismatch"])
        #expect(rules([:], policy) == ["iss:missing"])
        #expect(rules(["iss": ["https://appleid.apple.com"]], policy) == ["iss:wrong_type"])
        // Canonically equivalent is not equal: KELVIN SIGN vs K.
        let kelvin = ClaimPolicy(issuer: "K", requireExpiration: false)
        #expect(rules(["iss": "\u{212A}"], kelvin) == ["iss:mismatch"])
        let failure = failures(["iss": "https://evil.example"], policy)[0]
        #expect(failure.expected == "\"https://appleid.apple.com\"")
        #expect(failure.actual == "\"https://evil.example\"")
    }

    @Test func audienceAsStringOrArray() {
        let policy = ClaimPolicy(audiences: ["a", "b"], requireExpiration: false)
        #expect(rules(["aud": "a"], policy) == [])
        #expect(rules(["aud": ["x", "b"]], policy) == [])
        #expect(rules(["aud": "c"], policy) == ["aud:mismatch"])
        #expect(rules(["aud": ["x", "y"]], policy) == ["aud:mismatch"])
        #expect(rules(["aud": []], policy) == ["aud:mismatch"])
        #expect(rules([:], policy) == ["aud:missing"])
        #expect(rules(["aud": 5], policy) == ["aud:wrong_type"])
        #expect(rules(["aud": ["a", 5]], policy) == ["aud:wrong_type"])
        #expect(rules(["aud": "A"], policy) == ["aud:mismatch"])
    }

    @Test func everyAudienceCanBeRequiredToBeAccepted() {
        let policy = ClaimPolicy(audiences: ["a", "b"], requireEveryAudienceAccepted: true, requireExpiration: false)
        #expect(rules(["aud": ["a", "b"]], policy) == [])
        #expect(rules(["aud": "a"], policy) == [])
        #expect(rules(["aud": ["a", "evil"]], policy) == ["aud:mismatch"])
        #expect(failures(["aud": ["a", "evil"]], policy)[0].message.contains("\"evil\""))
    }

    @Test func requiredClaims() {
        let policy = ClaimPolicy(requireExpiration: false, requiredClaims: ["sub", "email"])
        #expect(rules(["sub": "s", "email": "e"], policy) == [])
        #expect(rules(["sub": "s"], policy) == ["email:missing"])
        #expect(rules(["sub": .null, "email": "e"], policy) == ["sub:missing"])
    }

    @Test func nonceRules() {
        let raw = "n-0S6_WzA2Mj"
        let hash = Hex.encode(SHA256.hash(data: Array(raw.utf8)))
        let equals = ClaimPolicy(requireExpiration: false, nonce: .equals(raw))
        let hashed = ClaimPolicy(requireExpiration: false, nonce: .sha256HexOf(raw))
        let either = ClaimPolicy(requireExpiration: false, nonce: .equalsOrSHA256HexOf(raw))
        #expect(rules(["nonce": .string(raw)], equals) == [])
        #expect(rules(["nonce": .string(hash)], equals) == ["nonce:mismatch"])
        #expect(rules(["nonce": .string(hash)], hashed) == [])
        #expect(rules(["nonce": .string(raw)], hashed) == ["nonce:mismatch"])
        #expect(rules(["nonce": .string(raw)], either) == [])
        #expect(rules(["nonce": .string(hash)], either) == [])
        #expect(rules(["nonce": "other"], either) == ["nonce:mismatch"])
        #expect(rules([:], either) == ["nonce:missing"])
        #expect(rules(["nonce": .string(hash.uppercased())], hashed) == ["nonce:mismatch"])
    }

    @Test func everyFailedRuleIsReported() {
        let policy = ClaimPolicy(
            issuer: "i", audiences: ["a"], maxAge: 10, requiredClaims: ["sub"], nonce: .equals("n"))
        let claims: JSONObject = [
            "iss": "x", "aud": "y", "exp": .int(Int64(now) - 100), "nbf": .int(Int64(now) + 100),
            "iat": .int(Int64(now) - 1000),
        ]
        #expect(
            rules(claims, policy) == [
                "iss:mismatch", "aud:mismatch", "exp:expired", "nbf:not_yet_valid", "iat:too_old", "sub:missing",
                "nonce:missing",
            ])
    }
}
