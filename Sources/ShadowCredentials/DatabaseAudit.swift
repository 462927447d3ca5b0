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
        try Self.openAudit(stored, keys: keys)
    }

    static func openAudit(
        _ stored: StoredAuditLine, keys: StoreKeys
    ) throws -> (entry: AuditEntry, previous: String, line: [UInt8]) {
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
    /// `verifyAudit()`'s to check.
    ///
    /// In two parts, so a write can append while its check runs: this reads the lines (a page at
    /// a time, each full page checked as it comes) and checks their numbering; the returned
    /// ``AuditTail`` checks the rest, needing no store. `count` and `chain` are the head, and
    /// `checkpoint` the stored checkpoint, both read under the write lock. Returns the checkpoint
    /// decoded too.
    func linesSinceCheckpoint(
        of transaction: any StateTransaction, count: Int, chain: [UInt8], checkpoint stored: [UInt8]?
    ) async throws -> (checkpoint: (count: Int, chain: [UInt8]), tail: AuditTail) {
        let checkpoint = try keys.decodeCheckpoint(stored)
        guard checkpoint.count <= count else {
            throw CredentialError(
                .auditTampered,
                "the audit checkpoint (\(checkpoint.count) lines) lies past the authenticated head (\(count) lines)")
        }
        var tail = AuditTail(keys: keys, head: (count, chain), checked: checkpoint.count, running: checkpoint.chain)
        while true {
            let page = try await transaction.audit(after: tail.checked + tail.lines.count, limit: AuditTail.page)
            try tail.take(page)
            if page.count < AuditTail.page { return (checkpoint, tail) }
            try tail.checkTaken()
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

/// The lines since the audit checkpoint, read, numbered in order and none past the head, whose
/// seals and chain are still to be checked (``check()``).
struct AuditTail: Sendable {
    /// The most lines read at once.
    static let page = 4096

    let keys: StoreKeys
    let head: (count: Int, chain: [UInt8])
    /// Lines up to `checked` are checked, and `running` is the chain value after them.
    private(set) var checked: Int
    private(set) var running: [UInt8]
    private(set) var lines: [StoredAuditLine] = []

    init(keys: StoreKeys, head: (count: Int, chain: [UInt8]), checked: Int, running: [UInt8]) {
        (self.keys, self.head, self.checked, self.running) = (keys, head, checked, running)
    }

    /// Takes the next lines read, which must follow on with no gap and stop at the head.
    mutating func take(_ page: [StoredAuditLine]) throws {
        for stored in page {
            let expected = checked + lines.count + 1
            guard stored.sequence == expected, expected <= head.count else {
                throw CredentialError(
                    .auditTampered,
                    expected > head.count
                        ? "the audit log holds line \(stored.sequence) past its authenticated head "
                            + "(\(head.count) lines)"
                        : "audit line \(expected) is missing: lines were removed")
            }
            lines.append(stored)
        }
    }

    /// Checks every line, once the last has been taken: ``checkTaken()``, and that they end at
    /// the head.
    mutating func check() throws {
        try checkTaken()
        guard checked == head.count, ConstantTime.equals(running, head.chain) else {
            throw CredentialError(
                .auditTampered,
                """
                the audit log since its checkpoint does not end at the authenticated head (\(head.count) lines): \
                lines were removed or edited
                """
            )
        }
    }

    /// Checks the lines taken so far: each opens at its sequence with its columns bound and
    /// links to the one before.
    mutating func checkTaken() throws {
        for stored in lines {
            let previous = Array(Hex.encode(running).utf8)
            let line = try SealedRows.openAuditLine(stored.line, sequence: stored.sequence, keys: keys)
            // A line that opened was written under this store's key, in this format: its
            // fields are compared where the writer put them. Anything else gets the full
            // parse, which names what is wrong.
            if !AuditEntry.carries(
                line[...], sequence: stored.sequence, subject: Array(Hex.encode(stored.subject).utf8),
                linked: stored.linked.map { Array(Hex.encode($0).utf8) }, previous: previous)
            {
                let (_, written, _) = try StateEngine.openAudit(stored, keys: keys)
                guard ConstantTime.equals(Array(written.utf8), previous) else {
                    throw CredentialError(
                        .auditTampered,
                        "audit line \(stored.sequence) does not link to the line before it: a line was edited")
                }
            }
            running = keys.audit.link(line[...])
        }
        checked += lines.count
        lines = []
    }
}
