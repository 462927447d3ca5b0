import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore

/// Where a secret comes from: stdin, a file, an environment variable, or (tokens and nonces only,
/// with a warning) an argument. The one reader behind every token, passphrase, key, code and
/// nonce the CLI takes.
struct SecretInput {
    enum Origin {
        case argument(String)
        case standardInput
        case file(String)
        case environment(String)
        /// Asked on the terminal without echo (twice when `confirm`): only when stdin is a
        /// terminal and no option names a key or passphrase.
        case prompt(confirm: Bool)
    }

    let origin: Origin
    /// What the secret is, for messages: "token", "passphrase", "key".
    let what: String

    /// Largest passphrase, key, code or nonce read.
    static let secretLimit = 64 * 1024

    var usesStdin: Bool {
        if case .standardInput = origin { return true }
        return false
    }

    /// The bytes as given, at most `limit`. A file or variable that cannot be read is exit 66;
    /// an oversized secret fails with `oversize` (a usage error unless said otherwise).
    func bytes(limit: Int, oversize: ExitStatus = .usage) throws -> [UInt8] {
        switch origin {
        case .argument(let value):
            return Array(value.utf8)
        case .standardInput:
            guard let input = try Files.readAll(0, limit: limit, path: "stdin") else {
                throw CLIError(oversize, "the \(what) on stdin exceeds \(limit) bytes")
            }
            return input
        case .file(let path):
            warnIfReadableByOthers(path, what: "\(what) file")
            do {
                guard let input = try Files.read(path, limit: limit) else {
                    throw CLIError(oversize, "the \(what) file \(path) exceeds \(limit) bytes")
                }
                return input
            } catch let error as FileError {
                throw CLIError(.noInput, "cannot read the \(what) file: \(error)")
            }
        case .environment(let name):
            guard let value = ProcessInfo.processInfo.environment[name] else {
                throw CLIError(.noInput, "environment variable \(name) is not set")
            }
            return Array(value.utf8)
        case .prompt(let confirm):
            return try TerminalPrompt.secret(what: what, confirm: confirm, limit: limit)
        }
    }

    /// The secret with one trailing newline (LF or CRLF) dropped; empty is refused. The
    /// intermediate copy is zeroed.
    func secret(limit: Int = secretLimit) throws -> SecretBytes {
        var bytes = try self.bytes(limit: limit)
        defer { for index in bytes.indices { bytes[index] = 0 } }
        if bytes.last == 0x0A { bytes.removeLast() }
        if bytes.last == 0x0D { bytes.removeLast() }
        guard !bytes.isEmpty else { throw CLIError(.usage, "the \(what) is empty") }
        return SecretBytes(bytes)
    }

    /// The secret as UTF-8 text: surrounding whitespace trimmed (`trimmingWhitespace`, for
    /// tokens) or one trailing newline dropped.
    func text(
        limit: Int = secretLimit, oversize: ExitStatus = .usage, trimmingWhitespace: Bool = false
    ) throws -> String {
        let bytes = try self.bytes(limit: limit, oversize: oversize)
        let kept = trimmingWhitespace ? trimWhitespace(bytes) : Self.droppingOneNewline(bytes[...])
        guard !kept.isEmpty else { throw CLIError(.usage, "the \(what) is empty") }
        guard let text = String(validating: kept, as: UTF8.self) else {
            throw CLIError(.usage, "the \(what) is not UTF-8")
        }
        return text
    }

    /// A 256-bit key. A file holds 32 raw bytes, 64 hex digits, or base64 (standard or URL-safe)
    /// of 32 bytes; other origins hold the text forms.
    func key() throws -> SecretBytes {
        var bytes = try self.bytes(limit: 4096)
        defer { for index in bytes.indices { bytes[index] = 0 } }
        if case .file = origin, bytes.count == 32 { return SecretBytes(bytes) }
        let trimmed = trimWhitespace(bytes)
        if trimmed.count == 64, var hex = try? Hex.decode(utf8: trimmed) {
            defer { for index in hex.indices { hex[index] = 0 } }
            return SecretBytes(hex)
        }
        let text = String(decoding: trimmed, as: UTF8.self)
        let urlSafe = text.replacing("+", with: "-").replacing("/", with: "_").filter { $0 != "=" }
        if let decoded = try? Base64URL.decode(urlSafe), decoded.count == 32 { return SecretBytes(decoded) }
        let forms =
            if case .file = origin { "32 raw bytes, 64 hex digits, or base64 of 32 bytes" } else {
                "64 hex digits or base64 of 32 bytes"
            }
        throw CLIError(.usage, "the \(what) holds neither \(forms)")
    }

    private static func droppingOneNewline(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var bytes = bytes
        if bytes.last == 0x0A { bytes.removeLast() }
        if bytes.last == 0x0D { bytes.removeLast() }
        return bytes
    }
}

/// The one origin among several options, or nil when none was given; a usage error names them
/// all when more than one was.
func oneOrigin(_ candidates: Origins, options: String) throws -> SecretInput.Origin? {
    let given = candidates.filter(\.given)
    guard given.count <= 1 else { throw ValidationError("give one of \(options)") }
    return given.first?.origin
}

/// Bytes without leading and trailing ASCII whitespace.
func trimWhitespace(_ bytes: [UInt8]) -> ArraySlice<UInt8> {
    func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 }
    guard let start = bytes.firstIndex(where: { !isSpace($0) }), let end = bytes.lastIndex(where: { !isSpace($0) })
    else { return [] }
    return bytes[start...end]
}

/// Warns on stderr when a secret file can be read by group or others.
package func warnIfReadableByOthers(_ path: String, what: String) {
    if let (_, mode) = (try? Files.ownerAndMode(path)) ?? nil, mode & 0o044 != 0 {
        Console.warn(
            "the \(what) \(path) is readable by group or others (mode \(String(mode, radix: 8))); chmod 600 it")
    }
}
