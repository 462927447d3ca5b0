import ArgumentParser
import ShadowApple
import ShadowCore
import ShadowCredentials
import ShadowDPoP
package import ShadowJOSE
import ShadowCrypto
import ShadowJWKS
import ShadowOperationLog
import ShadowTokenSource
import ShadowVault

/// The exit codes scripts rely on (Docs/cli.md).
package enum ExitStatus: Int32 {
    case success = 0
    case failure = 1
    case malformedToken = 10
    case signatureRejected = 11
    case claimsRejected = 12
    case keysUnavailable = 13
    case credentialRevoked = 14
    case authenticationFailed = 20
    case vaultWrongKey = 30
    case vaultCorrupted = 31
    case vaultNoSuchEntry = 32
    case vaultLockTimeout = 33
    case storeUnavailable = 34
    case notAStore = 35
    case rolledBack = 36
    case appleInvalidGrant = 40
    case appleRejected = 41
    case appleUnavailable = 42
    case reauthenticationRequired = 43
    case usage = 64
    case malformedInput = 65
    case noInput = 66
    case cannotCreate = 73

    /// The status for an error from a ShadowKeys module. Exit codes are the CLI's contract
    /// (Docs/cli.md); the modules know nothing of them.
    init(_ error: any ShadowKeysError) {
        switch error {
        case let error as JOSEError:
            switch error.code {
            case .malformedToken: self = .malformedToken
            case .claimsRejected: self = .claimsRejected
            case .invalidKey, .invalidKeySet, .keysUnavailable: self = .keysUnavailable
            default: self = .signatureRejected
            }
        case let error as JWKSError:
            switch error.code {
            case .fetchFailed: self = .keysUnavailable
            case .cacheUnavailable: self = .usage
            default: self = .failure
            }
        case let error as AppleError:
            switch error.code {
            case .invalidGrant: self = .appleInvalidGrant
            case .serverError, .transport, .invalidResponse: self = .appleUnavailable
            case .invalidKey: self = .malformedInput
            case .invalidParameter: self = .usage
            default: self = .appleRejected
            }
        case let error as ShadowCryptoError:
            switch error.code {
            case .authenticationFailed: self = .authenticationFailed
            case .malformedInput, .inputChanged: self = .malformedInput
            case .weakParameters, .invalidParameter: self = .usage
            default: self = .failure
            }
        case let error as VaultError:
            switch error.code {
            case .wrongKey: self = .vaultWrongKey
            case .corrupted: self = .vaultCorrupted
            case .noSuchEntry: self = .vaultNoSuchEntry
            case .lockTimeout: self = .vaultLockTimeout
            case .notFound: self = .noInput
            case .invalidParameter: self = .usage
            default: self = .failure
            }
        case let error as TokenError:
            switch error.code {
            case .reauthenticationRequired: self = .reauthenticationRequired
            case .rejected: self = .appleRejected
            case .providerUnavailable, .invalidResponse: self = .appleUnavailable
            case .lockTimeout: self = .vaultLockTimeout
            case .notConfigured: self = .usage
            default: self = .failure
            }
        case let error as LogError:
            switch error.code {
            case .wrongKey: self = .vaultWrongKey
            case .tampered: self = .vaultCorrupted
            case .notALog: self = .notAStore
            case .rolledBack: self = .rolledBack
            case .notFound: self = .noInput
            case .unavailable: self = .storeUnavailable
            case .lockTimeout: self = .vaultLockTimeout
            case .invalidParameter: self = .usage
            default: self = .failure
            }
        case let error as CredentialError:
            switch error.code {
            case .superseded: self = .credentialRevoked
            case .auditTampered, .corruptedState: self = .vaultCorrupted
            case .invalidEvent: self = .malformedInput
            case .wrongKey: self = .vaultWrongKey
            case .lockTimeout: self = .vaultLockTimeout
            case .storeUnavailable: self = .storeUnavailable
            case .noStore: self = .noInput
            case .notAStore: self = .notAStore
            case .invalidParameter: self = .usage
            default: self = .failure
            }
        case let error as DPoPError:
            switch error.code {
            case .missingProof, .multipleProofs, .malformedProof: self = .malformedToken
            case .wrongType, .disallowedAlgorithm, .invalidKey, .unsupportedCriticalHeader, .invalidSignature,
                .keyMismatch:
                self = .signatureRejected
            case .invalidParameter: self = .usage
            case .unavailable: self = .storeUnavailable
            default: self = .claimsRejected
            }
        default:
            self = ExitStatus(codeName: error.codeName)
        }
    }

    /// The status of an error from a module the CLI does not list (the session store's, say), by
    /// the stable code names every module shares.
    init(codeName: String) {
        switch codeName {
        case "wrong_passphrase_or_key", "wrong_key": self = .vaultWrongKey
        case "lock_timeout": self = .vaultLockTimeout
        case "store_unavailable": self = .storeUnavailable
        case "invalid_parameter": self = .usage
        case _ where codeName.hasSuffix("_corrupted") || codeName.hasSuffix("_tampered"): self = .vaultCorrupted
        default: self = .failure
        }
    }
}

