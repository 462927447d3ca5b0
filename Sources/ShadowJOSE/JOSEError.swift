public import ShadowCore

/// The error every ShadowJOSE operation throws: a code to match on, a reason for people, and
/// for claim checks the list of every rule that failed. Equal by code.
public struct JOSEError: ShadowKeysError {
    /// What kind of failure this is. New codes may be added; switch with a `default`.
    public struct Code: ShadowKeysErrorCode {
        public let name: String
        private init(_ name: String) { self.name = name }

        /// The token is not a well-formed compact JWS (segments, base64url, JSON, size).
        public static let malformedToken = Code("malformed_token")
        /// The header names an algorithm that is never accepted (`none`, HS*), unknown, or not allowed.
        public static let disallowedAlgorithm = Code("disallowed_algorithm")
        /// The selected key cannot verify the header's algorithm (type, curve, `alg`, `use`, `key_ops`).
        public static let algorithmKeyMismatch = Code("algorithm_key_mismatch")
        /// No key in the set matches the token's `kid`, or the token has no `kid` and the set
        /// does not have exactly one key for its algorithm.
        public static let unknownKey = Code("unknown_key")
        /// The header lists a `crit` extension this verifier does not understand.
        public static let unsupportedCriticalHeader = Code("unsupported_critical_header")
        /// The signature does not verify.
        public static let invalidSignature = Code("invalid_signature")
        /// One or more claim rules failed; see ``JOSEError/claimFailures``.
        public static let claimsRejected = Code("claims_rejected")
        /// The token verified, but its claims do not decode as the caller's `Decodable` type
        /// (``JWTVerifier/verify(_:as:keys:)``).
        public static let claimsUndecodable = Code("claims_undecodable")
        /// A JWK is malformed, unsupported, or outside the allowed key sizes.
        public static let invalidKey = Code("invalid_key")
        /// A JWK Set is malformed (not JSON, no `keys` array, duplicate `kid`s).
        public static let invalidKeySet = Code("invalid_key_set")
        /// No usable key set is available (missing, unreadable, or no usable keys).
        public static let keysUnavailable = Code("keys_unavailable")
    }

    public let code: Code
    /// What was expected and what was found. Never contains key material or the token.
    public let reason: String
    /// For ``Code/claimsRejected``: every failed rule, in policy order.
    public let claimFailures: [ClaimFailure]
    public let file: String
    public let line: Int

    /// An error with a code and a reason.
    public init(
        _ code: Code, _ reason: String, claimFailures: [ClaimFailure] = [], file: String = #fileID, line: Int = #line
    ) {
        (self.code, self.reason, self.claimFailures, self.file, self.line) = (code, reason, claimFailures, file, line)
    }
}
