import Foundation
import ShadowCore
import ShadowCredentials
import ShadowPostgres
import ShadowSQLite
import ShadowTestSupport
import ShadowVault
import Testing

/// `--store`, `state apply-events`, `state migrate` and `migrate-schema`, over SQLite and a
/// throwaway PostgreSQL cluster, as scripts and operators use them.
@Suite(.tags(.multiProcess), .ownThreads) struct StoreCLITests {
    static let client = "com.example.app"
    let directory: TemporaryDirectory
    let keyFile: String
    let key = SecretBytes((0..<32).map { UInt8($0) })

    init() throws {
        directory = try TemporaryDirectory()
        keyFile = try directory.write(
            "state.key", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n", mode: 0o600)
    }

    func run(_ arguments: [String], stdin: String? = nil, environment: [String: String] = [:]) throws -> CLIResult {
        try CLIRunner.run(
            arguments, stdin: stdin, environment: ["XDG_DATA_HOME": directory.path] + environment,
            removing: ["SHADOW_KEYS_STATE_STORE"])
    }

    /// Runs `shadow-keys-server`, which opens PostgreSQL stores.
    func runServer(_ arguments: [String], stdin: String? = nil) throws -> CLIResult {
        try CLIRunner.runServer(
            arguments, stdin: stdin, environment: ["XDG_DATA_HOME": directory.path],
            removing: ["SHADOW_KEYS_STATE_STORE"])
    }

    static func line(_ kind: String, _ subject: String, _ time: Int64, _ id: String, linked: String? = nil) -> String {
        let object: JSONObject = [
            "kind": .string(kind), "client_id": .string(client), "sub": .string(subject), "time_ms": .int(time),
            "id": .string(id),
            "linked_sub": linked.map(JSONValue.string) ?? .null,
        ]
        return JSONValue.object(object).serialized()
    }

    @Test func applyEventsSummarisesAndTheDefaultStoreIsAPrivateSQLiteFile() throws {
        let events =
            [
                Self.line("sign-in", "u1", 1_700_000_000_000, "a"),
                Self.line("consent-revoked", "u1", 1_700_000_001_000, "b"),
                Self.line("consent-revoked", "u1", 1_700_000_001_000, "b"),
                Self.line("transferred", "u2", 1_700_000_000_000, "t", linked: "u3"),
            ].joined(separator: "\n") + "\n"
        let applied = try run(["state", "apply-events", "-", "--key-file", keyFile, "--json"], stdin: events)
        #expect(applied.status == 0, "\(applied.stderr)")
        let summary = try applied.json()
        #expect(
            summary["events"] as? Int == 4 && summary["applied"] as? Int == 4 && summary["changed"] as? Int == 3
                && summary["duplicates"] as? Int == 1)
        let path = directory.path + "/shadow-keys/state.sqlite"
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let shown = try run([
            "state", "show", "--client-id", Self.client, "--sub", "u2", "--key-file", keyFile, "--json",
        ])
        #expect(
            try shown.json()["state"] as? String == "transferred" && (try shown.json()["linked_sub"] as? String) == "u3"
        )
        // The same store named explicitly, and through the environment.
        let explicit = try run([
            "state", "check", "--client-id", Self.client, "--sub", "u1", "--store", "sqlite:\(path)", "--key-file",
            keyFile,
        ])
        #expect(explicit.status == 14)
        let fromEnvironment = try run(
            ["state", "audit", "--verify", "--key-file", keyFile, "--json"],
            environment: ["SHADOW_KEYS_STATE_STORE": "sqlite:\(path)"])
        #expect(try fromEnvironment.json()["entries"] as? Int == 3)
    }

    @Test func aBadLineAppliesNothingAndNamesTheLine() throws {
        let cases: [(String, String)] = [
            (#"{"kind":"signed-in","client_id":"c","sub":"s","time_ms":1,"id":"i"}"#, "unknown kind"),
            (#"{"kind":"sign-in","client_id":"c","sub":"s","time_ms":1.5,"id":"i"}"#, "time_ms"),
            (#"{"kind":"sign-in","client_id":"c","sub":"s","time_ms":-1,"id":"i"}"#, "1970"),
            (#"{"kind":"sign-in","client_id":"c","sub":"s","time_ms":1,"id":"i","extra":1}"#, "unknown member"),
            (#"{"kind":"transferred","client_id":"c","sub":"s","time_ms":1,"id":"i"}"#, "transfer"),
            (#"{"kind":"sign-in","client_id":"c","sub":"s","time_ms":1,"id":"i","id":"j"}"#, "JSON"),
            ("not json", "JSON"),
        ]
        for (bad, reason) in cases {
            let input = Self.line("sign-in", "good", 1_700_000_000_000, "g") + "\n" + bad + "\n"
            let result = try run(["state", "apply-events", "-", "--key-file", keyFile, "--json"], stdin: input)
            #expect(result.status == 65, "\(bad): \(result.status) \(result.stderr)")
            #expect(result.stdout.contains("line 2") && result.stdout.contains(reason), "\(bad): \(result.stdout)")
        }
        let shown = try run(["state", "show", "--client-id", Self.client, "--sub", "good", "--key-file", keyFile])
        // Nothing was applied, so no store was even created: a reader says there is none.
        #expect(shown.status == 66, "\(shown.stderr)")
        let batch = try run(["state", "apply-events", "-", "--batch-size", "0", "--key-file", keyFile], stdin: "")
        #expect(batch.status == 64)
    }

    @Test func storeOptionsAreCheckedBeforeAnythingRuns() throws {
        let both = try run([
            "state", "show", "--client-id", "c", "--sub", "s", "--store", "sqlite:/tmp/x", "--vault", "/tmp/v",
            "--key-file", keyFile,
        ])
        #expect(both.status == 64 && both.stderr.contains("not both"))
        let unknown = try run([
            "state", "show", "--client-id", "c", "--sub", "s", "--store", "mysql://h/d", "--key-file", keyFile,
        ])
        #expect(unknown.status == 64 && unknown.stderr.contains("sqlite:PATH"))
        let badMode = try runServer([
            "state", "show", "--client-id", "c", "--sub", "s", "--store", "postgres://u@h/d?sslmode=maybe",
            "--key-file", keyFile,
        ])
        #expect(badMode.status == 64 && badMode.stderr.contains("sslmode"))
    }

    /// The lean `shadow-keys` has no PostgreSQL client: every way of naming such a store is a usage
    /// error that says which executable has one, and nothing is connected to or created.
    @Test(arguments: [
        [
            "state", "show", "--client-id", "c", "--sub", "s", "--store", "postgres://u@127.0.0.1:1/d?sslmode=disable",
            "--key-file", "k",
        ],
        ["state", "apply-events", "-", "--store", "postgresql://u@127.0.0.1:1/d", "--key-file", "k"],
        ["state", "migrate", "--from", "vault:/tmp/none.skv", "--to", "postgres://u@127.0.0.1:1/d", "--key-file", "k"],
        ["state", "migrate-schema", "--store", "postgres://u@127.0.0.1:1/d"],
        [
            "verify-token", "--apple", "--aud", "c", "--jwks", "/dev/null", "--state", "--store",
            "postgres://u@127.0.0.1:1/d", "--key-file", "k",
        ],
    ])
    func theLeanBinaryRefersPostgresToTheServerBinary(arguments: [String]) throws {
        let result = try run(arguments.map { $0 == "k" ? keyFile : $0 }, stdin: "")
        #expect(result.status == 64, "\(arguments): \(result.status) \(result.stderr)")
        #expect(result.stderr.contains("shadow-keys-server"), "\(result.stderr)")
        let environment = try CLIRunner.run(
            ["state", "show", "--client-id", "c", "--sub", "s", "--key-file", keyFile],
            environment: ["XDG_DATA_HOME": directory.path, "SHADOW_KEYS_STATE_STORE": "postgres://u@127.0.0.1:1/d"])
        #expect(environment.status == 64 && environment.stderr.contains("shadow-keys-server"), "\(environment.stderr)")
    }

    @Test func aDamagedDatabaseOrAnotherKeyIsAClearError() throws {
        _ = try run(
            ["state", "apply-events", "-", "--key-file", keyFile],
            stdin: Self.line("sign-in", "u1", 1_700_000_000_000, "a") + "\n")
        let other = try directory.write("other.key", String(repeating: "ab", count: 32) + "\n", mode: 0o600)
        let wrong = try run(["state", "show", "--client-id", Self.client, "--sub", "u1", "--key-file", other, "--json"])
        #expect(wrong.status == 30, "\(wrong.stderr)")
        #expect(wrong.stdout.contains("wrong_key"))
        let damaged = try directory.write(
            "damaged.sqlite", Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 131) }), mode: 0o600)
        let result = try run([
            "state", "show", "--client-id", Self.client, "--sub", "u1", "--store", "sqlite:\(damaged)", "--key-file",
            keyFile,
        ])
        #expect(result.status == 31, "\(result.stderr)")
        #expect(result.stderr.contains("damaged") && !result.stderr.contains("Fatal"))
    }

    /// Readers open a SQLite store read-only: an empty file is exit 35 and stays empty, and a
    /// reader's answer comes from the store a writer made.
    @Test func readersNeverCreateOrRepairAStore() throws {
        let empty = try directory.write("empty.sqlite", Data(), mode: 0o600)
        for command in [
            ["state", "show", "--client-id", Self.client, "--sub", "u1"], ["state", "audit", "--verify"],
            ["state", "history", "--client-id", Self.client, "--sub", "u1"],
        ] {
            let result = try run(command + ["--store", "sqlite:\(empty)", "--key-file", keyFile, "--json"])
            #expect(result.status == 35, "\(command): \(result.stderr)")
            #expect(
                result.stdout.contains("not_a_state_store") && result.stderr.contains("not a ShadowKeys state store"))
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: empty)).isEmpty)
        let store = directory.path + "/state.sqlite"
        _ = try run(
            ["state", "apply-events", "-", "--store", "sqlite:\(store)", "--key-file", keyFile],
            stdin: Self.line("consent-revoked", "u1", 1_700_000_000_000, "a"))
        #expect(
            try run([
                "state", "check", "--client-id", Self.client, "--sub", "u1", "--store", "sqlite:\(store)", "--key-file",
                keyFile,
            ]).status == 14)
    }

    @Test func migrateMovesAVaultWithItsAuditChain() throws {
        let vault = directory.path + "/vault.skv"
        _ = try run(["vault", "init", "--vault", vault, "--key-file", keyFile])
        let events = (0..<30).map {
            Self.line(
                $0 % 3 == 0 ? "consent-revoked" : "sign-in", "u\($0 % 10)", 1_700_000_000_000 + Int64($0) * 1000,
                "e\($0)")
        }
        let applied = try run(
            ["state", "apply-events", "-", "--store", "vault:\(vault)", "--key-file", keyFile],
            stdin: events.joined(separator: "\n"))
        #expect(applied.status == 0, "\(applied.stderr)")
        let target = directory.path + "/moved.sqlite"
        let moved = try run([
            "state", "migrate", "--from", "vault:\(vault)", "--to", "sqlite:\(target)", "--key-file", keyFile, "--json",
        ])
        #expect(moved.status == 0, "\(moved.stderr)")
        #expect(try moved.json()["users"] as? Int == 10)
        let before = try run(["state", "audit", "--vault", vault, "--key-file", keyFile])
        let after = try run(["state", "audit", "--store", "sqlite:\(target)", "--key-file", keyFile])
        #expect(before.status == 0 && after.status == 0 && !before.stdout.isEmpty)
        #expect(before.stdout == after.stdout, "the audit entries differ after the move")
        for user in 0..<10 {
            let a = try run([
                "state", "show", "--client-id", Self.client, "--sub", "u\(user)", "--vault", vault, "--key-file",
                keyFile, "--json",
            ])
            let b = try run([
                "state", "show", "--client-id", Self.client, "--sub", "u\(user)", "--store", "sqlite:\(target)",
                "--key-file", keyFile, "--json",
            ])
            #expect(a.stdout == b.stdout)
        }
        // A store that already holds state is refused, and left as it was.
        let again = try run([
            "state", "migrate", "--from", "vault:\(vault)", "--to", "sqlite:\(target)", "--key-file", keyFile,
        ])
        #expect(again.status == 64 && again.stderr.contains("already holds"))
        // New events go on the moved chain.
        _ = try run(
            ["state", "apply-events", "-", "--store", "sqlite:\(target)", "--key-file", keyFile],
            stdin: Self.line("account-deleted", "u1", 1_800_000_000_000, "z"))
        #expect(
            try run(["state", "audit", "--verify", "--store", "sqlite:\(target)", "--key-file", keyFile]).status == 0)
    }

    @Test(.tags(.postgres), .enabled(if: postgresWanted)) func postgresThroughTheCLI() throws {
        let cluster = try PostgresCluster.shared.get()
        let url = try cluster.freshDatabase()
        let schema = try runServer(["state", "migrate-schema", "--store", url, "--json"])
        #expect(schema.status == 0 && schema.stdout.contains("\"schema_version\":2"), "\(schema.stderr)")
        let applied = try runServer(
            ["state", "apply-events", "-", "--store", url, "--key-file", keyFile, "--json"],
            stdin: Self.line("sign-in", "pg1", 1_700_000_000_000, "a"))
        #expect(applied.status == 0, "\(applied.stderr)")
        let checked = try runServer([
            "state", "check", "--client-id", Self.client, "--sub", "pg1", "--store", url, "--key-file", keyFile,
        ])
        #expect(checked.status == 0, "\(checked.stderr)")
        let unreachable = try runServer([
            "state", "check", "--client-id", Self.client, "--sub", "pg1", "--store",
            "postgres://shadow@127.0.0.1:1/x?sslmode=disable",
            "--key-file", keyFile, "--lock-timeout", "1", "--json",
        ])
        #expect(unreachable.status == 34, "\(unreachable.stderr)")
        #expect(unreachable.stdout.contains("store_unavailable"))
    }
}

extension Dictionary where Key == String, Value == String {
    static func + (a: Self, b: Self) -> Self { a.merging(b) { $1 } }
}
