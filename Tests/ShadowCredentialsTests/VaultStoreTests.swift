import Foundation
import ShadowApple
import ShadowCore
import ShadowCredentials
import ShadowCrypto
import ShadowSelfTest
import ShadowJOSE
import ShadowTestSupport
import ShadowVault
import Testing

/// The vault-backed store: persistence, the audit log and its chain, enforcement.
@Suite struct VaultStoreTests {
    static let client = "com.example.app"
    static let subject = "001234.8a2b3c4d5e6f70819a2b3c4d5e6f7081.1234"
    let directory: TemporaryDirectory
    let path: String
    let key = SecretBytes((0..<32).map { UInt8($0) })
    let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))

    init() throws {
        directory = try TemporaryDirectory()
        path = directory.path + "/vault.skv"
        _ = try TokenVault.createSync(at: path, unlock: .key(key))
    }

    func store() -> VaultCredentialStore {
        VaultCredentialStore(vault: TokenVault(path: path, unlock: .key(key)), clock: clock.clock)
    }

    func event(
        _ kind: CredentialEvent.Kind, at seconds: Int64, id: String? = nil, subject: String = subject,
        linked: String? = nil
    ) throws -> CredentialEvent {
        try CredentialEvent(
            kind: kind, clientID: Self.client, subject: subject, timeMilliseconds: seconds * 1000,
            id: id ?? "\(kind.rawValue)@\(seconds)",
            linkedSubject: linked)
    }

    var auditBytes: [UInt8] { (try? Array(Data(contentsOf: URL(fileURLWithPath: path + ".audit")))) ?? [] }

    func writeAudit(_ bytes: [UInt8]) throws { try Data(bytes).write(to: URL(fileURLWithPath: path + ".audit")) }

    @Test func statePersistsAndEveryTransitionIsAudited() async throws {
        let store = store()
        #expect(try await store.status(clientID: Self.client, subject: Self.subject) == .notFound)
        let changes = try await store.apply([
            try event(.consentRevoked, at: 2000, id: "jti-1"), try event(.signIn, at: 1000),
        ])
        #expect(changes.map(\.new.state) == [.authorized, .revoked])
        #expect(changes.allSatisfy { $0.changed })

        let reopened = self.store()
        let status = try await reopened.status(clientID: Self.client, subject: Self.subject)
        #expect(status.state == .revoked && status.cause == .consentRevoked && status.eventID == "jti-1")

        let history = try await reopened.history(clientID: Self.client, subject: Self.subject)
        #expect(
            history.map { "\($0.old)>\($0.new):\($0.cause.rawValue)" } == [
                "notFound>authorized:sign-in", "authorized>revoked:consent-revoked",
            ])
        #expect(
            history.map(\.sequence) == [1, 2] && history[1].eventTimeMilliseconds == 2_000_000
                && history[1].eventID == "jti-1")
        #expect(history[0].recordedAtMilliseconds == 1_800_000_000_000)
        // Subjects appear only as keyed hashes; the file is owner-only.
        let log = String(decoding: auditBytes, as: UTF8.self)
        #expect(
            !log.contains(Self.subject) && log.contains(history[0].subjectHash) && history[0].subjectHash.count == 64)
        let mode = try FileManager.default.attributesOfItem(atPath: path + ".audit")[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(try await reopened.verifyAudit() == AuditReport(entries: 2, uncommitted: 0, partialTail: false))
        // Another subject's history is empty.
        #expect(try await reopened.history(clientID: Self.client, subject: "001.other.1").isEmpty)
        #expect(try await reopened.history(clientID: "com.example.other", subject: Self.subject).isEmpty)
    }

    @Test func duplicatesAndStaleEventsWriteNothing() async throws {
        let store = store()
        _ = try await store.apply([try event(.consentRevoked, at: 2000, id: "jti-1")])
        let generation = try TokenVault.headerInfo(path: path).generation
        let log = auditBytes
        let changes = try await store.apply([
            try event(.consentRevoked, at: 2000, id: "jti-1"), try event(.signIn, at: 1500),
            try event(.signIn, at: 2000),
        ])
        #expect(changes.allSatisfy { !$0.changed })
        #expect(auditBytes == log)
        #expect(try TokenVault.headerInfo(path: path).generation == generation)
    }

    @Test func transfersLinkTheNewSubjectAndMetadataStaysMetadata() async throws {
        let store = store()
        let token = try event(.transferred, at: 3000, linked: "002.new.9")
        _ = try await store.apply([
            try event(.signIn, at: 1000), token, try event(.emailDisabled, at: 4000), try event(.signIn, at: 5000),
        ])
        let status = try await store.status(clientID: Self.client, subject: Self.subject)
        #expect(status.state == .transferred && status.linkedSubject == "002.new.9" && status.emailForwarding == false)
        let history = try await store.history(clientID: Self.client, subject: "002.new.9")
        #expect(history.count == 1 && history[0].new == .transferred && history[0].linkedSubjectHash != nil)
    }

    @Test func everyKindOfTamperingIsDetected() async throws {
        let store = store()
        for second in 1...4 {
            _ = try await store.apply([try event(second % 2 == 0 ? .consentRevoked : .signIn, at: Int64(second) * 100)])
        }
        let original = auditBytes
        let lines = original.split(separator: 0x0A, omittingEmptySubsequences: false).dropLast().map(Array.init)
        #expect(lines.count == 4)
        func joined(_ lines: [[UInt8]]) -> [UInt8] { lines.flatMap { $0 + [0x0A] } }

        var edited = original
        let position = try #require(
            String(decoding: original, as: UTF8.self).range(of: "revoked").map {
                original.count - String(decoding: original, as: UTF8.self)[$0.lowerBound...].utf8.count
            })
        edited.replaceSubrange(position..<(position + 7), with: Array("xevoked".utf8))
        var forged = lines
        forged[1] = Array(
            String(decoding: lines[1], as: UTF8.self).replacingOccurrences(
                of: "\"consent-revoked\"", with: "\"account-deleted\""
            ).utf8)
        let cases: [(String, [UInt8])] = [
            ("a state edited", edited), ("a cause changed in a valid form", joined(forged)),
            ("the last line removed", joined(Array(lines.dropLast()))),
            ("a middle line removed", joined([lines[0], lines[2], lines[3]])),
            ("two lines swapped", joined([lines[0], lines[2], lines[1], lines[3]])), ("the file emptied", []),
            ("cut inside a line", Array(original.dropLast(10))), ("a line duplicated", joined(lines + [lines[3]])),
        ]
        for (name, bytes) in cases {
            try writeAudit(bytes)
            await #expect(throws: CredentialError(.auditTampered, ""), "\(name)") { try await store.verifyAudit() }
        }
        // A damaged log also stops further writes rather than extending it.
        try writeAudit(Array(original.dropLast(original.count - lines[0].count - 1)))
        await #expect(throws: CredentialError(.auditTampered, "")) {
            try await store.apply([try event(.signIn, at: 900)])
        }
        // So does an edited last line, even when the file is as long as before.
        var lastEdited = lines
        lastEdited[3] = Array(
            String(decoding: lines[3], as: UTF8.self).replacingOccurrences(
                of: "\"consent-revoked\"", with: "\"account-deleted\""
            ).utf8)
        #expect(lastEdited[3] != lines[3])
        try writeAudit(joined(lastEdited))
        await #expect(throws: CredentialError(.auditTampered, "")) {
            try await store.apply([try event(.signIn, at: 900)])
        }
        try writeAudit(original)
        #expect(try await store.verifyAudit().entries == 4)
        _ = try await store.apply([try event(.signIn, at: 900)])
        #expect(try await store.verifyAudit().entries == 5)
    }

    @Test func anInterruptedWriteLeavesAnUncommittedTailThatTheNextWriteDrops() async throws {
        let store = store()
        _ = try await store.apply([try event(.signIn, at: 100)])
        let committed = auditBytes
        // A second store's write that died after the log was synced and before the vault commit:
        // simulated by restoring the vault file after the write.
        let vaultBytes = try Data(contentsOf: URL(fileURLWithPath: path))
        _ = try await store.apply([try event(.consentRevoked, at: 200)])
        try vaultBytes.write(to: URL(fileURLWithPath: path))
        #expect(auditBytes.count > committed.count)
        #expect(try await store.verifyAudit() == AuditReport(entries: 1, uncommitted: 1, partialTail: false))
        #expect(try await store.status(clientID: Self.client, subject: Self.subject).state == .authorized)
        // A torn last line is reported the same way.
        try writeAudit(auditBytes.dropLast(5))
        #expect(try await store.verifyAudit() == AuditReport(entries: 1, uncommitted: 0, partialTail: true))
        // The next write replaces the tail.
        _ = try await store.apply([try event(.accountDeleted, at: 300)])
        #expect(try await store.verifyAudit() == AuditReport(entries: 2, uncommitted: 0, partialTail: false))
        #expect(
            try await store.history(clientID: Self.client, subject: Self.subject).map(\.cause) == [
                .signIn, .accountDeleted,
            ])
    }

    @Test func theStoreRefusesTokensARevocationSuperseded() async throws {
        let signer = try JWSSigner.rs256(TestKeys.rsa, keyID: "k1")
        let keys = try JWKSet(keys: [signer.publicJWK()])
        func token(issuedAt: Int64) throws -> String {
            try signer.sign(claims: [
                "iss": "https://appleid.apple.com", "aud": .string(Self.client), "sub": .string(Self.subject),
                "iat": .int(issuedAt), "exp": .int(issuedAt + 86400),
            ])
        }
        let validator = AppleIdentityTokenValidator(
            clientIDs: [Self.client], clock: .fixed(Date(timeIntervalSince1970: 2000)))
        let store = store()
        let old = try token(issuedAt: 1000)
        _ = try await store.apply(
            try CredentialEvent.signIn(try validator.validate(old, keys: keys), rawToken: old, clientID: Self.client))
        _ = try await validator.validate(old, keys: keys, states: store)
        _ = try await store.apply([try event(.consentRevoked, at: 1500)])
        await #expect(throws: CredentialError(.superseded, "")) {
            try await validator.validate(old, keys: keys, states: store)
        }
        await #expect(throws: CredentialError(.superseded, "")) {
            try await validator.validate(try token(issuedAt: 1500), keys: keys, states: store)
        }
        let fresh = try token(issuedAt: 1501)
        _ = try await validator.validate(fresh, keys: keys, states: store)
        _ = try await store.apply(
            try CredentialEvent.signIn(
                try validator.validate(fresh, keys: keys), rawToken: fresh, clientID: Self.client))
        #expect(try await store.status(clientID: Self.client, subject: Self.subject).state == .authorized)
        // The old token stays refused after the new sign-in.
        await #expect(throws: CredentialError(.superseded, "")) {
            try await validator.validate(old, keys: keys, states: store)
        }
    }

    @Test func aTokenWithTransferSubMovesTheOldSubject() async throws {
        let signer = try JWSSigner.rs256(TestKeys.rsa, keyID: "k1")
        let keys = try JWKSet(keys: [signer.publicJWK()])
        let raw = try signer.sign(claims: [
            "iss": "https://appleid.apple.com", "aud": .string(Self.client), "sub": "002.new.9", "iat": 1000,
            "exp": 90000, "transfer_sub": .string(Self.subject),
        ])
        let token = try await AppleIdentityTokenValidator(
            clientIDs: [Self.client], clock: .fixed(Date(timeIntervalSince1970: 1000))
        ).validate(raw, keys: keys)
        let store = InMemoryCredentialStore()
        _ = try await store.apply(try CredentialEvent.signIn(token, rawToken: raw, clientID: Self.client))
        #expect(try await store.status(clientID: Self.client, subject: "002.new.9").state == .authorized)
        let old = try await store.status(clientID: Self.client, subject: Self.subject)
        #expect(old.state == .transferred && old.linkedSubject == "002.new.9")
    }

    @Test func aCorruptedSectionIsReportedNotReset() async throws {
        let vault = TokenVault(path: path, unlock: .key(key))
        try vault.update { try $0.setSection("credential-state", ["version": 2]) }
        await #expect(throws: CredentialError(.corruptedState, "")) {
            try await store().status(clientID: Self.client, subject: Self.subject)
        }
    }
}

