#if canImport(AsyncHTTPClient)
import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import ShadowCore
import ShadowCredentials
import ShadowJOSE
import ShadowPostgres
import ShadowTestSupport
import ShadowVault
import Synchronization
import Testing

/// Two `serve` processes over one PostgreSQL database, under a load generator posting Apple-shaped
/// notifications (a fifth of them repeated) to both, with a loopback fake of Apple's revoke
/// endpoint that counts calls.
@Suite(.tags(.multiProcess, .postgres), .alone, .serialized, .enabled(if: postgresWanted)) struct ServeClusterTests {
    static let client = "com.example.app"
    static let types = ["consent-revoked", "account-delete", "email-disabled", "email-enabled", "account-deleted"]

    let directory: TemporaryDirectory
    let keyFile: String
    let key = SecretBytes((0..<32).map { UInt8($0) })
    let jwks: String
    let signer: JWSSigner
    let p8: P256.Signing.PrivateKey
    let p8File: String
    let apple: FakeAppleServer
    let database: String

    init() throws {
        directory = try TemporaryDirectory()
        keyFile = try directory.write("state.key", Hex.encode(key.withUnsafeBytes { Array($0) }) + "\n", mode: 0o600)
        signer = try JWSSigner.rs256(TestKeys.rsa, keyID: "apple-1")
        jwks = try directory.write("apple-keys.json", TestKeys.jwksJSON([try signer.publicJWK()]))
        p8 = P256.Signing.PrivateKey()
        p8File = try directory.write("AuthKey.p8", p8.pemRepresentation, mode: 0o600)
        apple = try FakeAppleServer(clientKey: p8.publicKey, clientIDs: [Self.client])
        database = try PostgresCluster.shared.get().freshDatabase()
    }

    /// The n-th user's `sub`, in Apple's shape.
    static func subject(_ index: Int) -> String { "001234." + String(format: "%08x", index) + ".0042" }

    /// One notification: its body, and the event the server must record for it.
    struct Sent: Sendable {
        let body: [UInt8]
        let event: CredentialEvent
    }

    /// `distinct` notifications over `users` users, each user's events a second apart.
    func notifications(distinct: Int, users: Int) throws -> [Sent] {
        let now = Int64(Date().timeIntervalSince1970)
        return try (0..<distinct).map { index in
            let subject = Self.subject(index % users)
            let type = Self.types[(index / users + index) % Self.types.count]
            let eventTime = (now - 3000 + Int64(index / users)) * 1000
            let jti = "jti-\(index)"
            let events: JSONObject = ["type": .string(type), "sub": .string(subject), "event_time": .int(eventTime)]
            let claims: JSONObject = [
                "iss": "https://appleid.apple.com", "aud": .string(Self.client), "iat": .int(now - 1),
                "exp": .int(now + 3600), "jti": .string(jti),
                "events": .string(JSONValue.object(events).serialized()),
            ]
            let body = Array(JSONValue.object(["payload": .string(try signer.sign(claims: claims))]).serialized().utf8)
            let kind: CredentialEvent.Kind =
                switch type {
                case "consent-revoked": .consentRevoked
                case "email-disabled": .emailDisabled
                case "email-enabled": .emailEnabled
                default: .accountDeleted
                }
            return Sent(
                body: body,
                event: try CredentialEvent(
                    kind: kind, clientID: Self.client, subject: subject, timeMilliseconds: eventTime, id: jti))
        }
    }

    /// Every user gets a refresh token stored an hour before the events.
    func storeTokens(users: Int, in store: PostgresCredentialStore) async throws -> [String: String] {
        var tokens: [String: String] = [:]
        for index in 0..<users {
            let subject = Self.subject(index)
            let value = "r.\(UUID().uuidString)"
            tokens[subject] = value
            try await store.put(
                ServerToken(
                    clientID: Self.client, subject: subject, kind: .refresh, value: SecretBytes(utf8: value),
                    storedAt: Date().addingTimeInterval(-7200)))
        }
        return tokens
    }

    func startServe(port: Int) throws -> ChildProcess {
        try ChildProcess(
            CLIRunner.serverExecutable.path,
            [
                "serve", "--listen", "127.0.0.1:\(port)", "--client-id", Self.client, "--jwks", jwks, "--store",
                database, "--key-file", keyFile,
                "--p8", p8File, "--team-id", apple.teamID, "--key-id", apple.keyID, "--base-url", apple.baseURL,
                "--allow-http-loopback",
                "--revocation-retry", "1", "--revocation-lease", "5",
            ], environment: [:], removing: ["SHADOW_KEYS_STATE_STORE"])
    }

    func waitHealthy(_ server: ChildProcess, port: Int) throws {
        for _ in 0..<600 where !server.hasExited {
            if let (status, _) = try? ServeCLITests.http("GET", port: port, path: "/healthz"), status == 200 { return }
            usleep(100_000)
        }
        server.kill()
        throw CLIRunnerError(
            "serve on \(port) never answered /healthz: \(try server.wait(timeout: 10).stderr.suffix(2000))")
    }

    /// Posts every body with `concurrency` requests in flight, the i-th to `ports[i % 2]`; a
    /// request that fails (a killed instance) goes to the next port, as Apple retries. Returns
    /// the bodies that got a 200 and how each outcome was counted.
    static func post(
        _ sent: [Sent], ports: @escaping @Sendable (Int) -> [Int], concurrency: Int, client: HTTPClient,
        onProgress: @escaping @Sendable (Int) async -> Void = { _ in }
    ) async throws -> (acknowledged: [Int], outcomes: [String: Int]) {
        final class Progress: Sendable {
            let next = Atomic(0)
            let results = Mutex<(acknowledged: [Int], outcomes: [String: Int])>(([], [:]))
        }
        let progress = Progress()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<concurrency {
                group.addTask {
                    while true {
                        let index = progress.next.wrappingAdd(1, ordering: .relaxed).oldValue
                        guard index < sent.count else { return }
                        await onProgress(index)
                        var delivered = false
                        for attempt in 0..<200 where !delivered {
                            let candidates = ports(index)
                            let port = candidates[attempt % candidates.count]
                            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/apple/notifications")
                            request.method = .POST
                            request.headers.add(name: "Content-Type", value: "application/json")
                            request.body = .bytes(ByteBuffer(bytes: sent[index].body))
                            do {
                                let response = try await client.execute(request, timeout: .seconds(30))
                                let body = try await response.body.collect(upTo: 4096)
                                guard response.status.code == 200 else {
                                    Issue.record(
                                        "notification \(index): HTTP \(response.status.code) \(String(buffer: body))")
                                    return
                                }
                                let outcome =
                                    (try? StrictJSON.parse(Array(body.readableBytesView)))?.objectValue?["outcome"]?
                                    .stringValue ?? "?"
                                progress.results.withLock {
                                    $0.acknowledged.append(index)
                                    $0.outcomes[outcome, default: 0] += 1
                                }
                                delivered = true
                            } catch {
                                try await Task.sleep(for: .milliseconds(50))
                            }
                        }
                        if !delivered { Issue.record("notification \(index) was never acknowledged") }
                    }
                }
            }
            try await group.waitForAll()
        }
        return progress.results.withLock { $0 }
    }

    /// Waits until the queue is empty, then returns its counts.
    static func drained(
        _ store: PostgresCredentialStore, expecting done: Int, within seconds: Double
    ) async throws -> RevocationCounts {
        let deadline = Date().addingTimeInterval(seconds)
        var counts = try await store.revocationCounts()
        while counts.pending > 0 || counts.done < done, Date() < deadline {
            try await Task.sleep(for: .milliseconds(200))
            counts = try await store.revocationCounts()
        }
        return counts
    }

    /// The users whose tokens must be revoked: any recorded deletion or revocation.
    static func revokedUsers(_ events: [CredentialEvent]) -> Set<String> {
        Set(events.filter { $0.kind == .accountDeleted || $0.kind == .consentRevoked }.map(\.subject))
    }

    @Test func twoInstancesOneDatabase() async throws {
        let users = 1000, distinct = 4000
        let store = try await PostgresCredentialStore.connect(try PostgresLocation(url: database), unlock: .key(key))
        let tokens = try await storeTokens(users: users, in: store)
        let unique = try notifications(distinct: distinct, users: users)
        // 5,000 posts: every notification once, and 1,000 of them again, shuffled together.
        var generator = SeededGenerator(seed: 20261123)
        let sent = (unique + unique.shuffled(using: &generator).prefix(1000)).shuffled(using: &generator)

        let ports = try (0..<2).map { _ in try PostgresCluster.freePortForTests() }
        let servers = try ports.map(startServe)
        defer { for server in servers { server.kill() } }
        for (server, port) in zip(servers, ports) { try waitHealthy(server, port: port) }

        let (acknowledged, outcomes) = try await Self.post(
            sent, ports: { [ports[$0 % 2]] }, concurrency: 16, client: HTTPClient.shared)
        #expect(acknowledged.count == sent.count)
        #expect(outcomes["applied", default: 0] + outcomes["duplicate", default: 0] == sent.count, "\(outcomes)")
        #expect(outcomes["duplicate", default: 0] >= 1000, "every repeated notification is a duplicate: \(outcomes)")

        // The final states equal one process applying the distinct events.
        let replay = InMemoryCredentialStore()
        _ = try await replay.apply(unique.map(\.event))
        for index in 0..<users {
            let subject = Self.subject(index)
            let expected = try await replay.record(clientID: Self.client, subject: subject).status
            let actual = try await store.record(clientID: Self.client, subject: subject).status
            #expect(
                actual.state == expected.state && actual.since == expected.since && actual.cause == expected.cause
                    && actual.emailForwarding == expected.emailForwarding,
                "\(subject): \(actual) != \(expected)")
        }
        // Every transition logged once: no event twice in the verified chain.
        let entries = try await store.auditEntries()
        #expect(Set(entries.map(\.eventID)).count == entries.count, "an event was logged twice")
        #expect(!entries.isEmpty)

        // Every token of a deleted or revoked user revoked with Apple exactly once, no other.
        let owed = Self.revokedUsers(unique.map(\.event))
        let counts = try await Self.drained(store, expecting: owed.count, within: 120)
        #expect(counts.pending == 0 && counts.failed == 0, "\(counts)")
        let calls = apple.revokeCalls
        #expect(calls.count == owed.count, "revoked \(calls.count) tokens, owed \(owed.count)")
        for subject in owed {
            #expect(calls[tokens[subject]!] == 1, "\(subject): \(calls[tokens[subject]!] ?? 0) calls")
        }
        #expect(Set(calls.keys) == Set(owed.map { tokens[$0]! }))

        // The two metrics pages add up to what was sent and done. Each worker sets its pending
        // gauge when it next polls the queue, so the pages are read until the gauges have caught
        // up with the drained queue (or 30 s pass).
        func metrics() throws -> [String: Double] {
            var totals: [String: Double] = [:]
            for port in ports {
                let page = try ServeCLITests.http("GET", port: port, path: "/metrics")
                #expect(page.status == 200)
                for line in page.body.split(separator: "\n") where !line.hasPrefix("#") {
                    let parts = line.split(separator: " ")
                    if parts.count == 2, let value = Double(parts[1]) { totals[String(parts[0]), default: 0] += value }
                }
            }
            return totals
        }
        var totals = try metrics()
        for _ in 0..<300 where totals["shadow_keys_revocations_pending", default: -1] != 0 {
            usleep(100_000)
            totals = try metrics()
        }
        #expect(totals["shadow_keys_notifications_received_total"] == Double(sent.count), "\(totals)")
        #expect(
            totals[#"shadow_keys_notifications_total{outcome="applied"}"#, default: 0]
                == Double(outcomes["applied", default: 0]), "\(totals)")
        #expect(
            totals[#"shadow_keys_notifications_total{outcome="duplicate"}"#, default: 0]
                == Double(outcomes["duplicate", default: 0]), "\(totals)")
        #expect(
            totals[#"shadow_keys_revocations_total{outcome="revoked"}"#, default: 0] == Double(owed.count), "\(totals)")
        #expect(totals["shadow_keys_revocations_pending", default: -1] == 0, "\(totals)")
        for server in servers { server.kill(SIGTERM) }
        for server in servers { #expect(try server.wait(timeout: 30).status == 0) }
        await store.close()
    }

    /// SIGKILL one instance in the middle of the load and start it again: every notification that
    /// got a 200 is in the database, and the revocations the killed instance held are finished.
    @Test func killedInstanceLosesNothing() async throws {
        let users = 300, distinct = 1200
        let store = try await PostgresCredentialStore.connect(try PostgresLocation(url: database), unlock: .key(key))
        let tokens = try await storeTokens(users: users, in: store)
        let sent = try notifications(distinct: distinct, users: users)

        let ports = try (0..<2).map { _ in try PostgresCluster.freePortForTests() }
        let servers = Mutex(try ports.map(startServe))
        defer { servers.withLock { for server in $0 { server.kill() } } }
        for (server, port) in zip(servers.withLock { $0 }, ports) { try waitHealthy(server, port: port) }

        let killed = Atomic(false)
        let this = self
        let (acknowledged, _) = try await Self.post(
            sent, ports: { [ports[$0 % 2], ports[($0 + 1) % 2]] }, concurrency: 8, client: HTTPClient.shared
        ) { index in
            guard index == distinct / 2, !killed.exchange(true, ordering: .relaxed) else { return }
            let victim = servers.withLock { $0[0] }
            victim.kill(SIGKILL)
            _ = try? victim.wait(timeout: 10)
            if let restarted = try? this.startServe(port: ports[0]) {
                servers.withLock { $0[0] = restarted }
            }
        }
        try waitHealthy(servers.withLock { $0[0] }, port: ports[0])
        let wasKilled = killed.load(ordering: .relaxed)
        #expect(wasKilled)
        #expect(acknowledged.count == sent.count)

        // Nothing acknowledged is lost: each user's state is the fold of every acknowledged event.
        let replay = InMemoryCredentialStore()
        _ = try await replay.apply(acknowledged.map { sent[$0].event })
        for index in 0..<users {
            let expected = try await replay.record(clientID: Self.client, subject: Self.subject(index)).status
            let actual = try await store.record(clientID: Self.client, subject: Self.subject(index)).status
            #expect(
                actual.state == expected.state && actual.since == expected.since,
                "\(Self.subject(index)): \(actual) != \(expected)")
        }
        // The revocations resume: all finished, each owed token revoked (at least once).
        let owed = Self.revokedUsers(sent.map(\.event))
        let counts = try await Self.drained(store, expecting: owed.count, within: 120)
        #expect(counts.pending == 0 && counts.failed == 0, "\(counts)")
        let calls = apple.revokeCalls
        for subject in owed { #expect(calls[tokens[subject]!, default: 0] >= 1, "\(subject) not revoked") }
        #expect(calls.values.reduce(0, +) <= owed.count + 16, "at most one batch is repeated after a kill")
        servers.withLock { for server in $0 { server.kill(SIGTERM) } }
        await store.close()
    }
}
#endif
