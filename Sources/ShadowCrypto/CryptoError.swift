/// The error ShadowCrypto throws. Equal by code.
public struct ShadowCryptoError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong. New codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// Decryption failed: wrong key or passphrase, wrong context, altered, truncated or
        /// extended data. Deliberately does not say which.
        public static let authenticationFailed = Code("authentication_failed")
        /// The input is not an envelope this version reads (magic, version, layout, limits).
        public static let malformedInput = Code("malformed_input")
        /// A parameter is weaker than allowed (iterations, salt, key size).
        public static let weakParameters = Code("weak_parameters")
        /// A parameter is out of range or malformed (key file, chunk size, context).
        public static let invalidParameter = Code("invalid_parameter")
        /// A regular input file shrank or grew while it was read; nothing was written.
        public static let inputChanged = Code("input_changed")
        /// Reading or writing failed.
        public static let io = Code("io")
    }

    public let code: Code
    public let reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { "\(code.name): \(reason)" }
    public static func == (lhs: ShadowCryptoError, rhs: ShadowCryptoError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// The one message every authentication failure carries.
    static let authenticationMessage = "authentication failed: wrong key or passphrase, wrong context, or the data was altered, truncated or extended"

    static var authenticationFailure: ShadowCryptoError { ShadowCryptoError(.authenticationFailed, authenticationMessage) }
}
