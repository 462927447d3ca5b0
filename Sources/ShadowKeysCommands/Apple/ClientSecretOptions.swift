import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
package import ShadowApple
import ShadowCore
import ShadowCrypto
import ShadowJOSE
import ShadowJWKS

/// The inputs of a client secret, shared by `client-secret` and every `apple` subcommand.
package struct ClientSecretOptions: ParsableArguments {
    package init() {}

    @Option(name: .customLong("p8"), help: "The Sign in with Apple private key (.p8, PKCS#8 PEM, P-256).")
    var p8: String

    @Option(name: .customLong("team-id"), help: "The 10-character Team ID (A-Z, 0-9).")
    var teamID: String

    @Option(name: .customLong("key-id"), help: "The 10-character Key ID of the .p8 key.")
    var keyID: String

    @Option(name: .customLong("client-id"), help: "The App ID or Services ID (case kept).")
    var clientID: String

    @Option(help: "Client secret lifetime in seconds (at most 15777000).")
    var ttl: Int = Int(ClientSecretBuilder.defaultLifetime)

    package func validate() throws {
        let identifier = #/^[A-Z0-9]{10}$/#
        guard teamID.wholeMatch(of: identifier) != nil else {
            throw ValidationError("--team-id must be 10 characters A-Z and 0-9")
        }
        guard keyID.wholeMatch(of: identifier) != nil else {
            throw ValidationError("--key-id must be 10 characters A-Z and 0-9")
        }
        guard !clientID.isEmpty, clientID.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw ValidationError("--client-id must be printable ASCII without spaces")
        }
        guard ttl >= 1, ttl <= Int(ClientSecretBuilder.maximumLifetime) else {
            throw ValidationError("--ttl must be 1 to \(Int(ClientSecretBuilder.maximumLifetime)) seconds")
        }
    }

    /// Reads the key (exit 65 when unreadable or not a P-256 .p8) and builds the secret maker.
    func builder() throws -> ClientSecretBuilder {
        try ClientSecretBuilder(
            key: readAppleSigningKey(p8), teamID: teamID, keyID: keyID, clientID: clientID, lifetime: TimeInterval(ttl))
    }
}

/// Reads a `.p8` key (warning when others can read it): exit 65 when unreadable or not P-256 PKCS#8.
package func readAppleSigningKey(_ path: String) throws -> AppleSigningKey {
    warnIfReadableByOthers(path, what: ".p8 key file")
    let pem: [UInt8]
    do {
        guard let bytes = try Files.read(path, limit: 64 * 1024) else {
            throw CLIError(.malformedInput, "the .p8 file \(path) is too large to be a key")
        }
        pem = bytes
    } catch let error as FileError {
        throw CLIError(.malformedInput, code: "invalid_key", "cannot read the .p8 key: \(error)")
    }
    do {
        return try AppleSigningKey(pem: String(decoding: pem, as: UTF8.self))
    } catch let error as AppleError where error.code == .invalidKey {
        throw CLIError(.malformedInput, code: "invalid_key", "\(path): \(error.reason)")
    }
}
