import Crypto
import ShadowCore
import Testing

@Suite struct DigestKeyTests {
    @Test func keysAreEqualExactlyWhenTheirBytesAre() {
        let digest = SHA256.hash(utf8: "a token")
        let bytes = Array(digest)
        #expect(DigestKey(digest) == DigestKey(SHA256.hash(utf8: "a token")))
        #expect(DigestKey(digest) == key(bytes))
        #expect(DigestKey(digest).hashValue == key(bytes).hashValue)
        #expect(DigestKey(digest) != DigestKey(SHA256.hash(utf8: "another token")))
        // One bit changed in each of the four words, at either end of it: every word is compared.
        var table: [DigestKey: Int] = [DigestKey(digest): -1]
        for index in [0, 7, 8, 15, 16, 23, 24, 31] {
            var changed = bytes
            changed[index] ^= 0x01
            #expect(key(changed) != DigestKey(digest), "byte \(index)")
            #expect(table[key(changed)] == nil, "byte \(index)")
            table[key(changed)] = index
        }
        #expect(table.count == 9 && table[DigestKey(digest)] == -1)
    }

    @Test func aFullCacheFindsEachOfItsKeysAndNoOther() {
        let cache = BoundedCache<DigestKey, Int>(capacity: 4096)
        func key(_ number: Int) -> DigestKey { DigestKey(SHA256.hash(utf8: "token \(number)")) }
        for number in 0..<4096 { cache.insert(key(number), number) }
        #expect(cache.count == 4096)
        var found = 0
        var strays = 0
        for number in 0..<8192 {
            let value: Int? = cache[key(number)]
            if number < 4096, value == number { found += 1 }
            if number >= 4096, value != nil { strays += 1 }
        }
        #expect(found == 4096 && strays == 0)
    }

    private func key(_ bytes: [UInt8]) -> DigestKey { bytes.withUnsafeBytes { DigestKey(raw: $0) } }
}
