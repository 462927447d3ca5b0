@testable import ShadowJOSE
import Testing

/// The `Authorization` header's scheme and token (RFC 6750 §2.1, RFC 9449 §7.1).
@Suite struct BearerTokenTests {
    /// The `b64token` characters of RFC 6750 §2.1, written out as the RFC lists them.
    static let allowed = Set(
        ("ABCDEFGHIJKLMNOPQRSTUVWXYZ" + "abcdefghijklmnopqrstuvwxyz" + "0123456789" + "-._~+/").utf8)

    @Test func everyByteIsTakenOrRefusedAsTheGrammarSays() {
        for byte in UInt8.min...UInt8.max {
            let text = String(decoding: [UInt8(ascii: "a"), byte, UInt8(ascii: "b")], as: UTF8.self)
            // A byte that is not UTF-8 alone decodes to U+FFFD, which is no b64token character.
            let expected = byte < 0x80 && Self.allowed.contains(byte)
            #expect(BearerToken.isToken68(text) == expected, "byte \(byte)")
            // At either end too, where a loop bound that is off by one would miss it.
            #expect(BearerToken.isToken68(String(decoding: [byte, UInt8(ascii: "a")], as: UTF8.self)) == expected)
            if byte != UInt8(ascii: "=") {
                #expect(BearerToken.isToken68(String(decoding: [UInt8(ascii: "a"), byte], as: UTF8.self)) == expected)
            }
        }
    }

    @Test func paddingComesOnlyAtTheEndAndNeverAlone() {
        #expect(BearerToken.isToken68("abc=="))
        #expect(BearerToken.isToken68("a.b.c="))
        #expect(!BearerToken.isToken68("="))
        #expect(!BearerToken.isToken68("=="))
        #expect(!BearerToken.isToken68(""))
        #expect(!BearerToken.isToken68("ab=c"))
        #expect(!BearerToken.isToken68("a==b"))
        // Two credentials, or two headers joined with ", ".
        #expect(!BearerToken.isToken68("a.b.c, Bearer d.e.f"))
        #expect(!BearerToken.isToken68("a.b.c d"))
        #expect(!BearerToken.isToken68(" a.b.c"))
    }

    @Test func aLongTokenIsReadToItsLastByte() {
        let token = String(repeating: "Ab0-._~+/", count: 200)
        #expect(BearerToken.isToken68(token))
        #expect(!BearerToken.isToken68(token + "!"))
        #expect(!BearerToken.isToken68("!" + token))
        #expect(BearerToken.isToken68(token + "=="))
    }

    @Test func theSchemeIsReadInAnyCaseWithOneSpace() {
        #expect(BearerToken.from(header: "Bearer abc") == "abc")
        #expect(BearerToken.from(header: "bEARER abc") == "abc")
        #expect(BearerToken.from(header: "Bearer") == nil)
        #expect(BearerToken.from(header: "Bearer ") == nil)
        #expect(BearerToken.from(header: "Bearerx abc") == nil)
        #expect(BearerToken.token(in: "DPoP abc", scheme: "dpop") == "abc")
        #expect(BearerToken.token(in: "DPoP abc", scheme: "bearer") == nil)
    }
}
