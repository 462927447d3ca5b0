import ShadowCore
import Foundation
import ShadowCredentials
import ShadowTestSupport
import Testing

/// The transition table and the ordering rule, checked on the record a store keeps and on a
/// plain fold of the table over events sorted by time.
@Suite struct StateMachineTests {
    static let client = "com.example.app"
    static let t: Int64 = 1_700_000_000_000

    static func event(
        _ kind: CredentialEvent.Kind, at time: Int64, id: String? = nil, subject: String = "001.aaa.1"
    ) -> CredentialEvent {
        try! CredentialEvent(
            kind: kind, clientID: client, subject: subject, timeMilliseconds: time,
            id: id ?? "\(kind.rawValue)@\(time)",
            linkedSubject: kind == .transferred ? "002.bbb.2" : nil)
    }

    /// The status the table gives for `events`: sorted, duplicates dropped, folded.
    static func fold(_ events: [CredentialEvent]) -> CredentialStatus {
        var seen = Set<CredentialEvent>()
        return events.sorted(by: CredentialEvent.appliesBefore).filter { seen.insert($0).inserted }.reduce(.notFound) {
            $0.applying($1)
        }
    }

    static func record(_ events: [CredentialEvent]) -> CredentialRecord {
        var record = CredentialRecord()
        for event in events { record.apply(event) }
        return record
    }

    /// How each starting state is reached: one event at `t`.
    static let setups: [(CredentialState, [CredentialEvent])] = [
        (.notFound, []), (.authorized, [event(.signIn, at: t)]), (.revoked, [event(.consentRevoked, at: t)]),
        (.transferred, [event(.transferred, at: t)]),
    ]

    /// The expected state after an event with `effect`, one second before (-1), at (0) or one
    /// second after (+1) the event that set the starting state. Written out by hand, as in
    /// Docs/credential-state.md.
    static let table: [CredentialState: [CredentialEvent.Kind.Effect: [CredentialState]]] = [
        .notFound: [
            .authorize: [.authorized, .authorized, .authorized], .revoke: [.revoked, .revoked, .revoked],
            .transfer: [.transferred, .transferred, .transferred], .metadata: [.notFound, .notFound, .notFound],
        ],
        .authorized: [
            .authorize: [.authorized, .authorized, .authorized], .revoke: [.authorized, .revoked, .revoked],
            .transfer: [.transferred, .transferred, .transferred], .metadata: [.authorized, .authorized, .authorized],
        ],
        .revoked: [
            .authorize: [.revoked, .revoked, .authorized], .revoke: [.revoked, .revoked, .revoked],
            .transfer: [.transferred, .transferred, .transferred], .metadata: [.revoked, .revoked, .revoked],
        ],
        .transferred: [
            .authorize: [.transferred, .transferred, .transferred],
            .revoke: [.transferred, .transferred, .transferred],
            .transfer: [.transferred, .transferred, .transferred],
            .metadata: [.transferred, .transferred, .transferred],
        ],
    ]

    @Test(arguments: CredentialEvent.Kind.allCases)
    func everyStateAndEvent(kind: CredentialEvent.Kind) throws {
        for (start, setup) in Self.setups {
            #expect(Self.record(setup).status.state == start)
            for (column, offset) in [Int64(-1000), 0, 1000].enumerated() {
                let event = Self.event(kind, at: Self.t + offset)
                let expected = try #require(Self.table[start]?[kind.effect]?[column])
                let record = Self.record(setup + [event])
                #expect(record.status.state == expected, "\(start) + \(kind) at \(offset) ms")
                #expect(
                    record.status == Self.fold(setup + [event]),
                    "\(start) + \(kind) at \(offset) ms: record and fold disagree")
                // Arrival order does not matter.
                #expect(Self.record([event] + setup) == record, "\(start) + \(kind) at \(offset) ms, arriving first")
                if kind.effect == .metadata { #expect(record.status.emailForwarding == (kind == .emailEnabled)) }
            }
        }
    }

