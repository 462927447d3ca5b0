import Crypto
import Dispatch
#if canImport(Darwin)
import Darwin
import Foundation
#else
import Glibc
import FoundationEssentials
#endif
public import ShadowCore
public import ShadowCrypto
import Synchronization

/// How to open a vault.
public enum VaultUnlock: Sendable, CustomStringConvertible {
    /// A passphrase, stretched with PBKDF2-HMAC-SHA256 (salt and iterations in the header).
    case passphrase(SecretBytes)
    /// A raw 256-bit key.
    case key(SecretBytes)

    public var description: String {
        switch self {
        case .passphrase: return "VaultUnlock.passphrase(redacted)"
        case .key: return "VaultUnlock.key(redacted)"
        }
    }
}

/// The random values a vault file is sealed with (injected only to reproduce vectors).
package struct VaultRandomness: Sendable {
    package var vaultID: [UInt8]
    package var salt: [UInt8]
    package var nonce: [UInt8]

    package init(vaultID: [UInt8], salt: [UInt8], nonce: [UInt8]) {
        self.vaultID = vaultID
        self.salt = salt
        self.nonce = nonce
    }
}

extension VaultUnlock {
    var headerKind: VaultHeader.Kind {
        switch self {
        case .key: return .key
        case .passphrase: return .passphrase
        }
    }
}

/// What the header of a vault says, readable without a key.
public struct VaultHeaderInfo: Sendable {
    public let version: Int
    /// "key" or "passphrase".
    public let keyKind: String
    /// PBKDF2 iterations, for a passphrase vault.
    public let iterations: Int?
    public let saltBytes: Int?
    public let generation: UInt64
    /// Hex of the random vault id.
    public let vaultID: String
    public let fileBytes: Int
}

/// An encrypted, crash-safe, multi-process store for tokens and keys: one file whose header is
/// authenticated and whose body (names, secrets, metadata) is encrypted. Format and guarantees:
/// Docs/vault-format.md.
///
/// Writes hold an advisory lock across read-modify-write and replace the file atomically
/// (temporary file, fsync, rename, fsync of the directory). Reads take no lock.
public final class TokenVault: Sendable {
    /// The vault file.
    public let path: String
    /// How long a write waits for another process's lock, in seconds.
    public let lockTimeout: Duration
    private let unlock: VaultUnlock
    private let clock: WallClock
    /// The last master key derived, by (salt, iterations), so one process stretches a passphrase once.
    private let masterCache = Mutex<(salt: [UInt8], iterations: UInt32, key: SymmetricKey)?>(nil)

    /// The largest vault file read.
    public static let maxFileBytes = 64 << 20

    /// The default path: `$SHADOW_KEYS_VAULT`, else `$XDG_DATA_HOME/shadow-keys/vault.skv`, else
    /// `$HOME/.local/share/shadow-keys/vault.skv`.
    ///
    /// - Throws: ``VaultError/Code/invalidParameter`` when none of these is set (the last two
    ///   must be absolute paths): there is no shared fallback such as `/tmp`.
    public static func defaultPath(environment: [String: String]? = nil) throws -> String {
        let environment = environment ?? ProcessInfo.processInfo.environment
        if let path = environment["SHADOW_KEYS_VAULT"], !path.isEmpty { return path }
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") { return xdg + "/shadow-keys/vault.skv" }
        if let home = environment["HOME"], home.hasPrefix("/") { return home + "/.local/share/shadow-keys/vault.skv" }
        throw VaultError(
            .invalidParameter,
            "no vault path: give --vault, or set SHADOW_KEYS_VAULT, or XDG_DATA_HOME or HOME to an absolute path")
    }

    /// A handle on the vault at `path`; nothing is read until it is used.
    public init(path: String, unlock: VaultUnlock, lockTimeout: Duration = .seconds(10), clock: WallClock = .system) {
        self.path = path
        self.unlock = unlock
        self.lockTimeout = lockTimeout
        self.clock = clock
    }

    // MARK: - Creating and inspecting

    /// Creates an empty vault (folder 0700, file 0600). Fails if one exists. Deriving a
    /// passphrase's key takes PBKDF2's full cost, so the work runs off the caller's executor,
    /// like every other vault operation.
    @discardableResult
    public static func create(
        at path: String, unlock: VaultUnlock, iterations: Int = PBKDF2.defaultIterations, clock: WallClock = .system
    ) async throws -> TokenVault {
        try await runBlocking { try createSync(at: path, unlock: unlock, iterations: iterations, clock: clock) }
    }

