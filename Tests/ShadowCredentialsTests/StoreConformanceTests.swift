import Foundation
import ShadowCore
import ShadowCredentials
import ShadowPostgres
import ShadowSQLite
import ShadowTestSupport
import ShadowVault
import Testing

/// The three stores that keep state: the vault, SQLite, and PostgreSQL (a throwaway cluster).
enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case vault, sqlite, postgres
    var testDescription: String { rawValue }

    /// Every kind, PostgreSQL left out under `SHADOW_KEYS_SKIP_POSTGRES=1` (a quick run).
    static var wanted: [StoreKind] { allCases.filter { $0 != .postgres || postgresWanted } }
}

/// A fresh, empty store of one kind, and a way to open another handle on the same data.
struct StoreFixture: Sendable {
    let kind: StoreKind
    let directory: TemporaryDirectory
    /// The SQLite file, the vault file, or the PostgreSQL URL.
    let location: String
    let key: SecretBytes

    static let defaultKey = SecretBytes((0..<32).map { UInt8($0) })

    init(_ kind: StoreKind, key: SecretBytes = defaultKey) throws {
        self.kind = kind
        self.key = key
        directory = try TemporaryDirectory()
        switch kind {
        case .vault:
            location = directory.path + "/vault.skv"
            _ = try TokenVault.createSync(at: location, unlock: .key(key))
        case .sqlite:
            location = directory.path + "/state.sqlite"
        case .postgres:
            location = try PostgresCluster.shared.get().freshDatabase()
        }
    }

    /// A new handle (a new connection for the databases).
    func open(unlock: VaultUnlock? = nil, clock: WallClock = .system) async throws -> any AuditedCredentialStore {
        let unlock = unlock ?? .key(key)
        switch kind {
        case .vault: return VaultCredentialStore(vault: TokenVault(path: location, unlock: unlock), clock: clock)
        case .sqlite: return try await SQLiteCredentialStore.open(path: location, unlock: unlock, clock: clock)
        case .postgres:
            return try await PostgresCredentialStore.connect(
                try PostgresLocation(url: location), unlock: unlock, clock: clock)
        }
    }
}

func close(_ store: any AuditedCredentialStore) async {
    if let store = store as? any DatabaseCredentialStore { await store.close() }
}

/// The transition table, the ordering rule and the audit chain, through every store.
@Suite(.serialized, .ownThreads) struct StoreConformanceTests {
    typealias Table = StateMachineTests

