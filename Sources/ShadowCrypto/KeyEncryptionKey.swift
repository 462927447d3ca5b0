public import ShadowCore
import Crypto

/// The key that wraps each object's data key: a raw 256-bit key, or one derived from a
/// passphrase with PBKDF2-HMAC-SHA256 (salt and iterations stored in the envelope header).
public struct KeyEncryptionKey: Sendable, CustomStringConvertible {
    enum Material: Sendable {
        case raw(SymmetricKey)
        case passphrase(SecretBytes, iterations: Int)
    }

    let material: Material
    /// An identifier stored in the header (at most 255 UTF-8 bytes), so keys can rotate.
    public let id: String

    /// A raw 256-bit key.
    public static func raw(_ key: SecretBytes, id: String = "") throws -> KeyEncryptionKey {
        guard key.count == 32 else {
            throw ShadowCryptoError(.invalidParameter, "a key-encryption key is 32 bytes (256 bits), not \(key.count)")
        }
        return try KeyEncryptionKey(material: .raw(key.symmetricKey), id: id)
    }

    /// A passphrase. `iterations` applies when sealing; opening uses the header's.
    public static func passphrase(
        _ passphrase: SecretBytes, id: String = "", iterations: Int = PBKDF2.defaultIterations
    ) throws -> KeyEncryptionKey {
        guard iterations >= PBKDF2.minimumIterations else {
            throw ShadowCryptoError(
                .weakParameters, "PBKDF2 iterations \(iterations) is below the minimum of \(PBKDF2.minimumIterations)")
        }
        // Readers refuse headers with more (Docs/envelope-format.md), so no writer makes one.
        guard iterations <= EnvelopeHeader.maxEnvelopeIterations else {
            throw ShadowCryptoError(
                .invalidParameter,
                """
                PBKDF2 iterations \(iterations) is above the envelope maximum of \
                \(EnvelopeHeader.maxEnvelopeIterations)
                """
            )
        }
        guard passphrase.count > 0 else { throw ShadowCryptoError(.invalidParameter, "the passphrase is empty") }
        return try KeyEncryptionKey(material: .passphrase(passphrase, iterations: iterations), id: id)
    }

    private init(material: Material, id: String) throws {
        guard id.utf8.count <= 255 else { throw ShadowCryptoError(.invalidParameter, "key id exceeds 255 bytes") }
        self.material = material
        self.id = id
    }

    public var description: String {
        switch material {
        case .raw: return "KeyEncryptionKey(raw, id: \(id.debugDescription))"
        case .passphrase(_, let iterations):
            return "KeyEncryptionKey(passphrase, \(iterations) iterations, id: \(id.debugDescription))"
        }
    }
}
