import ShadowCore
@testable import ShadowCredentials
import Testing

/// A write checks the lines before it by the fields their writer put where it puts them
/// (`AuditEntry.carries`), and makes its own lines' members in place (`AuditEntry.members()`):
/// both must hold for every value a line can carry, escapes included.
@Suite struct AuditLineFieldsTests {
    let keys = AuditKeys(secret: Array(repeating: 0x42, count: 32))

    /// Values chosen to sit badly in JSON: quotes, backslashes, control characters, non-ASCII, and
    /// text that spells the members `carries` looks for.
    static let awkward = [
        "com.example.app", #"quote " and backslash \ "#, "line\nbreak\ttab\u{01}\u{1F}", "é/ü 🙂",
        #"x","subject":"0000000000000000000000000000000000000000000000000000000000000000"#,
        #"y","linked_subject":null,"z"#, #"","prev":""#, "\\\"",
    ]

    private func entry(clientID: String, eventID: String, linked: Bool, email: Bool?) -> AuditEntry {
        AuditEntry(
            sequence: 7, recordedAtMilliseconds: 1_800_000_000_000, eventTimeMilliseconds: -5,
            clientID: clientID, subjectHash: keys.subjectHash(clientID: clientID, subject: "001234.abc"),
            old: .authorized, new: linked ? .transferred : .revoked, cause: linked ? .transferred : .consentRevoked,
            eventID: eventID,
            linkedSubjectHash: linked ? keys.subjectHash(clientID: clientID, subject: "002.bbb.2") : nil,
            emailForwarding: email)
    }

    private var entries: [AuditEntry] {
        Self.awkward.flatMap { text in
            [
                entry(clientID: text, eventID: "e-1", linked: false, email: nil),
                entry(clientID: "com.example.app", eventID: text, linked: true, email: true),
                entry(clientID: text, eventID: text, linked: true, email: false),
            ]
        }
    }

    @Test func membersAreWhatTheObjectSerializes() {
        for entry in entries {
            let object: JSONObject = [
                "recorded_at_ms": .int(entry.recordedAtMilliseconds),
                "event_time_ms": .int(entry.eventTimeMilliseconds),
                "client_id": .string(entry.clientID), "subject": .string(entry.subjectHash),
                "old": .string(entry.old.description), "new": .string(entry.new.description),
                "cause": .string(entry.cause.rawValue), "event_id": .string(entry.eventID),
                "linked_subject": entry.linkedSubjectHash.map(JSONValue.string) ?? .null,
                "email_forwarding": entry.emailForwarding.map(JSONValue.bool) ?? .null,
            ]
            let serialized = JSONValue.object(object).serializedBytes()
            #expect(entry.members() == Array(serialized.dropFirst().dropLast()), "\(entry.clientID) \(entry.eventID)")
        }
    }

    @Test func aWrittenLineCarriesItsFieldsAndNoOthers() throws {
        let previous = keys.start
        let other = Array(repeating: UInt8(ascii: "0"), count: 64)
        for entry in entries {
            let line = AuditEntry.line(sequence: 7, members: entry.members(), previous: previous)
            #expect(AuditEntry.parse(line[...]) != nil)
            let subject = Array(entry.subjectHash.utf8)
            let linked = entry.linkedSubjectHash.map { Array($0.utf8) }
            let prev = Array(Hex.encode(previous).utf8)
            func carries(
                sequence: Int = 7, subject: [UInt8]? = nil, linked: [UInt8]?? = nil, previous: [UInt8]? = nil,
                in text: [UInt8]? = nil
            ) -> Bool {
                AuditEntry.carries(
                    (text ?? line)[...], sequence: sequence, subject: subject ?? Array(entry.subjectHash.utf8),
                    linked: linked ?? entry.linkedSubjectHash.map { Array($0.utf8) }, previous: previous ?? prev)
            }
            let what = "\(entry.clientID) \(entry.eventID)"
            #expect(carries(), "\(what)")
            #expect(!carries(sequence: 70), "\(what)")
            #expect(!carries(sequence: 8), "\(what)")
            #expect(!carries(subject: other), "\(what)")
            #expect(!carries(subject: Array(subject.dropLast())), "\(what)")
            #expect(!carries(linked: .some(linked == nil ? subject : nil)), "\(what)")
            #expect(!carries(previous: other), "\(what)")
            #expect(!carries(in: Array(line.dropLast())), "\(what)")
            #expect(!carries(in: line + [0x20]), "\(what)")
        }
    }
}
