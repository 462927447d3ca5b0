import ShadowCore
import ShadowCredentials
import ShadowVault
import ShadowStorage

/// TestVectors/shadow/state-db/vectors.json (made by an independent implementation of
/// Docs/credential-state.md, "Database stores"): the sealed store secrets open and re-seal byte
/// for byte, and a flipped byte is refused; row ids, record encodings and sealed bodies match;
/// every invalid record is refused; tokens and audit lines seal and open only under their own
/// row id, kind and sequence; audit heads encode and a flipped byte is refused.
package enum StateDBSuites {
    package static func vectors(_ bytes: [UInt8]) -> [VectorCase] {
        guard let root = try? StrictJSON.parse(bytes).objectValue, let secret = try? hex(root["secret"]) else {
            return [VectorCase(id: "file", passed: false, detail: "not a state-db vector file")]
        }
        let keys = StoreKeys(secret: secret)
        var cases = [
            VectorCase(
                id: "keys", passed: (try? hex(root["keys"]?.objectValue?["start"])) == keys.audit.start,
                detail: "the audit chain's c0")
        ]
        for (index, row) in objects(root["sealed_secrets"]).enumerated() {
            cases.append(check("sealed secret \(index + 1)") { try sealedSecret(row, secret: secret) })
        }
        for (index, row) in objects(root["records"]).enumerated() {
            cases.append(check("record \(index + 1)") { try record(row, keys: keys) })
        }
        for (index, row) in objects(root["invalid_records"]).enumerated() {
            cases.append(
                check("invalid record \(index + 1)") {
                    do {
                        _ = try SealedRows.decode(
                            try SealedRows.openRecord(try hex(row["body"]), rowID: try hex(row["row_id"]), keys: keys))
                        return false
                    } catch let error as CredentialError { return error.code == .corruptedState }
                })
        }
        for (index, row) in objects(root["tokens"]).enumerated() {
            cases.append(check("token \(index + 1)") { try token(row, keys: keys) })
        }
        let audit = root["audit"]?.objectValue ?? [:]
        for (index, row) in objects(audit["lines"]).enumerated() {
            cases.append(
                check("audit line \(index + 1)") {
                    let line = Array((row["line"]?.stringValue ?? "").utf8),
                        sequence = Int(row["seq"]?.numberValue?.int64Value ?? -1), sealed = try hex(row["sealed"])
                    let moved = (try? SealedRows.openAuditLine(sealed, sequence: sequence + 1, keys: keys)) == nil
                    return try SealedRows.sealAuditLine(
                        line, sequence: sequence, keys: keys, nonce: try hex(row["nonce"])) == sealed
                        && (try SealedRows.openAuditLine(sealed, sequence: sequence, keys: keys)) == line && moved
                        && AuditEntry.parse(line[...]) != nil
                })
        }
        for (index, row) in objects(audit["heads"]).enumerated() {
            cases.append(
                check("audit head \(index + 1)") {
                    let count = Int(row["count"]?.numberValue?.int64Value ?? -1), chain = try hex(row["chain"]),
                        stored = try hex(row["stored"])
                    let decoded = try keys.decodeHead(stored)
                    var bad = stored
                    bad[3] ^= 0x01
                    return keys.encodeHead(count: count, chain: chain) == stored && decoded.count == count
                        && decoded.chain == chain && (try? keys.decodeHead(bad)) == nil
                })
        }
        for (index, row) in objects(audit["checkpoints"]).enumerated() {
            cases.append(
                check("audit checkpoint \(index + 1)") {
                    let count = Int(row["count"]?.numberValue?.int64Value ?? -1), chain = try hex(row["chain"]),
                        stored = try hex(row["stored"])
                    let decoded = try keys.decodeCheckpoint(stored)
                    // Not interchangeable with a head: each is authenticated under its own label.
                    return keys.encodeCheckpoint(count: count, chain: chain) == stored && decoded.count == count
                        && decoded.chain == chain && (try? keys.decodeHead(stored)) == nil
                })
        }
        return cases
    }

    private static func sealedSecret(_ row: JSONObject, secret: [UInt8]) throws -> Bool {
        let stored = try hex(row["stored"]), header = try hex(row["header"])
        let unlock: VaultUnlock =
            row["unlock"]?.stringValue == "key"
            ? .key(SecretBytes(try hex(row["key"])))
            : .passphrase(SecretBytes(utf8: row["passphrase"]?.stringValue ?? ""))
        let made = try SealedStoreSecret.create(
            unlock: unlock, secret: secret, iterations: Int(row["iterations"]?.numberValue?.int64Value ?? 100_000),
            salt: header.count > 2 ? Array(header[6...]) : nil, nonce: try hex(row["nonce"]))
        var bad = stored
        bad[bad.count / 2] ^= 0x01
        return try SealedStoreSecret.open(stored, unlock: unlock) == secret && made.stored == stored
            && (try? SealedStoreSecret.open(bad, unlock: unlock)) == nil
    }

    private static func record(_ row: JSONObject, keys: StoreKeys) throws -> Bool {
        let client = row["client_id"]?.stringValue ?? "", subject = row["subject"]?.stringValue ?? ""
        let id = try hex(row["row_id"]), plaintext = try hex(row["plaintext"]), body = try hex(row["body"])
        let decoded = try SealedRows.decode(plaintext)
        return try keys.rowID(clientID: client, subject: subject) == id && decoded.clientID == client
            && decoded.subject == subject
            && Int64(decoded.record.status.state.rawValue) == row["state"]?.numberValue?.int64Value
            && SealedRows.encode(clientID: client, subject: subject, record: decoded.record) == plaintext
            && (try SealedRows.sealRecord(plaintext, rowID: id, keys: keys, nonce: try hex(row["nonce"]))) == body
            && (try SealedRows.openRecord(body, rowID: id, keys: keys)) == plaintext
    }

    private static func token(_ row: JSONObject, keys: StoreKeys) throws -> Bool {
        let token = try ServerToken(
            clientID: row["client_id"]?.stringValue ?? "", subject: row["subject"]?.stringValue ?? "",
            kind: try ServerToken.Kind(row["kind"]?.stringValue ?? ""),
            value: SecretBytes(utf8: row["value"]?.stringValue ?? ""),
            expiresAtMilliseconds: row["expires_at_ms"]?.numberValue?.int64Value,
            storedAtMilliseconds: row["stored_at_ms"]?.numberValue?.int64Value ?? -1)
        let id = try hex(row["row_id"]), plaintext = try hex(row["plaintext"]), body = try hex(row["body"])
        let opened = try SealedRows.decodeToken(
            try SealedRows.openToken(body, rowID: id, kind: token.kind.rawValue, keys: keys))
        return try SealedRows.encode(token) == plaintext
            && (try SealedRows.sealToken(
                plaintext, rowID: id, kind: token.kind, keys: keys, nonce: try hex(row["nonce"]))) == body
            && opened.text == token.text && opened.expiresAtMilliseconds == token.expiresAtMilliseconds
            && (try? SealedRows.openToken(body, rowID: id, kind: "other", keys: keys)) == nil
    }

    private static func check(_ id: String, _ body: () throws -> Bool) -> VectorCase {
        do { return VectorCase(id: id, passed: try body(), detail: id) } catch {
            return VectorCase(id: id, passed: false, detail: "\(id): \(error)")
        }
    }

    private static func objects(_ value: JSONValue?) -> [JSONObject] {
        value?.arrayValue?.compactMap(\.objectValue) ?? []
    }

    private static func hex(_ value: JSONValue?) throws -> [UInt8] { try Hex.decode(value?.stringValue ?? "") }
}
