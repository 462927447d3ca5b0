import Crypto
import Foundation
import ShadowCore
import ShadowJOSE
@testable import ShadowSessions
import ShadowSQLite
import ShadowStorage
import ShadowTestSupport
import ShadowVault
import Testing

/// TestVectors/shadow/sessions/vectors.json, made by an independent implementation of
/// Docs/sessions.md ("Refresh tokens", "The key ring", "Tables"), through a real SQLite store: the
/// sealed secret opens under its key, the keys derived from it, the refresh tokens, the Apple
/// hashes, the row MACs, the sealed Apple refresh tokens and the sealed signing keys are the
/// document's, and every invalid row or token is refused.
@Suite struct SessionVectorTests {
    struct Vectors: Decodable {
        struct SealedSecret: Decodable {
            let unlock_key: String
            let stored: String
        }
        struct Token: Decodable {
            let session: String
            let generation: String
            let token: String
        }
        struct BadToken: Decodable {
            let why: String
            let token: String
        }
        struct AppleHash: Decodable {
            let client_id: String
            let subject: String
            let hash: String
        }
        struct User: Decodable {
            let apple: String
            let user: String
            let inactive: Int64
            let checked_ms: String
            let apple_refresh: String?
            let mac: String?
            let valid: Bool
            let why: String?
        }
        struct AppleRefresh: Decodable {
            let user: String
            let sealed: String
            let plaintext: String?
            let valid: Bool
            let why: String?
        }
        struct SigningKey: Decodable {
            let kid: String
            let alg: String
            let sealed: String
            let private_der: String?
            let public_jwk: [String: String]?
            let valid: Bool
            let why: String?
        }
        struct Session: Decodable {
            let id: String
            let user: String
            let generation: Int64
            let rotated_ms: String
            let created_ms: String
            let used_ms: String
            let expires_ms: String
            let revoked_ms: String?
            let device: String
            let jkt: String?
            let mac: String?
            let valid: Bool
            let why: String?
        }
        let secret: String
        let sealed_secret: SealedSecret
        let keys: [String: String]
        let refresh_tokens: [Token]
        let invalid_refresh_tokens: [BadToken]
        let apple_hashes: [AppleHash]
        let users: [User]
        let apple_refresh_tokens: [AppleRefresh]
        let signing_keys: [SigningKey]
        let sessions: [Session]
    }

    let vectors: Vectors
    let directory: TemporaryDirectory
    let path: String
    let store: DatabaseSessionStore
    let configuration = SessionConfiguration(
        issuer: "https://api.example.com", audience: "https://api.example.com/v1", clientID: "com.example.app")

    /// A new store whose sealed secret is replaced by the document's before it is opened again.
    init() async throws {
        vectors = try JSONDecoder().decode(
            Vectors.self, from: Data(try PackagePaths.vector("shadow/sessions/vectors.json")))
        directory = try TemporaryDirectory()
        path = directory.path + "/state.sqlite"
        let unlock = VaultUnlock.key(SecretBytes(try Self.hex(vectors.sealed_secret.unlock_key)))
        await (try SQLiteSessionStore.open(path: path, unlock: unlock)).close()
        let stored = try Self.hex(vectors.sealed_secret.stored)
        try await Self.sql(path, "UPDATE shadow_session_meta SET value = ? WHERE name = 'secret'", .blob(stored))
        store = try await SQLiteSessionStore.open(path: path, unlock: unlock)
    }

    static func hex(_ text: String) throws -> [UInt8] {
        try Hex.decode(text)
    }

