import Crypto
import CryptoExtras
import ShadowCore
import ShadowJOSE
import ShadowTestSupport
import Testing

@Suite struct JWKTests {
    /// An odd modulus of exactly `bits` bits (not a real RSA modulus; import does not factor).
    private func modulus(bits: Int) -> String {
        var bytes = [UInt8](repeating: 0xA5, count: (bits + 7) / 8)
        let topBits = bits % 8 == 0 ? 8 : bits % 8
        bytes[0] = UInt8((1 << (topBits - 1)) | 1)
        bytes[bytes.count - 1] |= 1
        return Base64URL.encode(bytes)
    }

    private func rsa(n: String, e: String = "AQAB", extra: JSONObject = [:]) throws -> JWK {
        var json: JSONObject = ["kty": "RSA", "n": .string(n), "e": .string(e)]
        for member in extra { json.set(member.name, member.value) }
        return try JWK(json: json)
    }

    private func expectInvalidKey(_ reason: String, _ body: () throws -> JWK) {
        do {
            _ = try body()
            Issue.record("key accepted; expected refusal mentioning \(reason)")
        } catch let error as JOSEError {
            #expect(error.code == .invalidKey)
            #expect(error.reason.contains(reason), "\(error.reason)")
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test(arguments: [2048, 3072, 4096, 8192])
    func acceptsRSAModulusSizes(bits: Int) throws {
        #expect(try rsa(n: modulus(bits: bits)).keyType == .rsa(bits: bits))
    }

    @Test(arguments: [1024, 2047, 8193, 16384])
    func refusesRSAModulusSizes(bits: Int) {
        expectInvalidKey("\(bits) bits") { try rsa(n: modulus(bits: bits)) }
    }

    @Test func aLeadingZeroDoesNotCountTowardsTheSize() throws {
        let bytes = try Base64URL.decode(modulus(bits: 2047))
        expectInvalidKey("2047 bits") { try rsa(n: Base64URL.encode([0] + bytes)) }
        let key = try rsa(n: Base64URL.encode([0] + Base64URL.decode(modulus(bits: 2048))))
        #expect(key.json["n"]?.stringValue == modulus(bits: 2048), "the canonical form drops the zero")
    }

    @Test(arguments: [
        ("AQ", "between 3"), ("Ag", "odd"), ("AAE", "between 3"), ("AQAAAAE", "between 3"), ("", "between 3"),
    ])
    func refusesUnusualExponents(e: String, reason: String) {
        expectInvalidKey(reason) { try rsa(n: modulus(bits: 2048), e: e) }
    }

    @Test func acceptsExponentThree() throws {
        _ = try rsa(n: modulus(bits: 2048), e: "Aw")
    }

    @Test func refusesAnEvenModulus() throws {
        var bytes = try Base64URL.decode(modulus(bits: 2048))
        bytes[bytes.count - 1] &= 0xFE
        expectInvalidKey("even") { try rsa(n: Base64URL.encode(bytes)) }
    }

    @Test(arguments: ["d", "p", "q", "dp", "dq", "qi"])
    func refusesPrivateMembers(member: String) {
        expectInvalidKey("private member") { try rsa(n: modulus(bits: 2048), extra: [member: "AQAB"]) }
    }

    @Test func readsP256Keys() throws {
        let key = try TestKeys.jwk(TestKeys.p256, kid: "ec")
        #expect(key.keyType == .p256)
        #expect(key.canVerify(.es256))
        #expect(!key.canVerify(.rs256))
    }

    @Test func refusesAPointOffTheCurve() throws {
        var json = try TestKeys.jwk(TestKeys.p256, kid: "ec").json
        var y = try Base64URL.decode(json["y"]?.stringValue ?? "")
        y[31] ^= 1
        json.set("y", .string(Base64URL.encode(y)))
        expectInvalidKey("not on the curve") { try JWK(json: json) }
    }

    @Test func refusesShortCoordinates() throws {
        var json = try TestKeys.jwk(TestKeys.p256, kid: "ec").json
        let x = try Base64URL.decode(json["x"]?.stringValue ?? "")
        json.set("x", .string(Base64URL.encode(x.dropFirst())))
        expectInvalidKey("32 bytes") { try JWK(json: json) }
    }

    @Test(arguments: [
        (#"{"kty":"oct","k":"c2VjcmV0"}"#, "private member"),
        (#"{"kty":"oct"}"#, "kty \"oct\" is not supported"),
        (#"{"kty":"OKP","crv":"Ed25519","x":"AA"}"#, "kty \"OKP\""),
        (#"{"kty":"EC","crv":"P-384","x":"AA","y":"AA"}"#, "curve \"P-384\""),
        (#"{"kty":"EC","crv":"P-256","x":"AA","y":"AA","alg":"ES384"}"#, "alg \"ES384\""),
        (#"{"n":"AQAB","e":"AQAB"}"#, "no \"kty\""),
        (#"{"kty":5}"#, "must be a string"),
        (#"{"kty":"rsa","n":"AQAB","e":"AQAB"}"#, "kty \"rsa\""),
    ])
    func refusesUnsupportedOrMalformedKeys(json: String, reason: String) {
        expectInvalidKey(reason) { try JWK(jsonText: json) }
    }

    @Test func keyAlgorithmMustMatchItsType() throws {
        expectInvalidKey("declares alg ES256") { try rsa(n: modulus(bits: 2048), extra: ["alg": "ES256"]) }
    }

    @Test func useAndKeyOpsLimitVerification() throws {
        let n = modulus(bits: 2048)
        #expect(try rsa(n: n, extra: ["use": "sig"]).canVerify(.rs256))
        #expect(try !rsa(n: n, extra: ["use": "enc"]).canVerify(.rs256))
        #expect(try rsa(n: n, extra: ["key_ops": ["verify"]]).canVerify(.rs256))
        #expect(try !rsa(n: n, extra: ["key_ops": ["encrypt", "wrapKey"]]).canVerify(.rs256))
        #expect(try rsa(n: n, extra: ["alg": "RS256"]).canVerify(.rs256))
        expectInvalidKey("repeats") { try rsa(n: n, extra: ["key_ops": ["verify", "verify"]]) }
        expectInvalidKey("array of strings") { try rsa(n: n, extra: ["key_ops": "verify"]) }
    }

    @Test func thumbprintMatchesRFC7638() throws {
        let file = try #require(
            try StrictJSON.parse(PackagePaths.vector("rfc/rfc7638-3.1-thumbprint.json")).objectValue)
        let jwk = try JWK(json: try #require(file["jwk"]?.objectValue))
        #expect(jwk.thumbprint == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs")
        #expect(jwk.thumbprint == file["thumbprint"]?.stringValue)
    }

    @Test func thumbprintIgnoresOptionalMembersAndKeyOrder() throws {
        let plain = try TestKeys.jwk(TestKeys.p256, kid: nil, alg: nil)
        let labelled = try TestKeys.jwk(TestKeys.p256, kid: "some-kid", alg: .es256)
        #expect(plain.thumbprint == labelled.thumbprint)
        let (x, y) = (plain.json["x"]?.stringValue ?? "", plain.json["y"]?.stringValue ?? "")
        let reordered = try JWK(jsonText: #"{"y":"\#(y)","x":"\#(x)","crv":"P-256","kty":"EC"}"#)
        #expect(reordered.thumbprint == plain.thumbprint)
    }
}

@Suite struct JWKSetTests {
    @Test func skipsUnsupportedKeysWithDiagnostics() throws {
        let good = try TestKeys.jwk(TestKeys.rsa, kid: "good")
        let text = """
            {"keys":[
              {"kty":"oct","kid":"hmac","k":"c2VjcmV0"},
              \(good.json.serialized()),
              {"kty":"EC","kid":"p384","crv":"P-384","x":"AA","y":"AA"},
              {"kty":"RSA","kid":"rs512","alg":"RS512","n":"AQAB","e":"AQAB"},
              {"kty":"OKP","kid":"ed","crv":"Ed25519","x":"AA"},
              "not an object"
            ]}
            """
        let set = try JWKSet(jsonText: text)
        #expect(set.keys.map(\.keyID) == ["good"])
        #expect(set.skipped.map(\.index) == [0, 2, 3, 4, 5])
        #expect(set.skipped.map(\.keyID) == ["hmac", "p384", "rs512", "ed", nil])
        #expect(set.skipped[2].reason.contains("RS512"))
        // A kid that names a skipped entry says why it cannot be used.
        #expect(throws: JOSEError(.unknownKey, "")) { try set.key(for: "rs512", algorithm: .rs256) }
        do { _ = try set.key(for: "rs512", algorithm: .rs256) } catch let error as JOSEError {
            #expect(error.reason.contains("skipped"))
        }
    }

    @Test func refusesDuplicateKeyIDs() throws {
        let a = try TestKeys.jwk(TestKeys.rsa, kid: "same")
        let b = try TestKeys.jwk(TestKeys.p256, kid: "same")
        #expect(throws: JOSEError(.invalidKeySet, "")) { try JWKSet(keys: [a, b]) }
        #expect(throws: JOSEError(.invalidKeySet, "")) { try JWKSet(jsonText: TestKeys.jwksJSON([a, b])) }
        // A duplicate among skipped entries counts too.
        let text = #"{"keys":[\#(a.json.serialized()),{"kty":"oct","kid":"same"}]}"#
        #expect(throws: JOSEError(.invalidKeySet, "")) { try JWKSet(jsonText: text) }
    }

    @Test(arguments: [
        ("[]", "must be a JSON object"),
        ("{}", "no \"keys\" array"),
        (#"{"keys":{}}"#, "no \"keys\" array"),
        (#"{"keys":[],"keys":[]}"#, "duplicate member"),
        ("{\"keys\":[", "not valid JSON"),
    ])
    func refusesMalformedSets(json: String, reason: String) {
        do {
            _ = try JWKSet(jsonText: json)
            Issue.record("accepted \(json)")
        } catch let error as JOSEError {
            #expect(error.code == .invalidKeySet)
            #expect(error.reason.contains(reason), "\(error.reason)")
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func lookupByKidIsExactWithNoFallback() throws {
        let set = try JWKSet(keys: [TestKeys.jwk(TestKeys.rsa, kid: "K1")])
        #expect(try set.key(for: "K1", algorithm: .rs256).keyID == "K1")
        #expect(throws: JOSEError(.unknownKey, "")) { try set.key(for: "k1", algorithm: .rs256) }
        #expect(throws: JOSEError(.unknownKey, "")) { try set.key(for: "\u{212A}1", algorithm: .rs256) }
        #expect(throws: JOSEError(.unknownKey, "")) { try set.key(for: "K1 ", algorithm: .rs256) }
        #expect(throws: JOSEError(.algorithmKeyMismatch, "")) { try set.key(for: "K1", algorithm: .es256) }
    }

    @Test func withoutKidExactlyOneKeyMustFit() throws {
        let rsa = try TestKeys.jwk(TestKeys.rsa, kid: "r")
        let rsa2 = try TestKeys.jwk(TestKeys.rsa2, kid: "r2")
        let ec = try TestKeys.jwk(TestKeys.p256, kid: "e")
        #expect(try JWKSet(keys: [rsa, ec]).key(for: nil, algorithm: .es256).keyID == "e")
        #expect(try JWKSet(keys: [rsa, ec]).key(for: nil, algorithm: .rs256).keyID == "r")
        #expect(throws: JOSEError(.unknownKey, "")) {
            try JWKSet(keys: [rsa, rsa2, ec]).key(for: nil, algorithm: .rs256)
        }
        #expect(throws: JOSEError(.unknownKey, "")) { try JWKSet(keys: [rsa]).key(for: nil, algorithm: .es256) }
    }
}
