public import ShadowCore

/// The codes of ``StorageError``: what a database did, as the features above it report it in
/// their own codes (an outage stays an outage, never corruption).
public struct StorageErrorCode: ShadowKeysErrorCode {
    public let name: String
    private init(_ name: String) { self.name = name }

    /// The database cannot be reached or opened now (a server down, a file that cannot be opened,
    /// a lost connection): try again later.
    public static let unavailable = StorageErrorCode("store_unavailable")
    /// Another process held the database's write lock for longer than the lock timeout.
    public static let lockTimeout = StorageErrorCode("lock_timeout")
    /// The database refused what it holds: a damaged file, a row of the wrong shape, a failed
    /// constraint, a schema newer than this code.
    public static let corrupted = StorageErrorCode("store_corrupted")
    /// The file is not a database at all (random bytes, another kind of file).
    public static let notADatabase = StorageErrorCode("not_a_database")
    /// The key does not open the store's sealed secret.
    public static let wrongKey = StorageErrorCode("wrong_key")
    /// A setting or argument is out of range.
    public static let invalidParameter = StorageErrorCode("invalid_parameter")
}

/// The error of ShadowStorage: what the database layer under every feature's store reports.
public typealias StorageError = ModuleError<StorageErrorCode>
