import Foundation
import ShadowCore
import ShadowCredentials
import ShadowCrypto
import ShadowVault
import ShadowPostgres
import ShadowHTTP
import ShadowStorage

enum VaultTargets {
    /// The vectors' key (TestVectors/shadow/vault).
    static let unlock = VaultUnlock.key(SecretBytes((0..<32).map { UInt8($0) }))

    /// Even mode: a vault file opened with a fixed key (a passphrase vault is refused by kind,
    /// before any key derivation). Odd mode: a decrypted body, which must re-encode to itself,
    /// also with every entry built and encoded again (so the entry model holds every field the
    /// format can: two label keys that differ only in their bytes stay two).
    static let vault: FuzzTargets.Harness = { data in
        let input = Input(data)
        if input.mode & 1 == 0 {
            _ = try? TokenVault.headerInfo(bytes: input.rest)
            _ = try? TokenVault.open(input.rest, unlock: unlock)
            return
        }
        guard let contents = try? VaultContents.decode(input.rest) else { return }
        precondition(contents.encode() == input.rest, "a vault body does not re-encode to itself")
        var rebuilt = contents
        for entry in contents.entries { rebuilt.insert(entry) }
        precondition(rebuilt.encode() == input.rest, "a vault entry does not encode to the bytes it was read from")
        for entry in contents.entries { precondition(contents.entry(named: entry.name) != nil) }
        for name in contents.sectionNames { _ = try? contents.section(name) }
    }
}

enum CredentialTargets {
    /// The audit vectors' secret (TestVectors/shadow/audit).
    static let keys: AuditKeys = {
        guard let secret = try? Hex.decode("579c319830c101fc6c3cd62f687e2718e97d4938402427f81d23e2e60dce450c") else {
            preconditionFailure("fixed secret")
        }
        return AuditKeys(secret: secret)
    }()

    /// An audit log: each line that parses re-encodes to itself, and the write's field check
    /// (`AuditEntry.carries`) finds in it the fields the parse found and no other subject; the log
    /// is verified as wholly uncommitted (mode 0) and as committed up to its last full line (mode 1).
    static let auditLog: FuzzTargets.Harness = { data in
        let input = Input(data)
        var chain = keys.start
        var committed = 0
        var count = 0
        var offset = 0
        for line in input.rest.split(separator: 0x0A, omittingEmptySubsequences: false).dropLast() {
            let any = Array(repeating: UInt8(ascii: "a"), count: 64)
            _ = AuditEntry.carries(line, sequence: count + 1, subject: any, linked: nil, previous: any)
            if let (entry, previous) = AuditEntry.parse(line) {
                let prev = try? Hex.decode(previous)
                precondition(
                    prev.map { entry.line(previous: $0).elementsEqual(line) } ?? false,
                    "an audit line does not re-encode to itself")
                let subject = Array(entry.subjectHash.utf8)
                func carries(_ subject: [UInt8]) -> Bool {
                    AuditEntry.carries(
                        line, sequence: entry.sequence, subject: subject,
                        linked: entry.linkedSubjectHash.map { Array($0.utf8) }, previous: Array(previous.utf8))
                }
                precondition(carries(subject), "a canonical line does not carry its own fields")
                precondition(!carries(subject.map { $0 == 0x30 ? 0x31 : 0x30 }), "a line carries another subject")
            }
            offset += line.count + 1
            chain = keys.link(line)
            committed = offset
            count += 1
        }
        let head =
            input.mode & 1 == 0
            ? AuditHead(count: 0, bytes: 0, chain: keys.start) : AuditHead(count: count, bytes: committed, chain: chain)
        if let (report, entries) = try? AuditLog.verify(input.rest, keys: keys, head: head) {
            precondition(report.entries == entries.count && entries.count <= count)
            for (index, entry) in entries.enumerated() { precondition(entry.sequence == index + 1) }
        }
    }
}

enum StateDBTargets {
    static let key = VaultUnlock.key(SecretBytes((0..<32).map { UInt8($0) }))
    static let keys = StoreKeys(secret: (0..<32).map { UInt8($0 &* 7) })

    /// The database stores' rows and the event lines of `state apply-events`. Mode 0: a record's
    /// plaintext, which must re-encode to itself; 1: a token's, likewise; 2: a sealed secret opened
    /// with a fixed key; 3: an audit head; 4: event lines, each written back and read to the same
    /// event.
    static let stateDB: FuzzTargets.Harness = { data in
        let input = Input(data)
        switch input.mode % 5 {
        case 0:
            guard let decoded = try? SealedRows.decode(input.rest) else { return }
            precondition(
                SealedRows.encode(clientID: decoded.clientID, subject: decoded.subject, record: decoded.record)
                    == input.rest,
                "a record does not re-encode to itself")
            _ = decoded.record.status
        case 1:
            guard let token = try? SealedRows.decodeToken(input.rest) else { return }
            precondition(SealedRows.encode(token) == input.rest, "a token row does not re-encode to itself")
        case 2:
            _ = try? SealedStoreSecret.open(input.rest, unlock: key)
        case 3:
            if let head = try? keys.decodeHead(input.rest) {
                precondition(
                    keys.encodeHead(count: head.count, chain: head.chain) == input.rest,
                    "an audit head does not re-encode to itself")
            }
        default:
            guard let events = try? CredentialEvent.parseLines(input.rest) else { return }
            for event in events {
                let again = try? CredentialEvent.parseLines(Array(event.line.utf8))
                precondition(again == [event], "an event line does not read back to its event")
            }
        }
    }
}

enum StoreURLTargets {
    /// A PostgreSQL URL read as libpq reads it (with an empty environment): whatever parses has a
    /// description that does not depend on its password (the same location with another password
    /// describes itself identically), and names a port in range.
    static let postgresURL: FuzzTargets.Harness = { data in
        guard let text = String(validating: data, as: UTF8.self),
            let location = try? PostgresLocation(url: text, environment: [:])
        else { return }
        var other = location
        other.password = location.password == nil ? "x" : nil
        precondition(other.description == location.description, "a description depends on the password")
        precondition((1...65535).contains(location.port))
    }
}
