#if canImport(Darwin)
import Darwin
#else
import Glibc
#endif

/// A member name with its fingerprint worked out once, for repeated lookups.
package struct MemberKey: Sendable {
    package let name: String
    package let fingerprint: UInt32

    package init(_ name: String) {
        self.name = name
        self.fingerprint = ExactName.fingerprint(name)
    }
}

extension JSONObject {
    /// The value of the member named exactly `key.name`, if any.
    package subscript(key: MemberKey) -> JSONValue? {
        index(of: key.name, fingerprint: key.fingerprint).map { members[$0].value }
    }
}

/// The member names JOSE documents use most, kept as string literals so that reading them
/// allocates nothing and costs no reference counting afterwards.
enum KnownMemberNames {
    private static let names: [String] = [
        // JWS header (RFC 7515 §4.1)
        "alg", "jku", "jwk", "kid", "x5u", "x5c", "x5t", "x5t#S256", "typ", "cty", "crit",
        // JWT claims (RFC 7519 §4.1) and common additions
        "iss", "sub", "aud", "exp", "nbf", "iat", "jti", "nonce", "azp", "scope", "client_id",
        // Sign in with Apple identity tokens and notifications
        "email", "email_verified", "is_private_email", "real_user_status", "transfer_sub", "nonce_supported",
        "c_hash", "at_hash", "auth_time", "org_id", "events", "type", "event_time",
        // JWK (RFC 7517 §4, RFC 7518 §6)
        "keys", "kty", "use", "key_ops", "n", "e", "crv", "x", "y", "d",
    ]

    /// Open-addressed table of indices into `names` (plus one; zero is empty), by fingerprint.
    private static let slots: [UInt8] = {
        var slots = [UInt8](repeating: 0, count: 128)
        for (index, name) in names.enumerated() {
            var slot = Self.slot(ExactName.fingerprint(name))
            while slots[slot] != 0 { slot = (slot + 1) & 127 }
            slots[slot] = UInt8(index + 1)
        }
        return slots
    }()

    private static func slot(_ fingerprint: UInt32) -> Int {
        Int((fingerprint &* 0x9E37_79B1) >> 25)
    }

    /// The literal for these bytes, if they spell a known name.
    static func lookup(_ bytes: UnsafeBufferPointer<UInt8>, fingerprint: UInt32) -> String? {
        var slot = slot(fingerprint)
        while true {
            let entry = slots[slot]
            if entry == 0 { return nil }
            let name = names[Int(entry - 1)]
            if name.utf8.count == bytes.count,
                name.utf8.withContiguousStorageIfAvailable({ $0.elementsEqual(bytes) }) == true
            {
                return name
            }
            slot = (slot + 1) & 127
        }
    }
}
