import Crypto
#if canImport(Darwin)
import Darwin
#else
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowVault

/// What a witness remembers (Docs/operation-log.md, "The witness"): the last checkpoint of the
/// log it accepted, and optionally the vault's generation and the state store's audit head.
public struct WitnessRecord: Sendable, Hashable {
    public var origin: String
    public var size: UInt64
    public var root: TreeHash
    public var vault: VaultMark?
    public var state: StateMark?

    public init(origin: String, size: UInt64, root: TreeHash, vault: VaultMark? = nil, state: StateMark? = nil) {
        (self.origin, self.size, self.root, self.vault, self.state) = (origin, size, root, vault, state)
    }
}

/// A vault's identity and generation (from its header; no key needed).
public struct VaultMark: Sendable, Hashable {
    /// The vault ID, 32 lower-case hex digits.
    public let id: String
    public let generation: UInt64

    public init(id: String, generation: UInt64) {
        self.id = id
        self.generation = generation
    }

    /// The mark of the vault file at `path`.
    public static func read(path: String) throws -> VaultMark {
        let info = try TokenVault.headerInfo(path: path)
        return VaultMark(id: info.vaultID, generation: info.generation)
    }
}

/// A state store's audit head: how many transitions its audit log holds, and a digest of the last.
public struct StateMark: Sendable, Hashable {
    public let count: Int
    /// SHA-256 of the last entry's sequence, times, event ID and subject hash; 32 zero bytes for none.
    public let last: [UInt8]

    public init(count: Int, last: [UInt8]) {
        self.count = count
        self.last = last
    }

}

/// Reads a state store's mark for the witness, and the digest of its transition `entry` (1-based)
/// when asked: a state store's `auditMark(entry:)` (ShadowCredentials), so the log needs no
/// credential module.
public typealias StateMarkReader = @Sendable (_ entry: Int?) async throws -> (mark: StateMark, entryDigest: [UInt8]?)

/// A witness: the last accepted state, in a file of its own that the log's key authenticates.
///
/// On every check it demands that the log's new checkpoint be consistent with the remembered one
/// (the log only grew), that the vault's generation did not go down, and that the state store's
/// audit log still holds the remembered last entry. Anything else is ``LogErrorCode/rolledBack``.
public struct Witness: Sendable {
    public let path: String
    let keys: LogKeys

    static let header = "shadow-keys witness v1"
    /// The largest witness file read.
    static let maxBytes = 4096

    public init(path: String, keys: LogKeys) {
        self.path = path
        self.keys = keys
    }

    /// The remembered record; nil when there is no witness file yet.
    /// - Throws: ``LogErrorCode/tampered`` when the file is malformed or does not authenticate.
    public func read() throws -> WitnessRecord? {
        let bytes: [UInt8]
        do {
            guard let read = try Files.read(path, limit: Self.maxBytes) else {
                throw LogError(.tampered, "the witness file \(path) is over \(Self.maxBytes) bytes")
            }
            bytes = read
        } catch let error as FileError where error.code == ENOENT {
            return nil
        } catch let error as FileError {
            throw LogError(.io, "\(error)")
        }
        return try Self.parse(bytes, keys: keys)
    }

