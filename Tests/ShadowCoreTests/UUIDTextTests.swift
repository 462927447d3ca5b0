import Foundation
import Testing

@testable import ShadowCore

/// `UUID(text:)` reads the canonical text form as `UUID(uuidString:)` does, and nothing else:
/// here `UUID(uuidString:)` also reads a signed byte ("-b" as 0xF5, "+b" as 0x0B), so a `sub` or a
/// command-line user ID with a stray sign named another user.
@Suite struct UUIDTextTests {
    @Test func readsEveryUUIDInEitherCase() {
        for _ in 0..<500 {
            let uuid = UUID()
            #expect(UUID(text: uuid.uuidString) == uuid)
            #expect(UUID(text: uuid.uuidString.lowercased()) == uuid)
        }
        #expect(
            UUID(text: "00000000-0000-0000-0000-000000000000")
                == UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        let ones = UUID(text: "FFFFFFFF-ffff-FFFF-ffff-FFFFFFFFFFFF")
        #expect(ones.map { withUnsafeBytes(of: $0.uuid) { Array($0) } } == Array(repeating: 0xFF, count: 16))
    }

    @Test func refusesAllButTheCanonicalForm() {
        let good = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
        var bad: [String] = [
            "", String(good.prefix(35)), good + "0", " " + good, good + " ", "{" + good + "}",
            good.replacingOccurrences(of: "-", with: ""), good.replacingOccurrences(of: "-", with: "_"),
            "6ba7b8109-dad-11d1-80b4-00c04fd430c8", "6ba7b810-9dad-11d1-80b400-c04fd430c8",
            "6ba7b810-9dad-11d1-80b4-00c04fd430cg", "+ba7b810-9dad-11d1-80b4-00c04fd430c8",
            "6ba7b810-9dad-11d1-80b4-00c04fd430c\u{e9}", "6ba7b810-9dad-11d1-80b4-00c04fd4\u{1F511}",
            "0x6ba7b8-9dad-11d1-80b4-00c04fd430c8",
        ]
        // Every position: a hyphen where a digit belongs, and a digit where a hyphen belongs.
        for (offset, character) in good.enumerated() {
            var characters = Array(good)
            characters[offset] = character == "-" ? "0" : "-"
            bad.append(String(characters))
        }
        for text in bad { #expect(UUID(text: text) == nil, "read \(text)") }
    }
}
