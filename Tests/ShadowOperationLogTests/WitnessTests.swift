import Foundation
import ShadowCore
import ShadowCredentials
import ShadowOperationLog
import ShadowSQLite
import ShadowTestSupport
import ShadowVault
import Testing

/// The witness catches a log, vault or state store that went back to an older copy, or a log
/// that was rewritten; and its own file cannot be edited without the log's key.
@Suite struct WitnessTests {
    let directory: TemporaryDirectory
    let logPath: String
    let witnessPath: String

    init() throws {
        directory = try TemporaryDirectory()
        logPath = directory.path + "/ops.log"
        witnessPath = directory.path + "/witness"
    }

    func open() async throws -> OperationLog {
        try OperationLog(
            storage: try await FileLogStorage.open(
                path: logPath, unlock: LogFixtures.unlock, create: true, origin: LogFixtures.origin))
    }

    func copy(_ from: String, _ to: String) throws {
        try? FileManager.default.removeItem(atPath: to)
        try FileManager.default.copyItem(atPath: from, toPath: to)
    }

    @Test func aRestoredOrRewrittenLogIsCaught() async throws {
        var log = try await open()
        let witness = Witness(path: witnessPath, keys: log.storage.keys)
        _ = try await log.append(contentsOf: (0..<5).map { LogFixtures.entry($0) })
        #expect(try await witness.check(log) == nil)
        try copy(logPath, logPath + ".old")
        _ = try await log.append(contentsOf: (5..<9).map { LogFixtures.entry($0) })
        #expect(try await witness.check(log)?.size == 5)
        #expect(try witness.read()?.size == 9)
        // An older copy put back: consistent in itself, but behind the witness.
        try copy(logPath + ".old", logPath)
        log = try await open()
        #expect(try await log.verify().size == 5)
        await #expect(throws: LogError(.rolledBack, "")) { try await witness.check(log) }
        // A rewrite: as many entries as the witness saw, but other ones.
        _ = try await log.append(contentsOf: (50..<54).map { LogFixtures.entry($0) })
        #expect(try await log.verify().size == 9)
        await #expect(throws: LogError(.rolledBack, "")) { try await witness.check(log) }
        // The witness was not moved by the failed checks.
        #expect(try witness.read()?.size == 9)
    }

    @Test func aRestoredVaultIsCaught() async throws {
        let log = try await open()
        let witness = Witness(path: witnessPath, keys: log.storage.keys)
        let vaultPath = directory.path + "/vault.skv"
        let vault = try await TokenVault.create(at: vaultPath, unlock: LogFixtures.unlock)
        try await vault.put(
            VaultEntry(name: "a", secret: SecretBytes(utf8: "s1"), provider: .google, kind: .refreshToken))
        try copy(vaultPath, vaultPath + ".old")
        try await vault.put(
            VaultEntry(name: "b", secret: SecretBytes(utf8: "s2"), provider: .google, kind: .refreshToken))
        try await witness.check(log, vault: try VaultMark.read(path: vaultPath))
        try copy(vaultPath + ".old", vaultPath)
        await #expect(throws: LogError(.rolledBack, "")) {
            try await witness.check(log, vault: try VaultMark.read(path: vaultPath))
        }
        // Another vault in its place is not the watched one either.
        try FileManager.default.removeItem(atPath: vaultPath)
        _ = try await TokenVault.create(at: vaultPath, unlock: LogFixtures.unlock)
        await #expect(throws: LogError(.rolledBack, "")) {
            try await witness.check(log, vault: try VaultMark.read(path: vaultPath))
        }
    }

    @Test func aRestoredStateStoreIsCaught() async throws {
        let log = try await open()
        let witness = Witness(path: witnessPath, keys: log.storage.keys)
        let statePath = directory.path + "/state.sqlite"
        func event(_ number: Int) throws -> CredentialEvent {
            try CredentialEvent(
                kind: .signIn, clientID: "com.example.app", subject: "user-\(number)",
                timeMilliseconds: 1_750_000_000_000 + Int64(number), id: "event-\(number)")
        }
        var store = try await SQLiteCredentialStore.open(path: statePath, unlock: LogFixtures.unlock)
        _ = try await store.apply([try event(1), try event(2)])
        await store.close()
        try copy(statePath, statePath + ".old")
        store = try await SQLiteCredentialStore.open(path: statePath, unlock: LogFixtures.unlock)
        _ = try await store.apply([try event(3)])
        try await witness.check(log, state: Self.reader(store))
        #expect(try witness.read()?.state?.count == 3)
        _ = try await store.apply([try event(4)])
        try await witness.check(log, state: Self.reader(store))
        await store.close()
        try copy(statePath + ".old", statePath)
        try? FileManager.default.removeItem(atPath: statePath + "-wal")
        try? FileManager.default.removeItem(atPath: statePath + "-shm")
        store = try await SQLiteCredentialStore.open(path: statePath, unlock: LogFixtures.unlock)
        await #expect(throws: LogError(.rolledBack, "")) { try await witness.check(log, state: Self.reader(store)) }
        await store.close()
    }

    @Test func anEditedWitnessIsRefused() async throws {
        let log = try await open()
        let witness = Witness(path: witnessPath, keys: log.storage.keys)
        _ = try await log.append(contentsOf: (0..<3).map { LogFixtures.entry($0) })
        try await witness.check(log)
        let text = try String(contentsOfFile: witnessPath, encoding: .utf8)
        #expect(text.hasPrefix("shadow-keys witness v1\norigin \(LogFixtures.origin)\nsize 3\n"))
        for edited in [
            text.replacingOccurrences(of: "size 3", with: "size 2"), String(text.dropLast()), "",
            text.replacingOccurrences(of: "mac ", with: "mac x"),
        ] {
            try Data(edited.utf8).write(to: URL(fileURLWithPath: witnessPath))
            await #expect(throws: LogError(.tampered, "")) { try await witness.check(log) }
        }
        // Another log's key does not open it either.
        try Data(text.utf8).write(to: URL(fileURLWithPath: witnessPath))
        let other = Witness(path: witnessPath, keys: try LogKeys(secret: [UInt8](repeating: 1, count: 32)))
        #expect(throws: LogError(.tampered, "")) { try other.read() }
        #expect(try witness.read()?.size == 3)
    }

    /// The state store's mark, as the CLI reads it for the witness.
    static func reader(_ store: any AuditedCredentialStore) -> StateMarkReader {
        { at in
            let mark = try await store.auditMark(entry: at)
            return (StateMark(count: mark.count, last: mark.last), mark.entryDigest)
        }
    }
}