    static func uuid(_ text: String) throws -> UUID { try #require(UUID(uuidString: text)) }

    static func integer(_ text: String) throws -> Int64 { try #require(Int64(text)) }

    /// Runs one statement on the store's file, as someone with the file and not the key would.
    @discardableResult
    static func sql(_ path: String, _ statement: String, _ values: SQLValue...) async throws -> [SQLRow] {
        let database = try await SQLiteDatabase.open(path: path, create: false)
        do {
            let rows = try await database.write(statement, values)
            await database.close()
            return rows
        } catch {
            await database.close()
            throw error
        }
    }

    static func bytes(_ key: SymmetricKey) -> [UInt8] { key.withUnsafeBytes { Array($0) } }

    func expectCorrupted(_ why: String, _ body: () async throws -> Void) async {
        do {
            try await body()
            Issue.record("accepted: \(why)")
        } catch let error as SessionError {
            #expect(error.code == .corrupted, "\(why): \(error)")
        } catch {
            Issue.record("\(why): not a SessionError: \(error)")
        }
    }

    @Test func theSealedSecretOpensAndGivesTheDocumentsKeys() async throws {
        try await closing({ await store.close() }) {
            #expect(try await store.sessionSecret() == Self.hex(vectors.secret))
            let keys = try SessionKeys(secret: try Self.hex(vectors.secret))
            let derived = [
                "refresh": keys.refresh, "lookup": keys.lookup, "seal": keys.seal, "row": keys.row,
                "dpop_nonce": keys.dpopNonce,
            ]
            #expect(Set(derived.keys) == Set(vectors.keys.keys))
            for (name, key) in derived { #expect(try Self.bytes(key) == Self.hex(vectors.keys[name] ?? ""), "\(name)") }
        }
    }

    @Test func refreshTokensAreWrittenAndReadAsDocumented() async throws {
        try await closing({ await store.close() }) {
            let authority = try await SessionAuthority(store: store, configuration: configuration)
            let keys = try SessionKeys(secret: try Self.hex(vectors.secret))
            #expect(vectors.refresh_tokens.count == 4)
            for vector in vectors.refresh_tokens {
                let family = try #require(SessionID(vector.session))
                let generation = try #require(UInt64(vector.generation))
                #expect(RefreshToken(family: family, generation: generation).encoded(keys: keys) == vector.token)
                let read = try authority.authenticate(refreshToken: vector.token)
                #expect(read.family == family && read.generation == generation)
            }
            #expect(vectors.invalid_refresh_tokens.count >= 14)
            for vector in vectors.invalid_refresh_tokens {
                #expect("\(vector.why)") {
                    try authority.authenticate(refreshToken: vector.token)
                } throws: { ($0 as? SessionError)?.code == .invalidGrant }
            }
        }
    }

    @Test func appleSubjectsHashAsDocumented() async throws {
        try await closing({ await store.close() }) {
            let keys = try SessionKeys(secret: try Self.hex(vectors.secret))
            #expect(vectors.apple_hashes.count == 3)
            for vector in vectors.apple_hashes {
                #expect(
                    try keys.appleHash(clientID: vector.client_id, subject: vector.subject) == Self.hex(vector.hash),
                    "\(vector.client_id) \(vector.subject)")
            }
        }
    }

    @Test func userRowsAreReadAndWrittenAsDocumented() async throws {
        try await closing({ await store.close() }) {
            #expect(vectors.users.filter(\.valid).count == 2 && vectors.users.filter { !$0.valid }.count == 8)
            for vector in vectors.users {
                let apple = try Self.hex(vector.apple)
                let id = try Self.uuid(vector.user)
                let checked = try Self.integer(vector.checked_ms)
                let sealed = try vector.apple_refresh.map(Self.hex)
                try await Self.sql(path, "DELETE FROM shadow_session_users")
                try await Self.sql(
                    path,
                    #"INSERT INTO shadow_session_users (apple, "user", apple_refresh, inactive, checked_ms, mac) "#
                        + "VALUES (?, ?, ?, ?, ?, ?)", .blob(apple), .blob(id.bytes16), .optional(sealed),
                    .integer(vector.inactive), .integer(checked), .optional(try vector.mac.map(Self.hex)))
                guard vector.valid else {
                    await expectCorrupted(vector.why ?? "") { _ = try await store.user(appleHash: apple) }
                    continue
                }
                let read = try #require(try await store.user(appleHash: apple))
                #expect(
                    read
                        == SessionUser(
                            id: id, sealedAppleRefreshToken: sealed, inactive: vector.inactive == 1,
                            checkedAt: checked))
                let written = store.mac(DatabaseSessionStore.StoredUser(apple: apple, user: read, mac: []))
                #expect(try written == Self.hex(vector.mac ?? ""))
            }
        }
    }