/// TestVectors/shadow/audit, made by an independent implementation of the audit log format.
@Suite struct AuditVectorTests {
    @Test func keysHashesValidAndTamperedLogs() throws {
        let cases = AuditSuites.vectors(try PackagePaths.vector("shadow/audit/vectors.json"))
        #expect(cases.count == 26)
        for result in cases { #expect(result.passed, "\(result.detail)") }
    }
}

extension VaultStoreTests {
    /// Writers applying events at once. Run alone with `swift test --filter VaultStoreTests/Stress`.
    @Suite(.tags(.stress)) struct Stress {
        let fixture: VaultStoreTests
        init() throws { fixture = try VaultStoreTests() }

        @Test func concurrentWritersLoseNoTransition() async throws {
            let subjects = (0..<8).map { "001.concurrent.\($0)" }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for subject in subjects {
                    // Each writer has its own vault handle, as separate processes would.
                    let store = fixture.store()
                    let events = [
                        try fixture.event(.signIn, at: 100, subject: subject),
                        try fixture.event(.consentRevoked, at: 200, subject: subject),
                    ]
                    group.addTask { for event in events { _ = try await store.apply([event]) } }
                }
                try await group.waitForAll()
            }
            let store = fixture.store()
            #expect(try await store.verifyAudit().entries == 16)
            for subject in subjects {
                #expect(try await store.status(clientID: VaultStoreTests.client, subject: subject).state == .revoked)
            }
        }
    }
}
