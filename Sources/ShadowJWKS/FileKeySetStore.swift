import Crypto
#if canImport(Darwin)
import Darwin
import Foundation
#else
import Glibc
import FoundationEssentials
#endif
import ShadowCore

/// A ``KeySetStore`` in one file per URL, for processes that come and go (the CLI).
///
/// Files live in `$XDG_CACHE_HOME/shadow-keys/jwks/` (else `~/.cache/shadow-keys/jwks/`), are
/// written atomically with mode 0600 in a 0700 directory, and carry a SHA-256 over their
/// canonical form. A file that is corrupt, for another URL, not owned by this user, or writable by
/// group or others is ignored (and replaced at the next save). Format: Docs/jwks-caching.md.
public struct FileKeySetStore: KeySetStore {
    /// The cache file.
    public let path: String
    /// The URL whose key set the file holds.
    public let url: String

    /// The file's format identifier and version.
    static let format = "shadow-keys-jwks-cache"
    static let version: Int64 = 1
    /// Largest cache file read.
    static let maxFileBytes = 1 << 20

    /// A store for `url` in `directory`.
    public init(url: String, directory: String) {
        self.url = url
        self.path = directory + "/" + Self.fileName(for: url)
    }

    /// `<hex SHA-256 of the URL>.json`.
    public static func fileName(for url: String) -> String {
        Hex.encode(SHA256.hash(data: Array(url.utf8))) + ".json"
    }

    /// `$XDG_CACHE_HOME/shadow-keys/jwks`, else `$HOME/.cache/shadow-keys/jwks`.
    ///
    /// - Throws: ``JWKSError/Code/cacheUnavailable`` when neither variable holds an absolute path:
    ///   there is no shared fallback such as `/tmp`, where other users could plant a cache.
    public static func defaultDirectory(environment: [String: String]? = nil) throws -> String {
        let environment = environment ?? ProcessInfo.processInfo.environment
        if let xdg = environment["XDG_CACHE_HOME"], xdg.hasPrefix("/") { return xdg + "/shadow-keys/jwks" }
        if let home = environment["HOME"], home.hasPrefix("/") { return home + "/.cache/shadow-keys/jwks" }
        throw JWKSError(
            .cacheUnavailable, "no folder for the key-set cache: set XDG_CACHE_HOME or HOME to an absolute path")
    }

    /// Why the cache folder may not be used, or nil when it may: it must be this user's, not
    /// a symbolic link, and writable by nobody else; its parent must not let others replace it
    /// (this user's or root's, and not writable by others unless sticky, as `/tmp` is).
    public var directoryProblem: String? {
        let directory = Files.parentDirectory(path)
        return Files.privateDirectoryProblem(directory)
            ?? Files.privateDirectoryProblem(Files.parentDirectory(directory), asParent: true)
    }

    public func load() -> KeySetSnapshot? {
        guard directoryProblem == nil,
            let (owner, mode) = (try? Files.ownerAndMode(path)) ?? nil, owner == Files.currentUser, mode & 0o022 == 0,
            let bytes = try? Files.read(path, limit: Self.maxFileBytes, followSymlinks: false)
        else { return nil }
        return try? Self.decode(bytes, url: url)
    }

    public func save(_ snapshot: KeySetSnapshot) throws {
        let text = Array(Self.encode(snapshot, url: url).utf8)
        // The reader refuses larger files, so the writer does not make them.
        guard text.count <= Self.maxFileBytes else {
            throw JWKSError(
                .cacheUnavailable,
                "the key-set cache file would be \(text.count) bytes; the limit is \(Self.maxFileBytes)")
        }
        if let problem = directoryProblem { throw JWKSError(.cacheUnavailable, problem) }
        try Files.makeDirectory(Files.parentDirectory(path))
        if let problem = directoryProblem { throw JWKSError(.cacheUnavailable, problem) }
        try Files.writeAtomically(path, text, mode: 0o600)
    }

    public func lockForRefresh(timeout: Duration) -> (@Sendable () -> Void)? {
        guard directoryProblem == nil else { return nil }
        try? Files.makeDirectory(Files.parentDirectory(path))
        guard directoryProblem == nil,
            let lock = try? FileLock.acquire(path.dropLast(5) + ".lock", timeout: timeout.inSeconds)
        else { return nil }
        return { lock.release() }
    }

    /// Deletes this URL's cache file (and its lock file).
    public func remove() throws {
        for file in [path, String(path.dropLast(5)) + ".lock"] where unlink(file) != 0 && errno != ENOENT {
            throw FileError("remove", file)
        }
    }

    // MARK: - Format

    /// Why a cache file was refused.
    struct FormatError: Error, CustomStringConvertible {
        let description: String
    }