    @Test func statusCarriesTheDecidingEvent() throws {
        let revoke = Self.event(.consentRevoked, at: Self.t, id: "jti-1")
        let record = Self.record([
            Self.event(.signIn, at: Self.t - 5000), revoke, Self.event(.emailDisabled, at: Self.t - 1),
        ])
        #expect(
            record.status
                == CredentialStatus(
                    state: .revoked, since: revoke.time, cause: .consentRevoked, eventID: "jti-1",
                    emailForwarding: false))
        let transfer = Self.record([
            Self.event(.transferred, at: Self.t + 7), Self.event(.transferred, at: Self.t + 3, id: "earlier"),
        ]).status
        #expect(
            transfer.state == .transferred && transfer.eventID == "earlier" && transfer.linkedSubject == "002.bbb.2")
        #expect(CredentialRecord().status == .notFound)
    }

    @Test func duplicatesChangeNothing() {
        var record = CredentialRecord()
        let revoke = Self.event(.accountDeleted, at: Self.t, id: "jti-9")
        let first = record.apply(revoke)
        #expect(first)
        let after = record
        let again = record.apply(revoke)
        #expect(!again && record == after)
        // An older event of the same effect is absorbed.
        let older = record.apply(Self.event(.consentRevoked, at: Self.t - 1))
        #expect(!older)
        #expect(record.status == after.status)
    }

    @Test func supersedingIsAtOrAfterTheTokensIssue() {
        let record = Self.record([
            Self.event(.signIn, at: Self.t - 60_000), Self.event(.consentRevoked, at: Self.t + 400),
            Self.event(.signIn, at: Self.t + 5000),
        ])
        #expect(record.status.state == .authorized)
        let issued = { (seconds: Int64) in Date(timeIntervalSince1970: Double(seconds)) }
        #expect(record.superseding(issuedAt: issued(Self.t / 1000 - 60))?.kind == .consentRevoked)
        #expect(record.superseding(issuedAt: issued(Self.t / 1000))?.kind == .consentRevoked)
        #expect(record.superseding(issuedAt: issued(Self.t / 1000 + 1)) == nil)
        let transferred = Self.record([Self.event(.transferred, at: Self.t)])
        #expect(transferred.superseding(issuedAt: issued(Self.t / 1000))?.kind == .transferred)
    }

    @Test func malformedEventsAreRefused() {
        let cases: [() throws -> CredentialEvent] = [
            { try CredentialEvent(kind: .signIn, clientID: "", subject: "s", timeMilliseconds: 1, id: "i") },
            { try CredentialEvent(kind: .signIn, clientID: "c", subject: "", timeMilliseconds: 1, id: "i") },
            { try CredentialEvent(kind: .signIn, clientID: "c", subject: "s", timeMilliseconds: 1, id: "") },
            { try CredentialEvent(kind: .signIn, clientID: "c", subject: "s", timeMilliseconds: -1, id: "i") },
            { try CredentialEvent(kind: .transferred, clientID: "c", subject: "s", timeMilliseconds: 1, id: "i") },
            {
                try CredentialEvent(
                    kind: .signIn, clientID: "c", subject: "s", timeMilliseconds: 1, id: "i", linkedSubject: "n")
            },
            {
                try CredentialEvent(
                    kind: .signIn, clientID: String(repeating: "c", count: 256), subject: "s", timeMilliseconds: 1,
                    id: "i")
            },
        ]
        for (index, make) in cases.enumerated() {
            #expect(throws: CredentialError(.invalidEvent, ""), "case \(index)") { try make() }
        }
    }

    /// Random events over two subjects, times drawn from a small range so ties are common,
    /// delivered shuffled with duplicates: the record always equals the sorted fold.
    @Test func arrivalOrderAndDuplicatesNeverMatter() {
        var random = SeededGenerator(seed: 0x5EED_C0DE)
        for round in 0..<3000 {
            let subjects = ["001.aaa.1", "001.bbb.2"]
            var events: [CredentialEvent] = []
            for _ in 0..<Int.random(in: 1...12, using: &random) {
                let kind = CredentialEvent.Kind.allCases.randomElement(using: &random)!
                let time = Self.t + Int64.random(in: 0...4, using: &random) * 1000
                let id = ["a", "b", "c", "d"].randomElement(using: &random)!
                events.append(Self.event(kind, at: time, id: id, subject: subjects.randomElement(using: &random)!))
            }
            var delivered = events
            for _ in 0..<Int.random(in: 0...4, using: &random) {
                delivered.append(events.randomElement(using: &random)!)
            }
            delivered.shuffle(using: &random)
            for subject in subjects {
                let mine = { (list: [CredentialEvent]) in list.filter { $0.subject == subject } }
                let expected = Self.fold(mine(events))
                #expect(
                    Self.record(mine(delivered)).status == expected,
                    "round \(round) (seed 0x5EEDC0DE), \(subject): \(delivered)")
            }
        }
    }
}

/// SplitMix64: a reproducible generator for property tests (not for anything secret).