    /// ``create(at:unlock:iterations:clock:)`` on the calling thread.
    @discardableResult
    package static func createSync(
        at path: String, unlock: VaultUnlock, iterations: Int = PBKDF2.defaultIterations, clock: WallClock = .system
    ) throws -> TokenVault {
        if case .key(let key) = unlock, key.count != 32 {
            throw VaultError(.invalidParameter, "a vault key is 32 bytes, not \(key.count)")
        }
        guard iterations >= PBKDF2.minimumIterations, iterations <= VaultHeader.maxIterations else {
            throw VaultError(
                .invalidParameter,
                "PBKDF2 iterations must be \(PBKDF2.minimumIterations) to \(VaultHeader.maxIterations)")
        }
        try io { try Files.makeDirectory(Files.parentDirectory(path)) }
        let vault = TokenVault(path: path, unlock: unlock, clock: clock)
        try vault.withLock(creating: true) {
            guard try io({ try Files.ownerAndMode(path) }) == nil else {
                throw VaultError(.alreadyExists, "a vault already exists at \(path)")
            }
            try vault.write(VaultContents(), previous: nil, iterations: UInt32(iterations))
        }
        return vault
    }

    /// Reads the header only; no key needed.
    public static func headerInfo(path: String) throws -> VaultHeaderInfo {
        try headerInfo(bytes: try readFile(path))
    }

    /// Reads the header of a vault file's bytes.
    package static func headerInfo(bytes: [UInt8]) throws -> VaultHeaderInfo {
        let (header, _) = try VaultHeader.parse(bytes)
        return VaultHeaderInfo(
            version: Int(VaultHeader.version), keyKind: header.kind == .key ? "key" : "passphrase",
            iterations: header.kind == .passphrase ? Int(header.iterations) : nil,
            saltBytes: header.kind == .passphrase ? header.salt.count : nil,
            generation: header.generation, vaultID: Hex.encode(header.vaultID), fileBytes: bytes.count)
    }

    /// Warnings about loose permissions on the vault file or its folder.
    public static func permissionWarnings(path: String) -> [String] {
        var warnings: [String] = []
        if let (_, mode) = (try? Files.ownerAndMode(path)) ?? nil, mode & 0o077 != 0 {
            warnings.append("the vault file \(path) has mode \(String(mode, radix: 8)); it should be 600")
        }
        let folder = Files.parentDirectory(path)
        if let (_, mode) = (try? Files.ownerAndMode(folder)) ?? nil, mode & 0o077 != 0 {
            warnings.append("the vault folder \(folder) has mode \(String(mode, radix: 8)); it should be 700")
        }
        return warnings
    }

    // MARK: - Synchronous operations (the CLI's)

    /// Everything in the vault.
    package func contents() throws -> VaultContents {
        try open(try Self.readFile(path)).contents
    }

    /// The entry named `name`.
    package func entrySync(named name: String) throws -> VaultEntry {
        guard var entry = try contents().entry(named: name) else {
            throw VaultError(.noSuchEntry, "no entry named \(name.quotedForMessage)")
        }
        entry.expired = entry.isExpired(at: clock.now)
        return entry
    }

    /// Adds or replaces an entry, stamping `updatedAt`; a replacement keeps the original `createdAt`.
    package func putSync(_ entry: VaultEntry) throws { try putSync([entry]) }

    /// Adds or replaces several entries in one write.
    package func putSync(_ entries: [VaultEntry]) throws {
        let now = try writeTime(for: entries)
        try update { contents in
            for entry in entries { contents.put(entry, now: now) }
        }
    }

    /// ``putSync(_:)`` only if the entry named like `expected` is still stored as `expected`
    /// was read; false, and nothing written, when it changed or is gone.
    package func putSync(_ entries: [VaultEntry], ifUnchanged expected: VaultEntry) throws -> Bool {
        let now = try writeTime(for: entries)
        return try modify { contents in
            guard contents.holds(expected) else { return (false, false) }
            for entry in entries { contents.put(entry, now: now) }
            return (true, true)
        }
    }

    /// The `updatedAt` of a write of `entries`, once each is valid and the clock in range.
    private func writeTime(for entries: [VaultEntry]) throws -> Date {
        for entry in entries { try entry.validate() }
        let now = clock.now
        guard Timestamp(now) != nil else {
            throw VaultError(
                .invalidParameter,
                "the clock reads \(now.timeIntervalSince1970) s, outside \(Timestamp.rangeDescription)")
        }
        return now
    }

