public import ShadowCore

/// The error ShadowCrypto throws. Equal by code. (It carries the module's full name because
/// swift-crypto already exports a `CryptoError`.)
public struct ShadowCryptoError: ShadowKeysError {
    /// What went wrong. New codes may be added.
    public struct Code: ShadowKeysErrorCode {
        public let name: String
        private init(_ name: String) { self.name = name }

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
    public let file: String
    public let line: Int

    public init(_ code: Code, _ reason: String, file: String = #fileID, line: Int = #line) {
        (self.code, self.reason, self.file, self.line) = (code, reason, file, line)
    }

    /// The one message every authentication failure carries.
    static let authenticationMessage = "authentication failed: wrong key or passphrase, wrong context, or the data was altered, truncated or extended"

    static var authenticationFailure: ShadowCryptoError { ShadowCryptoError(.authenticationFailed, authenticationMessage) }
}
