import Crypto
import Foundation
import ShadowApple
import ShadowCore
import ShadowJOSE
import ShadowJWKS
import ShadowTestSupport
import ShadowHTTP
import Testing

/// Apple-format identity tokens built with our own RSA-2048 keys.
@Suite struct IdentityTokenTests {
    static let clientID = "com.example.app"
    let now: Int64 = 1_700_000_000
    let signer: JWSSigner
    let keys: JWKSet

    init() throws {
        signer = try JWSSigner.rs256(TestKeys.rsa, keyID: "W6WcOKB")
        keys = try JWKSet(keys: [signer.publicJWK()])
    }

    /// Claims as Apple sends them; `strings` picks the older "true"/"false" form.
    func appleClaims(strings: Bool, lifetime: Int64 = 86400, extra: JSONObject = [:]) -> JSONObject {
        func flag(_ value: Bool) -> JSONValue { strings ? .string(value ? "true" : "false") : .bool(value) }
        var claims: JSONObject = [
            "iss": "https://appleid.apple.com", "aud": .string(Self.clientID), "exp": .int(now + lifetime),
            "iat": .int(now),
            "sub": "001234.8a2b3c4d5e6f70819a2b3c4d5e6f7081.1234", "c_hash": "eSUx1sBM1nbm0kZgnIAf6A",
            "email": "q8xj2n4k7d@privaterelay.appleid.com", "email_verified": flag(true),
            "is_private_email": flag(true),
            "auth_time": .int(now), "nonce_supported": flag(true), "real_user_status": 2,
        ]
        for member in extra { claims.set(member.name, member.value) }
        return claims
    }

    func validator(nonce: String? = nil) -> AppleIdentityTokenValidator {
        AppleIdentityTokenValidator(
            clientIDs: [Self.clientID, "com.example.web"], nonce: nonce,
            clock: .fixed(Date(timeIntervalSince1970: TimeInterval(now + 10))))
    }

    func failures(_ token: String, nonce: String? = nil) -> [String] {
        do {
            _ = try validator(nonce: nonce).validate(token, keys: keys)
            return []
        } catch let error as JOSEError {
            return error.claimFailures.isEmpty
                ? [error.code.name] : error.claimFailures.map { "\($0.claim):\($0.rule)" }
        } catch {
            return ["\(error)"]
        }
    }

