import Foundation
import ShadowCore
@testable import ShadowCredentials
import Testing

/// The audit log's lines have one exact form (Docs/credential-state.md). A line that means the
/// same but is written otherwise must fail verification even when its chain is recomputed with
/// the right key: the verifier re-encodes every line and compares bytes.
@Suite struct AuditExactFormTests {
    let keys = AuditKeys(secret: Array(repeating: 0x42, count: 32))

    private func entry(sequence: Int, eventID: String) -> AuditEntry {
        AuditEntry(
            sequence: sequence, recordedAtMilliseconds: 1_800_000_000_000, eventTimeMilliseconds: 1_700_000_000_000,
            clientID: "com.example.app",
            subjectHash: keys.subjectHash(clientID: "com.example.app", subject: "001234.abc"), old: .notFound,
            new: .revoked, cause: .consentRevoked,
            eventID: eventID, linkedSubjectHash: nil, emailForwarding: nil)
    }

    /// A log of `lines` (each chained to the one before with the real key) and its head.
    private func log(_ lines: [[UInt8]]) -> (bytes: [UInt8], head: AuditHead) {
        var chain = keys.start
        var bytes: [UInt8] = []
        for line in lines {
            bytes += line + [0x0A]
            chain = keys.link(line[...])
        }
        return (bytes, AuditHead(count: lines.count, bytes: bytes.count, chain: chain))
    }

    /// The canonical first line, rewritten by `edit` as text.
    private func variant(eventID: String = "jti-é/1", _ edit: (String) -> String) -> [UInt8] {
        Array(
            edit(String(decoding: entry(sequence: 1, eventID: eventID).line(previous: keys.start), as: UTF8.self)).utf8)
    }

    @Test func theCanonicalFormVerifies() throws {
        let (bytes, head) = log([variant { $0 }])
        let (report, entries) = try AuditLog.verify(bytes, keys: keys, head: head)
        #expect(report.entries == 1 && entries[0].eventID == "jti-é/1")
    }

    /// Rewrites the canonical line as an attacker (or a careless tool) might.
    static func edit(_ what: String, _ line: String) -> String {
        func uppercased(after marker: String) -> String {
            guard let range = line.range(of: marker) else { return line }
            let end = line.index(range.upperBound, offsetBy: 64)
            return line.replacingCharacters(in: range.upperBound..<end, with: line[range.upperBound..<end].uppercased())
        }
        switch what {
        case "a space after a colon": return line.replacing("\"seq\":1", with: "\"seq\": 1")
        case "a space after a comma": return line.replacing(",\"recorded_at_ms\"", with: ", \"recorded_at_ms\"")
        case "reordered members":
            return line.replacing(
                "{\"seq\":1,\"recorded_at_ms\":1800000000000,", with: "{\"recorded_at_ms\":1800000000000,\"seq\":1,")
        case "é written as \\u00e9": return line.replacing("é", with: "\\u00e9")
        case "/ written as \\/": return line.replacing("é/1", with: "é\\/1")
        case "an upper-case subject hash": return uppercased(after: "\"subject\":\"")
        case "an upper-case prev": return uppercased(after: "\"prev\":\"")
        case "a number with an exponent":
            return line.replacing("\"event_time_ms\":1700000000000", with: "\"event_time_ms\":1.7e12")
        case "a number with a fraction": return line.replacing("\"seq\":1,", with: "\"seq\":1.0,")
        case "a trailing space": return line + " "
        default: return line
        }
    }

    @Test(arguments: [
        "a space after a colon", "a space after a comma", "reordered members", "é written as \\u00e9",
        "/ written as \\/", "an upper-case subject hash",
        "an upper-case prev", "a number with an exponent", "a number with a fraction", "a trailing space",
    ])
    func anyOtherSpellingIsTampering(what: String) throws {
        let line = variant { Self.edit(what, $0) }
        #expect(line != variant { $0 }, "\(what): the edit changed nothing")
        let (bytes, head) = log([line])
        let error = #expect(throws: CredentialError.self, "\(what)") {
            try AuditLog.verify(bytes, keys: keys, head: head)
        }
        #expect(error?.code == .auditTampered, "\(what)")
    }
}
