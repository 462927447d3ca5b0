import ShadowCore
import ShadowCrypto
import ShadowStorage

/// The plaintext of a credential row and of a token row, and their sealing
/// (Docs/credential-state.md, "Rows"). Strings are a length byte (or four, for a token) and UTF-8;
/// integers are big-endian.
package enum SealedRows {
    static let recordLabel = Array("shadow-keys state v1 record".utf8)
    static let tokenLabel = Array("shadow-keys token v1".utf8)

    /// Kind codes, fixed by the format.
    /// Each kind's code in a sealed record (Docs/credential-state.md).
    static func code(_ kind: CredentialEvent.Kind) -> UInt8 {
        switch kind {
        case .signIn: 1
        case .refreshSucceeded: 2
        case .refreshRejected: 3
        case .consentRevoked: 4
        case .accountDeleted: 5
        case .transferred: 6
        case .emailEnabled: 7
        case .emailDisabled: 8
        }
    }
    static let kinds: [UInt8: CredentialEvent.Kind] = Dictionary(
        uniqueKeysWithValues: CredentialEvent.Kind.allCases.map { (code($0), $0) })

    // MARK: Credential rows

    /// The record's plaintext: 0x01 ‖ client ID ‖ subject ‖ four marks (authorization, revocation,
    /// transfer, email), each 0x00 for none or 0x01 ‖ time (8) ‖ kind code ‖ id ‖ linked subject
    /// (an empty string for none).
    package static func encode(clientID: String, subject: String, record: CredentialRecord) -> [UInt8] {
        var out: [UInt8] = [0x01]
        out.reserveCapacity(160)
        appendShort(clientID, to: &out)
        appendShort(subject, to: &out)
        for mark in [record.authorization, record.revocation, record.transfer, record.email] {
            guard let mark else {
                out.append(0)
                continue
            }
            out.append(1)
            out += BigEndian.bytes(UInt64(bitPattern: mark.timeMilliseconds))
            out.append(code(mark.kind))
            appendShort(mark.id, to: &out)
            appendShort(mark.linkedSubject ?? "", to: &out)
        }
        return out
    }

    /// Reads what ``encode(clientID:subject:record:)`` writes, refusing anything else.
    package static func decode(_ bytes: [UInt8]) throws -> (clientID: String, subject: String, record: CredentialRecord)
    {
        var reader = Reader(bytes: bytes[...])
        guard try reader.byte() == 0x01 else { throw Reader.corrupted("a credential row is not version 1") }
        let clientID = try reader.short(), subject = try reader.short()
        guard !clientID.isEmpty, !subject.isEmpty else {
            throw Reader.corrupted("a credential row lacks its client ID or subject")
        }
        var record = CredentialRecord()
        let slots: [CredentialEvent.Kind.Effect] = [.authorize, .revoke, .transfer, .metadata]
        var marks: [CredentialRecord.Mark?] = []
        for effect in slots {
            switch try reader.byte() {
            case 0: marks.append(nil)
            case 1:
                let time = Int64(bitPattern: try reader.uint64())
                guard let kind = kinds[try reader.byte()], kind.effect == effect else {
                    throw Reader.corrupted("a credential row holds an event of the wrong kind")
                }
                let id = try reader.short(), linked = try reader.short()
                guard CredentialEvent.timeRange.contains(time), !id.isEmpty, linked.isEmpty == (kind != .transferred)
                else {
                    throw Reader.corrupted("a credential row holds a malformed event")
                }
                marks.append(
                    CredentialRecord.Mark(
                        timeMilliseconds: time, id: id, kind: kind, linkedSubject: linked.isEmpty ? nil : linked))
            default: throw Reader.corrupted("a credential row's event flag is neither 0 nor 1")
            }
        }
        guard reader.isAtEnd else { throw Reader.corrupted("a credential row has trailing bytes") }
        // The fold never keeps an authorization at or before the revocation: no writer stores one.
        if let authorization = marks[0], let revocation = marks[1],
            authorization.timeMilliseconds <= revocation.timeMilliseconds
        {
            throw Reader.corrupted("a credential row holds an authorization at or before its revocation")
        }
        record.authorization = marks[0]
        record.revocation = marks[1]
        record.transfer = marks[2]
        record.email = marks[3]
        return (clientID, subject, record)
    }

    package static func sealRecord(
        _ plaintext: [UInt8], rowID: [UInt8], keys: StoreKeys, nonce: [UInt8]? = nil
    ) throws -> [UInt8] {
        try seal(plaintext, aad: recordLabel + rowID, keys: keys, nonce: nonce)
    }

    package static func openRecord(_ sealed: [UInt8], rowID: [UInt8], keys: StoreKeys) throws -> [UInt8] {
        try open(sealed, aad: recordLabel + rowID, keys: keys, what: "a credential row")
    }

    // MARK: Token rows

    /// A token row's plaintext: 0x01 ‖ client ID ‖ subject ‖ kind ‖ stored-at time (8) ‖ 0x00, or
    /// 0x01 ‖ expiry time (8) ‖ token (4-byte length ‖ bytes).
    package static func encode(_ token: ServerToken) -> [UInt8] {
        var out: [UInt8] = [0x01]
        appendShort(token.clientID, to: &out)
        appendShort(token.subject, to: &out)
        appendShort(token.kind.rawValue, to: &out)
        out += BigEndian.bytes(UInt64(bitPattern: token.storedAtMilliseconds))
        if let expiry = token.expiresAtMilliseconds {
            out.append(1)
            out += BigEndian.bytes(UInt64(bitPattern: expiry))
        } else {
            out.append(0)
        }
        token.value.withUnsafeBytes { value in
            out += BigEndian.bytes(UInt32(value.count))
            out += value
        }
        return out
    }

    package static func decodeToken(_ bytes: [UInt8]) throws -> ServerToken {
        var reader = Reader(bytes: bytes[...])
        guard try reader.byte() == 0x01 else { throw Reader.corrupted("a token row is not version 1") }
        let clientID = try reader.short(), subject = try reader.short(), kindName = try reader.short()
        let storedAt = Int64(bitPattern: try reader.uint64())
        var expiry: Int64?
        switch try reader.byte() {
        case 0: break
        case 1: expiry = Int64(bitPattern: try reader.uint64())
        default: throw Reader.corrupted("a token row's expiry flag is neither 0 nor 1")
        }
        let count = Int(try reader.uint32())
        guard count <= ServerToken.maxValueBytes, reader.remaining == count else {
            throw Reader.corrupted("a token row's length does not match")
        }
        let value = SecretBytes(reader.rest())
        do {
            return try ServerToken(
                clientID: clientID, subject: subject, kind: ServerToken.Kind(kindName), value: value,
                expiresAtMilliseconds: expiry, storedAtMilliseconds: storedAt)
        } catch let error as CredentialError {
            throw Reader.corrupted("a token row holds a malformed token: \(error.reason)")
        }
    }

    package static func sealToken(
        _ plaintext: [UInt8], rowID: [UInt8], kind: ServerToken.Kind, keys: StoreKeys, nonce: [UInt8]? = nil
    ) throws -> [UInt8] {
        try seal(plaintext, aad: tokenLabel + rowID + [0] + Array(kind.rawValue.utf8), keys: keys, nonce: nonce)
    }

    package static func openToken(_ sealed: [UInt8], rowID: [UInt8], kind: String, keys: StoreKeys) throws -> [UInt8] {
        try open(sealed, aad: tokenLabel + rowID + [0] + Array(kind.utf8), keys: keys, what: "a token row")
    }

    // MARK: Audit lines

    static let auditLabel = Array("shadow-keys audit v1 line".utf8)

    /// An audit line as a database stores it: sealed, with its sequence number (8 bytes,
    /// big-endian) as associated data, so the database shows neither client IDs nor event ids.
    package static func sealAuditLine(
        _ line: [UInt8], sequence: Int, keys: StoreKeys, nonce: [UInt8]? = nil
    ) throws -> [UInt8] {
        try seal(line, aad: auditLabel + BigEndian.bytes(UInt64(sequence)), keys: keys, nonce: nonce)
    }

    /// The line, or ``CredentialError/Code/auditTampered`` when it does not open at `sequence`.
    package static func openAuditLine(_ sealed: [UInt8], sequence: Int, keys: StoreKeys) throws -> [UInt8] {
        do {
            return try open(
                sealed, aad: auditLabel + BigEndian.bytes(UInt64(sequence)), keys: keys, what: "audit line \(sequence)")
        } catch {
            throw CredentialError(
                .auditTampered, "audit line \(sequence) does not authenticate: it was edited or moved")
        }
    }

    // MARK: Shared

    /// nonce (12) ‖ AES-256-GCM ciphertext ‖ tag (16). The nonce is random; one is given only to
    /// reproduce vectors.
    static func seal(_ plaintext: [UInt8], aad: [UInt8], keys: StoreKeys, nonce given: [UInt8]? = nil) throws -> [UInt8]
    {
        let nonce = given ?? AES256GCM.randomNonce()
        return nonce + (try AES256GCM.seal(plaintext, key: keys.seal, nonce: nonce, aad: aad))
    }

    static func open(_ sealed: [UInt8], aad: [UInt8], keys: StoreKeys, what: String) throws -> [UInt8] {
        guard sealed.count >= AES256GCM.nonceBytes + AES256GCM.tagBytes else {
            throw Reader.corrupted("\(what) is too short to be sealed")
        }
        do {
            return try AES256GCM.open(
                sealed[AES256GCM.nonceBytes...], key: keys.seal, nonce: sealed[..<AES256GCM.nonceBytes], aad: aad)
        } catch {
            throw CredentialError(
                .corruptedState,
                "\(what) does not authenticate: it was edited, moved to another user, or written under another key")
        }
    }

    static func appendShort(_ text: String, to out: inout [UInt8]) {
        let bytes = Array(text.utf8)
        precondition(bytes.count <= 255, "strings in rows are at most 255 bytes (checked where they enter)")
        out.append(UInt8(bytes.count))
        out += bytes
    }

    struct Reader {
        var bytes: ArraySlice<UInt8>

        static func corrupted(_ reason: String) -> CredentialError { CredentialError(.corruptedState, reason) }

        var isAtEnd: Bool { bytes.isEmpty }
        var remaining: Int { bytes.count }

        mutating func take(_ count: Int) throws -> ArraySlice<UInt8> {
            guard bytes.count >= count else { throw Self.corrupted("a row ends early") }
            defer { bytes = bytes.dropFirst(count) }
            return bytes.prefix(count)
        }

        mutating func byte() throws -> UInt8 { try take(1).reduce(0) { _, byte in byte } }
        mutating func uint64() throws -> UInt64 { BigEndian.uint64(try take(8)) }
        mutating func uint32() throws -> UInt32 { BigEndian.uint32(try take(4)) }

        mutating func short() throws -> String {
            let bytes = try take(Int(try byte()))
            guard let text = String(validating: bytes, as: UTF8.self) else {
                throw Self.corrupted("a row holds a string that is not UTF-8")
            }
            return text
        }

        mutating func rest() -> [UInt8] {
            defer { bytes = [] }
            return Array(bytes)
        }
    }
}
