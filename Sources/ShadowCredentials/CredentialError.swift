public import ShadowCore

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
}