    /// Parses and authenticates a witness file, by its bytes: the MAC covers the exact bytes of
    /// the lines above it, the lines come in the documented order, and the file must be the one
    /// this writer makes of what it holds (decimal without a sign or leading zeros, lower-case hex).
    static func parse(_ bytes: [UInt8], keys: LogKeys) throws -> WitnessRecord {
        func bad(_ reason: String) -> LogError { LogError(.tampered, "the witness file: \(reason)") }
        guard String(validating: bytes, as: UTF8.self) != nil, bytes.last == UInt8(ascii: "\n") else {
            throw bad("it is not UTF-8 text ending in a newline")
        }
        let lines = bytes.dropLast().split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        guard lines.count >= 5, lines[0].elementsEqual(header.utf8), let macLine = lines.last,
            macLine.starts(with: "mac ".utf8)
        else { throw bad("it is not a \(header) file") }
        let body = bytes[..<macLine.startIndex]
        guard let mac = Base64.decode(String(decoding: macLine.dropFirst(4), as: UTF8.self)),
            ConstantTime.equals(keys.witnessMAC(body), mac)
        else { throw bad("it does not authenticate with this log's key: it was edited, or belongs to another log") }
        // The lines between the header and the MAC, each split at its spaces, in order.
        var fields = lines.dropFirst().dropLast().map {
            $0.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false).map {
                String(decoding: $0, as: UTF8.self)
            }
        }[...]
        func take(_ name: String, values: Int) -> [String]? {
            guard let line = fields.first, line.count == values + 1, line[0].utf8.elementsEqual(name.utf8) else {
                return nil
            }
            fields = fields.dropFirst()
            return Array(line.dropFirst())
        }
        guard let origin = take("origin", values: 1)?[0],
            (try? Checkpoint(origin: origin, size: 0, root: .empty)) != nil,
            let size = take("size", values: 1).flatMap({ UInt64($0[0]) }),
            let root = take("root", values: 1).flatMap({ TreeHash(base64: $0[0]) })
        else { throw bad("its origin, size or root line is malformed") }
        var record = WitnessRecord(origin: origin, size: size, root: root)
        if let vault = take("vault", values: 2) {
            guard let id = try? Hex.decode(vault[0]), id.count == 16, Hex.encode(id).utf8.elementsEqual(vault[0].utf8),
                let generation = UInt64(vault[1])
            else {
                throw bad("its vault line is malformed")
            }
            record.vault = VaultMark(id: vault[0], generation: generation)
        }
        if let state = take("state", values: 2) {
            guard let count = Int(state[0]), count >= 0, let last = try? Hex.decode(state[1]), last.count == 32 else {
                throw bad("its state line is malformed")
            }
            record.state = StateMark(count: count, last: last)
        }
        guard fields.isEmpty else { throw bad("a line is repeated, out of order or unknown") }
        // `+5`, `05` or upper-case hex read as the same record, but are not what was written.
        guard Self.body(record).elementsEqual(body) else {
            throw bad("a number or hex field is not written as this file writes it (decimal, lower-case hex)")
        }
        return record
    }

    /// The file's lines before its MAC line, for `record`.
    static func body(_ record: WitnessRecord) -> [UInt8] {
        var lines = [Self.header, "origin \(record.origin)", "size \(record.size)", "root \(record.root.base64)"]
        if let vault = record.vault { lines.append("vault \(vault.id) \(vault.generation)") }
        if let state = record.state { lines.append("state \(state.count) \(Hex.encode(state.last))") }
        return Array(lines.map { $0 + "\n" }.joined().utf8)
    }

    /// The file's bytes for `record`.
    func serialize(_ record: WitnessRecord) -> [UInt8] {
        let body = Self.body(record)
        return body + Array("mac \(Base64.encode(keys.witnessMAC(body[...])))\n".utf8)
    }

    /// Writes `record` atomically, mode 0600.
    /// - Throws: ``LogErrorCode/invalidParameter`` for a record the reader would refuse (an
    ///   origin that is not a log's, a vault ID that is not 32 lower-case hex digits, a negative count).
    public func write(_ record: WitnessRecord) throws {
        let bytes = serialize(record)
        do {
            _ = try Self.parse(bytes, keys: keys)
        } catch let error as LogError {
            throw LogError(.invalidParameter, "a witness record this file could not read back (\(error.reason))")
        }
        do {
            try Files.writeAtomically(path, bytes)
        } catch let error as FileError {
            throw LogError(.io, "\(error)")
        }
    }

    /// Checks `log`, and the vault and state store when given, against the remembered record,
    /// then remembers the new one. Returns the previous record (nil on first use).
    /// - Throws: ``LogErrorCode/rolledBack`` naming what went back; ``LogErrorCode/tampered``
    ///   when the witness file itself was edited.
    @discardableResult
    public func check(
        _ log: OperationLog, vault: VaultMark? = nil, state: StateMarkReader? = nil
    ) async throws -> WitnessRecord? {
        let current = try await log.checkpoint().checkpoint
        let previous = try read()
        var stateMark: StateMark?
        if let state {
            let (mark, digest) = try await state(previous?.state?.count)
            if let old = previous?.state, old.count > 0 {
                guard mark.count >= old.count else {
                    throw LogError(
                        .rolledBack,
                        "the state store's audit log went back from \(old.count) to \(mark.count) transitions")
                }
                guard let digest, ConstantTime.equals(digest, old.last) else {
                    throw LogError(
                        .rolledBack, "the state store's audit log no longer holds the transition the witness saw last")
                }
            }
            stateMark = mark
        }
        if let previous {
            guard previous.origin == current.origin else {
                throw LogError(.rolledBack, "the witness watches \(previous.origin), not \(current.origin)")
            }
            guard current.size >= previous.size else {
                throw LogError(
                    .rolledBack, "the log went back from \(previous.size) to \(current.size) entries")
            }
            let proof = try await log.consistencyProof(from: previous.size, to: current.size)
            do {
                try MerkleProof.verifyConsistency(
                    oldSize: previous.size, newSize: current.size, oldRoot: previous.root, newRoot: current.root,
                    proof: proof.path)
            } catch {
                throw LogError(
                    .rolledBack,
                    """
                    the log of \(current.size) entries does not extend the one of \(previous.size) the witness saw: \
                    it was rewritten
                    """
                )
            }
            if let old = previous.vault, let vault {
                guard old.id == vault.id else {
                    throw LogError(.rolledBack, "the vault is another vault (\(vault.id), not \(old.id))")
                }
                guard vault.generation >= old.generation else {
                    throw LogError(
                        .rolledBack,
                        """
                        the vault went back from generation \(old.generation) to \(vault.generation): an older copy \
                        was restored
                        """
                    )
                }
            }
        }
        try write(
            WitnessRecord(
                origin: current.origin, size: current.size, root: current.root, vault: vault ?? previous?.vault,
                state: stateMark ?? previous?.state))
        return previous
    }
}
