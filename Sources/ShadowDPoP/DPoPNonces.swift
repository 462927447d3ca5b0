public import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import ShadowCore

/// Server nonces (RFC 9449 §8, §9) with no state: the nonce of a period is its number and a MAC
/// of it, so every instance that shares the key gives and accepts the same ones. A nonce is
/// accepted during its period and the next (Docs/dpop.md, "Nonces").
public struct DPoPNonces: Sendable {
    private let key: SymmetricKey
    /// How long a nonce is current (default 300 s; 10 to 3600).
    public let period: Int64
    private let clock: WallClock

    static let label = Array("shadow-keys dpop v1 nonce".utf8)

    public init(key: SymmetricKey, period: Int64 = 300, clock: WallClock = .system) throws {
        guard (10...3600).contains(period) else {
            throw DPoPError(.invalidParameter, "a nonce period is 10 to 3600 s")
        }
        guard key.bitCount == 256 else { throw DPoPError(.invalidParameter, "a nonce key is 32 bytes") }
        (self.key, self.period, self.clock) = (key, period, clock)
    }

    private var step: Int64 { Int64(clock.now.timeIntervalSince1970.rounded(.down)) / period }

    /// base64url(period number (8, big-endian) ‖ HMAC-SHA-256(key, "shadow-keys dpop v1 nonce" ‖
    /// period number)[0..<16]): 32 characters.
    private func nonce(step: Int64) -> [UInt8] {
        let number = BigEndian.bytes(UInt64(bitPattern: step))
        return number + Array(HMAC<SHA256>.authenticationCode(for: Self.label + number, using: key).prefix(16))
    }

    /// The nonce to send now, in a `DPoP-Nonce` header.
    public func current() -> String { Base64URL.encode(nonce(step: step)) }

    /// True for the nonce of this period or the one before.
    public func accepts(_ text: String) -> Bool {
        guard text.utf8.count == 32, let bytes = try? Base64URL.decode(text), bytes.count == 24 else { return false }
        let claimed = Int64(bitPattern: BigEndian.uint64(bytes[0..<8]))
        let now = step
        guard claimed == now || claimed == now - 1 else { return false }
        return ConstantTime.equals(bytes, nonce(step: claimed))
    }
}
