#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore

extension StateEngine {

    /// The audit entries about the user, oldest first.
    package func history(clientID: String, subject: String) async throws -> [AuditEntry] {
        let id = keys.rowID(clientID: clientID, subject: subject)
        let lines = try await database.read { try await $0.audit(about: id) }
        return try lines.map { try openAudit($0).entry }
    }

    /// A stored audit line opened at its sequence number, after checking that its clear columns
    /// (the row ids it is about) are the ones its sealed text names: a column moved to another
    /// user, or a linked subject dropped, is tampering.
    func openAudit(_ stored: StoredAuditLine) throws -> (entry: AuditEntry, previous: String, line: [UInt8]) {
        let line = try SealedRows.openAuditLine(stored.line, sequence: stored.sequence, keys: keys)
        guard let (entry, previous) = AuditEntry.parse(line[...]) else {
            throw CredentialError(.auditTampered, "line \(stored.sequence) is not an audit entry")
        }
        guard entry.sequence == stored.sequence else {
            throw CredentialError(.auditTampered, "line \(stored.sequence) carries sequence number \(entry.sequence)")
        }
        guard Hex.encode(stored.subject) == entry.subjectHash, stored.linked.map(Hex.encode) == entry.linkedSubjectHash
        else {
            throw CredentialError(
                .auditTampered,
                "audit line \(stored.sequence)'s subject columns disagree with its sealed text: they were edited")
        }
        return (entry, previous, line)
    }

    /// Before a write extends the chain: every line after the authenticated checkpoint is there,
    /// in order, opens with its columns bound, and chains from the checkpoint's value to the
    /// head's, and no line lies past the head. A write never appends to a log whose recent part
    /// was removed, edited, reordered or extended; what lies before the checkpoint is
    /// `verifyAudit()`'s to check. Returns the checkpoint read.
    @discardableResult
    func checkSinceCheckpoint(
        of transaction: any StateTransaction, count: Int, chain: [UInt8]
    ) async throws
        -> (count: Int, chain: [UInt8])
    {
        let checkpoint = try keys.decodeCheckpoint(try await transaction.meta(MetaName.auditCheckpoint))
        guard checkpoint.count <= count else {
            throw CredentialError(
                .auditTampered,
                "the audit checkpoint (\(checkpoint.count) lines) lies past the authenticated head (\(count) lines)")
        }
        var running = checkpoint.chain
        var expected = checkpoint.count
        while true {
            let page = try await transaction.audit(after: expected, limit: 1000)
            for stored in page {
                expected += 1
                guard stored.sequence == expected, expected <= count else {
                    throw CredentialError(
                        .auditTampered,
                        expected > count
                            ? "the audit log holds line \(stored.sequence) past its authenticated head (\(count) lines)"
                            : "audit line \(expected) is missing: lines were removed")
                }
                let (_, previous, line) = try openAudit(stored)
                guard ConstantTime.equals(Array(previous.utf8), Array(Hex.encode(running).utf8)) else {
                    throw CredentialError(
                        .auditTampered, "audit line \(expected) does not link to the line before it: a line was edited")
                }
                running = keys.audit.link(line[...])
            }
            if page.count < 1000 { break }
        }
        guard expected == count, ConstantTime.equals(running, chain) else {
            throw CredentialError(
                .auditTampered,
                """
                the audit log since its checkpoint does not end at the authenticated head (\(count) lines): lines \
                were removed or edited
                """
            )
        }
        return checkpoint
    }

    /// Checks the whole chain against the authenticated head, reading it a page at a time in one
    /// read transaction (a consistent snapshot); returns the entries too when `collect` is set.
    package func verifyAudit(collect: Bool = false) async throws -> (report: AuditReport, entries: [AuditEntry]) {
        let keys = self.keys
        return try await database.transaction(writing: false) { transaction in
            let head = try keys.decodeHead(try await transaction.meta(MetaName.auditHead))
            var chain = keys.audit.start
            var entries: [AuditEntry] = []
            var number = 0
            while true {
                let page = try await transaction.audit(after: number, limit: 5000)
                for stored in page {
                    number += 1
                    guard stored.sequence == number else {
                        throw CredentialError(.auditTampered, "audit line \(number) is missing: lines were removed")
                    }
                    let (entry, previous, line) = try self.openAudit(stored)
                    guard ConstantTime.equals(Array(previous.utf8), Array(Hex.encode(chain).utf8)) else {
                        throw CredentialError(
                            .auditTampered,
                            """
                            line \(number) does not link to the line before it: a line was edited, removed or \
                            reordered
                            """
                        )
                    }
                    chain = keys.audit.link(line[...])
                    if collect { entries.append(entry) }
                }
                if page.count < 5000 { break }
            }
            guard number == head.count, ConstantTime.equals(chain, head.chain) else {
                throw CredentialError(
                    .auditTampered,
                    """
                    the log's \(number) lines do not end at the store's authenticated head (\(head.count) lines): \
                    lines were added, removed or edited
                    """
                )
            }
            return (AuditReport(entries: number, uncommitted: 0, partialTail: false), entries)
        }
    }
}