    /// Every cell of the table of Docs/credential-state.md, each in its own subject, through the store.
    @Test(arguments: StoreKind.wanted)
    func everyStateAndEvent(kind: StoreKind) async throws {
        let fixture = try StoreFixture(kind)
        let store = try await fixture.open()
        defer { Task { await close(store) } }
        var cell = 0
        for eventKind in CredentialEvent.Kind.allCases {
            for (start, setup) in Table.setups {
                for (column, offset) in [Int64(-1000), 0, 1000].enumerated() {
                    cell += 1
                    let subject = "cell.\(cell)"
                    let moved = setup.map { Table.event($0.kind, at: $0.timeMilliseconds, id: $0.id, subject: subject) }
                    let event = Table.event(eventKind, at: Table.t + offset, subject: subject)
                    _ = try await store.apply(moved)
                    #expect(try await store.status(clientID: Table.client, subject: subject).state == start)
                    let changes = try await store.apply([event])
                    let expected = try #require(Table.table[start]?[eventKind.effect]?[column])
                    let status = try await store.status(clientID: Table.client, subject: subject)
                    #expect(status.state == expected, "\(kind): \(start) + \(eventKind) at \(offset) ms")
                    #expect(
                        status == Table.fold(moved + [event]),
                        "\(kind): \(start) + \(eventKind) at \(offset) ms: store and fold disagree")
                    #expect(changes.count == 1 && changes[0].new == status)
                }
            }
        }
        #expect(try await store.verifyAudit().entries > 0)
    }

    /// Random events over a few subjects, delivered shuffled, with duplicates, in random batches:
    /// every record equals the sorted fold, and the chain verifies.
    @Test(arguments: StoreKind.wanted)
    func arrivalOrderAndDuplicatesNeverMatter(kind: StoreKind) async throws {
        let fixture = try StoreFixture(kind)
        let store = try await fixture.open()
        defer { Task { await close(store) } }
        var random = SeededGenerator(seed: 0xD1CE_5EED)
        for round in 0..<40 {
            let subjects = (0..<3).map { "r\(round).s\($0)" }
            var events: [CredentialEvent] = []
            for _ in 0..<Int.random(in: 1...12, using: &random) {
                let eventKind = CredentialEvent.Kind.allCases.randomElement(using: &random)!
                let time = Table.t + Int64.random(in: 0...4, using: &random) * 1000
                events.append(
                    Table.event(
                        eventKind, at: time, id: ["a", "b", "c"].randomElement(using: &random)!,
                        subject: subjects.randomElement(using: &random)!))
            }
            var delivered = events
            for _ in 0..<Int.random(in: 0...4, using: &random) {
                delivered.append(events.randomElement(using: &random)!)
            }
            delivered.shuffle(using: &random)
            var rest = delivered[...]
            while !rest.isEmpty {
                let take = Int.random(in: 1...rest.count, using: &random)
                _ = try await store.apply(Array(rest.prefix(take)))
                rest = rest.dropFirst(take)
            }
            for subject in subjects {
                let expected = Table.fold(events.filter { $0.subject == subject })
                #expect(
                    try await store.status(clientID: Table.client, subject: subject) == expected,
                    "\(kind) round \(round) (seed 0xD1CE5EED), \(subject)")
            }
        }
        let entries = try await store.auditEntries()
        #expect(try await store.verifyAudit().entries == entries.count)
    }

    /// Two handles (two connections, or two vault handles) apply the same shuffled stream with
    /// duplicates at once: the states equal one handle's result and no transition is logged twice.
    @Test(arguments: StoreKind.wanted)
    func concurrentWritersAgreeAndLogOnce(kind: StoreKind) async throws {
        let fixture = try StoreFixture(kind)
        let first = try await fixture.open(), second = try await fixture.open()
        defer {
            Task {
                await close(first)
                await close(second)
            }
        }
        var random = SeededGenerator(seed: 0xC0C0_4EED)
        let subjects = (0..<20).map { "c.\($0)" }
        var events: [CredentialEvent] = []
        for index in 0..<400 {
            let eventKind = CredentialEvent.Kind.allCases.randomElement(using: &random)!
            events.append(
                Table.event(
                    eventKind, at: Table.t + Int64.random(in: 0...20, using: &random) * 1000, id: "e\(index % 50)",
                    subject: subjects.randomElement(using: &random)!))
        }
        let streams = [events.shuffled(using: &random), events.shuffled(using: &random)]
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (store, stream) in zip([first, second], streams) {
                group.addTask {
                    for chunk in stride(from: 0, to: stream.count, by: 10) {
                        _ = try await store.apply(Array(stream[chunk..<min(chunk + 10, stream.count)]))
                    }
                }
            }
            try await group.waitForAll()
        }
        for subject in subjects {
            #expect(
                try await first.status(clientID: Table.client, subject: subject)
                    == Table.fold(events.filter { $0.subject == subject }), "\(kind) \(subject)")
        }
        let entries = try await second.auditEntries()
        let keys = entries.map {
            """
            \($0.subjectHash) \($0.old)>\($0.new) \($0.cause.rawValue) \($0.eventID) \($0.eventTimeMilliseconds) \
            \($0.emailForwarding.map(String.init) ?? "-")
            """
        }
        #expect(Set(keys).count == keys.count, "\(kind): a transition was logged twice")
        #expect(!entries.isEmpty)
    }

    /// Four handles (four instances) apply at once, their batches full of users none of them has
    /// seen yet, so two often make the same user's row together. Each user's transitions are
    /// chained in the order they were made: every line starts from the state the line before it
    /// left (from `notFound` for the first), and the states are one handle's result.
    @Test(arguments: [StoreKind.sqlite, .postgres].filter(StoreKind.wanted.contains))
    func fourWritersChainEachUsersTransitionsInOrder(kind: StoreKind) async throws {
        let fixture = try StoreFixture(kind)
        var stores: [any AuditedCredentialStore] = []
        for _ in 0..<4 { stores.append(try await fixture.open()) }
        defer { Task { [stores] in for store in stores { await close(store) } } }
        var random = SeededGenerator(seed: 0x4_0A11)
        let subjects = (0..<60).map { "w.\($0)" }
        var events: [CredentialEvent] = []
        for index in 0..<600 {
            events.append(
                Table.event(
                    CredentialEvent.Kind.allCases.randomElement(using: &random)!,
                    at: Table.t + Int64.random(in: 0...30, using: &random) * 1000, id: "e\(index)",
                    subject: subjects.randomElement(using: &random)!))
        }
        let streams = (0..<4).map { _ in events.shuffled(using: &random) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (store, stream) in zip(stores, streams) {
                group.addTask {
                    for chunk in stride(from: 0, to: stream.count, by: 40) {
                        _ = try await store.apply(Array(stream[chunk..<min(chunk + 40, stream.count)]))
                    }
                }
            }
            try await group.waitForAll()
        }
        for subject in subjects {
            #expect(
                try await stores[0].status(clientID: Table.client, subject: subject)
                    == Table.fold(events.filter { $0.subject == subject }), "\(kind) \(subject)")
        }
        let entries = try await stores[1].auditEntries()
        #expect(try await stores[2].verifyAudit().entries == entries.count)
        var last: [String: CredentialState] = [:]
        for entry in entries {
            #expect(
                entry.old == last[entry.subjectHash, default: .notFound],
                """
                \(kind): line \(entry.sequence) starts from \(entry.old), the user's line before ended at \
                \(String(describing: last[entry.subjectHash]))
                """)
            last[entry.subjectHash] = entry.new
        }
        #expect(Set(last.keys).count == subjects.count)
    }

    @Test(arguments: StoreKind.wanted)
    func aWrongKeyIsRefused(kind: StoreKind) async throws {
        let fixture = try StoreFixture(kind)
        let store = try await fixture.open()
        _ = try await store.apply([Table.event(.signIn, at: Table.t)])
        await close(store)
        let other = SecretBytes(Array(repeating: 7, count: 32))
        await #expect(throws: (any Error).self) {
            let wrong = try await fixture.open(unlock: .key(other))
            defer { Task { await close(wrong) } }
            _ = try await wrong.status(clientID: Table.client, subject: "001.aaa.1")
        }
        if kind != .vault {
            await #expect(throws: CredentialError(.wrongKey, "")) { _ = try await fixture.open(unlock: .key(other)) }
            await #expect(throws: CredentialError(.wrongKey, "")) {
                _ = try await fixture.open(unlock: .passphrase(SecretBytes(utf8: "a passphrase")))
            }
        }
    }

    @Test(arguments: StoreKind.wanted)
    func historyFollowsTheSubjectAndItsLinkedSubject(kind: StoreKind) async throws {
        let fixture = try StoreFixture(kind)
        let store = try await fixture.open()
        defer { Task { await close(store) } }
        let transfer = try CredentialEvent(
            kind: .transferred, clientID: Table.client, subject: "old.1", timeMilliseconds: Table.t + 5000, id: "t1",
            linkedSubject: "new.1")
        _ = try await store.apply([
            Table.event(.signIn, at: Table.t, subject: "old.1"), transfer,
            Table.event(.signIn, at: Table.t, subject: "other"),
        ])
        let old = try await store.history(clientID: Table.client, subject: "old.1")
        #expect(old.map { "\($0.old)>\($0.new)" } == ["notFound>authorized", "authorized>transferred"])
        let new = try await store.history(clientID: Table.client, subject: "new.1")
        #expect(new.map(\.cause) == [.transferred])
        #expect(try await store.history(clientID: "another.client", subject: "old.1").isEmpty)
    }
}
