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

    /// A fresh random 12-byte nonce, from swift-crypto's generator.
    public static func randomNonce() -> [UInt8] { AES.GCM.Nonce().withUnsafeBytes { Array($0) } }

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
        Array(try opened(sealed, key: key, nonce: nonce, aad: aad))
    }

    /// ``open(_:key:nonce:aad:)`` on bytes in place, returning the plaintext as swift-crypto gives
    /// it: no generic collection code at run time and no copy of the result, for a caller that
    /// opens many small boxes (the operation log's verify opens one per entry).
    public static func open(
        _ sealed: UnsafeRawBufferPointer, key: SymmetricKey, nonce: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer
    ) throws -> Data {
        try opened(sealed, key: key, nonce: nonce, aad: aad)
    }

    /// Both opens' checks and work; specialized for raw buffers by the overload above.
    private static func opened(
        _ sealed: some DataProtocol, key: SymmetricKey, nonce: some DataProtocol, aad: some DataProtocol
    ) throws -> Data {
        guard key.bitCount == 256 else { throw ShadowCryptoError(.invalidParameter, "AES-256-GCM needs a 32-byte key") }
        guard sealed.count >= tagBytes else { throw ShadowCryptoError.authenticationFailure }
        guard nonce.count == nonceBytes else {
            throw ShadowCryptoError(.invalidParameter, "AES-256-GCM nonces are 12 bytes")
        }
        do {
            // The box from its combined form, nonce ‖ ciphertext ‖ tag, in one Data: swift-crypto's
            // generic initializers would otherwise build slice and iterator types at run time,
            // each at the cost of a scan of every protocol conformance in the binary.
            var combined = Data(capacity: nonceBytes + sealed.count)
            append(nonce, to: &combined)
            append(sealed, to: &combined)
            return try AES.GCM.open(try AES.GCM.SealedBox(combined: combined), using: key, authenticating: aad)
        } catch {
            throw ShadowCryptoError.authenticationFailure
        }
    }

    /// Appends `bytes` through their contiguous storage when they have one (arrays, slices, Data),
    /// without building an iterator type at run time.
    private static func append(_ bytes: some DataProtocol, to data: inout Data) {
        let appended: Void? = bytes.withContiguousStorageIfAvailable { buffer in
            if let base = buffer.baseAddress { data.append(base, count: buffer.count) }
        }
        if appended == nil { data.append(contentsOf: Array(bytes)) }
    }

    private static func makeNonce(_ nonce: some DataProtocol) throws -> AES.GCM.Nonce {
        guard nonce.count == nonceBytes, let value = try? AES.GCM.Nonce(data: nonce) else {
            throw ShadowCryptoError(.invalidParameter, "AES-256-GCM nonces are 12 bytes")
        }
        return value
    }
}
