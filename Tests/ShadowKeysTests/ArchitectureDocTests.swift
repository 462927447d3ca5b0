import Foundation
import ShadowKeys
import Testing

/// Docs/architecture.md names each library module's public error type in the module's own row,
/// and every type named here exists (the compiler checks that): the document stays true.
@Suite struct ArchitectureDocTests {
    static let errors: [(module: String, name: String, type: any Error.Type)] = [
        ("ShadowJOSE", "JOSEError", JOSEError.self),
        ("ShadowJWKS", "JWKSError", JWKSError.self),
        ("ShadowJWKS", "HTTPTransportError", HTTPTransportError.self),
        ("ShadowHTTP", "HTTPTransportError", HTTPTransportError.self),
        ("ShadowApple", "AppleError", AppleError.self),
        ("ShadowCrypto", "ShadowCryptoError", ShadowCryptoError.self),
        ("ShadowVault", "VaultError", VaultError.self),
        ("ShadowStorage", "StorageError", StorageError.self),
        ("ShadowCredentials", "CredentialError", CredentialError.self),
        ("ShadowSessions", "SessionError", SessionError.self),
        ("ShadowDPoP", "DPoPError", DPoPError.self),
        ("ShadowOperationLog", "LogError", LogError.self),
        ("ShadowTokenSource", "TokenError", TokenError.self),
    ]

    static func rows() throws -> [String: String] {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Docs/architecture.md").path
        var rows: [String: String] = [:]
        for line in try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n") where line.hasPrefix("| ")
        {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            if let first = cells.first { rows[first] = String(line) }
        }
        return rows
    }

    @Test func eachModuleRowNamesItsErrorType() throws {
        let rows = try Self.rows()
        for (module, name, type) in Self.errors {
            let row = try #require(rows[module], "Docs/architecture.md has no row for \(module)")
            let cells = row.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            #expect(cells.count >= 2 && cells[1].contains("`\(name)`"), "\(module)'s row does not name \(name)")
            #expect(type is any ShadowKeysError.Type || name == "HTTPTransportError", "\(name)")
        }
    }
}
