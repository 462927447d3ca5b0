public import ShadowCore
package import ShadowStorage

/// The error ShadowCredentials throws. Equal by code.
public typealias CredentialError = ModuleError<CredentialErrorCode>

/// The codes of `CredentialError`: what went wrong. New codes may be added; switch with a `default`.
public struct CredentialErrorCode: ShadowKeysErrorCode {
    public let name: String
    private init(_ name: String) { self.name = name }

    /// The token was issued at or before a revocation (or transfer) of its subject.
    public static let superseded = CredentialErrorCode("credential_revoked")
    /// An event is malformed (empty ids, a transfer without its new subject…).
    public static let invalidEvent = CredentialErrorCode("invalid_event")
    /// The stored state does not parse.
    public static let corruptedState = CredentialErrorCode("state_corrupted")
    /// The audit log was edited, truncated or extended.
    public static let auditTampered = CredentialErrorCode("audit_log_tampered")
    /// Reading or writing the audit log failed.
    public static let io = CredentialErrorCode("io")
    /// The key or passphrase does not open the store.
    public static let wrongKey = CredentialErrorCode("wrong_key")
    /// There is no store where one was named (a reader never creates one).
    public static let noStore = CredentialErrorCode("no_store")
    /// The database is not a ShadowKeys state store: an empty file, or another application's database.
    public static let notAStore = CredentialErrorCode("not_a_state_store")
    /// The database cannot be reached, or refused the connection.
    public static let storeUnavailable = CredentialErrorCode("store_unavailable")
    /// Another writer held the database longer than the lock timeout.
    public static let lockTimeout = CredentialErrorCode("lock_timeout")
    /// A parameter is out of range (a token kind, an iteration count, a store URL).
    public static let invalidParameter = CredentialErrorCode("invalid_parameter")
}

extension ModuleError where Code == CredentialErrorCode {
    /// A database failure (ShadowStorage) as the credential store reports it: an outage stays
    /// `store_unavailable`, a lock `lock_timeout`; a damaged database is `state_corrupted`.
    package init(storage error: StorageError) {
        let code: CredentialErrorCode =
            switch error.code {
            case .lockTimeout: .lockTimeout
            case .notADatabase, .corrupted: .corruptedState
            case .wrongKey: .wrongKey
            case .invalidParameter: .invalidParameter
            default: .storeUnavailable
            }
        self.init(code, error.reason)
    }
}

/// `body`, with a storage failure reported as a ``CredentialError``.
package func credentialStoring<R>(_ body: () throws -> R) throws -> R {
    do { return try body() } catch let error as StorageError { throw CredentialError(storage: error) }
}
