import Crypto
import ShadowCore
import ShadowCredentials

/// TestVectors/shadow/audit/vectors.json (made by an independent implementation of the audit
/// log section of Docs/credential-state.md): the derived keys and subject hashes match, every
/// valid log verifies with the stated report and its lines re-write byte for byte, and every
/// tampered log is refused.
package enum AuditSuites {
    package static func vectors(_ bytes: [UInt8]) -> [VectorCase] {
        guard let root = try? StrictJSON.parse(bytes).objectValue,
            let secret = try? Hex.decode(root["secret_hex"]?.stringValue ?? "")
        else {
            return [VectorCase(id: "file", passed: false, detail: "not an audit vector file")]
        }
        let keys = AuditKeys(secret: secret)
        func hex(_ key: SymmetricKey) -> String { key.withUnsafeBytes { Hex.encode($0) } }
        var cases = [
            VectorCase(
                id: "keys",
                passed: hex(keys.chain) == root["chain_key_hex"]?.stringValue
                    && hex(keys.subject) == root["subject_key_hex"]?.stringValue
                    && Hex.encode(keys.start) == root["start_hex"]?.stringValue,
                detail: "chain key, subject key and c0 as derived with HKDF-SHA-256")
        ]
        for (index, value) in (root["subject_hashes"]?.arrayValue ?? []).enumerated() {
            let object = value.objectValue ?? [:]
            let actual = keys.subjectHash(
                clientID: object["client_id"]?.stringValue ?? "", subject: object["subject"]?.stringValue ?? "")
            cases.append(
                VectorCase(
                    id: "subject hash \(index + 1)", passed: actual == object["hash"]?.stringValue,
                    detail: "subject hash \(index + 1): got \(actual)"))
        }
        for value in root["valid"]?.arrayValue ?? [] { cases.append(valid(value.objectValue ?? [:], keys: keys)) }
        for value in root["tampered"]?.arrayValue ?? [] { cases.append(tampered(value.objectValue ?? [:], keys: keys)) }
        return cases
    }

    private static func head(_ object: JSONObject?) throws -> AuditHead {
        guard let object, let count = object["count"]?.numberValue?.int64Value,
            let bytes = object["bytes"]?.numberValue?.int64Value,
            let chain = try? Hex.decode(object["head"]?.stringValue ?? "")
        else { throw VectorFormatError("malformed head") }
        return AuditHead(count: Int(count), bytes: Int(bytes), chain: chain)
    }

    private static func valid(_ vector: JSONObject, keys: AuditKeys) -> VectorCase {
        let name = vector["name"]?.stringValue ?? "?"
        do {
            let log = Array((vector["log"]?.stringValue ?? "").utf8)
            let (report, _) = try AuditLog.verify(log, keys: keys, head: try head(vector["head"]?.objectValue))
            let expected = AuditReport(
                entries: Int(vector["entries"]?.numberValue?.int64Value ?? -1),
                uncommitted: Int(vector["uncommitted"]?.numberValue?.int64Value ?? -1),
                partialTail: vector["partial_tail"]?.boolValue ?? false)
            // Every complete line, parsed and written again after the chain value before it, is the same bytes.
            var chain = keys.start
            var rewrites = true
            for line in log.split(separator: 0x0A, omittingEmptySubsequences: false).dropLast() {
                guard let (entry, _) = AuditEntry.parse(line), entry.line(previous: chain)[...] == line else {
                    rewrites = false
                    break
                }
                chain = keys.link(line)
            }
            return VectorCase(
                id: name, passed: report == expected && rewrites,
                detail: "\(name): report \(report), lines re-write byte for byte \(rewrites)")
        } catch {
            return VectorCase(id: name, passed: false, detail: "\(name): \(error)")
        }
    }

    private static func tampered(_ vector: JSONObject, keys: AuditKeys) -> VectorCase {
        let name = vector["name"]?.stringValue ?? "?"
        do {
            let log = try Hex.decode(vector["log_hex"]?.stringValue ?? "")
            let (report, _) = try AuditLog.verify(log, keys: keys, head: try head(vector["head"]?.objectValue))
            return VectorCase(id: name, passed: false, detail: "\(name): accepted (\(report))")
        } catch let error as CredentialError where error.code == .auditTampered {
            return VectorCase(id: name, passed: true, detail: "\(name): refused: \(error.reason)")
        } catch {
            return VectorCase(id: name, passed: false, detail: "\(name): failed with \(error), not audit_log_tampered")
        }
    }
}