    /// The file's text: members in code point order (as RFC 8785 sorts them), compact, with
    /// `sha256` last over the serialization of the others.
    package static func encode(_ snapshot: KeySetSnapshot, url: String) -> String {
        // Times outside the supported range (only a broken clock makes them) are written as null.
        func millis(_ date: Date?) -> JSONValue {
            date.flatMap(Timestamp.init).map { .int($0.milliseconds) } ?? .null
        }
        func text(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
        let unknown: [JSONValue] = snapshot.unknownKeyIDs.compactMap { entry in
            Timestamp(entry.at).map { ["atMs": .int($0.milliseconds), "kid": .string(entry.keyID)] }
        }
        let body: JSONObject = [
            "body": snapshot.body.map { .string(Base64URL.encode($0)) } ?? .null,
            "etag": text(snapshot.etag),
            "expiresAtMs": millis(snapshot.expiresAt),
            "fetchedAtMs": millis(snapshot.fetchedAt),
            "format": .string(format),
            "lastAttemptMs": millis(snapshot.lastAttempt),
            "lastFailure": text(snapshot.lastFailure),
            "lastModified": text(snapshot.lastModified),
            "retryNotBeforeMs": millis(snapshot.retryNotBefore),
            "unknownKids": .array(unknown),
            "url": .string(url),
            "version": .int(version),
        ]
        let canonical = body.serialized()
        let digest = Hex.encode(SHA256.hash(data: Array(canonical.utf8)))
        return String(canonical.dropLast()) + ",\"sha256\":\"\(digest)\"}"
    }

    /// Reads a cache file, checking format, version, URL and digest.
    package static func decode(_ bytes: [UInt8], url: String) throws -> KeySetSnapshot {
        guard var object = try StrictJSON.parse(bytes, limits: .init(maxBytes: maxFileBytes, maxDepth: 8)).objectValue
        else {
            throw FormatError(description: "not a JSON object")
        }
        guard object["format"]?.stringValue == format else {
            throw FormatError(description: "not a shadow-keys JWKS cache file")
        }
        guard object["version"]?.numberValue?.int64Value == version else {
            throw FormatError(description: "unsupported cache version")
        }
        guard let digest = object["sha256"]?.stringValue, object.last?.name == "sha256" else {
            throw FormatError(description: "no digest")
        }
        object.set("sha256", nil)
        let expected = Hex.encode(SHA256.hash(data: Array(object.serialized().utf8)))
        guard ConstantTime.equals(Array(digest.utf8), Array(expected.utf8)) else {
            throw FormatError(description: "digest mismatch")
        }
        guard object["url"]?.stringValue?.exactlyEquals(url) == true else {
            throw FormatError(description: "cache file is for another URL")
        }

        func date(_ name: String) throws -> Date? {
            switch object[name] {
            case .none, .null?: return nil
            case .number(let number)?:
                guard let ms = number.int64Value, let time = Timestamp(milliseconds: ms) else {
                    throw FormatError(description: "\(name) is not an integer within \(Timestamp.rangeDescription)")
                }
                return time.date
            default: throw FormatError(description: "\(name) is not a number")
            }
        }
        func text(_ name: String) throws -> String? {
            switch object[name] {
            case .none, .null?: return nil
            case .string(let value)?: return value
            default: throw FormatError(description: "\(name) is not a string")
            }
        }
        var snapshot = KeySetSnapshot()
        snapshot.body = try text("body").map { try Base64URL.decode($0) }
        snapshot.fetchedAt = try date("fetchedAtMs")
        snapshot.expiresAt = try date("expiresAtMs")
        snapshot.etag = try text("etag")
        snapshot.lastModified = try text("lastModified")
        snapshot.lastAttempt = try date("lastAttemptMs")
        snapshot.lastFailure = try text("lastFailure")
        snapshot.retryNotBefore = try date("retryNotBeforeMs")
        for entry in object["unknownKids"]?.arrayValue ?? [] {
            guard let kid = entry.objectValue?["kid"]?.stringValue,
                let ms = entry.objectValue?["atMs"]?.numberValue?.int64Value,
                let time = Timestamp(milliseconds: ms)
            else {
                throw FormatError(description: "malformed unknownKids entry")
            }
            snapshot.unknownKeyIDs.append(.init(keyID: kid, at: time.date))
        }
        // The file must be the one this writer makes of what was read (Docs/jwks-caching.md):
        // reordered, extra or missing members, `1.0` for an integer, an escape or space RFC 8785
        // does not write, each parse and hash to a snapshot, but none is a cache file.
        guard encode(snapshot, url: url).utf8.elementsEqual(bytes) else {
            throw FormatError(description: "not in the canonical form (members, order or spelling)")
        }
        return snapshot
    }
}
