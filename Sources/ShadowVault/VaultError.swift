public import ShadowCore

/// The error ShadowVault throws. Equal by code.
public struct VaultError: ShadowKeysError {
    /// What went wrong. New codes may be added.
    public struct Code: ShadowKeysErrorCode {
        public let name: String
        private init(_ name: String) { self.name = name }

        /// The passphrase or key does not open this vault (the key check failed).
        public static let wrongKey = Code("wrong_passphrase_or_key")
        /// The file is damaged, truncated, tampered with, or not a vault.
        public static let corrupted = Code("vault_corrupted")
        /// No entry by that name.
        public static let noSuchEntry = Code("no_such_entry")
        /// Another process held the vault's lock past the timeout.
        public static let lockTimeout = Code("lock_timeout")
        /// There is no vault at the path.
        public static let notFound = Code("vault_not_found")
        /// A vault already exists at the path.
        public static let alreadyExists = Code("vault_exists")
        /// A parameter is invalid (name, label, iterations, key size).
        public static let invalidParameter = Code("invalid_parameter")
        /// Reading or writing failed.
        public static let io = Code("io")
    }

    public let code: Code
    public let reason: String
    public let file: String
    public let line: Int

    public init(_ code: Code, _ reason: String, file: String = #fileID, line: Int = #line) {
        (self.code, self.reason, self.file, self.line) = (code, reason, file, line)
    }
}
