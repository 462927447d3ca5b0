import Foundation
import ShadowCore
import ShadowCredentials
import ShadowPostgres
import ShadowSQLite
import ShadowTestSupport
import Testing

/// An attacker who can edit a store's rows but holds no key (a DBA, a leaked backup, an SQL
/// injection elsewhere): every edit fails closed (Docs/credential-state.md, "Threat model:
/// someone who can edit rows but has no key").
@Suite(.serialized, .ownThreads) struct TamperedRowTests {
    typealias Table = StateMachineTests
    static let databases = DatabaseStoreTests.databases

    /// A store with four lines: a and b sign in, a is revoked, d is transferred to 002.bbb.2.
    func written(_ kind: StoreKind) async throws -> StoreFixture {
        let fixture = try StoreFixture(kind)
        let store = try await fixture.open()
        try await closing({ await close(store) }) {
            _ = try await store.apply([
                Table.event(.signIn, at: Table.t, subject: "a"), Table.event(.signIn, at: Table.t + 1, subject: "b"),
                Table.event(.consentRevoked, at: Table.t + 2, subject: "a"),
                Table.event(.transferred, at: Table.t + 3, subject: "d"),
            ])
            #expect(try await store.verifyAudit().entries == 4)
        }
        return fixture
    }

    /// Opens the fixture's store and runs `body` with it, closing it afterwards.
    func withStore(_ fixture: StoreFixture, _ body: (any AuditedCredentialStore) async throws -> Void) async throws {
        let store = try await fixture.open()
        try await closing({ await close(store) }) { try await body(store) }
    }

    func sql(_ fixture: StoreFixture, _ statement: String) async throws {
        try await DatabaseStoreTests().sql(fixture, statement)
    }

