package import Crypto
#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif

/// The keys a format derives from its one secret: HKDF-SHA-256 with no salt (32 zero bytes),
/// 32 bytes, info `<prefix> <name>` (for example `shadow-keys session v1 seal`).
package struct Subkeys: Sendable {
    private let material: SymmetricKey
    private let prefix: String

    package init(secret: some DataProtocol, prefix: String) {
        material = SymmetricKey(data: Array(secret))
        self.prefix = prefix
    }

    package func key(_ name: String) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: material, info: Array("\(prefix) \(name)".utf8), outputByteCount: 32)
    }
}