    @Test func sealedAppleRefreshTokensOpenOnlyForTheirUser() async throws {
        try await closing({ await store.close() }) {
            let authority = try await SessionAuthority(store: store, configuration: configuration)
            #expect(vectors.apple_refresh_tokens.count == 5)
            for vector in vectors.apple_refresh_tokens {
                let user = try Self.uuid(vector.user)
                let sealed = try Self.hex(vector.sealed)
                if vector.valid {
                    #expect(try authority.open(sealed, user: user) == Array((vector.plaintext ?? "").utf8))
                    // What this library seals, the same reading opens.
                    let resealed = try authority.seal(Array("token".utf8), user: user)
                    #expect(try authority.open(resealed, user: user) == Array("token".utf8))
                } else {
                    await expectCorrupted(vector.why ?? "") { _ = try authority.open(sealed, user: user) }
                }
            }
        }
    }

    @Test func sessionRowsAreReadAndWrittenAsDocumented() async throws {
        try await closing({ await store.close() }) {
            #expect(vectors.sessions.filter(\.valid).count == 3 && vectors.sessions.filter { !$0.valid }.count == 13)
            for vector in vectors.sessions {
                let id = try Base64URL.decode(vector.id)
                let user = try Self.uuid(vector.user)
                let times = try [vector.rotated_ms, vector.created_ms, vector.used_ms, vector.expires_ms].map(
                    Self.integer)
                let revoked = try vector.revoked_ms.map(Self.integer)
                let jkt = try vector.jkt.map(Self.hex)
                try await Self.sql(path, "DELETE FROM shadow_sessions")
                if vector.valid {
                    // The writer: the row this library stores for these fields carries the document's MAC.
                    let row = SessionRow(
                        id: try #require(SessionID(bytes: id)), user: user, generation: UInt64(vector.generation),
                        rotatedAt: times[0], createdAt: times[1], lastUsedAt: times[2], expiresAt: times[3],
                        revokedAt: revoked, device: vector.device, keyThumbprint: jkt.map(Base64URL.encode))
                    try await store.insertSession(row)
                    let stored = try await Self.sql(path, "SELECT mac FROM shadow_sessions WHERE id = ?", .blob(id))
                    #expect(try stored.first?.blob("mac") == Self.hex(vector.mac ?? ""), "\(vector.id)")
                    try await Self.sql(path, "DELETE FROM shadow_sessions")
                }
                try await Self.sql(
                    path,
                    #"INSERT INTO shadow_sessions (id, "user", generation, rotated_ms, created_ms, used_ms, "#
                        + "expires_ms, revoked_ms, device, mac, jkt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    .blob(id),
                    .blob(user.bytes16), .integer(vector.generation), .integer(times[0]), .integer(times[1]),
                    .integer(times[2]), .integer(times[3]), .optional(revoked), .text(vector.device),
                    .optional(try vector.mac.map(Self.hex)), .optional(jkt))
                let sessionID = try #require(SessionID(bytes: id))
                guard vector.valid else {
                    await expectCorrupted(vector.why ?? "") { _ = try await store.session(sessionID) }
                    continue
                }
                let read = try #require(try await store.session(sessionID))
                #expect(
                    read.user == user && read.generation == UInt64(vector.generation) && read.device == vector.device)
                #expect([read.rotatedAt, read.createdAt, read.lastUsedAt, read.expiresAt] == times)
                #expect(read.revokedAt == revoked && read.keyThumbprint == jkt.map(Base64URL.encode))
            }
        }
    }

    @Test func signingKeysOpenAsDocumentedAndSign() async throws {
        try await closing({ await store.close() }) {
            #expect(
                vectors.signing_keys.filter(\.valid).count == 2 && vectors.signing_keys.filter { !$0.valid }.count == 7)
            for vector in vectors.signing_keys {
                try await Self.sql(path, "DELETE FROM shadow_session_keys")
                try await Self.sql(
                    path,
                    "INSERT INTO shadow_session_keys (kid, alg, sealed, created_ms, activates_ms, retired_ms) "
                        + "VALUES (?, ?, ?, 1700000000000, 1700000000000, NULL)", .text(vector.kid), .text(vector.alg),
                    .blob(try Self.hex(vector.sealed)))
                var configuration = self.configuration
                configuration.algorithm = vector.alg == "RS256" ? .rs256 : .es256
                guard vector.valid, let publicKey = vector.public_jwk else {
                    await expectCorrupted(vector.why ?? "") {
                        _ = try await SessionAuthority(store: store, configuration: configuration)
                    }
                    continue
                }
                let authority = try await SessionAuthority(store: store, configuration: configuration)
                // Published under its kid, with the document's public key.
                let document = try await authority.jwks().document
                let set = try #require(
                    try JSONSerialization.jsonObject(with: Data(document.utf8)) as? [String: [[String: String]]])
                let published = try #require(set["keys"]?.first { $0["kid"] == vector.kid })
                for (name, value) in publicKey { #expect(published[name] == value, "\(vector.alg) \(name)") }
                // It signs: an access token verifies under the document's public key alone.
                var jwk = publicKey
                jwk["kid"] = vector.kid
                jwk["alg"] = vector.alg
                let keySet = try JWKSet(
                    json: try JSONSerialization.data(withJSONObject: ["keys": [jwk]], options: [.sortedKeys]))
                let issued = try await authority.signIn(
                    appleSubject: "001234.vector.\(vector.alg)", appleClientID: "com.example.app",
                    appleRefreshToken: nil,
                    device: "vector")
                let claims = try AccessTokenVerifier(configuration: configuration, keys: keySet).verify(
                    issued.accessToken)
                #expect(claims.userID == issued.userID)
            }
        }
    }

    /// The writer of the ring: a key this library makes is sealed as the document says, PKCS#8 DER
    /// for P-256 and PKCS#1 DER for RSA (the element after the version: a SEQUENCE, the algorithm,
    /// or an INTEGER, the modulus), under the key ID as AAD.
    @Test(arguments: [JWSAlgorithm.es256, .rs256])
    func keysThisLibraryMakesAreSealedAsDocumented(algorithm: JWSAlgorithm) async throws {
        try await closing({ await store.close() }) {
            var configuration = self.configuration
            configuration.algorithm = algorithm
            _ = try await SessionAuthority(store: store, configuration: configuration)
            let keys = try SessionKeys(secret: try Self.hex(vectors.secret))
            let stored = try #require(try await store.signingKeys().first)
            #expect(stored.algorithm == algorithm.rawValue)
            let sealed = stored.sealedPrivateKey
            let der = try AES256GCMTestOpen.open(
                sealed, key: keys.seal, aad: Array("shadow-keys session v1 signing key".utf8) + Array(stored.keyID.utf8)
            )
            #expect(Self.elementAfterVersion(der) == (algorithm == .es256 ? 0x30 : 0x02))
        }
    }

    /// The tag of the second element of a DER SEQUENCE whose first is INTEGER 0 (a PKCS#8 or
    /// PKCS#1 private key); nil for anything else.
    static func elementAfterVersion(_ der: [UInt8]) -> UInt8? {
        guard der.count > 8, der[0] == 0x30 else { return nil }
        var index = 1
        if der[index] & 0x80 != 0 { index += Int(der[index] & 0x7F) }
        index += 1
        guard der.count > index + 3, der[index] == 0x02, der[index + 1] == 0x01, der[index + 2] == 0x00 else {
            return nil
        }
        return der[index + 3]
    }
}

/// AES-256-GCM opening of nonce ‖ ciphertext ‖ tag, by swift-crypto directly, so the check does
/// not go through the code it checks.
enum AES256GCMTestOpen {
    static func open(_ sealed: [UInt8], key: SymmetricKey, aad: [UInt8]) throws -> [UInt8] {
        let box = try AES.GCM.SealedBox(combined: sealed)
        return Array(try AES.GCM.open(box, using: key, authenticating: aad))
    }
}
