import ShadowCore
import ShadowTestSupport
import Testing

@Suite struct Base64URLTests {
    @Test(arguments: [
        ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"),
        ("foobar", "Zm9vYmFy"),
    ])
    func rfc4648Vectors(plain: String, encoded: String) throws {
        #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
        #expect(try Base64URL.decode(encoded) == Array(plain.utf8))
    }

    @Test func urlSafeAlphabet() throws {
        #expect(Base64URL.encode([0xFB, 0xFF, 0xBF]) == "-_-_")
        #expect(try Base64URL.decode("-_-_") == [0xFB, 0xFF, 0xBF])
    }

    @Test func roundTripsEveryLength() throws {
        var generator = SeededGenerator(seed: 0xB64)
        for length in 0..<200 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(try Base64URL.decode(Base64URL.encode(bytes)) == bytes, "length \(length), seed 0xB64")
        }
    }

    @Test(arguments: [
        ("Zg==", Base64URL.DecodeError.invalidCharacter(offset: 2, byte: UInt8(ascii: "="))),
        ("Zm8=", .invalidCharacter(offset: 3, byte: UInt8(ascii: "="))),
        ("Zm+v", .invalidCharacter(offset: 2, byte: UInt8(ascii: "+"))),
        ("Zm/v", .invalidCharacter(offset: 2, byte: UInt8(ascii: "/"))),
        ("Zm9v ", .invalidCharacter(offset: 4, byte: UInt8(ascii: " "))),
        ("Zm 9v", .invalidCharacter(offset: 2, byte: UInt8(ascii: " "))),
        ("Zm9\nv", .invalidCharacter(offset: 3, byte: 0x0A)),
        ("Z", .invalidLength(1)),
        ("Zm9vY", .invalidLength(5)),
        ("Zh", .nonCanonicalTrailingBits),
        ("Zm9", .nonCanonicalTrailingBits),
        ("Zm8.", .invalidCharacter(offset: 3, byte: UInt8(ascii: "."))),
    ])
    func rejectsNonCanonicalInput(input: String, expected: Base64URL.DecodeError) {
        #expect(throws: expected) { try Base64URL.decode(input) }
    }

    @Test func rejectsNonASCII() {
        #expect(throws: Base64URL.DecodeError.self) { try Base64URL.decode("Zm9vYmFé") }
    }

    @Test func errorNamesPadding() {
        let error = Base64URL.DecodeError.invalidCharacter(offset: 2, byte: UInt8(ascii: "="))
        #expect(error.description.contains("padding"))
    }
}

@Suite struct HexAndConstantTimeTests {
    @Test func hexRoundTrip() throws {
        #expect(Hex.encode([0x00, 0x01, 0xAB, 0xFF]) == "0001abff")
        #expect(try Hex.decode("0001ABff") == [0x00, 0x01, 0xAB, 0xFF])
        #expect(throws: Hex.DecodeError.oddLength(3)) { try Hex.decode("abc") }
        #expect(throws: Hex.DecodeError.invalidCharacter(offset: 1)) { try Hex.decode("0g") }
    }

    /// Digits given as ASCII bytes (a key file's, trimmed): offsets count from the slice's start.
    @Test func hexFromASCIIBytes() throws {
        let file = Array("  0001ABff\r\n".utf8)
        #expect(try Hex.decode(utf8: file[2..<10]) == [0x00, 0x01, 0xAB, 0xFF])
        #expect(throws: Hex.DecodeError.invalidCharacter(offset: 3)) {
            try Hex.decode(utf8: Array("xx000g".utf8)[2...])
        }
        #expect(throws: Hex.DecodeError.oddLength(3)) { try Hex.decode(utf8: Array("abc".utf8)[...]) }
        #expect(try Hex.decode(utf8: []) == [])
    }

    @Test func constantTimeEquals() {
        #expect(ConstantTime.equals([1, 2, 3], [1, 2, 3]))
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2, 4]))
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2]))
        #expect(ConstantTime.equals([UInt8](), [UInt8]()))
        #expect(!ConstantTime.equals([0x80], [0x00]))
    }

    /// Buffers are compared in place, any other collection index by index: both ways give the
    /// same answers, with every byte position able to differ.
    @Test func constantTimeEqualsInPlaceAndIndexByIndex() {
        let bytes: [UInt8] = Array(0..<40)
        for position in bytes.indices {
            var other = bytes
            other[position] ^= 0x01
            #expect(!ConstantTime.equals(bytes, other), "a difference at \(position) in place")
            #expect(!ConstantTime.equals(bytes.reversed(), other.reversed()), "at \(position) index by index")
            #expect(!ConstantTime.equals(bytes, other.lazy.map { $0 }), "at \(position), mixed")
            #expect(!ConstantTime.equals(bytes[1...], other[1...]) == (position != 0), "a slice at \(position)")
        }
        #expect(ConstantTime.equals(bytes.reversed(), bytes.reversed()))
        #expect(ConstantTime.equals(bytes[3..<9], bytes[3..<9].lazy.map { $0 }))
        #expect(!ConstantTime.equals(bytes[3..<9], bytes[3..<8]))
        bytes.withUnsafeBufferPointer { buffer in
            #expect(ConstantTime.equals(buffer, bytes))
            #expect(!ConstantTime.equals(UnsafeBufferPointer(rebasing: buffer[..<39]), bytes))
        }
    }

    @Test func exactEqualityIgnoresCanonicalEquivalence() {
        // U+212A KELVIN SIGN is canonically equivalent to "K"; identifiers must not treat them alike.
        #expect("\u{212A}" == "K")
        #expect(!"\u{212A}".exactlyEquals("K"))
        #expect("K".exactlyEquals("K"))
    }
}
