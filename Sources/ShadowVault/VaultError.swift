public import ShadowCore

/// The error ShadowVault throws. Equal by code.
public typealias VaultError = ModuleError<VaultErrorCode>

/// The codes of `VaultError`: what went wrong. New codes may be added; switch with a `default`.
public struct VaultErrorCode: ShadowKeysErrorCode {
    public let name: String
    private init(_ name: String) { self.name = name }

    /// The passphrase or key does not open this vault (the key check failed).
    public static let wrongKey = VaultErrorCode("wrong_passphrase_or_key")
    /// The file is damaged, truncated, tampered with, or not a vault.
    public static let corrupted = VaultErrorCode("vault_corrupted")
    /// No entry by that name.
    public static let noSuchEntry = VaultErrorCode("no_such_entry")
    /// Another process held the vault's lock past the timeout.
    public static let lockTimeout = VaultErrorCode("lock_timeout")
    /// There is no vault at the path.
    public static let notFound = VaultErrorCode("vault_not_found")
    /// A vault already exists at the path.
    public static let alreadyExists = VaultErrorCode("vault_exists")
    /// A parameter is invalid (name, label, iterations, key size).
    public static let invalidParameter = VaultErrorCode("invalid_parameter")
    /// Reading or writing failed.
    public static let io = VaultErrorCode("io")
}
