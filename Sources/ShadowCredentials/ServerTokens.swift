#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import ShadowCore

/// A per-user secret a server keeps: the refresh token it must revoke when the account is
/// deleted, or an access token. Never prints its value.
public struct ServerToken: Sendable, CustomStringConvertible {
    /// What the token is: `refresh`, `access`, or another name of 1 to 32 bytes of `a-z`, `0-9` and `-`.
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String

        public init(_ name: String) throws {
            guard (1...32).contains(name.utf8.count),
                name.utf8.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D })
            else {
                throw CredentialError(.invalidParameter, "a token kind is 1 to 32 bytes of a-z, 0-9 and '-'")
            }
            rawValue = name
        }

        private init(known: String) { rawValue = known }

        public static let refresh = Kind(known: "refresh")
        public static let access = Kind(known: "access")
        public var description: String { rawValue }
    }

    /// The longest token value stored: 16 KiB.
    public static let maxValueBytes = 16 * 1024

    public let clientID: String
    public let subject: String
    public let kind: Kind
    public let value: SecretBytes
    /// When the token stops being valid, if known (milliseconds since 1970).
    public let expiresAtMilliseconds: Int64?
    /// When it was stored (milliseconds since 1970).
    public let storedAtMilliseconds: Int64

    public init(
        clientID: String, subject: String, kind: Kind, value: SecretBytes, expiresAt: Date? = nil,
        storedAt: Date = Date()
    ) throws {
        try self.init(
            clientID: clientID, subject: subject, kind: kind, value: value,
            expiresAtMilliseconds: try expiresAt.map(CredentialEvent.milliseconds),
            storedAtMilliseconds: try CredentialEvent.milliseconds(storedAt))
    }

    public init(
        clientID: String, subject: String, kind: Kind, value: SecretBytes, expiresAtMilliseconds: Int64?,
        storedAtMilliseconds: Int64
    ) throws {
        guard (1...255).contains(clientID.utf8.count) else {
            throw CredentialError(.invalidParameter, "a client ID is 1 to 255 bytes")
        }
        guard (1...255).contains(subject.utf8.count) else {
            throw CredentialError(.invalidParameter, "a subject is 1 to 255 bytes")
        }
        guard (1...Self.maxValueBytes).contains(value.count) else {
            throw CredentialError(.invalidParameter, "a token is 1 to \(Self.maxValueBytes) bytes")
        }
        guard CredentialEvent.timeRange.contains(storedAtMilliseconds),
            expiresAtMilliseconds.map(CredentialEvent.timeRange.contains) ?? true
        else {
            throw CredentialError(.invalidParameter, "token times lie in 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z")
        }
        self.clientID = clientID
        self.subject = subject
        self.kind = kind
        self.value = value
        self.expiresAtMilliseconds = expiresAtMilliseconds
        self.storedAtMilliseconds = storedAtMilliseconds
    }

    public var expiresAt: Date? { expiresAtMilliseconds.map(Date.init(millisecondsSince1970:)) }
    public var storedAt: Date { Date(millisecondsSince1970: storedAtMilliseconds) }

    /// The token's value as UTF-8 text (tokens Apple issues are ASCII), or nil.
    public var text: String? { value.withUnsafeBytes { String(validating: $0, as: UTF8.self) } }

    public var description: String { "ServerToken(\(kind) for a subject of \(clientID), value redacted)" }
}

/// Per-user server tokens, each sealed on its own, in the same database as the credential state.
public protocol ServerTokenStore: Sendable {
    /// Stores `token`, replacing the subject's token of the same kind.
    func put(_ token: ServerToken) async throws
    /// The subject's token of `kind`, or nil.
    func token(clientID: String, subject: String, kind: ServerToken.Kind) async throws -> ServerToken?
    /// Every token of the subject (what `account-delete` must revoke), by kind name.
    func tokens(clientID: String, subject: String) async throws -> [ServerToken]
    /// Deletes the subject's token of `kind`; false when there was none.
    @discardableResult
    func deleteToken(clientID: String, subject: String, kind: ServerToken.Kind) async throws -> Bool
    /// Tokens whose expiry is at or before `time`, oldest expiry first, at most `limit`.
    func expiredTokens(at time: Date, limit: Int) async throws -> [ServerToken]
}
