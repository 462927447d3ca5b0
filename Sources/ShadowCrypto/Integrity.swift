import Crypto
#if canImport(Darwin)
import Darwin
public import Foundation
#else
import Glibc
public import FoundationEssentials
#endif
public import ShadowCore

/// SHA-256 integrity hashes, plain and keyed, over bytes, streams and files in constant memory.
///
/// A plain SHA-256 of a plaintext stored beside its ciphertext tells anyone who can see two
/// records whether their plaintexts are equal, and lets them test guesses. Use the keyed form,
/// HMAC-SHA256 with a key the storage provider does not have, for hashes that sit next to
/// ciphertext; use the plain form for public content (downloads, manifests).
public enum Integrity {
    /// SHA-256 of `data`.
    public static func sha256(_ data: some DataProtocol) -> [UInt8] {
        Array(SHA256.hash(data: data))
    }

    /// HMAC-SHA256 of `data` under `key`.
    public static func hmacSHA256(key: SecretBytes, _ data: some DataProtocol) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: data, using: key.symmetricKey))
    }

    /// SHA-256 of everything readable from a descriptor.
    public static func sha256(fileDescriptor fd: Int32) throws -> [UInt8] {
        var hasher = SHA256()
        try stream(fd) { hasher.update(bufferPointer: $0) }
        return Array(hasher.finalize())
    }

    /// HMAC-SHA256 of everything readable from a descriptor.
    public static func hmacSHA256(key: SecretBytes, fileDescriptor fd: Int32) throws -> [UInt8] {
        var mac = HMAC<SHA256>(key: key.symmetricKey)
        try stream(fd) { mac.update(data: $0) }
        return Array(mac.finalize())
    }

    /// SHA-256 of a file.
    public static func sha256(path: String) throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ShadowCryptoError(.io, "\(FileError("open", path))") }
        defer { close(fd) }
        return try sha256(fileDescriptor: fd)
    }

    /// True when two hashes are equal, compared in constant time.
    public static func matches(_ lhs: some Collection<UInt8>, _ rhs: some Collection<UInt8>) -> Bool {
        ConstantTime.equals(lhs, rhs)
    }

    /// Lower-case hex.
    public static func hex(_ digest: some Sequence<UInt8>) -> String { Hex.encode(digest) }

    /// Standard base64 with padding.
    public static func base64(_ digest: some Sequence<UInt8>) -> String { Data(digest).base64EncodedString() }

    /// Feeds a descriptor's bytes to `consume` in 1 MiB pieces.
    private static func stream(_ fd: Int32, _ consume: (UnsafeRawBufferPointer) -> Void) throws {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 64)
        defer { buffer.deallocate() }
        while true {
            let count = read(fd, buffer.baseAddress, buffer.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw ShadowCryptoError(.io, "read failed: \(String(cString: strerror(errno)))")
            }
            if count == 0 { return }
            consume(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
        }
    }
}