    /// Removes an entry.
    package func removeSync(named name: String) throws {
        try update { contents in
            guard contents.remove(named: name) else {
                throw VaultError(.noSuchEntry, "no entry named \(name.quotedForMessage)")
            }
        }
    }

    /// Reads, changes and writes the vault under its lock; the write happens only if `body` returns.
    package func update<R>(_ body: (inout VaultContents) throws -> R) throws -> R {
        try modify { contents in (try body(&contents), true) }
    }

    /// Like ``update(_:)``, but writes only when `body` says it changed something.
    package func modify<R>(_ body: (inout VaultContents) throws -> (result: R, changed: Bool)) throws -> R {
        try withLock {
            let opened = try open(try Self.readFile(path))
            var contents = opened.contents
            let (result, changed) = try body(&contents)
            if changed { try write(contents, previous: opened.header, iterations: nil) }
            return result
        }
    }

    /// Reads the vault while holding its lock, so no writer runs meanwhile (for checks that read
    /// the vault and files beside it together).
    package func withLockedContents<R>(_ body: (VaultContents) throws -> R) throws -> R {
        try withLock { try body(try open(try Self.readFile(path)).contents) }
    }

    /// Re-encrypts under a new passphrase or key (a passphrase gets a new salt), atomically.
    package func rekeySync(to newUnlock: VaultUnlock, iterations: Int = PBKDF2.defaultIterations) throws {
        if case .key(let key) = newUnlock, key.count != 32 {
            throw VaultError(.invalidParameter, "a vault key is 32 bytes, not \(key.count)")
        }
        guard iterations >= PBKDF2.minimumIterations, iterations <= VaultHeader.maxIterations else {
            throw VaultError(
                .invalidParameter,
                "PBKDF2 iterations must be \(PBKDF2.minimumIterations) to \(VaultHeader.maxIterations)")
        }
        // A token refresh in flight (Docs/token-source.md) writes its answer with the old key
        // once its provider answers: the rekey waits for it, or the rotated token would be lost.
        // (No lock file is made beside a vault that does not exist.)
        if try Self.io({ try Files.ownerAndMode(path) }) == nil { throw Self.missing(path) }
        guard let refreshes = try Self.io({ try FileLock.acquire(refreshLockPath, timeout: lockTimeout.inSeconds) })
        else {
            throw VaultError(
                .lockTimeout, "a token refresh held \(refreshLockPath) for more than \(lockTimeout): try again")
        }
        defer { refreshes.release() }
        try withLock {
            let opened = try open(try Self.readFile(path))
            let replacement = TokenVault(path: path, unlock: newUnlock, lockTimeout: lockTimeout, clock: clock)
            try replacement.write(opened.contents, previous: opened.header, iterations: UInt32(iterations))
        }
    }

    /// The lock a token refresh holds from its read of the vault to its write
    /// (Docs/token-source.md, "Getting a token"); a rekey takes it first.
    package var refreshLockPath: String { path + ".refresh.lock" }

    // MARK: - Async API

    /// The entry named `name`, with ``VaultEntry/expired`` set by the vault's clock.
    public func entry(named name: String) async throws -> VaultEntry {
        try await runBlocking { try self.entrySync(named: name) }
    }

    /// Every entry's metadata, never secrets, in byte order of names.
    public func list() async throws -> [VaultEntryInfo] {
        try await runBlocking {
            let now = self.clock.now
            return try self.contents().entries.map {
                VaultEntryInfo(
                    name: $0.name, provider: $0.provider, kind: $0.kind, subject: $0.subject, createdAt: $0.createdAt,
                    updatedAt: $0.updatedAt,
                    expiresAt: $0.expiresAt, labels: $0.labels, expired: $0.isExpired(at: now))
            }
        }
    }

    /// Adds or replaces an entry.
    public func put(_ entry: VaultEntry) async throws { try await runBlocking { try self.putSync(entry) } }

    /// Adds or replaces several entries in one atomic write.
    public func put(contentsOf entries: [VaultEntry]) async throws {
        try await runBlocking { try self.putSync(entries) }
    }

    /// Adds or replaces several entries in one atomic write, but only if the entry named like
    /// `expected` is still stored exactly as `expected` was read (its secret, labels and times):
    /// a writer that read an entry and then waited, as a token refresh waits for its provider,
    /// neither overwrites what another writer stored meanwhile nor brings back what it removed.
    /// - Returns: false, with nothing written, when that entry changed or is gone.
    public func put(contentsOf entries: [VaultEntry], ifUnchanged expected: VaultEntry) async throws -> Bool {
        try await runBlocking { try self.putSync(entries, ifUnchanged: expected) }
    }

