#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Crypto
import ShadowCore
import ShadowCrypto
package import ShadowVault

/// The store's secret, sealed under a key-encryption key made from the caller's key or passphrase.
///
/// Layout (the meta row `secret`): version 0x01 ‖ kind (0x01 key, 0x02 passphrase) ‖ for a
/// passphrase, iterations (4 bytes, big-endian) ‖ salt (16) ‖ then nonce (12) ‖ the secret
/// encrypted with AES-256-GCM (32) ‖ tag (16). The associated data is
/// "shadow-keys state v1 secret" followed by every byte before the nonce.
package enum SealedStoreSecret {
    /// What a sealed secret belongs to: its associated-data label and its key-encryption key's
    /// HKDF info, so a state store's sealed secret never opens as another format's.
    package struct Purpose: Sendable {
        let label: [UInt8]
        let kekInfo: [UInt8]

        /// The state stores: "shadow-keys state v1 secret", "shadow-keys state v1 kek".
        package static let state = Purpose(prefix: "shadow-keys state v1")
        /// The operation log: "shadow-keys oplog v1 secret", "shadow-keys oplog v1 kek".
        package static let operationLog = Purpose(prefix: "shadow-keys oplog v1")
        /// The session tables: "shadow-keys session v1 secret", "shadow-keys session v1 kek".
        package static let sessions = Purpose(prefix: "shadow-keys session v1")

        init(prefix: String) {
            label = Array("\(prefix) secret".utf8)
            kekInfo = Array("\(prefix) kek".utf8)
        }
    }

    static let maxIterations = 10_000_000

    /// Seals `secret` (default: a fresh one); returns it and its stored form.
    package static func create(
        unlock: VaultUnlock, secret given: [UInt8]? = nil, iterations: Int = PBKDF2.defaultIterations,
        salt: [UInt8]? = nil, nonce fixedNonce: [UInt8]? = nil, purpose: Purpose = .state
    ) throws -> (secret: [UInt8], stored: [UInt8]) {
        let secret = given ?? SecretBytes.random(count: 32).withUnsafeBytes { Array($0) }
        var header: [UInt8] = [0x01]
        switch unlock {
        case .key: header.append(0x01)
        case .passphrase:
            guard (PBKDF2.minimumIterations...maxIterations).contains(iterations) else {
                throw StorageError(
                    .invalidParameter, "passphrase iterations: \(PBKDF2.minimumIterations) to \(maxIterations)")
            }
            header.append(0x02)
            header += BigEndian.bytes(UInt32(iterations))
            header += salt ?? SecretBytes.random(count: 16).withUnsafeBytes { Array($0) }
        }
        let kek = try keyEncryptionKey(unlock: unlock, header: header, purpose: purpose)
        let nonce = fixedNonce ?? AES256GCM.randomNonce()
        let sealed = try AES256GCM.seal(secret, key: kek, nonce: nonce, aad: purpose.label + header)
        return (secret, header + nonce + sealed)
    }

    /// Opens a stored secret: ``StorageErrorCode/wrongKey`` when the key or passphrase is not
    /// the one it was sealed with.
    package static func open(_ stored: [UInt8], unlock: VaultUnlock, purpose: Purpose = .state) throws -> [UInt8] {
        func corrupted(_ reason: String) -> StorageError {
            StorageError(.corrupted, "the store's sealed secret: \(reason)")
        }
        guard stored.count >= 2, stored[0] == 0x01 else { throw corrupted("not version 1") }
        let headerBytes: Int
        switch stored[1] {
        case 0x01: headerBytes = 2
        case 0x02: headerBytes = 22
        default: throw corrupted("unknown key kind \(stored[1])")
        }
        guard stored.count == headerBytes + AES256GCM.nonceBytes + 32 + AES256GCM.tagBytes else {
            throw corrupted("\(stored.count) bytes")
        }
        let header = Array(stored[..<headerBytes])
        switch (stored[1], unlock) {
        case (0x01, .passphrase): throw StorageError(.wrongKey, "the store was created with a key, not a passphrase")
        case (0x02, .key): throw StorageError(.wrongKey, "the store was created with a passphrase, not a key")
        default: break
        }
        let kek = try keyEncryptionKey(unlock: unlock, header: header, purpose: purpose)
        let nonce = stored[headerBytes..<(headerBytes + AES256GCM.nonceBytes)]
        do {
            return try AES256GCM.open(
                stored[(headerBytes + AES256GCM.nonceBytes)...], key: kek, nonce: nonce, aad: purpose.label + header)
        } catch {
            throw StorageError(.wrongKey, "the key or passphrase does not open this store")
        }
    }

    /// A key: HKDF-SHA-256 of it (info: the purpose's, "shadow-keys state v1 kek" for a state
    /// store); a passphrase: PBKDF2-HMAC-SHA-256 with the header's salt and iterations.
    static func keyEncryptionKey(unlock: VaultUnlock, header: [UInt8], purpose: Purpose) throws -> SymmetricKey {
        switch unlock {
        case .key(let key):
            guard key.count == 32 else { throw StorageError(.invalidParameter, "a store key is 32 bytes") }
            return HKDF<SHA256>.deriveKey(
                inputKeyMaterial: key.symmetricKey, info: purpose.kekInfo, outputByteCount: 32)
        case .passphrase(let passphrase):
            let iterations = Int(BigEndian.uint32(header[2..<6]))
            guard (PBKDF2.minimumIterations...maxIterations).contains(iterations) else {
                throw StorageError(
                    .corrupted, "the store's sealed secret names \(iterations) PBKDF2 iterations")
            }
            return try PBKDF2.deriveKey(passphrase: passphrase, salt: Array(header[6..<22]), iterations: iterations)
                .symmetricKey
        }
    }
}

extension Array {
    /// The array in consecutive pieces of at most `size` elements.
    package func chunked(_ size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
