import Foundation
import ShadowSelfTest
import ShadowTestSupport
import Testing

/// TestVectors/shadow/state-db/vectors.json, made by an independent implementation of
/// Docs/credential-state.md, "Database stores", through the selftest's suite (which an installed
/// binary runs from its embedded copy).
@Suite struct StateDBVectorTests {
    @Test func everyVectorPasses() throws {
        let cases = StateDBSuites.vectors(try PackagePaths.vector("shadow/state-db/vectors.json"))
        #expect(cases.count == 23, "\(cases.map(\.id))")
        for result in cases { #expect(result.passed, "\(result.detail)") }
    }

    /// A vector that does not hold is reported as failed, not skipped.
    @Test func aWrongVectorFails() throws {
        var bytes = try PackagePaths.vector("shadow/state-db/vectors.json")
        let text = String(decoding: bytes, as: UTF8.self)
        let range = try #require(text.range(of: #""row_id": ""#))
        let offset = text.utf8.distance(from: text.startIndex, to: range.upperBound)
        bytes[offset] = bytes[offset] == UInt8(ascii: "0") ? UInt8(ascii: "1") : UInt8(ascii: "0")
        #expect(StateDBSuites.vectors(bytes).contains { !$0.passed })
    }
}