    /// Found by the apple-identity fuzz harness (FuzzTesting/FailCases/apple-identity): a token
    /// Apple's rules accepted whose sign-in the credential state could not record.
    @Test func everyAcceptedTokenCanBeRecorded() throws {
        let early = try signer.sign(
            claims: appleClaims(strings: true, lifetime: 2_400_086_400, extra: ["iat": -700_000_000]))
        #expect(failures(early) == ["iat:out_of_range"])
        let long = try signer.sign(
            claims: appleClaims(strings: false, extra: ["sub": .string(String(repeating: "a", count: 256))]))
        #expect(failures(long) == ["sub:mismatch"])
        #expect(
            failures(
                try signer.sign(
                    claims: appleClaims(strings: false, extra: ["sub": .string(String(repeating: "a", count: 255))]))
            ).isEmpty)
    }

    @Test(arguments: [true, false])
    func readsBothClaimForms(strings: Bool) throws {
        let token = try signer.sign(claims: appleClaims(strings: strings))
        let identity = try validator().validate(token, keys: keys)
        #expect(identity.subject == "001234.8a2b3c4d5e6f70819a2b3c4d5e6f7081.1234")
        #expect(identity.audience == Self.clientID)
        #expect(identity.emailVerified == true)
        #expect(identity.isPrivateEmail == true)
        #expect(identity.nonceSupported == true)
        #expect(identity.realUserStatus == .likelyReal)
        #expect(identity.codeHash == "eSUx1sBM1nbm0kZgnIAf6A")
        #expect(identity.authTime == Date(timeIntervalSince1970: TimeInterval(now)))
        #expect(identity.lifetime == 86400)
        let falseToken = try signer.sign(
            claims: appleClaims(strings: strings, extra: ["email_verified": strings ? "false" : false]))
        #expect(try validator().validate(falseToken, keys: keys).emailVerified == false)
    }

    @Test(arguments: [600, 86400] as [Int64])
    func lifetimeIsReportedNotAssumed(lifetime: Int64) throws {
        let token = try signer.sign(claims: appleClaims(strings: false, lifetime: lifetime))
        #expect(try validator().validate(token, keys: keys).lifetime == TimeInterval(lifetime))
    }

    @Test(
        arguments: [(0, "unsupported"), (1, "unknown"), (2, "likelyReal"), (3, "unknown"), (-1, "unknown")]
            as [(Int64, String)])
    func realUserStatusNeverFailsTheToken(value: Int64, expected: String) throws {
        let token = try signer.sign(claims: appleClaims(strings: false, extra: ["real_user_status": .int(value)]))
        #expect(try validator().validate(token, keys: keys).realUserStatus?.rawValue == expected)
        let odd = try signer.sign(claims: appleClaims(strings: false, extra: ["real_user_status": "2"]))
        #expect(try validator().validate(odd, keys: keys).realUserStatus == .unknown)
    }

    @Test func exposesTransferAndOrganisation() throws {
        let token = try signer.sign(
            claims: appleClaims(
                strings: false, extra: ["transfer_sub": "000999.abc.0001", "org_id": "org-1", "at_hash": "h"]))
        let identity = try validator().validate(token, keys: keys)
        #expect(identity.transferSubject == "000999.abc.0001")
        #expect(identity.organizationID == "org-1")
        #expect(identity.accessTokenHash == "h")
    }

    @Test func nonceMatchesRawOrHash() throws {
        let raw = "a-nonce-from-the-client"
        let hash = Hex.encode(SHA256.hash(data: Array(raw.utf8)))
        #expect(
            failures(try signer.sign(claims: appleClaims(strings: false, extra: ["nonce": .string(raw)])), nonce: raw)
                == [])
        #expect(
            failures(try signer.sign(claims: appleClaims(strings: false, extra: ["nonce": .string(hash)])), nonce: raw)
                == [])
        #expect(
            failures(try signer.sign(claims: appleClaims(strings: false, extra: ["nonce": "other"])), nonce: raw) == [
                "nonce:mismatch"
            ])
        // Without a nonce in the token: refused unless the token says nonce_supported: false.
        #expect(failures(try signer.sign(claims: appleClaims(strings: false)), nonce: raw) == ["nonce:missing"])
        #expect(failures(try signer.sign(claims: appleClaims(strings: true)), nonce: raw) == ["nonce:missing"])
        var noSupportField = appleClaims(strings: false)
        noSupportField.set("nonce_supported", nil)
        #expect(failures(try signer.sign(claims: noSupportField), nonce: raw) == ["nonce:missing"])
        #expect(
            failures(
                try signer.sign(claims: appleClaims(strings: true, extra: ["nonce_supported": "false"])), nonce: raw)
                == [])
        #expect(
            failures(
                try signer.sign(claims: appleClaims(strings: false, extra: ["nonce_supported": false])), nonce: raw)
                == [])
    }

    @Test func appleRulesAreEnforced() throws {
        #expect(
            failures(try signer.sign(claims: appleClaims(strings: false, extra: ["iss": "https://appleid.apple.com/"])))
                == ["iss:mismatch"])
        #expect(
            failures(try signer.sign(claims: appleClaims(strings: false, extra: ["aud": "com.evil.app"]))) == [
                "aud:mismatch"
            ])
        #expect(
            failures(try signer.sign(claims: appleClaims(strings: false, extra: ["email_verified": "yes"]))) == [
                "email_verified:wrong_type"
            ])
        #expect(
            failures(try signer.sign(claims: appleClaims(strings: false, extra: ["is_private_email": 1]))) == [
                "is_private_email:wrong_type"
            ])
        #expect(
            failures(try signer.sign(claims: appleClaims(strings: false, extra: ["exp": .int(now - 100)]))) == [
                "exp:expired"
            ])
        var noSub = appleClaims(strings: false)
        noSub.set("sub", nil)
        #expect(failures(try signer.sign(claims: noSub)) == ["sub:missing"])
        // ES256 is not Apple's algorithm, even with a key that could verify it.
        let ec = JWSSigner.es256(TestKeys.p256, keyID: "ec")
        let ecKeys = try JWKSet(keys: [ec.publicJWK()])
        #expect(throws: JOSEError(.disallowedAlgorithm, "")) {
            try validator().validate(try ec.sign(claims: appleClaims(strings: false)), keys: ecKeys)
        }
    }

    @Test func validatesThroughAFetchedKeySet() async throws {
        let server = try LoopbackHTTPServer { [keys] _ in .json(JSONValue.object(keys.json).serialized()) }
        var configuration = JWKSProvider.Configuration(url: server.url("/auth/keys"))
        configuration.allowLoopbackHTTP = true
        let provider = try JWKSProvider(
            configuration: configuration, transport: DefaultHTTPTransport(allowLoopbackHTTP: true))
        let identity = try await validator().validate(
            try signer.sign(claims: appleClaims(strings: true)), keys: provider)
        #expect(identity.email == "q8xj2n4k7d@privaterelay.appleid.com")
    }
}
