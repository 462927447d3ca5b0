import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowCrypto

/// Largest passphrase or key file read.
private let secretReadLimit = 64 * 1024

/// A passphrase from stdin, a file or an environment variable; never from argv.
struct PassphraseOptions: ParsableArguments {
    @Flag(name: .customLong("passphrase-stdin"), help: "Read the passphrase from stdin (one trailing newline is dropped).")
    var fromStdin = false

    @Option(name: .customLong("passphrase-file"), help: "Read the passphrase from this file (one trailing newline is dropped).")
    var file: String?

    @Option(name: .customLong("passphrase-env"), help: "Read the passphrase from this environment variable.")
    var environmentVariable: String?

    var given: Int { (fromStdin ? 1 : 0) + (file == nil ? 0 : 1) + (environmentVariable == nil ? 0 : 1) }

    func validate() throws {
        if given > 1 { throw ValidationError("give one passphrase source: --passphrase-stdin, --passphrase-file or --passphrase-env") }
    }

    /// Reads the passphrase; `nil` when no source was given.
    func read() throws -> SecretBytes? {
        var bytes: [UInt8]
        if fromStdin {
            guard let input = try Files.readAll(0, limit: secretReadLimit, path: "stdin") else { throw CLIError(.usage, "passphrase on stdin exceeds \(secretReadLimit) bytes") }
            bytes = input
        } else if let file {
            warnIfReadableByOthers(file, what: "passphrase file")
            do {
                guard let input = try Files.read(file, limit: secretReadLimit) else { throw CLIError(.usage, "passphrase file exceeds \(secretReadLimit) bytes") }
                bytes = input
            } catch let error as FileError {
                throw CLIError(.usage, "cannot read the passphrase file: \(error)")
            }
        } else if let name = environmentVariable {
            guard let value = ProcessInfo.processInfo.environment[name] else { throw CLIError(.usage, "environment variable \(name) is not set") }
            bytes = Array(value.utf8)
        } else {
            return nil
        }
        if bytes.last == 0x0A { bytes.removeLast() }
        if bytes.last == 0x0D { bytes.removeLast() }
        defer { for index in bytes.indices { bytes[index] = 0 } }
        guard !bytes.isEmpty else { throw CLIError(.usage, "the passphrase is empty") }
        return SecretBytes(bytes)
    }
}

/// Reads a 256-bit key file: 32 raw bytes, 64 hex digits, or base64/base64url of 32 bytes.
func readKeyFile(_ path: String) throws -> SecretBytes {
    warnIfReadableByOthers(path, what: "key file")
    var bytes: [UInt8]
    do {
        guard let contents = try Files.read(path, limit: 4096) else { throw CLIError(.usage, "key file \(path) is too large to be a 256-bit key") }
        bytes = contents
    } catch let error as FileError {
        throw CLIError(.usage, "cannot read the key file: \(error)")
    }
    defer { for index in bytes.indices { bytes[index] = 0 } }
    if bytes.count == 32 { return SecretBytes(bytes) }
    guard let key = parseTextKey(bytes) else { throw CLIError(.usage, "key file \(path) holds neither 32 raw bytes, 64 hex digits, nor base64 of 32 bytes") }
    return key
}

/// Reads a 256-bit key from an environment variable: 64 hex digits, or base64/base64url of 32 bytes.
func readKeyEnvironment(_ name: String) throws -> SecretBytes {
    guard let value = ProcessInfo.processInfo.environment[name] else { throw CLIError(.usage, "environment variable \(name) is not set") }
    guard let key = parseTextKey(Array(value.utf8)) else { throw CLIError(.usage, "environment variable \(name) holds neither 64 hex digits nor base64 of 32 bytes") }
    return key
}

private func parseTextKey(_ bytes: [UInt8]) -> SecretBytes? {
    let text = String(decoding: trimWhitespace(bytes), as: UTF8.self)
    if text.utf8.count == 64, let hex = try? Hex.decode(text) { return SecretBytes(hex) }
    let urlSafe = text.replacing("+", with: "-").replacing("/", with: "_").filter { $0 != "=" }
    if let decoded = try? Base64URL.decode(urlSafe), decoded.count == 32 { return SecretBytes(decoded) }
    return nil
}

/// Warns on stderr when a secret file can be read by group or others.
func warnIfReadableByOthers(_ path: String, what: String) {
    if let (_, mode) = (try? Files.ownerAndMode(path)) ?? nil, mode & 0o044 != 0 {
        Console.err("shadow-keys: warning: the \(what) \(path) is readable by group or others (mode \(String(mode, radix: 8))); chmod 600 it")
    }
}

/// A key-encryption key from `--key-file` or a passphrase option.
struct KEKOptions: ParsableArguments {
    @Option(name: .customLong("key-file"), help: "A 256-bit key: 32 raw bytes, 64 hex digits, or base64.")
    var keyFile: String?

    @OptionGroup var passphrase: PassphraseOptions

    var usesStdin: Bool { passphrase.fromStdin }

    func validate() throws {
        let sources = passphrase.given + (keyFile == nil ? 0 : 1)
        guard sources == 1 else { throw ValidationError("give exactly one of --key-file, --passphrase-stdin, --passphrase-file or --passphrase-env") }
    }

    /// The key-encryption key, with `id` and, for a passphrase, `iterations` when sealing.
    func kek(id: String = "", iterations: Int = PBKDF2.defaultIterations) throws -> KeyEncryptionKey {
        if let keyFile { return try .raw(try readKeyFile(keyFile), id: id) }
        guard let secret = try passphrase.read() else { throw CLIError(.usage, "no key given") }
        return try .passphrase(secret, id: id, iterations: iterations)
    }
}

/// `--context k=v`, repeatable, in order.
func parseContext(_ items: [String]) throws -> EnvelopeContext {
    let pairs = try items.map { item -> (String, String) in
        guard let equals = item.firstIndex(of: "=") else { throw ValidationError("--context \(item): expected key=value") }
        return (String(item[..<equals]), String(item[item.index(after: equals)...]))
    }
    do { return try EnvelopeContext(pairs) } catch let error as ShadowCryptoError { throw ValidationError("--context: \(error.reason)") }
}

/// A short secret given as text in a file (one trailing newline dropped) or an environment
/// variable: a nonce, say. Usage errors name `what`.
func readSecretText(file: String? = nil, environment: String? = nil, what: String) throws -> String {
    var bytes: [UInt8]
    if let file {
        warnIfReadableByOthers(file, what: "\(what) file")
        do {
            guard let input = try Files.read(file, limit: secretReadLimit) else { throw CLIError(.usage, "the \(what) file exceeds \(secretReadLimit) bytes") }
            bytes = input
        } catch let error as FileError {
            throw CLIError(error.isNotFound ? .noInput : .usage, "cannot read the \(what) file: \(error)")
        }
    } else if let environment {
        guard let value = ProcessInfo.processInfo.environment[environment] else { throw CLIError(.usage, "environment variable \(environment) is not set") }
        bytes = Array(value.utf8)
    } else {
        throw CLIError(.usage, "no \(what) given")
    }
    if bytes.last == 0x0A { bytes.removeLast() }
    if bytes.last == 0x0D { bytes.removeLast() }
    guard !bytes.isEmpty, let text = String(validating: bytes, as: UTF8.self) else { throw CLIError(.usage, "the \(what) is empty or not UTF-8") }
    return text
}
