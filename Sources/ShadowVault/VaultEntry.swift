#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import ShadowCrypto
public import ShadowCore

/// One secret in the vault, with its metadata.
public struct VaultEntry: Sendable, CustomStringConvertible {
    /// Who issued the secret.
    public enum Provider: String, Sendable, CaseIterable {
        case apple, google, other
    }

    /// What the secret is.
    public enum Kind: String, Sendable, CaseIterable {
        case refreshToken = "refresh-token"
        case accessToken = "access-token"
        case idToken = "id-token"
        case key
        case other
    }

    /// The entry's name: 1 to 255 bytes of UTF-8 without control characters. Names compare byte
    /// for byte: two spellings of "é" (precomposed and decomposed) are two names.
    public var name: String
    /// The secret; it never prints.
    public var secret: SecretBytes
    public var provider: Provider
    public var kind: Kind
    /// The user the secret belongs to (a `sub`), if any.
    public var subject: String?
    /// Set by the vault when the entry is first stored.
    public internal(set) var createdAt: Date
    /// Set by the vault on every store.
    public internal(set) var updatedAt: Date
    public var expiresAt: Date?
    /// Free labels, keys compared byte for byte.
    public var labels: VaultLabels
    /// Set on read: whether the entry had expired by the vault's clock when it was read.
    public internal(set) var expired = false

    /// An entry to store; the vault sets `createdAt` and `updatedAt` from its clock.
    public init(
        name: String, secret: SecretBytes, provider: Provider = .other, kind: Kind = .other, subject: String? = nil,
        expiresAt: Date? = nil,
        labels: VaultLabels = [:]
    ) {
        self.init(
            name: name, secret: secret, provider: provider, kind: kind, subject: subject,
            createdAt: Date(timeIntervalSince1970: 0),
            updatedAt: Date(timeIntervalSince1970: 0), expiresAt: expiresAt, labels: labels)
    }

    package init(
        name: String, secret: SecretBytes, provider: Provider, kind: Kind, subject: String?, createdAt: Date,
        updatedAt: Date, expiresAt: Date?,
        labels: VaultLabels
    ) {
        self.name = name
        self.secret = secret
        self.provider = provider
        self.kind = kind
        self.subject = subject
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.expiresAt = expiresAt
        self.labels = labels
    }

    /// True when `expiresAt` is at or before `now`.
    public func isExpired(at now: Date) -> Bool { expiresAt.map { $0 <= now } ?? false }

    public var description: String {
        "VaultEntry(\(name), \(provider.rawValue) \(kind.rawValue), subject: \(subject ?? "none"), secret redacted)"
    }

    /// The longest entry name, in bytes of UTF-8.
    package static let maxNameBytes = 255

    /// Names are 1 to ``maxNameBytes`` bytes of UTF-8 without control characters.
    package static func isValidName(_ name: String) -> Bool {
        (1...maxNameBytes).contains(name.utf8.count)
            && name.unicodeScalars.allSatisfy {
                $0.value >= 0x20 && $0.value != 0x7F && !(0x80...0x9F).contains($0.value)
            }
    }

    /// Checks what the file format can hold: the name, a secret of at most 1 MiB, a subject and
    /// label values of at most 65535 bytes, label keys of 1 to 255 bytes, at most 65535 labels.
    package func validate() throws {
        guard Self.isValidName(name) else {
            throw VaultError(.invalidParameter, "entry names are 1 to 255 bytes of printable text")
        }
        if let expiresAt, Timestamp(expiresAt) == nil {
            throw VaultError(.invalidParameter, "an expiry must lie within \(Timestamp.rangeDescription)")
        }
        guard secret.count <= EntryCodec.maxSecretBytes else {
            throw VaultError(.invalidParameter, "a secret is at most \(EntryCodec.maxSecretBytes) bytes")
        }
        guard (subject?.utf8.count ?? 0) <= 0xFFFF else {
            throw VaultError(.invalidParameter, "a subject is at most 65535 bytes")
        }
        guard labels.count <= 0xFFFF,
            labels.allSatisfy({ (1...255).contains($0.key.utf8.count) && $0.value.utf8.count <= 0xFFFF })
        else {
            throw VaultError(.invalidParameter, "label keys are 1 to 255 bytes and values at most 65535 bytes")
        }
    }
}

/// What a reader learns about a stored entry: everything but the secret.
public struct VaultEntryInfo: Sendable {
    public let name: String
    public let provider: VaultEntry.Provider
    public let kind: VaultEntry.Kind
    public let subject: String?
    public let createdAt: Date
    public let updatedAt: Date
    public let expiresAt: Date?
    public let labels: VaultLabels
    /// Whether it had expired when read.
    public let expired: Bool
}
