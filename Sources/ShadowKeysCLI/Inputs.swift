import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowJOSE

/// Where the CLI reads a token from: an argument, `-` for stdin, a file, or an environment variable.
struct TokenInput {
    /// The positional `TOKEN|-`.
    var argument: String?
    var file: String?
    var environmentVariable: String?

    /// Largest token read from stdin or a file before it is refused.
    static let readLimit = 1 << 20

    func validate() throws {
        let given = [argument, file, environmentVariable].compactMap { $0 }.count
        guard given == 1 else {
            throw ValidationError("give the token exactly once: as TOKEN, '-' for stdin, --token-file or --token-env")
        }
    }

    var usesStdin: Bool { argument == "-" }

    /// The token text with surrounding whitespace removed.
    func read() throws -> String {
        let bytes: [UInt8]
        if let argument, argument != "-" {
            bytes = Array(argument.utf8)
        } else if argument == "-" {
            guard let input = try Files.readAll(0, limit: Self.readLimit, path: "stdin") else {
                throw CLIError(.malformedToken, "token on stdin exceeds \(Self.readLimit) bytes")
            }
            bytes = input
        } else if let file {
            do {
                guard let input = try Files.read(file, limit: Self.readLimit) else {
                    throw CLIError(.malformedToken, "token file \(file) exceeds \(Self.readLimit) bytes")
                }
                bytes = input
            } catch let error as FileError {
                throw CLIError(.usage, "cannot read token file: \(error)")
            }
        } else if let name = environmentVariable {
            guard let value = ProcessInfo.processInfo.environment[name] else {
                throw CLIError(.usage, "environment variable \(name) is not set")
            }
            bytes = Array(value.utf8)
        } else {
            throw CLIError(.usage, "no token given")
        }
        return String(decoding: trimWhitespace(bytes), as: UTF8.self)
    }
}

/// Bytes without leading and trailing ASCII whitespace.
func trimWhitespace(_ bytes: [UInt8]) -> ArraySlice<UInt8> {
    func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 }
    guard let start = bytes.firstIndex(where: { !isSpace($0) }), let end = bytes.lastIndex(where: { !isSpace($0) }) else { return [] }
    return bytes[start...end]
}

/// Reads a JWK Set from a file or stdin; every failure is "keys unavailable" (exit 13).
func readKeySet(_ source: String) throws -> JWKSet {
    let bytes: [UInt8]
    do {
        let input = source == "-" ? try Files.readAll(0, limit: JWKSet.maxDocumentBytes, path: "stdin") : try Files.read(source, limit: JWKSet.maxDocumentBytes)
        guard let input else { throw CLIError(.keysUnavailable, "JWKS \(source) exceeds \(JWKSet.maxDocumentBytes) bytes") }
        bytes = input
    } catch let error as FileError {
        throw CLIError(.keysUnavailable, "cannot read JWKS: \(error)")
    }
    let set: JWKSet
    do { set = try JWKSet(json: bytes) } catch let error as JOSEError {
        throw CLIError(.keysUnavailable, code: error.code.name, "JWKS \(source): \(error.reason)")
    }
    guard !set.keys.isEmpty else {
        let reasons = set.skipped.map(\.description).joined(separator: "; ")
        throw CLIError(.keysUnavailable, "JWKS \(source) has no usable keys" + (reasons.isEmpty ? "" : " (skipped: \(reasons))"))
    }
    return set
}

/// Parses `--now`: epoch seconds or RFC 3339, within the supported range.
func parseNow(_ value: String?) throws -> WallClock {
    guard let value else { return .system }
    return .fixed(try parseTime(value, option: "--now").date)
}

/// An RFC 3339 or epoch-seconds option value within the supported range; a usage error names the option.
func parseTime(_ value: String, option: String) throws -> Timestamp {
    do { return try Timestamp.parse(value) } catch { throw ValidationError("\(option): \(error)") }
}

/// Now plus `seconds` (an option such as `--expires-in`), within the supported range.
func timeFromNow(seconds: Int, option: String) throws -> Timestamp {
    guard let now = Timestamp(Date()), let later = now.adding(seconds: Double(seconds)) else {
        throw ValidationError("\(option): \(seconds) s from now is outside \(Timestamp.rangeDescription)")
    }
    return later
}
