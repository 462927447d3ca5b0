/// The code of a ShadowKeys error: a stable name (`claims_rejected`, `wrong_passphrase_or_key`),
/// as printed in `--json` output. Codes are extensible structs: new ones may be added, so switch
/// over them with a `default`.
public protocol ShadowKeysErrorCode: Hashable, Sendable, CustomStringConvertible {
    /// The stable name.
    var name: String { get }
}

extension ShadowKeysErrorCode {
    public var description: String { name }
}

/// The shape of every ShadowKeys module's error (`JOSEError`, `JWKSError`, `AppleError`,
/// `CryptoError`, `VaultError`, `CredentialError`): a code to match on, a reason for people that
/// says what was expected and what was found (never a secret), and where it was raised.
///
/// Two errors are equal when their codes are, so tests and callers can match with `==`.
public protocol ShadowKeysError: Error, Hashable, Sendable, CustomStringConvertible {
    associatedtype Code: ShadowKeysErrorCode
    /// What kind of failure this is.
    var code: Code { get }
    /// What was expected and what was found.
    var reason: String { get }
    /// Where the error was raised.
    var file: String { get }
    /// Where the error was raised.
    var line: Int { get }
}

extension ShadowKeysError {
    /// `code: reason`.
    public var description: String { "\(code.name): \(reason)" }
    /// The code's stable name, for `--json` output and logs.
    public var codeName: String { code.name }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}

/// The error of a ShadowKeys module whose failures need nothing but a code and a reason:
/// `JWKSError`, `ShadowCryptoError`, `VaultError` and `CredentialError` are this type with
/// their own codes (`VaultError.Code` is `VaultErrorCode`), so matching stays per module.
public struct ModuleError<Code: ShadowKeysErrorCode>: ShadowKeysError {
    public let code: Code
    public let reason: String
    public let file: String
    public let line: Int

    /// An error with a code and a reason saying what was expected and what was found.
    public init(_ code: Code, _ reason: String, file: String = #fileID, line: Int = #line) {
        (self.code, self.reason, self.file, self.line) = (code, reason, file, line)
    }
}
