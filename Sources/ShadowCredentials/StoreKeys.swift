#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
package import Crypto
import ShadowCore
import ShadowCrypto
import ShadowStorage

/// The keys of a database store (Docs/credential-state.md, "Database stores"), all derived from
/// the store's 32-byte secret: the audit log's chain and subject keys (the subject key also makes
/// the row ids), and the key that seals rows.
package struct StoreKeys: Sendable {
    package let audit: AuditKeys
    package let seal: SymmetricKey

    package init(secret: [UInt8]) {
        audit = AuditKeys(secret: secret)
        seal = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: secret), info: Array("shadow-keys state v1 seal".utf8),
            outputByteCount: 32)
    }

    /// A user's row id: HMAC-SHA-256(subject key, client ID ‖ 0x00 ‖ subject), the same value the
    /// audit log prints (in hex) as the subject hash.
    package func rowID(clientID: String, subject: String) -> [UInt8] {
        audit.subjectDigest(clientID: clientID, subject: subject)
    }

    /// The audit head as stored: count (8 bytes, big-endian) ‖ chain value (32) ‖ HMAC-SHA-256
    /// under the chain key of "shadow-keys audit v1 head" ‖ count ‖ chain value.
    package func encodeHead(count: Int, chain: [UInt8]) -> [UInt8] {
        encode(count: count, chain: chain, label: Self.headLabel)
    }

    /// The `audit_checkpoint` meta row: as the head, under its own label.
    package func encodeCheckpoint(count: Int, chain: [UInt8]) -> [UInt8] {
        encode(count: count, chain: chain, label: Self.checkpointLabel)
    }

    /// The stored checkpoint, checked; nil (none yet) reads as the log's start.
    package func decodeCheckpoint(_ bytes: [UInt8]?) throws -> (count: Int, chain: [UInt8]) {
        try decode(bytes, label: Self.checkpointLabel, what: "audit checkpoint")
    }

    static let headLabel = Array("shadow-keys audit v1 head".utf8)
    static let checkpointLabel = Array("shadow-keys audit v1 checkpoint".utf8)

    /// count (8, big-endian) ‖ chain value (32) ‖ HMAC-SHA-256(chain key, label ‖ count ‖ chain value).
    private func encode(count: Int, chain: [UInt8], label: [UInt8]) -> [UInt8] {
        let body = BigEndian.bytes(UInt64(count)) + chain
        return body + audit.chainCode(label, body)
    }

    /// The stored head, checked; nil (no head yet) reads as the empty log.
    package func decodeHead(_ bytes: [UInt8]?) throws -> (count: Int, chain: [UInt8]) {
        try decode(bytes, label: Self.headLabel, what: "audit head")
    }

    private func decode(_ bytes: [UInt8]?, label: [UInt8], what: String) throws -> (count: Int, chain: [UInt8]) {
        guard let bytes else { return (0, audit.start) }
        guard bytes.count == 72 else {
            throw CredentialError(.corruptedState, "the store's \(what) is \(bytes.count) bytes, not 72")
        }
        let body = Array(bytes[..<40])
        guard ConstantTime.equals(audit.chainCode(label, body), Array(bytes[40...])) else {
            throw CredentialError(.auditTampered, "the store's \(what) does not authenticate: it was edited")
        }
        let count = BigEndian.uint64(bytes[0..<8])
        guard count <= UInt64(Int.max) else {
            throw CredentialError(.corruptedState, "the store's \(what) holds an impossible count")
        }
        return (Int(count), Array(bytes[8..<40]))
    }
}