    /// Removes an entry; ``VaultError/Code/noSuchEntry`` when there is none.
    public func remove(named name: String) async throws { try await runBlocking { try self.removeSync(named: name) } }

    /// Changes the passphrase or key, or raises the iterations, atomically.
    public func rekey(to newUnlock: VaultUnlock, iterations: Int = PBKDF2.defaultIterations) async throws {
        try await runBlocking { try self.rekeySync(to: newUnlock, iterations: iterations) }
    }

    // MARK: - Reading and writing

    private static func io<R>(_ body: () throws -> R) throws -> R {
        do { return try body() } catch let error as FileError { throw VaultError(.io, error.description) }
    }

    /// The error for a vault file that does not exist.
    static func missing(_ path: String) -> VaultError {
        VaultError(.notFound, "no vault at \(path); create one with `shadow-keys vault init`")
    }

    static func readFile(_ path: String) throws -> [UInt8] {
        do {
            guard let bytes = try Files.read(path, limit: maxFileBytes) else {
                throw VaultError(.corrupted, "the vault file exceeds \(maxFileBytes) bytes")
            }
            return bytes
        } catch let error as FileError {
            if error.isNotFound {
                throw Self.missing(path)
            }
            throw VaultError(.io, error.description)
        }
    }

    /// The master key for `header`: the raw key, or the passphrase stretched (once per process
    /// for a given salt and count).
    private func masterKey(for header: VaultHeader) throws -> SymmetricKey {
        if case .passphrase(let passphrase) = unlock, header.kind == .passphrase {
            if let cached = masterCache.withLock({ $0 }), cached.salt == header.salt,
                cached.iterations == header.iterations
            {
                return cached.key
            }
            let key = try Self.masterKey(unlock: .passphrase(passphrase), header: header)
            masterCache.withLock { $0 = (header.salt, header.iterations, key) }
            return key
        }
        return try Self.masterKey(unlock: unlock, header: header)
    }

    static func masterKey(unlock: VaultUnlock, header: VaultHeader) throws -> SymmetricKey {
        switch (unlock, header.kind) {
        case (.key(let key), .key):
            guard key.count == 32 else {
                throw VaultError(.wrongKey, "wrong passphrase or key (a vault key is 32 bytes)")
            }
            return key.symmetricKey
        case (.passphrase(let passphrase), .passphrase):
            return try PBKDF2.deriveKey(passphrase: passphrase, salt: header.salt, iterations: Int(header.iterations))
                .symmetricKey
        case (.key, .passphrase):
            throw VaultError(.wrongKey, "wrong passphrase or key: this vault is locked with a passphrase, not a key")
        case (.passphrase, .key):
            throw VaultError(.wrongKey, "wrong passphrase or key: this vault is locked with a key, not a passphrase")
        }
    }

    private func open(_ bytes: [UInt8]) throws -> (header: VaultHeader, contents: VaultContents) {
        try Self.open(bytes, masterKey: masterKey(for:))
    }

    /// Opens a vault file's bytes (for vectors and tools that hold the bytes already).
    package static func open(_ bytes: [UInt8], unlock: VaultUnlock) throws -> VaultContents {
        try open(bytes) { try masterKey(unlock: unlock, header: $0) }.contents
    }

    /// Checks the digest and the key, then decrypts and reads the body.
    static func open(
        _ bytes: [UInt8], masterKey: (VaultHeader) throws -> SymmetricKey
    ) throws -> (header: VaultHeader, contents: VaultContents) {
        let (header, length) = try VaultHeader.parse(bytes)
        guard bytes.count - length == Int(header.bodyLength) else {
            throw VaultError(
                .corrupted,
                bytes.count - length < Int(header.bodyLength)
                    ? "the vault file is truncated" : "the vault file has bytes after its body")
        }
        let keys = VaultKeys(master: try masterKey(header), vaultID: header.vaultID)
        guard ConstantTime.equals(keys.keyCheck(header), header.keyCheck) else {
            throw VaultError(.wrongKey, "wrong passphrase or key")
        }
        let plaintext: [UInt8]
        do {
            plaintext = try AES256GCM.open(
                bytes[length...], key: keys.bodyKey, nonce: header.nonce, aad: header.serialized)
        } catch {
            throw VaultError(.corrupted, "the vault body does not authenticate: the file was altered or damaged")
        }
        let contents = try VaultContents.decode(plaintext)
        guard contents.generation == header.generation else {
            throw VaultError(.corrupted, "the body's generation does not match the header's")
        }
        return (header, contents)
    }

