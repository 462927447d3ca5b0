import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowCrypto

/// The vault file, version 1 (Docs/vault-format.md): a plaintext header that ends with a key
/// check (HMAC) and a SHA-256 digest, then an AES-256-GCM body whose AAD is the whole header.
///
/// The unkeyed digest lets damage be told from a wrong key: a damaged header fails its digest
/// (corrupted) before the key check runs, so only a header that is intact, or was rewritten on
/// purpose, can give "wrong passphrase or key".
struct VaultHeader: Equatable {
    static let magic: [UInt8] = Array("SKVT".utf8)
    static let version: UInt8 = 1
    static let maxIterations = 10_000_000

    enum Kind: UInt8 {
        case key = 1
        case passphrase = 2
    }

    var kind: Kind
    var vaultID: [UInt8]  // 16
    var generation: UInt64
    var iterations: UInt32 = 0
    var salt: [UInt8] = []
    var nonce: [UInt8]  // 12
    var bodyLength: UInt32  // ciphertext + tag
    var keyCheck: [UInt8]  // 32

    static let digestBytes = 32

    /// Every byte before the key check.
    var beforeKeyCheck: [UInt8] {
        var out = Self.magic
        out.append(Self.version)
        out.append(kind.rawValue)
        out += vaultID
        out.appendBigEndian(generation)
        if kind == .passphrase {
            out.appendBigEndian(iterations)
            out.append(UInt8(salt.count))
            out += salt
        }
        out += nonce
        out.appendBigEndian(bodyLength)
        return out
    }

    /// The header as written: fields, key check, then SHA-256 of both.
    var serialized: [UInt8] {
        let authenticated = beforeKeyCheck + keyCheck
        return authenticated + SHA256.hash(data: authenticated)
    }

    /// Parses the header at the start of `bytes`.
    static func parse(_ bytes: [UInt8]) throws -> (VaultHeader, length: Int) {
        func corrupt(_ why: String) -> VaultError { VaultError(.corrupted, why) }
        guard bytes.count >= 4 else {
            throw corrupt(
                bytes.isEmpty ? "the vault file is empty" : "the vault file is truncated (\(bytes.count) bytes)")
        }
        guard Array(bytes[0..<4]) == magic else { throw corrupt("not a ShadowKeys vault (bad magic)") }
        var offset = 4
        func take(_ count: Int) throws -> [UInt8] {
            guard offset + count <= bytes.count else { throw corrupt("the vault file is truncated inside its header") }
            defer { offset += count }
            return Array(bytes[offset..<offset + count])
        }
        func integer<T: FixedWidthInteger>(_: T.Type) throws -> T {
            try take(MemoryLayout<T>.size).reduce(T(0)) { $0 << 8 | T($1) }
        }
        let version = try take(1)[0]
        guard version == Self.version else { throw corrupt("unsupported vault version \(version)") }
        guard let kind = Kind(rawValue: try take(1)[0]) else { throw corrupt("unknown key kind") }
        var header = VaultHeader(
            kind: kind, vaultID: try take(16), generation: try integer(UInt64.self), nonce: [], bodyLength: 0,
            keyCheck: [])
        if kind == .passphrase {
            header.iterations = try integer(UInt32.self)
            guard Int(header.iterations) >= PBKDF2.minimumIterations, Int(header.iterations) <= maxIterations else {
                throw corrupt(
                    "PBKDF2 iterations \(header.iterations) outside \(PBKDF2.minimumIterations)...\(maxIterations)")
            }
            let saltLength = Int(try take(1)[0])
            guard (16...64).contains(saltLength) else { throw corrupt("salt length \(saltLength) outside 16...64") }
            header.salt = try take(saltLength)
        }
        header.nonce = try take(12)
        header.bodyLength = try integer(UInt32.self)
        header.keyCheck = try take(32)
        let digest = try take(digestBytes)
        guard ConstantTime.equals(Array(SHA256.hash(data: bytes[0..<offset - digestBytes])), digest) else {
            throw corrupt("the vault header is damaged (its SHA-256 digest does not match)")
        }
        return (header, offset)
    }
}

/// Keys derived from the master key (the raw key, or PBKDF2 of the passphrase).
struct VaultKeys {
    let checkKey: SymmetricKey
    let bodyKey: SymmetricKey

    init(master: SymmetricKey, vaultID: [UInt8]) {
        let prk = HKDF<SHA256>.extract(inputKeyMaterial: master, salt: vaultID)
        checkKey = HKDF<SHA256>.expand(
            pseudoRandomKey: prk, info: Array("shadow-keys vault v1 key check".utf8), outputByteCount: 32)
        bodyKey = HKDF<SHA256>.expand(
            pseudoRandomKey: prk, info: Array("shadow-keys vault v1 body key".utf8), outputByteCount: 32)
    }

    func keyCheck(_ header: VaultHeader) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: header.beforeKeyCheck, using: checkKey))
    }
}

extension Array where Element == UInt8 {
    mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.bigEndian) { append(contentsOf: $0) }
    }
}
