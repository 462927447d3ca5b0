import Foundation
import ShadowCore
import ShadowCredentials
import ShadowPostgres
import ShadowSQLite
import ShadowTestSupport
import ShadowVault
import Testing

/// Processes killed mid-write, and several processes writing one PostgreSQL database at once.
@Suite(.tags(.multiProcess), .alone, .serialized) struct StoreReliabilityTests {
    static let client = StoreCLITests.client
    let directory: TemporaryDirectory
    let keyFile: String
    let key = SecretBytes((0..<32).map { UInt8($0) })

    init() throws {
        directory = try TemporaryDirectory()
        keyFile = try directory.write(
            "state.key", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n", mode: 0o600)
    }

    /// 200 `state apply-events` processes SIGKILLed at random moments over one backlog whose
    /// batches each touch their own 25 users. After every kill: each batch is wholly applied or
    /// not at all, the applied batches are a prefix of the backlog, the audit log has one line per
    /// applied sign-in and nothing else, and its chain verifies.
    @Test func twoHundredKillsLoseNoCommittedTransition() async throws {
        let batches = 400, perBatch = 25
        var lines: [String] = []
        for batch in 0..<batches {
            for user in 0..<perBatch {
                lines.append(
                    StoreCLITests.line(
                        "sign-in", "b\(batch).u\(user)", 1_700_000_000_000 + Int64(batch), "e\(batch).\(user)"))
            }
        }
        let backlog = try directory.write("backlog.jsonl", lines.joined(separator: "\n") + "\n")
        let path = directory.path + "/state.sqlite"
        let arguments = [
            "state", "apply-events", backlog, "--store", "sqlite:\(path)", "--key-file", keyFile, "--batch-size",
            String(perBatch), "--quiet",
        ]
        var random = SeededGenerator(seed: 0x0C0F_FEE5)
        var killed = 0, completed = 0
        for round in 0..<200 {
            let child = try ChildProcess(
                CLIRunner.executable.path, arguments, environment: [:], removing: ["SHADOW_KEYS_STATE_STORE"])
            usleep(UInt32.random(in: 5_000...120_000, using: &random))
            child.kill()
            let result = try child.wait(timeout: 60)
            if result.status == 0 { completed += 1 } else { killed += 1 }
            guard FileManager.default.fileExists(atPath: path) else { continue }
            let store = try await SQLiteCredentialStore.open(path: path, unlock: .key(key), create: false)
            let authorized = try await store.counts()[.authorized] ?? 0
            let report = try await store.verifyAudit()
            #expect(
                authorized % perBatch == 0,
                "round \(round) (seed 0x0C0FFEE5): \(authorized) users authorized, not whole batches")
            #expect(
                report.entries == authorized,
                "round \(round): \(report.entries) audit entries for \(authorized) sign-ins")
            if round % 25 == 0 || round == 199 {
                // The applied batches are exactly the first authorized / perBatch ones.
                let applied = authorized / perBatch
                for batch in [0, applied - 1, applied, min(applied + 1, batches - 1)]
                where batch >= 0 && batch < batches {
                    for user in [0, perBatch - 1] {
                        let state = try await store.status(clientID: Self.client, subject: "b\(batch).u\(user)").state
                        #expect(
                            state == (batch < applied ? .authorized : .notFound),
                            "round \(round): batch \(batch) of \(applied) applied")
                    }
                }
            }
            await store.close()
        }
        #expect(killed > 100, "only \(killed) of 200 runs were killed mid-way")
        // Finish the backlog: everything arrives exactly once.
        let finished = try CLIRunner.run(arguments, removing: ["SHADOW_KEYS_STATE_STORE"], timeout: 120)
        #expect(finished.status == 0, "\(finished.stderr)")
        let store = try await SQLiteCredentialStore.open(path: path, unlock: .key(key), create: false)
        #expect(try await store.counts()[.authorized] == batches * perBatch)
        #expect(try await store.verifyAudit().entries == batches * perBatch)
        await store.close()
    }

    /// Four processes apply the same 10,000-event stream (with duplicates, each shuffled its own
    /// way) to one PostgreSQL database at once: every user ends as the sorted fold says, and no
    /// transition is logged twice.
    @Test(.tags(.postgres), .enabled(if: postgresWanted)) func fourProcessesOneDatabase() async throws {
        let cluster = try PostgresCluster.shared.get()
        let url = try cluster.freshDatabase()
        var random = SeededGenerator(seed: 0x4B1D_5EED)
        let kinds = CredentialEvent.Kind.allCases
        var events: [CredentialEvent] = []
        for index in 0..<8000 {
            let kind = kinds.randomElement(using: &random)!
            let subject = "p.\(Int.random(in: 0..<1000, using: &random))"
            events.append(
                try CredentialEvent(
                    kind: kind, clientID: Self.client, subject: subject,
                    timeMilliseconds: 1_700_000_000_000 + Int64.random(in: 0..<50, using: &random) * 1000,
                    id: "i\(index % 900)", linkedSubject: kind == .transferred ? subject + ".new" : nil))
        }
        let stream = events + (0..<2000).map { _ in events.randomElement(using: &random)! }
        func line(_ event: CredentialEvent) -> String {
            StoreCLITests.line(
                event.kind.rawValue, event.subject, event.timeMilliseconds, event.id, linked: event.linkedSubject)
        }
        var children: [ChildProcess] = []
        for process in 0..<4 {
            let file = try directory.write(
                "stream\(process).jsonl", stream.shuffled(using: &random).map(line).joined(separator: "\n"))
            children.append(
                try ChildProcess(
                    CLIRunner.serverExecutable.path,
                    [
                        "state", "apply-events", file, "--store", url, "--key-file", keyFile, "--batch-size", "250",
                        "--json",
                    ],
                    environment: [:], removing: ["SHADOW_KEYS_STATE_STORE"]))
        }
        for child in children {
            let result = try child.wait(timeout: 300)
            #expect(result.status == 0, "\(result.stderr)")
        }
        let store = try await PostgresCredentialStore.connect(try PostgresLocation(url: url), unlock: .key(key))
        defer { Task { await store.close() } }
        var bySubject: [String: [CredentialEvent]] = [:]
        for event in events { bySubject[event.subject, default: []].append(event) }
        for (subject, mine) in bySubject {
            var seen = Set<CredentialEvent>()
            let expected = mine.sorted(by: CredentialEvent.appliesBefore).filter { seen.insert($0).inserted }.reduce(
                CredentialStatus.notFound
            ) { $0.applying($1) }
            #expect(try await store.status(clientID: Self.client, subject: subject) == expected, "\(subject)")
        }
        let entries = try await store.auditEntries()
        let keys = entries.map {
            """
            \($0.subjectHash) \($0.old)>\($0.new) \($0.cause.rawValue) \($0.eventID) \($0.eventTimeMilliseconds) \
            \($0.emailForwarding.map(String.init) ?? "-")
            """
        }
        #expect(Set(keys).count == keys.count, "a transition was logged twice")
        #expect(entries.count >= bySubject.count)
    }
}
