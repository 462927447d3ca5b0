public import ShadowCore

/// The error ShadowCrypto throws. Equal by code. (It carries the module's full name because
/// swift-crypto already exports a `CryptoError`.)
public typealias ShadowCryptoError = ModuleError<ShadowCryptoErrorCode>

/// The codes of `ShadowCryptoError`: what went wrong. New codes may be added; switch with a `default`.
public struct ShadowCryptoErrorCode: ShadowKeysErrorCode {
    public let name: String
    private init(_ name: String) { self.name = name }

    /// Decryption failed: wrong key or passphrase, wrong context, altered, truncated or
    /// extended data. Deliberately does not say which.
    public static let authenticationFailed = ShadowCryptoErrorCode("authentication_failed")
    /// The input is not an envelope this version reads (magic, version, layout, limits).
    public static let malformedInput = ShadowCryptoErrorCode("malformed_input")
    /// A parameter is weaker than allowed (iterations, salt, key size).
    public static let weakParameters = ShadowCryptoErrorCode("weak_parameters")
    /// A parameter is out of range or malformed (key file, chunk size, context).
    public static let invalidParameter = ShadowCryptoErrorCode("invalid_parameter")
    /// A regular input file shrank or grew while it was read; nothing was written.
    public static let inputChanged = ShadowCryptoErrorCode("input_changed")
    /// Reading or writing failed.
    public static let io = ShadowCryptoErrorCode("io")
}

extension ShadowCryptoError {
    /// The one message every authentication failure carries.
    static let authenticationMessage =
        "authentication failed: wrong key or passphrase, wrong context, or the data was altered, truncated or extended"

    static var authenticationFailure: ShadowCryptoError {
        ShadowCryptoError(.authenticationFailed, authenticationMessage)
    }
}
