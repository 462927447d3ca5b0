import Crypto
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import ShadowCore
import ShadowCrypto

/// The error ShadowSessions throws. Equal by code.
public typealias SessionError = ModuleError<SessionErrorCode>

/// The codes of `SessionError`. New codes may be added; switch with a `default`.
public struct SessionErrorCode: ShadowKeysErrorCode {
    public let name: String
    private init(_ name: String) { self.name = name }

    /// The refresh token is malformed, forged, or belongs to no live session (RFC 6749 `invalid_grant`).
    public static let invalidGrant = SessionErrorCode("invalid_grant")
    /// An old refresh token came back after its grace: the whole session was revoked (RFC 9700, 4.14.2).
    public static let reuseDetected = SessionErrorCode("refresh_token_reused")
    /// The access token is missing, malformed, expired or not ours (RFC 6750 `invalid_token`).
    public static let invalidToken = SessionErrorCode("invalid_token")
    /// Too many requests for this client or user (GCRA); `retryAfter` seconds.
    public static let rateLimited = SessionErrorCode("rate_limited")
    /// A setting or argument is out of range.
    public static let invalidParameter = SessionErrorCode("invalid_parameter")
    /// The session is bound to a DPoP key and the refresh came without a proof by that key, or
    /// DPoP is required and the session is not bound (Docs/dpop.md, "Sessions"). Nothing changed.
    public static let invalidProof = SessionErrorCode("invalid_dpop_proof")
    /// The store's session data does not authenticate or is malformed.
    public static let corrupted = SessionErrorCode("sessions_corrupted")
    /// The key does not open the store's session secret.
    public static let wrongKey = SessionErrorCode("wrong_passphrase_or_key")
    /// The store cannot be reached or opened now (a server down, a file that cannot be opened):
    /// try again later. Never reported as ``corrupted``.
    public static let unavailable = SessionErrorCode("store_unavailable")
    /// Another process held the store's write lock for longer than the lock timeout.
    public static let lockTimeout = SessionErrorCode("lock_timeout")
}

extension ModuleError where Code == SessionErrorCode {
    /// A session store's report of its database's failure, by the failure's stable code name: a
    /// wrong key, a lock timeout or an unreachable store stay what they are; anything else the
    /// database refused is ``SessionErrorCode/corrupted``.
    package init(storeFailure error: any ShadowKeysError, file: String = #fileID, line: Int = #line) {
        let code: SessionErrorCode =
            switch error.codeName {
            case "wrong_key", "wrong_passphrase_or_key": .wrongKey
            case "lock_timeout": .lockTimeout
            case "store_unavailable", "io", "no_store": .unavailable
            case "invalid_parameter": .invalidParameter
            default: .corrupted
            }
        self.init(code, error.reason, file: file, line: line)
    }
}

/// The keys of the session tables, derived from their 32-byte secret with HKDF-SHA-256 (no
/// salt; info `shadow-keys session v1 <name>`): `refresh` (the refresh tokens' MAC), `lookup`
/// (the keyed hash of Apple's `sub`) and `seal` (AES-256-GCM of Apple's refresh tokens and of the
/// signing keys).
public struct SessionKeys: Sendable, CustomStringConvertible {
    let refresh: SymmetricKey
    let lookup: SymmetricKey
    let seal: SymmetricKey
    /// The rows' MAC key (`shadow-keys session v1 row`): every session and user row is bound to it.
    let row: SymmetricKey
    /// The DPoP nonces' key (`shadow-keys session v1 dpop nonce`, Docs/dpop.md, "Nonces").
    let dpopNonce: SymmetricKey

    public init(secret: some DataProtocol) throws {
        guard secret.count == 32 else { throw SessionError(.invalidParameter, "a session secret is 32 bytes") }
        let keys = Subkeys(secret: secret, prefix: "shadow-keys session v1")
        refresh = keys.key("refresh")
        lookup = keys.key("lookup")
        seal = keys.key("seal")
        row = keys.key("row")
        dpopNonce = keys.key("dpop nonce")
    }

    public var description: String { "SessionKeys(redacted)" }

    /// HMAC-SHA-256(lookup key, client ID ‖ 0x00 ‖ Apple `sub`): the mapping table's key, so the
    /// store holds no Apple user ID in clear.
    public func appleHash(clientID: String, subject: String) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: Array(clientID.utf8) + [0] + Array(subject.utf8), using: lookup))
    }
}

/// A refresh token (Docs/sessions.md, "Refresh tokens"): `skr1.` and the base64url of
/// family ID (16) ‖ generation (8, big-endian) ‖ HMAC-SHA-256(refresh key,
/// "shadow-keys session v1 refresh" ‖ family ID ‖ generation)[0..<16].
///
/// The token is a pure function of (family, generation): the store keeps only the family's
/// current generation, never a token, and the successor of a generation can be given again.
public struct RefreshToken: Sendable, Hashable, CustomStringConvertible {
    public let family: SessionID
    public let generation: UInt64

    public static let prefix = "skr1."
    static let label = Array("shadow-keys session v1 refresh".utf8)

    public init(family: SessionID, generation: UInt64) {
        self.family = family
        self.generation = generation
    }

    /// The token text.
    public func encoded(keys: SessionKeys) -> String {
        let body = family.bytes + BigEndian.bytes(generation)
        return Self.prefix + Base64URL.encode(body + Self.mac(body, keys: keys))
    }

    static func mac(_ body: [UInt8], keys: SessionKeys) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: label + body, using: keys.refresh).prefix(16))
    }

    /// Reads and authenticates a token; anything else is ``SessionErrorCode/invalidGrant``.
    public init(parsing text: String, keys: SessionKeys) throws {
        func invalid() -> SessionError { SessionError(.invalidGrant, "the refresh token is malformed or not ours") }
        guard text.utf8.count == Self.prefix.utf8.count + 54, text.hasPrefix(Self.prefix),
            let bytes = try? Base64URL.decode(text.dropFirst(Self.prefix.count)), bytes.count == 40
        else { throw invalid() }
        let body = Array(bytes[0..<24])
        guard ConstantTime.equals(Self.mac(body, keys: keys), Array(bytes[24...])) else { throw invalid() }
        family = SessionID(exactly: Array(body[0..<16]))
        generation = BigEndian.uint64(body[16..<24])
    }

    public var description: String { "RefreshToken(family \(family), generation \(generation), redacted)" }
}

/// A session (a refresh-token family): 16 random bytes, printed as base64url.
public struct SessionID: Sendable, Hashable, CustomStringConvertible {
    public let bytes: [UInt8]

    public init?(bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    /// From 16 bytes the caller has just cut or drawn (a token's, a fresh random ID).
    init(exactly bytes: [UInt8]) {
        precondition(bytes.count == 16, "a session ID is 16 bytes")
        self.bytes = bytes
    }

    public init?(_ text: String) {
        guard let bytes = try? Base64URL.decode(text), bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    public static func random() -> SessionID {
        SessionID(exactly: SecretBytes.random(count: 16).withUnsafeBytes { Array($0) })
    }

    public var description: String { Base64URL.encode(bytes) }
}
