#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
package import ShadowCore

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

    /// Before a write extends the chain: the last line is there, opens, and ends at the head's
    /// chain value, and no line lies past the head. A write never appends to a log whose end was
    /// removed, edited or extended; what lies further back is `verifyAudit()`'s to check.
    func checkTail(of transaction: Database.Transaction, count: Int, chain: [UInt8]) async throws {
        let tail = try await transaction.audit(after: max(0, count - 1), limit: 2)
        if count == 0 {
            guard tail.isEmpty else {
                throw CredentialError(.auditTampered, "the audit log holds lines past its authenticated head (0 lines)")
            }
            return
        }
        guard let last = tail.first, last.sequence == count else {
            throw CredentialError(
                .auditTampered, "audit line \(count), the last the store's head counts, is missing: it was removed")
        }
        guard tail.count == 1 else {
            throw CredentialError(
                .auditTampered,
                """
                the audit log holds line \(tail[1].sequence) past its authenticated head (\(count) lines): it was \
                inserted
                """
            )
        }
        let opened = try openAudit(last)
        guard ConstantTime.equals(keys.audit.link(opened.line[...]), chain) else {
            throw CredentialError(
                .auditTampered, "audit line \(count) does not end at the store's authenticated head: it was edited")
        }
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
