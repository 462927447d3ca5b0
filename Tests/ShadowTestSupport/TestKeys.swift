public import Crypto
public import CryptoExtras
public import Foundation
public import ShadowCore
public import ShadowJOSE

/// Keys for tests, generated once per process (RSA generation is slow).
public enum TestKeys {
    public static let rsa: _RSA.Signing.PrivateKey = makeRSA()
    public static let rsa2: _RSA.Signing.PrivateKey = makeRSA()
    public static let p256 = P256.Signing.PrivateKey()
    public static let p256b = P256.Signing.PrivateKey()

    private static func makeRSA() -> _RSA.Signing.PrivateKey {
        do { return try _RSA.Signing.PrivateKey(keySize: .bits2048) } catch {
            fatalError("RSA key generation failed: \(error)")
        }
    }

    /// A public JWK with the given `kid`.
    public static func jwk(_ key: _RSA.Signing.PrivateKey, kid: String?, alg: JWSAlgorithm? = .rs256) throws -> JWK {
        try JWK(rsa: key.publicKey, keyID: kid, algorithm: alg)
    }

    /// A public JWK with the given `kid`.
    public static func jwk(_ key: P256.Signing.PrivateKey, kid: String?, alg: JWSAlgorithm? = .es256) throws -> JWK {
        try JWK(p256: key.publicKey, keyID: kid, algorithm: alg)
    }

    /// A JWK Set document holding these keys.
    public static func jwksJSON(_ keys: [JWK]) -> String {
        JSONValue.object(["keys": .array(keys.map { .object($0.json) })]).serialized()
    }
}

/// Builds tokens for tests, including ones no honest signer would make.
public enum TokenFactory {
    /// Claims valid at `now` for an hour.
    public static func claims(now: Int64 = 1_700_000_000, extra: JSONObject = [:]) -> JSONObject {
        var claims: JSONObject = [
            "iss": "https://issuer.example", "aud": "app.example", "sub": "user-1", "iat": .int(now),
            "exp": .int(now + 3600),
        ]
        for member in extra { claims.set(member.name, member.value) }
        return claims
    }

    /// A token from raw header and payload JSON text, signed as `algorithm` with the given key.
    public static func raw(header: String, payload: String, rsa key: _RSA.Signing.PrivateKey) throws -> String {
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8))
        let signature = try key.signature(for: SHA256.hash(data: Array(input.utf8)), padding: .insecurePKCS1v1_5)
        return input + "." + Base64URL.encode(Array(signature.rawRepresentation))
    }

    /// A token from raw header and payload JSON text, signed ES256.
    public static func raw(header: String, payload: String, p256 key: P256.Signing.PrivateKey) throws -> String {
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8))
        let signature = try key.signature(for: SHA256.hash(data: Array(input.utf8)))
        return input + "." + Base64URL.encode(Array(signature.rawRepresentation))
    }

    /// Splits a token into its three segments.
    public static func segments(_ token: String) -> [String] {
        token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
    }
}

/// Paths of the package under test.
public enum PackagePaths {
    /// The package root, found from this file's location.
    public static let root: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// TestVectors/.
    public static var vectors: URL { root.appendingPathComponent("TestVectors") }

    /// Reads a file under TestVectors/.
    public static func vector(_ path: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: vectors.appendingPathComponent(path)))
    }
}

/// A directory removed when the value is deinitialised.
public final class TemporaryDirectory: @unchecked Sendable {
    public let url: URL
    public var path: String { url.path }

    public init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("shadow-keys-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// Writes `contents` to a file in the directory and returns its path.
    @discardableResult
    public func write(_ name: String, _ contents: String, mode: Int? = nil) throws -> String {
        try write(name, Data(contents.utf8), mode: mode)
    }

    /// Writes `contents` to a file in the directory and returns its path.
    @discardableResult
    public func write(_ name: String, _ contents: Data, mode: Int? = nil) throws -> String {
        let file = url.appendingPathComponent(name)
        try contents.write(to: file)
        if let mode { try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: file.path) }
        return file.path
    }

    deinit { try? FileManager.default.removeItem(at: url) }
}
