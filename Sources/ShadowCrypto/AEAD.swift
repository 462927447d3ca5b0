import ShadowCore
public import Crypto
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// AES-256-GCM with 96-bit nonces and 128-bit tags, the only AEAD ShadowKeys uses.
public enum AES256GCM {
    /// Key length in bytes.
    public static let keyBytes = 32
    /// Nonce length in bytes.
    public static let nonceBytes = 12
    /// Tag length in bytes.
    public static let tagBytes = 16

    /// Encrypts `plaintext`, returning ciphertext followed by the 16-byte tag.
    public static func seal(
        _ plaintext: some DataProtocol, key: SymmetricKey, nonce: some DataProtocol, aad: some DataProtocol
    ) throws -> [UInt8] {
        guard key.bitCount == 256 else { throw ShadowCryptoError(.invalidParameter, "AES-256-GCM needs a 32-byte key") }
        let box = try AES.GCM.seal(plaintext, using: key, nonce: try makeNonce(nonce), authenticating: aad)
        var out: [UInt8] = []
        out.reserveCapacity(box.ciphertext.count + tagBytes)
        out += box.ciphertext
        out += box.tag
        return out
    }

    /// Decrypts ciphertext followed by its tag; any failure is ``ShadowCryptoError/Code/authenticationFailed``.
    public static func open(
        _ sealed: some DataProtocol, key: SymmetricKey, nonce: some DataProtocol, aad: some DataProtocol
    ) throws -> [UInt8] {
        guard key.bitCount == 256 else { throw ShadowCryptoError(.invalidParameter, "AES-256-GCM needs a 32-byte key") }
        guard sealed.count >= tagBytes else { throw ShadowCryptoError.authenticationFailure }
        do {
            let split = sealed.index(sealed.endIndex, offsetBy: -tagBytes)
            let box = try AES.GCM.SealedBox(
                nonce: try makeNonce(nonce), ciphertext: sealed[..<split], tag: sealed[split...])
            return Array(try AES.GCM.open(box, using: key, authenticating: aad))
        } catch {
            throw ShadowCryptoError.authenticationFailure
        }
    }

    private static func makeNonce(_ nonce: some DataProtocol) throws -> AES.GCM.Nonce {
        guard nonce.count == nonceBytes, let value = try? AES.GCM.Nonce(data: nonce) else {
            throw ShadowCryptoError(.invalidParameter, "AES-256-GCM nonces are 12 bytes")
        }
        return value
    }
}