/// A failure the CLI reports and turns into an exit code.
package struct CLIError: Error, CustomStringConvertible {
    let status: ExitStatus
    /// Stable machine-readable code.
    let code: String
    let message: String
    let claimFailures: [ClaimFailure]

    package init(_ status: ExitStatus, code: String? = nil, _ message: String, claimFailures: [ClaimFailure] = []) {
        self.status = status
        self.code = code ?? Self.defaultCode(status)
        self.message = message
        self.claimFailures = claimFailures
    }

    /// The report of an error from a ShadowKeys module: its code, its reason, its exit status.
    init(_ error: any ShadowKeysError) {
        self.init(
            ExitStatus(error), code: error.codeName, error.reason,
            claimFailures: (error as? JOSEError)?.claimFailures ?? [])
    }

    package var description: String { message }

    private static func defaultCode(_ status: ExitStatus) -> String {
        switch status {
        case .usage: return "usage"
        case .keysUnavailable: return "keys_unavailable"
        case .malformedToken: return "malformed_token"
        case .authenticationFailed: return "authentication_failed"
        case .malformedInput: return "malformed_input"
        case .noInput: return "no_input"
        default: return "error"
        }
    }

    /// The `{"code":…,"message":…,"claim":…,"expected":…,"actual":…}` object of `--json` output.
    var json: JSONValue {
        var object: JSONObject = ["code": .string(code), "message": .string(message)]
        if let first = claimFailures.first {
            object.set("claim", .string(first.claim))
            object.set("expected", .string(first.expected))
            object.set("actual", first.actual.map(JSONValue.string) ?? .null)
            object.set(
                "failures",
                .array(
                    claimFailures.map { failure in
                        .object([
                            "claim": .string(failure.claim), "rule": .string(failure.rule.name),
                            "expected": .string(failure.expected),
                            "actual": failure.actual.map(JSONValue.string) ?? .null,
                            "message": .string(failure.message),
                        ])
                    }))
        }
        return .object(object)
    }
}

/// Runs a command body, reporting any failure on stderr (or as JSON on stdout) and exiting with
/// its code.
/// Runs a command's body, reporting what it throws on stderr (and, with `json`, as the one JSON
/// error shape on stdout), then exits with its status. `valid` adds `"valid": false` beside the
/// error, for the commands whose answer says whether something is valid (`verify-token`, `log
/// verify`, `state audit`).
package func reportingFailures(json: Bool, valid: Bool = false, _ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch {
        try report(error, json: json, valid: valid)
    }
}

/// ``reportingFailures(json:valid:_:)`` for a body that runs on the calling thread
/// (``SynchronousCommand``).
func reportingFailuresSynchronously(json: Bool, valid: Bool = false, _ body: () throws -> Void) throws {
    do {
        try body()
    } catch {
        try report(error, json: json, valid: valid)
    }
}

/// Rethrows an exit code or a usage error as it is; reports anything else and throws its exit code.
private func report(_ error: any Error, json: Bool, valid: Bool) throws -> Never {
    switch error {
    case is ExitCode, is ValidationError: throw error
    default: try fail(CLIError(reporting: error), json: json, valid: valid)
    }
}

extension CLIError {
    /// The report of any error a command body throws: its exit status, code and message.
    init(reporting error: any Error) {
        switch error {
        case let error as CLIError: self = error
        case let error as any ShadowKeysError: self.init(error)
        case let error as FileError: self.init(error.isNotFound ? .noInput : .failure, code: "io", error.description)
        case let error as HTTPTransportError:
            self.init(error.kind == .forbiddenURL ? .usage : .keysUnavailable, code: error.kind.rawValue, error.message)
        default: self.init(.failure, "\(error)")
        }
    }
}

private func fail(_ error: CLIError, json: Bool, valid: Bool) throws -> Never {
    if json {
        Console.json(valid ? ["valid": false, "error": error.json] : ["error": error.json])
    }
    if error.claimFailures.count > 1 {
        Console.err("shadow-keys: claims rejected:")
        for failure in error.claimFailures { Console.err("  - \(failure.message)") }
    } else {
        Console.err("shadow-keys: \(error.message)")
    }
    throw ExitCode(error.status.rawValue)
}
