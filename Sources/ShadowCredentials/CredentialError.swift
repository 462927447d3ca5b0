/// The error ShadowCredentials throws. Equal by code.
public struct CredentialError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong. New codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// The token was issued at or before a revocation (or transfer) of its subject.
        public static let superseded = Code("credential_revoked")
        /// The subject is not authorized (a `check`).
        public static let notAuthorized = Code("not_authorized")
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

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { "\(code.name): \(reason)" }
    public static func == (lhs: CredentialError, rhs: CredentialError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
