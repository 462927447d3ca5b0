#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import ShadowCore
package import ShadowVault
import ShadowStorage

/// A store over a database (``SQLiteCredentialStore``, ``PostgresCredentialStore``): credential
/// state with its audit chain, and server tokens, all through one ``StateEngine``.
public protocol DatabaseCredentialStore: AuditedCredentialStore, ServerTokenStore, RevocationQueue {
    /// The store's engine.
    var engine: StateEngine { get }
    /// Closes the database connections.
    func close() async
}

extension DatabaseCredentialStore {
    public func record(clientID: String, subject: String) async throws -> CredentialRecord {
        try await engine.record(clientID: clientID, subject: subject)
    }
    public func apply(_ events: [CredentialEvent]) async throws -> [CredentialChange] {
        try await engine.apply(events)
    }
    public func history(clientID: String, subject: String) async throws -> [AuditEntry] {
        try await engine.history(clientID: clientID, subject: subject)
    }
    public func verifyAudit() async throws -> AuditReport { try await engine.verifyAudit(collect: false).report }
    public func auditEntries() async throws -> [AuditEntry] { try await engine.verifyAudit(collect: true).entries }
    /// How many users are in each state (readable without the key: the state is a clear column).
    public func counts() async throws -> [CredentialState: Int] { try await engine.counts() }

    public func put(_ token: ServerToken) async throws { try await engine.put(token) }
    public func token(clientID: String, subject: String, kind: ServerToken.Kind) async throws -> ServerToken? {
        try await engine.tokens(clientID: clientID, subject: subject, kind: kind).first
    }
    public func tokens(clientID: String, subject: String) async throws -> [ServerToken] {
        try await engine.tokens(clientID: clientID, subject: subject, kind: nil)
    }
    @discardableResult
    public func deleteToken(clientID: String, subject: String, kind: ServerToken.Kind) async throws -> Bool {
        try await engine.deleteToken(clientID: clientID, subject: subject, kind: kind)
    }
    public func expiredTokens(at time: Date, limit: Int) async throws -> [ServerToken] {
        try await engine.expiredTokens(at: time, limit: limit)
    }

    public func claimRevocations(
        limit: Int, lease: Duration
    ) async throws -> (due: [PendingRevocation], unreadable: Int) {
        try await engine.claimRevocations(limit: limit, lease: lease)
    }
    public func completeRevocation(_ revocation: PendingRevocation, _ result: RevocationResult) async throws {
        try await engine.completeRevocation(revocation, result)
    }
    public func revocationCounts() async throws -> RevocationCounts { try await engine.revocationCounts() }
    public func pendingRevocations() async throws -> Int { try await engine.pendingRevocations() }
}

/// What moving a vault store into a database store moved.
public struct MigrationReport: Sendable, Equatable {
    /// Users (records) moved.
    public let users: Int
    /// Audit entries moved, their chain intact.
    public let auditEntries: Int
}

extension StateEngine {
    /// Moves a vault store into an empty database in one transaction. The database adopts the
    /// vault's audit secret (sealed under `unlock`), so its row ids are the vault log's subject
    /// hashes and the log moves line for line with its chain and head unchanged: `state audit`
    /// prints the same entries before and after.
    package static func importVault(
        _ export: VaultStateExport, into database: any StateDatabase, unlock: VaultUnlock
    ) async throws -> MigrationReport {
        let keys = StoreKeys(secret: export.secret)
        let sealedSecret = try credentialStoring {
            try SealedStoreSecret.create(unlock: unlock, secret: export.secret).stored
        }
        var rows: [StoredRow] = []
        for (clientID, subject, record) in export.records {
            let id = keys.rowID(clientID: clientID, subject: subject)
            let body = try SealedRows.sealRecord(
                SealedRows.encode(clientID: clientID, subject: subject, record: record), rowID: id, keys: keys)
            rows.append(StoredRow(id: id, state: record.status.state.rawValue, body: body))
        }
        var lines: [StoredAuditLine] = []
        for (line, entry) in zip(export.auditLines, export.auditEntries) {
            let subject = try Hex.decode(entry.subjectHash), linked = try entry.linkedSubjectHash.map(Hex.decode)
            lines.append(
                StoredAuditLine(
                    sequence: entry.sequence, subject: subject, linked: linked,
                    line: try SealedRows.sealAuditLine(line, sequence: entry.sequence, keys: keys)))
        }
        let head = keys.encodeHead(count: lines.count, chain: export.auditChain)
        // The vault's log was verified whole on export: the checkpoint starts at its end.
        let checkpoint = keys.encodeCheckpoint(count: lines.count, chain: export.auditChain)
        let (moved, logged) = (rows.count, lines.count)
        let (finalRows, finalLines) = (rows, lines)
        try await database.transaction(writing: true) { transaction in
            guard try await transaction.stateCounts().isEmpty, try await transaction.audit(after: 0, limit: 1).isEmpty
            else {
                throw CredentialError(
                    .invalidParameter, "the target store already holds credential state: migrate into a new one")
            }
            try await transaction.setMeta(MetaName.secret, sealedSecret)
            for chunk in finalRows.chunked(300) { try await transaction.upsert(Array(chunk)) }
            for chunk in finalLines.chunked(200) { try await transaction.appendAudit(Array(chunk)) }
            try await transaction.setMeta(MetaName.auditHead, head)
            try await transaction.setMeta(MetaName.auditCheckpoint, checkpoint)
        }
        return MigrationReport(users: moved, auditEntries: logged)
    }
}