    /// After `edit` to an audit row's clear columns, verifying the log, reading the history of
    /// `subject` and the next write (the line is after the checkpoint) all fail as tampering, and
    /// the write leaves nothing behind.
    func expectColumnEditCaught(_ kind: StoreKind, _ edit: String, historyOf subject: String) async throws {
        let fixture = try await written(kind)
        try await sql(fixture, edit)
        try await withStore(fixture) { store in
            await #expect(throws: CredentialError(.auditTampered, "")) { _ = try await store.verifyAudit() }
            await #expect(throws: CredentialError(.auditTampered, "")) {
                _ = try await store.history(clientID: Table.client, subject: subject)
            }
            await #expect(throws: CredentialError(.auditTampered, "")) {
                _ = try await store.apply([Table.event(.signIn, at: Table.t + 10, subject: "c")])
            }
            let appended = try await store.status(clientID: Table.client, subject: "c")
            #expect(appended.state == .notFound)
        }
    }

    @Test(arguments: databases)
    func anAuditLineMovedToAnotherUserIsTampering(kind: StoreKind) async throws {
        // a's first line now claims to be about b.
        try await expectColumnEditCaught(
            kind, "UPDATE shadow_audit SET subject = (SELECT subject FROM shadow_audit WHERE seq = 2) WHERE seq = 1",
            historyOf: "b")
    }

    @Test(arguments: databases)
    func aDroppedLinkedSubjectIsTampering(kind: StoreKind) async throws {
        try await expectColumnEditCaught(kind, "UPDATE shadow_audit SET linked = NULL WHERE seq = 4", historyOf: "d")
    }

    /// A revoked user's row deleted: the reader does not answer notFound (which would pass the
    /// user's old tokens); the audit log still knows the user.
    @Test(arguments: databases)
    func aDeletedRowIsCorruptionNotAnUnknownUser(kind: StoreKind) async throws {
        let fixture = try await written(kind)
        try await sql(
            fixture, "DELETE FROM shadow_credentials WHERE row_id = (SELECT subject FROM shadow_audit WHERE seq = 3)")
        try await withStore(fixture) { store in
            await #expect(throws: CredentialError(.corruptedState, "")) {
                _ = try await store.status(clientID: Table.client, subject: "a")
            }
            // Users the log does not know are still unknown, not errors.
            let never = try await store.status(clientID: Table.client, subject: "never")
            let other = try await store.status(clientID: Table.client, subject: "b")
            #expect(never.state == .notFound && other.state == .authorized)
        }
    }

    /// A's row holds b's record (moved without the key) while forty other users sign in at once:
    /// the group commit puts their events in A's transaction, and only A's caller fails.
    @Test(arguments: databases)
    func oneUsersEditedRowFailsOnlyThatUsersWrite(kind: StoreKind) async throws {
        let fixture = try await written(kind)
        try await sql(
            fixture,
            """
            UPDATE shadow_credentials SET body = (SELECT body FROM shadow_credentials WHERE row_id = (SELECT subject \
            FROM shadow_audit WHERE seq = 2)) WHERE row_id = (SELECT subject FROM shadow_audit WHERE seq = 1)
            """)
        try await withStore(fixture) { store in
            let outcomes = await withTaskGroup(of: (String, CredentialError?).self) { group in
                for index in 0..<41 {
                    let subject = index == 20 ? "a" : "u\(index)"
                    let event = Table.event(.signIn, at: Table.t + 100, id: "s\(index)", subject: subject)
                    group.addTask {
                        do {
                            _ = try await store.apply([event])
                            return (subject, nil)
                        } catch {
                            return (
                                subject, error as? CredentialError ?? CredentialError(.storeUnavailable, "\(error)")
                            )
                        }
                    }
                }
                var outcomes: [String: CredentialError?] = [:]
                for await (subject, error) in group { outcomes[subject] = error }
                return outcomes
            }
            #expect(outcomes["a"]??.code == .corruptedState)
            let failed = outcomes.filter { $0.key != "a" && $0.value != nil }
            #expect(failed.isEmpty, "other users' writes failed with a's row: \(failed.keys.sorted())")
            for index in 0..<41 where index != 20 {
                let state = try await store.status(clientID: Table.client, subject: "u\(index)").state
                #expect(state == .authorized, "u\(index)")
            }
        }
    }

    /// Token rows edited in their clear columns or moved between users are refused by every read
    /// of tokens, the expired-token sweep included (which must not hand out another user's token
    /// or one whose expiry was moved into the past).
    @Test(arguments: databases)
    func editedTokenRowsAreRefusedByEveryRead(kind: StoreKind) async throws {
        let edits = [
            "UPDATE shadow_tokens SET expires_at_ms = 1000 WHERE kind = 'access'",
            """
            UPDATE shadow_tokens SET body = (SELECT body FROM shadow_tokens WHERE kind = 'access') \
            WHERE kind = 'refresh'
            """,
            "UPDATE shadow_tokens SET row_id = (SELECT subject FROM shadow_audit WHERE seq = 2) WHERE kind = 'access'",
        ]
        for edit in edits {
            let fixture = try await written(kind)
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            let store = try #require(try await fixture.open() as? any DatabaseCredentialStore)
            try await closing({ await store.close() }) {
                for tokenKind in [ServerToken.Kind.access, .refresh] {
                    let value = SecretBytes(utf8: "\(tokenKind.rawValue)-a")
                    try await store.put(
                        try ServerToken(
                            clientID: Table.client, subject: "a", kind: tokenKind, value: value,
                            expiresAt: now + 3600, storedAt: now))
                }
            }
            try await sql(fixture, edit)
            let reopened = try #require(try await fixture.open() as? any DatabaseCredentialStore)
            await closing({ await reopened.close() }) {
                let owner = edit.contains("row_id =") ? "b" : "a"
                await #expect(throws: CredentialError(.corruptedState, ""), "\(edit)") {
                    _ = try await reopened.tokens(clientID: Table.client, subject: owner)
                }
                await #expect(throws: CredentialError(.corruptedState, ""), "\(edit)") {
                    _ = try await reopened.expiredTokens(at: now + 7200, limit: 10)
                }
            }
        }
    }

    /// A write refuses a log whose end was removed, edited or extended, and appends nothing.
    @Test(arguments: databases)
    func aWriteRefusesABrokenTail(kind: StoreKind) async throws {
        let edits = [
            "DELETE FROM shadow_audit WHERE seq = 4",
            "UPDATE shadow_audit SET line = (SELECT line FROM shadow_audit WHERE seq = 3) WHERE seq = 4",
            """
            INSERT INTO shadow_audit (seq, subject, linked, line) SELECT 5, subject, linked, line FROM shadow_audit \
            WHERE seq = 1
            """,
        ]
        for edit in edits {
            let fixture = try await written(kind)
            try await sql(fixture, edit)
            try await withStore(fixture) { store in
                await #expect(throws: CredentialError(.auditTampered, ""), "\(edit)") {
                    _ = try await store.apply([Table.event(.signIn, at: Table.t + 10, subject: "c")])
                }
                let appended = try await store.status(clientID: Table.client, subject: "c")
                #expect(appended.state == .notFound, "\(edit)")
            }
        }
    }

    /// A line flipped or deleted in the middle of the recent log, not only at its end, is caught
    /// by the next write: it checks every line since the authenticated checkpoint.
    @Test(arguments: databases)
    func aWriteRefusesAnEditInTheMiddleOfTheRecentLog(kind: StoreKind) async throws {
        let edits = [
            "DELETE FROM shadow_audit WHERE seq = 2",
            "UPDATE shadow_audit SET line = (SELECT line FROM shadow_audit WHERE seq = 1) WHERE seq = 2",
        ]
        for edit in edits {
            let fixture = try await written(kind)
            try await sql(fixture, edit)
            try await withStore(fixture) { store in
                await #expect(throws: CredentialError(.auditTampered, ""), "\(edit)") {
                    _ = try await store.apply([Table.event(.signIn, at: Table.t + 10, subject: "c")])
                }
            }
        }
    }

    /// A write the check refuses leaves nothing behind, though its revocations and lines were
    /// already on their way to the store while the check ran (600 sign-ins: three stretches of
    /// lines; a revocation with a token to queue): once the edit is undone, the store is exactly
    /// as it was, and takes the next write.
    @Test(arguments: databases)
    func aRefusedWriteLeavesNothingBehind(kind: StoreKind) async throws {
        let fixture = try await written(kind)
        try await withStore(fixture) { store in
            let tokens = try #require(store as? any DatabaseCredentialStore)
            try await tokens.put(
                ServerToken(
                    clientID: Table.client, subject: "b", kind: .refresh, value: SecretBytes(utf8: "r.b"),
                    storedAt: Date(timeIntervalSince1970: Double(Table.t) / 1000)))
        }
        try await sql(fixture, "CREATE TABLE audit_backup AS SELECT * FROM shadow_audit")
        try await sql(
            fixture, "UPDATE shadow_audit SET line = (SELECT line FROM shadow_audit WHERE seq = 1) WHERE seq = 2")
        let write =
            (0..<600).map { Table.event(.signIn, at: Table.t + 10, subject: "n\($0)") } + [
                Table.event(.consentRevoked, at: Table.t + 20, subject: "b")
            ]
        try await withStore(fixture) { store in
            await #expect(throws: CredentialError(.auditTampered, "")) { _ = try await store.apply(write) }
        }
        try await sql(
            fixture, "UPDATE shadow_audit SET line = (SELECT line FROM audit_backup WHERE seq = 2) WHERE seq = 2")
        try await withStore(fixture) { store in
            #expect(try await store.verifyAudit().entries == 4)
            let (b, n0) = (
                try await store.status(clientID: Table.client, subject: "b"),
                try await store.status(clientID: Table.client, subject: "n0")
            )
            #expect(b.state == .authorized && n0.state == .notFound)
            let queue = try #require(store as? any DatabaseCredentialStore)
            #expect(try await queue.revocationCounts().pending == 0)
            _ = try await store.apply(write)
            #expect(try await store.verifyAudit().entries == 4 + 601)
            #expect(try await queue.revocationCounts().pending == 1)
        }
    }

    /// Each write moves the checkpoint to the head it checked, so the next write checks exactly
    /// the lines of the write before it (a cost per batch, whatever the log's length): an edit
    /// there is refused; an edit further back is left to verifyAudit.
    @Test(arguments: databases)
    func aWriteChecksTheLinesOfTheWriteBeforeIt(kind: StoreKind) async throws {
        for (edited, refused) in [(5, true), (2, false)] {
            let fixture = try StoreFixture(kind)
            let store = try await fixture.open()
            try await closing({ await close(store) }) {
                _ = try await store.apply((1...3).map { Table.event(.signIn, at: Table.t, subject: "w\($0)") })
                _ = try await store.apply((4...6).map { Table.event(.signIn, at: Table.t, subject: "w\($0)") })
            }
            try await sql(
                fixture,
                "UPDATE shadow_audit SET line = (SELECT line FROM shadow_audit WHERE seq = 1) WHERE seq = \(edited)")
            try await withStore(fixture) { store in
                let next = [Table.event(.signIn, at: Table.t, subject: "after")]
                if refused {
                    await #expect(throws: CredentialError(.auditTampered, ""), "line \(edited)") {
                        _ = try await store.apply(next)
                    }
                    #expect(try await store.status(clientID: Table.client, subject: "after").state == .notFound)
                } else {
                    _ = try await store.apply(next)
                }
                await #expect(throws: CredentialError(.auditTampered, ""), "line \(edited)") {
                    _ = try await store.verifyAudit()
                }
            }
        }
    }
}
