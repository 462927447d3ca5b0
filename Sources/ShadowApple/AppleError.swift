public import ShadowCore

/// The error ShadowApple throws for client secrets and Apple's endpoints. Equal by code.
public struct AppleError: ShadowKeysError {
    /// What went wrong. New codes may be added.
    public struct Code: ShadowKeysErrorCode {
        public let name: String
        private init(_ name: String) { self.name = name }

        /// A `.p8` key that is unreadable, not PEM, encrypted, RSA, another curve…
        public static let invalidKey = Code("invalid_key")
        /// A team ID, key ID, client ID, TTL or other input out of its format.
        public static let invalidParameter = Code("invalid_parameter")
        /// Apple's `invalid_request`.
        public static let invalidRequest = Code("invalid_request")
        /// Apple's `invalid_client`: the client secret or client ID was refused.
        public static let invalidClient = Code("invalid_client")
        /// Apple's `invalid_grant`: the code or token is invalid, expired or revoked.
        public static let invalidGrant = Code("invalid_grant")
        /// Apple's `unauthorized_client`.
        public static let unauthorizedClient = Code("unauthorized_client")
        /// Apple's `unsupported_grant_type`.
        public static let unsupportedGrantType = Code("unsupported_grant_type")
        /// Apple's `invalid_scope`.
        public static let invalidScope = Code("invalid_scope")
        /// Any other 4xx, or an error code Apple does not document.
        public static let rejected = Code("rejected")
        /// Apple answered 5xx (after retries).
        public static let serverError = Code("server_error")
        /// No answer: connection failure or timeout (after retries).
        public static let transport = Code("transport")
        /// Apple's answer was not of the documented shape.
        public static let invalidResponse = Code("invalid_response")

        /// The code for Apple's `error` field.
        static func fromApple(_ value: String) -> Code {
            switch value {
            case "invalid_request": return .invalidRequest
            case "invalid_client": return .invalidClient
            case "invalid_grant": return .invalidGrant
            case "unauthorized_client": return .unauthorizedClient
            case "unsupported_grant_type": return .unsupportedGrantType
            case "invalid_scope": return .invalidScope
            default: return .rejected
            }
        }
    }

    public let code: Code
    public let reason: String
    /// The HTTP status, for errors from Apple's endpoints.
    public let status: Int?
    public let file: String
    public let line: Int

    public init(_ code: Code, _ reason: String, status: Int? = nil, file: String = #fileID, line: Int = #line) {
        (self.code, self.reason, self.status, self.file, self.line) = (code, reason, status, file, line)
    }

    /// True for failures worth retrying: 5xx and transport errors (timeouts included).
    public var isRetryable: Bool { code == .serverError || code == .transport }
}
