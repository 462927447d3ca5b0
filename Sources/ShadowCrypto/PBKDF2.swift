public import ShadowCore
import Crypto
import CryptoExtras

/// PBKDF2-HMAC-SHA256 (RFC 8018 §5.2) through swift-crypto.
///
/// The default, 100,000 iterations, is what the apps' specification requires; OWASP's Password
/// Storage Cheat Sheet currently recommends 600,000 for PBKDF2-HMAC-SHA256, and callers may raise
/// it. Fewer than 100,000 iterations, or a salt under 16 bytes, are refused here; known-answer
/// tests with lower counts go through ``deriveKeyUnsafe(passphrase:salt:unsafeIterations:length:)``.
public enum PBKDF2 {
    /// The iteration count used when the caller gives none.
    public static let defaultIterations = 100_000
    /// The fewest iterations the safe API accepts.
    public static let minimumIterations = 100_000
    /// The most iterations accepted anywhere (a bound on work an input can demand).
    public static let maximumIterations = 100_000_000
    /// The shortest salt accepted, in bytes.
    public static let minimumSaltBytes = 16
    /// The default output length, in bytes.
    public static let defaultLength = 32

    /// Derives a key. Refuses fewer than 100,000 iterations and salts under 16 bytes.
    public static func deriveKey(
        passphrase: SecretBytes, salt: [UInt8], iterations: Int = defaultIterations, length: Int = defaultLength
    ) throws -> SecretBytes {
        guard iterations >= minimumIterations else {
            throw ShadowCryptoError(
                .weakParameters, "PBKDF2 iterations \(iterations) is below the minimum of \(minimumIterations)")
        }
        guard salt.count >= minimumSaltBytes else {
            throw ShadowCryptoError(
                .weakParameters, "PBKDF2 salt is \(salt.count) bytes; at least \(minimumSaltBytes) are required")
        }
        return try deriveKeyUnsafe(passphrase: passphrase, salt: salt, unsafeIterations: iterations, length: length)
    }

    /// Derives a key with any iteration count and salt: for known-answer tests and reading
    /// existing data only.
    public static func deriveKeyUnsafe(
        passphrase: SecretBytes, salt: [UInt8], unsafeIterations iterations: Int, length: Int
    ) throws -> SecretBytes {
        guard (1...maximumIterations).contains(iterations) else {
            throw ShadowCryptoError(
                .invalidParameter, "PBKDF2 iterations must be between 1 and \(maximumIterations), not \(iterations)")
        }
        guard (1...1024).contains(length) else {
            throw ShadowCryptoError(
                .invalidParameter, "PBKDF2 output length must be between 1 and 1024 bytes, not \(length)")
        }
        let key = try passphrase.withUnsafeBytes { bytes in
            try KDF.Insecure.PBKDF2.deriveKey(
                from: bytes, salt: salt, using: .sha256, outputByteCount: length, unsafeUncheckedRounds: iterations)
        }
        return key.withUnsafeBytes { SecretBytes($0) }
    }
}