    /// The bytes of a vault file holding `contents` at `contents.generation`, sealed with the
    /// given random values: the writer's core, and how vectors are reproduced.
    package static func seal(
        _ contents: VaultContents, unlock: VaultUnlock, iterations: Int, randomness: VaultRandomness
    ) throws -> [UInt8] {
        try seal(contents, kind: unlock.headerKind, iterations: UInt32(iterations), randomness: randomness) {
            try masterKey(unlock: unlock, header: $0)
        }
    }

    static func seal(
        _ contents: VaultContents, kind: VaultHeader.Kind, iterations: UInt32, randomness: VaultRandomness,
        masterKey: (VaultHeader) throws -> SymmetricKey
    ) throws -> [UInt8] {
        let plaintext = contents.encode()
        guard randomness.vaultID.count == 16, randomness.nonce.count == 12,
            kind == .key || (16...64).contains(randomness.salt.count)
        else {
            throw VaultError(.invalidParameter, "vault randomness has the wrong sizes")
        }
        var header = VaultHeader(
            kind: kind, vaultID: randomness.vaultID, generation: contents.generation,
            iterations: kind == .passphrase ? iterations : 0,
            salt: kind == .passphrase ? randomness.salt : [], nonce: randomness.nonce,
            bodyLength: UInt32(clamping: plaintext.count + AES256GCM.tagBytes),
            keyCheck: [])
        let keys = VaultKeys(master: try masterKey(header), vaultID: header.vaultID)
        header.keyCheck = keys.keyCheck(header)
        let serialized = header.serialized
        // The reader refuses files over maxFileBytes, so the writer never makes one.
        guard serialized.count + Int(header.bodyLength) <= maxFileBytes else {
            throw VaultError(
                .invalidParameter,
                """
                the vault would be \(serialized.count + Int(header.bodyLength)) bytes, over the \(maxFileBytes)-byte \
                limit; remove entries or keep large secrets elsewhere
                """
            )
        }
        return serialized + (try AES256GCM.seal(plaintext, key: keys.bodyKey, nonce: header.nonce, aad: serialized))
    }

    /// Writes `contents` as the next generation, atomically. A passphrase vault keeps its salt
    /// and count unless `iterations` sets new ones (create, rekey), which also draws a new salt.
    private func write(_ contents: VaultContents, previous: VaultHeader?, iterations: UInt32?) throws {
        var contents = contents
        contents.generation = (previous?.generation ?? 0) + 1
        let kind = unlock.headerKind
        let keepSalt = previous?.kind == .passphrase && kind == .passphrase && iterations == nil
        let randomness = VaultRandomness(
            vaultID: previous?.vaultID ?? randomBytes(16), salt: keepSalt ? previous?.salt ?? [] : randomBytes(16),
            nonce: randomBytes(12))
        let rounds = keepSalt ? previous?.iterations ?? 0 : iterations ?? UInt32(PBKDF2.defaultIterations)
        let bytes = try Self.seal(
            contents, kind: kind, iterations: rounds, randomness: randomness, masterKey: masterKey(for:))
        try Self.io { try Files.writeAtomically(path, bytes, mode: 0o600) }
    }

    /// Holds the vault's lock (`<path>.lock`) around `body`; removes temporary files that a
    /// killed writer left behind, which only a lock holder can safely do. Unless `creating`, a
    /// vault that does not exist is refused before the lock file is made, so a failed write
    /// leaves nothing beside the missing vault.
    private func withLock<R>(creating: Bool = false, _ body: () throws -> R) throws -> R {
        if !creating, try Self.io({ try Files.ownerAndMode(path) }) == nil {
            throw Self.missing(path)
        }
        let lock: FileLock?
        do { lock = try FileLock.acquire(path + ".lock", timeout: lockTimeout.inSeconds) } catch let error as FileError
        {
            // The vault's folder does not exist: there is no vault, as a read would say.
            if error.isNotFound {
                throw VaultError(
                    .notFound, "no folder for a vault at \(path): \(Files.parentDirectory(path)) does not exist")
            }
            throw VaultError(.io, error.description)
        }
        guard let lock else {
            throw VaultError(.lockTimeout, "another process held the vault's lock for more than \(lockTimeout)")
        }
        defer { lock.release() }
        removeStaleTemporaries()
        return try body()
    }

    private func removeStaleTemporaries() {
        let folder = Files.parentDirectory(path)
        let prefix = "." + Files.baseName(path) + ".tmp-"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return }
        for name in names where name.hasPrefix(prefix) { unlink(folder + "/" + name) }
    }
}
