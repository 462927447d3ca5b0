import Foundation
import ShadowCredentials
import ShadowCore
import ShadowTestSupport
import ShadowVault
import Testing

/// TestVectors/shadow/state-db/vectors.json, made by an independent implementation of
/// Docs/credential-state.md, "Database stores".
@Suite struct StateDBVectorTests {
    let document: [String: Any]

    init() throws {
        document = try #require(try JSONSerialization.jsonObject(with: Data(try PackagePaths.vector("shadow/state-db/vectors.json"))) as? [String: Any])
    }

    func hex(_ value: Any?) throws -> [UInt8] { try Hex.decode(try #require(value as? String)) }
    var secret: [UInt8] { get throws { try hex(document["secret"]) } }
    var keys: StoreKeys { get throws { StoreKeys(secret: try secret) } }

    @Test func keysAndSealedSecrets() throws {
        let expected = try #require(document["keys"] as? [String: Any])
        let keys = try keys
        #expect(keys.audit.start == (try hex(expected["start"])))
        for row in try #require(document["sealed_secrets"] as? [[String: Any]]) {
            let stored = try hex(row["stored"])
            let unlock: VaultUnlock = row["unlock"] as? String == "key" ? .key(SecretBytes(try hex(row["key"]))) : .passphrase(SecretBytes(utf8: try #require(row["passphrase"] as? String)))
            #expect(try SealedStoreSecret.open(stored, unlock: unlock) == (try secret))
            let header = try hex(row["header"])
            let made = try SealedStoreSecret.create(unlock: unlock, secret: try secret, iterations: row["iterations"] as? Int ?? 100_000,
                                                    salt: header.count > 2 ? Array(header[6...]) : nil, nonce: try hex(row["nonce"]))
            #expect(made.stored == stored, "\(row["unlock"] ?? "")")
            // One flipped byte anywhere: wrong key or corrupted, never the secret.
            for index in [1, stored.count / 2, stored.count - 1] {
                var bad = stored
                bad[index] ^= 0x01
                #expect(throws: CredentialError.self) { _ = try SealedStoreSecret.open(bad, unlock: unlock) }
            }
        }
    }

    @Test func recordsEncodeSealAndOpen() throws {
        let keys = try keys
        for row in try #require(document["records"] as? [[String: Any]]) {
            let client = try #require(row["client_id"] as? String), subject = try #require(row["subject"] as? String)
            let id = try hex(row["row_id"])
            #expect(keys.rowID(clientID: client, subject: subject) == id)
            let plaintext = try hex(row["plaintext"])
            let decoded = try SealedRows.decode(plaintext)
            #expect(decoded.clientID == client && decoded.subject == subject)
            #expect(decoded.record.status.state.rawValue == row["state"] as? Int)
            #expect(SealedRows.encode(clientID: client, subject: subject, record: decoded.record) == plaintext)
            #expect(try SealedRows.sealRecord(plaintext, rowID: id, keys: keys, nonce: try hex(row["nonce"])) == (try hex(row["body"])))
            #expect(try SealedRows.openRecord(try hex(row["body"]), rowID: id, keys: keys) == plaintext)
        }
    }

    @Test func invalidRecordsAreRefused() throws {
        let keys = try keys
        let cases = try #require(document["invalid_records"] as? [[String: Any]])
        #expect(cases.count == 10)
        for row in cases {
            #expect(throws: CredentialError(.corruptedState, ""), "\(row["reason"] ?? "")") {
                _ = try SealedRows.decode(try SealedRows.openRecord(try hex(row["body"]), rowID: try hex(row["row_id"]), keys: keys))
            }
        }
    }

    @Test func tokensEncodeSealAndOpen() throws {
        let keys = try keys
        for row in try #require(document["tokens"] as? [[String: Any]]) {
            let token = try ServerToken(
                clientID: try #require(row["client_id"] as? String), subject: try #require(row["subject"] as? String),
                kind: try ServerToken.Kind(try #require(row["kind"] as? String)), value: SecretBytes(utf8: try #require(row["value"] as? String)),
                expiresAtMilliseconds: (row["expires_at_ms"] as? NSNumber)?.int64Value, storedAtMilliseconds: try #require(row["stored_at_ms"] as? NSNumber).int64Value)
            let plaintext = try hex(row["plaintext"])
            #expect(SealedRows.encode(token) == plaintext)
            let id = try hex(row["row_id"])
            #expect(try SealedRows.sealToken(plaintext, rowID: id, kind: token.kind, keys: keys, nonce: try hex(row["nonce"])) == (try hex(row["body"])))
            let opened = try SealedRows.decodeToken(try SealedRows.openToken(try hex(row["body"]), rowID: id, kind: token.kind.rawValue, keys: keys))
            #expect(opened.text == token.text && opened.expiresAtMilliseconds == token.expiresAtMilliseconds)
            // Moved to another kind: refused.
            #expect(throws: CredentialError.self) { _ = try SealedRows.openToken(try hex(row["body"]), rowID: id, kind: "other", keys: keys) }
        }
    }

    @Test func auditLinesAndHeads() throws {
        let keys = try keys
        let audit = try #require(document["audit"] as? [String: Any])
        for row in try #require(audit["lines"] as? [[String: Any]]) {
            let line = Array(try #require(row["line"] as? String).utf8), sequence = try #require(row["seq"] as? Int)
            #expect(try SealedRows.sealAuditLine(line, sequence: sequence, keys: keys, nonce: try hex(row["nonce"])) == (try hex(row["sealed"])))
            #expect(try SealedRows.openAuditLine(try hex(row["sealed"]), sequence: sequence, keys: keys) == line)
            #expect(throws: CredentialError(.auditTampered, "")) { _ = try SealedRows.openAuditLine(try hex(row["sealed"]), sequence: sequence + 1, keys: keys) }
            #expect(AuditEntry.parse(line[...]) != nil)
        }
        for row in try #require(audit["heads"] as? [[String: Any]]) {
            let count = try #require(row["count"] as? Int), chain = try hex(row["chain"]), stored = try hex(row["stored"])
            #expect(keys.encodeHead(count: count, chain: chain) == stored)
            let decoded = try keys.decodeHead(stored)
            #expect(decoded.count == count && decoded.chain == chain)
            var bad = stored
            bad[3] ^= 0x01
            #expect(throws: CredentialError(.auditTampered, "")) { _ = try keys.decodeHead(bad) }
        }
    }
}
