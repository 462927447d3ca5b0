/// The error every ShadowJOSE operation throws: a code to match on, a reason for people, and
/// for claim checks the list of every rule that failed.
///
/// Two errors are equal when their codes are equal, so tests and callers can match with `==`.
public struct JOSEError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure this is. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The stable name of the code, as printed in `--json` output.
        public let name: String
        /// The failure class that decides the CLI exit code.
        public let category: Category

        private init(_ name: String, _ category: Category) {
            self.name = name
            self.category = category
        }

        public var description: String { name }

        /// The token is not a well-formed compact JWS (segments, base64url, JSON, size).
        public static let malformedToken = Code("malformed_token", .malformed)
        /// The header names an algorithm that is never accepted (`none`, HS*), unknown, or not allowed.
        public static let disallowedAlgorithm = Code("disallowed_algorithm", .signature)
        /// The selected key cannot verify the header's algorithm (type, curve, `alg`, `use`, `key_ops`).
        public static let algorithmKeyMismatch = Code("algorithm_key_mismatch", .signature)
        /// No key in the set matches the token's `kid`, or the token has no `kid` and the set
        /// does not have exactly one key for its algorithm.
        public static let unknownKey = Code("unknown_key", .signature)
        /// The header lists a `crit` extension this verifier does not understand.
        public static let unsupportedCriticalHeader = Code("unsupported_critical_header", .signature)
        /// The signature does not verify.
        public static let invalidSignature = Code("invalid_signature", .signature)
        /// One or more claim rules failed; see ``JOSEError/claimFailures``.
        public static let claimsRejected = Code("claims_rejected", .claims)
        /// A JWK is malformed, unsupported, or outside the allowed key sizes.
        public static let invalidKey = Code("invalid_key", .keys)
        /// A JWK Set is malformed (not JSON, no `keys` array, duplicate `kid`s).
        public static let invalidKeySet = Code("invalid_key_set", .keys)
        /// No usable key set is available (missing, unreadable, or no usable keys).
        public static let keysUnavailable = Code("keys_unavailable", .keys)
    }

    /// Failure classes, one per CLI exit code.
    public enum Category: Sendable, Hashable {
        /// Exit 10.
        case malformed
        /// Exit 11.
        case signature
        /// Exit 12.
        case claims
        /// Exit 13.
        case keys
    }

    /// What kind of failure this is.
    public let code: Code
    /// What was expected and what was found. Never contains key material or the token.
    public let reason: String
    /// For ``Code/claimsRejected``: every failed rule, in policy order.
    public let claimFailures: [ClaimFailure]
    /// Where the error was raised.
    public let file: String
    /// Where the error was raised.
    public let line: Int

    /// An error with a code and a reason.
    public init(_ code: Code, _ reason: String, claimFailures: [ClaimFailure] = [], file: String = #fileID, line: Int = #line) {
        self.code = code
        self.reason = reason
        self.claimFailures = claimFailures
        self.file = file
        self.line = line
    }

    public var description: String { "\(code.name): \(reason)" }

    public static func == (lhs: JOSEError, rhs: JOSEError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
