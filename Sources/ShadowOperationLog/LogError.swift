public import ShadowCore

/// The error ShadowOperationLog throws. Equal by code.
public typealias LogError = ModuleError<LogErrorCode>

/// The codes of `LogError`. New codes may be added; switch with a `default`.
public struct LogErrorCode: ShadowKeysErrorCode {
    public let name: String
    private init(_ name: String) { self.name = name }

    /// The log's bytes do not match its tree, its checkpoints or their signatures: an entry was
    /// changed, deleted, reordered or added, or the log was cut short.
    public static let tampered = LogErrorCode("log_tampered")
    /// The log is consistent in itself but older than, or forked from, the checkpoint a witness
    /// accepted before; or a vault or state store the witness watches went back.
    public static let rolledBack = LogErrorCode("rolled_back")
    /// A proof does not verify against the given root(s).
    public static let proofRejected = LogErrorCode("proof_rejected")
    /// A signed note or checkpoint is malformed, or no trusted key signed it.
    public static let badCheckpoint = LogErrorCode("bad_checkpoint")
    /// The key or passphrase does not open the log's sealed secret.
    public static let wrongKey = LogErrorCode("wrong_passphrase_or_key")
    /// The bytes are not a ShadowKeys operation log, or a version this build does not read.
    public static let notALog = LogErrorCode("not_an_operation_log")
    /// There is no log at the location.
    public static let notFound = LogErrorCode("log_not_found")
    /// An entry field, index or size is out of range.
    public static let invalidParameter = LogErrorCode("invalid_parameter")
    /// The entry was pruned: its leaf hash stays, its payload is gone.
    public static let pruned = LogErrorCode("entry_pruned")
    /// Reading or writing failed.
    public static let io = LogErrorCode("io")
    /// The log's database cannot be reached or opened now: try again later. Never `log_tampered`.
    public static let unavailable = LogErrorCode("store_unavailable")
    /// Another process held the log's write lock for longer than the lock timeout.
    public static let lockTimeout = LogErrorCode("lock_timeout")
}

extension ModuleError where Code == LogErrorCode {
    /// A log storage's report of its database's failure, by the failure's stable code name: a
    /// wrong key, a lock timeout or an unreachable database stay what they are; a file that is no
    /// database at all is ``LogErrorCode/notALog`` when `opening`, else damage
    /// (``LogErrorCode/tampered``).
    package init(
        storeFailure error: any ShadowKeysError, opening: Bool = false, file: String = #fileID, line: Int = #line
    ) {
        let code: LogErrorCode =
            switch error.codeName {
            case "wrong_key", "wrong_passphrase_or_key": .wrongKey
            case "lock_timeout": .lockTimeout
            case "store_unavailable", "io": .unavailable
            case "no_store": .notFound
            case "not_a_state_store": .notALog
            case "invalid_parameter": .invalidParameter
            default: opening ? .notALog : .tampered
            }
        self.init(code, error.reason, file: file, line: line)
    }
}
