public import ShadowCore

/// The error ShadowCredentials throws. Equal by code.
public struct CredentialError: ShadowKeysError {
    /// What went wrong. New codes may be added.
    public struct Code: ShadowKeysErrorCode {
        public let name: String
        private init(_ name: String) { self.name = name }

        /// The token was issued at or before a revocation (or transfer) of its subject.
        public static let superseded = Code("credential_revoked")
        /// An event is malformed (empty ids, a transfer without its new subject…).
        public static let invalidEvent = Code("invalid_event")
        /// The stored state does not parse.
        public static let corruptedState = Code("state_corrupted")
        /// The audit log was edited, truncated or extended.
        public static let auditTampered = Code("audit_log_tampered")
        /// Reading or writing the audit log failed.
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
