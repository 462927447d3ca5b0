import Foundation
import ShadowCore
import ShadowJOSE
import ShadowPostgres
import ShadowTestSupport
import Testing

/// Features tried together, as an app's backend and its operators use them: a sign-in and Apple's
/// notifications, a transfer and the deleted-row check, the state commands and serve on one store.
/// Each test runs two features in one (Docs/sessions.md, "Credential state").
@Suite(.tags(.multiProcess), .ownThreads) struct SeamTests {
    static let client = SessionServer.client

    /// A sign-in records the user's authorization; Apple's email notifications (sent routinely)
    /// end no session; consent-revoked ends them all, and an identity token issued before it
    /// opens none.
    @Test func emailNotificationsEndNoSessionAndARevocationEndsThemAll() throws {
        let server = try SessionServer()
        let subject = "001234.mail.0042"
        let signedIn = try server.signIn(subject: subject)
        #expect(signedIn.status == 200, "\(signedIn.body)")
        var refreshToken = try #require(signedIn.json["refreshToken"]?.stringValue)

        let shown = try CLIRunner.runServer(
            ["state", "show", "--client-id", Self.client, "--sub", subject, "--json"] + server.storeOptions)
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(try shown.json()["state"] as? String == "authorized", "\(shown.stdout)")

        for (type, ago) in [("email-disabled", Int64(3)), ("email-enabled", 2)] {
            let notified = try server.notify(type, subject: subject, ago: ago)
            #expect(notified.status == 200 && notified.body.contains("applied"), "\(type): \(notified.body)")
            let refreshed = try server.refresh(refreshToken)
            #expect(refreshed.status == 200, "after \(type): \(refreshed.body)")
            refreshToken = try #require(refreshed.json["refreshToken"]?.stringValue)
        }

        let stale = try server.identityToken(subject: subject, issuedAt: Int64(Date().timeIntervalSince1970) - 30)
        let revoked = try server.notify("consent-revoked", subject: subject)
        #expect(revoked.status == 200 && revoked.body.contains("applied"), "\(revoked.body)")
        let afterRevocation = try server.refresh(refreshToken)
        #expect(afterRevocation.status == 401 && afterRevocation.body.contains("revoked"), "\(afterRevocation.body)")
        // An identity token from before the revocation opens no session; a newer one does.
        let superseded = try server.signIn(subject: subject, identityToken: stale)
        #expect(superseded.status == 401, "\(superseded.body)")
        #expect(superseded.body.contains("credential_revoked"), "\(superseded.body)")
        let fresh = try server.identityToken(subject: subject, issuedAt: Int64(Date().timeIntervalSince1970) + 2)
        let again = try server.signIn(subject: subject, identityToken: fresh)
        #expect(again.status == 200, "\(again.body)")
        // A repeat of the old revocation (Apple retrying) is a duplicate and ends nothing new.
        let newToken = try #require(again.json["refreshToken"]?.stringValue)
        #expect(try server.refresh(newToken).status == 200)
    }

    /// Signing out a device, then that device's access token (still within its hour) at the
    /// device routes: its own session has ended, so it lists nothing and ends nothing. Before,
    /// a lost phone's token, or a thief's after reuse detection ended the session, could end
    /// the user's other sessions, the new sign-in's included, until the token expired.
    @Test func anEndedSessionsAccessTokenManagesNoDevices() throws {
        let server = try SessionServer()
        let subject = "001234.lost.0042"
        let lost = try server.signIn(subject: subject, device: "lost phone")
        let kept = try server.signIn(subject: subject, device: "laptop")
        #expect(lost.status == 200 && kept.status == 200, "\(lost.body) \(kept.body)")
        let lostAccess = try #require(lost.json["accessToken"]?.stringValue)
        let keptAccess = try #require(kept.json["accessToken"]?.stringValue)
        func list(_ token: String) throws -> SessionServer.Answer {
            try server.request("GET", "/auth/sessions", headers: ["Authorization: Bearer " + token])
        }
        func ids(_ answer: SessionServer.Answer, current: Bool) -> [String] {
            (answer.json["sessions"]?.arrayValue ?? []).compactMap { session in
                session.objectValue?["current"]?.boolValue == current ? session.objectValue?["id"]?.stringValue : nil
            }
        }
        let before = try list(keptAccess)
        let lostID = try #require(ids(before, current: false).first, "\(before.body)")
        let keptID = try #require(ids(before, current: true).first, "\(before.body)")
        let signedOut = try server.request(
            "DELETE", "/auth/sessions/" + lostID, headers: ["Authorization: Bearer " + keptAccess])
        #expect(signedOut.status == 200, "\(signedOut.body)")

        let listed = try list(lostAccess)
        #expect(listed.status == 401, "\(listed.body)")
        #expect(listed.json["error"]?.objectValue?["code"] == "invalid_token", "\(listed.body)")
        #expect(listed.headers.contains("WWW-Authenticate: Bearer"), "\(listed.headers)")
        let ended = try server.request(
            "DELETE", "/auth/sessions/" + keptID, headers: ["Authorization: Bearer " + lostAccess])
        #expect(ended.status == 401, "\(ended.body)")
        // The laptop's session is untouched.
        let after = try list(keptAccess)
        #expect(after.status == 200 && ids(after, current: true) == [keptID], "\(after.body)")
        let refreshToken = try #require(kept.json["refreshToken"]?.stringValue)
        #expect(try server.refresh(refreshToken).status == 200)
    }

    /// A notification for a user who never signed in through serve: recorded, no session to end.
    @Test func aNotificationForAnUnknownUserIsRecordedAndEndsNothing() throws {
        let server = try SessionServer()
        let other = try server.signIn(subject: "001234.other.0042")
        let token = try #require(other.json["refreshToken"]?.stringValue)
        for type in ["email-disabled", "account-delete"] {
            #expect(try server.notify(type, subject: "001234.stranger.0042").status == 200, "\(type)")
        }
        #expect(try server.refresh(token).status == 200)
    }

    /// A PostgreSQL store that goes away is unavailable, never corrupted, and everything answers
    /// within `--lock-timeout`: serve's refresh and `/healthz` (503), the `sessions` commands (34).
    /// A wrong key is 30. Without the bound, a refresh took 30 s and /healthz 10 s.
    @Test(.tags(.postgres), .enabled(if: postgresWanted)) func aStoreGoingDownIsUnavailableWithinTheLockTimeout()
        throws
    {
        let cluster = try PostgresCluster.start()
        defer { cluster.stop() }
        let url = try cluster.createDatabase("down")
        let server = try SessionServer(store: url, extra: ["--lock-timeout", "1"])
        // The set-up, before the outage: with a 1 s connect timeout, a busy machine (the whole
        // suite at once) can make the first connections time out, which is 503 and correct; the
        // sign-in is tried again then. What is tested starts once the server is stopped.
        var signedIn = try server.signIn(subject: "001234.down.0042")
        for _ in 0..<4 where signedIn.status == 503 {
            Thread.sleep(forTimeInterval: 1)
            signedIn = try server.signIn(subject: "001234.down.0042")
        }
        try #require(signedIn.status == 200, "the sign-in before the outage: \(signedIn.status) \(signedIn.body)")
        let refreshToken = try #require(signedIn.json["refreshToken"]?.stringValue)
        let user = try #require(signedIn.json["userId"]?.stringValue)
        let wrongKey = try server.directory.write("wrong.key", String(repeating: "ab", count: 32) + "\n", mode: 0o600)
        for action in [["keys", "list"], ["list", user], ["revoke", user]] {
            let refused = try CLIRunner.runServer(["sessions"] + action + ["--store", url, "--key-file", wrongKey])
            #expect(refused.status == 30, "\(action): \(refused.status) \(refused.stderr)")
        }

        try cluster.stopServer()
        for (path, body) in [
            ("/auth/refresh", JSONValue.object(["refreshToken": .string(refreshToken)])), ("/healthz", nil),
        ] {
            let started = Date()
            let answer = try server.request(path == "/healthz" ? "GET" : "POST", path, json: body)
            let took = Date().timeIntervalSince(started)
            #expect(answer.status == 503 && answer.body.contains("unavailable"), "\(path): \(answer.body)")
            #expect(took < 9, "\(path) answered after \(took) s with --lock-timeout 1")
        }
        for action in [["keys", "list"], ["list", user], ["revoke", user]] {
            let started = Date()
            let failed = try CLIRunner.runServer(
                ["sessions"] + action + ["--store", url, "--key-file", server.keyFile, "--lock-timeout", "1"])
            #expect(failed.status == 34, "\(action): \(failed.status) \(failed.stderr)")
            #expect(Date().timeIntervalSince(started) < 9, "\(action)")
        }
        let log = try server.stop()
        #expect(!log.stderr.contains("corrupted"), "an outage was logged as corruption: \(log.stderr.suffix(2000))")
    }

    /// Three instances start together on an empty ring (here: after its keys were deleted, with
    /// the key table locked while they start, which lines them all up): exactly one first key
    /// signs, and every instance's JWK Set holds the key every other one signs with.
    @Test(.tags(.postgres), .alone, .enabled(if: postgresWanted)) func instancesStartingTogetherMakeOneFirstKey()
        throws
    {
        let cluster = try PostgresCluster.shared.get()
        let url = try cluster.freshDatabase()
        let database = try PostgresLocation(url: url).database
        let first = try SessionServer(store: url)
        #expect(try first.stop().status == 0)
        try cluster.psql(database, "DELETE FROM shadow_session_keys")
        let locker = try ChildProcess(
            "/usr/bin/env",
            [
                "psql", "-h", cluster.root, "-p", String(cluster.port), "-U", cluster.user, "-d", database, "-X", "-c",
                "BEGIN; LOCK TABLE shadow_session_keys IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(4); COMMIT;",
            ], environment: ["PATH": cluster.binaries + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "")])
        defer { locker.kill() }
        usleep(500_000)
        let servers = try (0..<3).map { _ in
            try SessionServer(store: url, apple: first.apple, directory: first.directory, waitForHealth: false)
        }
        for server in servers { try server.waitHealthy() }
        #expect(try locker.wait(timeout: 60).status == 0)

        let keys = try cluster.psql(database, "SELECT kid FROM shadow_session_keys WHERE activates_ms <= created_ms")
        #expect(keys.split(separator: "\n").count == 1, "first keys: \(keys)")
        let signers = try servers.map { server -> String in
            let signedIn = try server.signIn(subject: "001234.race.0042")
            let token = try #require(signedIn.json["accessToken"]?.stringValue, "\(signedIn.body)")
            return try #require(try CompactJWS(token).header.keyID)
        }
        for server in servers {
            let published = try server.request("GET", "/.well-known/jwks.json").body
            for kid in signers { #expect(published.contains(kid), "\(kid) is missing from a JWK Set") }
        }
    }

    /// One database handle per location: serve with sessions and the authentication log holds
    /// at most three descriptors on its SQLite file (one writer, two readers), and at most one
    /// pool (16) of PostgreSQL connections while clients press every route at once.
    @Test(arguments: postgresWanted ? ["sqlite", "postgres"] : ["sqlite"])
    func serveOpensItsStoreOnce(engine: String) async throws {
        let store = engine == "sqlite" ? nil : try PostgresCluster.shared.get().freshDatabase()
        let server = try SessionServer(
            store: store, extra: ["--rate-limit-ip", "100000", "--rate-limit-user", "100000"])
        var tokens: [String] = []
        for index in 0..<8 {
            let signedIn = try server.signIn(subject: "001234.pool\(index).0042")
            tokens.append(try #require(signedIn.json["refreshToken"]?.stringValue, "\(signedIn.body)"))
        }
        // 64 clients at once: refreshes, notifications, health checks, the key set.
        let refreshTokens = tokens
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<64 {
                group.addTask {
                    switch index % 4 {
                    case 0: try server.refresh(refreshTokens[index / 4 % 8]).status
                    case 1: try server.notify("email-disabled", subject: "001234.pool\(index % 8).0042").status
                    case 2: try server.request("GET", "/healthz").status
                    default: try server.request("GET", "/.well-known/jwks.json").status
                    }
                }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.allSatisfy { [200, 401].contains($0) }, "\(statuses)")
        if engine == "sqlite" {
            let path = server.directory.path + "/state.sqlite"
            let links = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(server.process.pid)/fd").filter {
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(server.process.pid)/fd/\($0)"))
                    == path
            }
            #expect((1...3).contains(links.count), "\(links.count) descriptors on the database file")
        } else {
            // The process's own sockets to the cluster: pg_stat_activity also lists a backend whose
            // client has closed its connection (a statement past its deadline) until that backend
            // notices, beside the connection that replaced it.
            let cluster = try PostgresCluster.shared.get()
            let connections = try Self.establishedConnections(of: server.process.pid, toPort: cluster.port)
            #expect((1...16).contains(connections), "\(connections) connections")
        }
        #expect(try server.stop().status == 0)
    }

    /// The TCP connections `pid` holds open to 127.0.0.1:`port`: the sockets among its
    /// descriptors that /proc/PID/net/tcp lists as established to that address.
    static func establishedConnections(of pid: Int32, toPort port: Int) throws -> Int {
        let descriptors = "/proc/\(pid)/fd"
        let sockets = Set(
            try FileManager.default.contentsOfDirectory(atPath: descriptors).compactMap { name -> Substring? in
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: descriptors + "/" + name),
                    target.hasPrefix("socket:["), target.hasSuffix("]")
                else { return nil }
                return target.dropFirst("socket:[".count).dropLast()
            })
        // local_address rem_address st ... inode: the remote address as hex IP (little-endian) and
        // hex port, 01 for ESTABLISHED.
        let remote = "0100007F:" + String(format: "%04X", port)
        // Read to its end: the file has no size, and one read returns only its first page.
        let table = try #require(FileHandle(forReadingAtPath: "/proc/\(pid)/net/tcp")).readToEnd() ?? Data()
        return String(decoding: table, as: UTF8.self).split(separator: "\n").dropFirst().filter { line in
            let fields = line.split(separator: " ")
            return fields.count > 9 && fields[2] == remote && fields[3] == "01" && sockets.contains(fields[9])
        }.count
    }

    /// The `sessions` commands write to the store's authentication log as serve does: a revocation
    /// by hand is there after serve's sign-in, in one log that still verifies.
    @Test func theSessionsCommandsWriteTheAuthenticationLog() throws {
        let server = try SessionServer()
        let signedIn = try server.signIn(subject: "001234.hand.0042")
        let user = try #require(signedIn.json["userId"]?.stringValue)
        #expect(try server.stop().status == 0)
        let revoked = try CLIRunner.runServer(["sessions", "revoke", user, "--json"] + server.storeOptions)
        #expect(revoked.status == 0 && revoked.stdout.contains(#""revoked":1"#), "\(revoked.stderr)")
        let log = ["--log", "sqlite:\(server.directory.path)/state.sqlite", "--key-file", server.keyFile]
        let shown = try CLIRunner.run(["log", "show"] + log)
        #expect(shown.stdout.contains(#""operation":"sign-in""#) && shown.stdout.contains(#""operation":"revoke-all""#))
        #expect(try CLIRunner.run(["log", "verify"] + log).status == 0)
    }

    /// The answers Docs/sessions.md states, member for member: the routes' and the `sessions`
    /// commands', their time format, a new session's generation, and the JSON error shape.
    @Test func theDocumentedAnswersHoldTheirShape() throws {
        let server = try SessionServer()
        let signedIn = try server.signIn(subject: "001234.shape.0042", device: "Ada's iPhone")
        #expect(
            Set(signedIn.json.map(\.name)) == ["userId", "accessToken", "refreshToken", "tokenType", "expiresIn"],
            "\(signedIn.status) \(signedIn.body)")
        #expect(signedIn.json["tokenType"] == "Bearer")
        let refreshed = try server.refresh(try #require(signedIn.json["refreshToken"]?.stringValue))
        #expect(Set(refreshed.json.map(\.name)) == ["accessToken", "refreshToken", "tokenType", "expiresIn"])
        let bearer = "Authorization: Bearer " + (refreshed.json["accessToken"]?.stringValue ?? "")
        let listed = try server.request("GET", "/auth/sessions", headers: [bearer])
        let session = try #require(listed.json["sessions"]?.arrayValue?.first?.objectValue)
        #expect(Set(session.map(\.name)) == ["id", "deviceName", "createdAt", "lastUsedAt", "current"])
        let exact = #/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z$/#
        for name in ["createdAt", "lastUsedAt"] {
            #expect(
                session[name]?.stringValue?.wholeMatch(of: exact) != nil,
                "\(name): \(String(describing: session[name]))")
        }
        let user = try #require(signedIn.json["userId"]?.stringValue)
        let second = try server.signIn(subject: "001234.shape.0042", device: "iPad")
        #expect(second.status == 200)
        let lines = try CLIRunner.runServer(["sessions", "list", user] + server.storeOptions)
        #expect(lines.status == 0, "\(lines.stderr)")
        let rows = try lines.stdout.split(separator: "\n").map {
            try #require(try StrictJSON.parse(String($0)).objectValue)
        }
        #expect(
            rows.count == 2
                && rows.allSatisfy {
                    Set($0.map(\.name)) == ["id", "device", "generation", "created", "lastUsed", "revoked"]
                })
        #expect(
            rows.first?["device"] == "iPad" && rows.first?["generation"] == .int(1) && rows.first?["revoked"] == .null)
        #expect(rows.last?["generation"] == .int(2), "the first device refreshed once")
        let keys = try CLIRunner.runServer(["sessions", "keys", "list", "--json"] + server.storeOptions)
        let key = try #require(try StrictJSON.parse(keys.stdout).objectValue?["keys"]?.arrayValue?.first?.objectValue)
        #expect(Set(key.map(\.name)) == ["kid", "alg", "created", "signsFrom", "retired"])
        // DELETE: one of the caller's sessions (here its own), then not found to another live
        // session of the user's; the ended session's own token is refused.
        let id = try #require(session["id"]?.stringValue)
        let deleted = try server.request("DELETE", "/auth/sessions/\(id)", headers: [bearer])
        #expect(deleted.status == 200 && deleted.body == #"{"revoked":true}"#, "\(deleted.body)")
        let iPad = "Authorization: Bearer " + (second.json["accessToken"]?.stringValue ?? "")
        #expect(try server.request("DELETE", "/auth/sessions/\(id)", headers: [iPad]).status == 404)
        #expect(try server.request("DELETE", "/auth/sessions/\(id)", headers: [bearer]).status == 401)
        // --json errors: the one shape, no "valid".
        let wrongKey = try server.directory.write("other.key", String(repeating: "cd", count: 32) + "\n", mode: 0o600)
        let refused = try CLIRunner.runServer(
            ["sessions", "list", user, "--json", "--store", server.store, "--key-file", wrongKey])
        #expect(refused.status == 30)
        let error = try #require(try StrictJSON.parse(refused.stdout).objectValue, "\(refused.stdout)")
        #expect(error["valid"] == nil && error["error"]?.objectValue?["code"]?.stringValue != nil, "\(refused.stdout)")
    }

    /// The per-IP limit behind a proxy: with `--trusted-proxy`, clients the proxy forwards are
    /// counted apart; without it, the same headers are ignored and every request is the proxy's.
    @Test func thePerIPLimitCountsForwardedClientsOnlyBehindATrustedProxy() throws {
        for trusted in [true, false] {
            let server = try SessionServer(
                extra: ["--rate-limit-ip", "1"] + (trusted ? ["--trusted-proxy", "127.0.0.0/8"] : []))
            func post(_ client: String) throws -> Int {
                try server.request(
                    "POST", "/auth/apple", json: [:], headers: ["X-Forwarded-For": client].map { "\($0): \($1)" }
                ).status
            }
            #expect(try post("198.51.100.1") == 400)
            #expect(try post("198.51.100.2") == (trusted ? 400 : 429), "trusted \(trusted)")
            #expect(try post("198.51.100.1") == 429, "trusted \(trusted)")
            // The client's own entry ends in U+0600, which joins the comma after it into one
            // Character: the entry the proxy appended is still the client, already limited.
            #expect(try post("7.7.7.7\u{600}, 198.51.100.1") == 429, "trusted \(trusted)")
        }
    }

    /// An app transfer: the old subject is transferred, the new one has no row until an event
    /// names it as `sub`. Reading the new subject is not tampering, in `state show` and in
    /// `verify-token --apple --state`; a deleted row is still caught.
    @Test(arguments: ["sqlite", "postgres"])
    func aTransferredUsersNewSubjectIsNotTampering(kind: String) throws {
        let directory = try TemporaryDirectory()
        let keyFile = try directory.write(
            "state.key", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n", mode: 0o600)
        let store =
            kind == "sqlite"
            ? "sqlite:\(directory.path)/state.sqlite" : try PostgresCluster.shared.get().freshDatabase()
        let options = ["--store", store, "--key-file", keyFile]
        let lines =
            [
                StoreCLITests.line("sign-in", "old.user", 1_700_000_000_000, "s1"),
                StoreCLITests.line("transferred", "old.user", 1_700_000_100_000, "t1", linked: "new.user"),
            ].joined(separator: "\n") + "\n"
        let applied = try CLIRunner.runServer(["state", "apply-events", "-"] + options, stdin: lines)
        #expect(applied.status == 0, "\(applied.stderr)")

        let newUser = try CLIRunner.runServer(
            ["state", "show", "--client-id", Self.client, "--sub", "new.user", "--json"] + options)
        #expect(newUser.status == 0, "\(newUser.stderr)")
        #expect(try newUser.json()["state"] as? String == "notFound", "\(newUser.stdout)")
        let history = try CLIRunner.runServer(
            ["state", "history", "--client-id", Self.client, "--sub", "new.user"] + options)
        #expect(history.status == 0 && history.stdout.contains("transferred"), "\(history.stderr)")

        let signer = try JWSSigner.rs256(TestKeys.rsa, keyID: "apple-1")
        let jwks = try directory.write("apple-keys.json", TestKeys.jwksJSON([try signer.publicJWK()]))
        let token = try signer.sign(claims: [
            "iss": "https://appleid.apple.com", "aud": .string(Self.client), "sub": "new.user",
            "iat": .int(1_700_000_200), "exp": .int(1_700_086_400),
        ])
        let verified = try CLIRunner.runServer(
            [
                "verify-token", "--apple", "--state", "--aud", Self.client, "--jwks", jwks, "--token-env", "T",
                "--now", "1700000300", "--json",
            ] + options, environment: ["T": token])
        #expect(verified.status == 0, "\(verified.stderr)")

        // The old subject's row deleted: still corruption, never notFound.
        let table = "shadow_credentials"
        let deleteOld = "DELETE FROM \(table) WHERE row_id = (SELECT subject FROM shadow_audit WHERE seq = 2)"
        if kind == "sqlite" {
            let sqlite = try CLIRunner.run(
                executable: URL(fileURLWithPath: "/usr/bin/env"),
                [
                    "python3", "-c",
                    "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(sys.argv[2]); c.commit()",
                    "\(directory.path)/state.sqlite", deleteOld,
                ], stdin: nil)
            #expect(sqlite.status == 0, "\(sqlite.stderr)")
        } else {
            try PostgresCluster.shared.get().psql(try PostgresLocation(url: store).database, deleteOld)
        }
        let oldUser = try CLIRunner.runServer(
            ["state", "show", "--client-id", Self.client, "--sub", "old.user"] + options)
        #expect(oldUser.status == 31, "\(oldUser.stdout) \(oldUser.stderr)")
        #expect(
            try CLIRunner.runServer(["state", "show", "--client-id", Self.client, "--sub", "new.user"] + options)
                .status == 0)
    }
}
