import Crypto
import CryptoExtras
import Foundation
import ShadowKeys
import Testing

/// The examples of the DocC articles (Sources/ShadowKeys/ShadowKeys.docc), run as written. Each
/// test's body between `// example:` and `// end of example` is, line for line, a `swift` code
/// block of its article; `articlesShowTheCodeThatRuns` checks that no article has drifted.
@Suite struct DocumentationExampleTests {
    @Test func verifyingTokens() throws {
        // example: VerifyingTokens
        // The issuer's side: a P-256 key, its public JWK Set, and a token.
        let signer = JWSSigner.es256(P256.Signing.PrivateKey(), keyID: "key-1")
        let keys = try JWKSet(keys: [signer.publicJWK()])
        let now = Int64(Date().timeIntervalSince1970)
        let token = try signer.sign(claims: [
            "iss": "https://issuer.example", "aud": "my-app", "sub": "user-42",
            "iat": .number(JSONNumber(now)), "exp": .number(JSONNumber(now + 600)),
        ])

        // The verifier's side: the algorithms, the issuer and the audience it accepts.
        struct Session: Decodable {
            let sub: String
            let exp: Int
        }
        let verifier = JWTVerifier(policy: ClaimPolicy(issuer: "https://issuer.example", audiences: ["my-app"]))
        let session = try verifier.verify(token, as: Session.self, keys: keys)
        precondition(session.sub == "user-42")

        // A token for another audience is refused, naming the rule that failed.
        let strict = JWTVerifier(policy: ClaimPolicy(issuer: "https://issuer.example", audiences: ["other-app"]))
        do {
            _ = try strict.verify(token, keys: keys)
        } catch let error as JOSEError {
            precondition(error.code == .claimsRejected)
            precondition(error.claimFailures.map(\.claim) == ["aud"])
        }
        // end of example
        #expect(session.sub == "user-42")
        #expect(throws: JOSEError.self) { try strict.verify(token, keys: keys) }
    }

    @Test func signInWithApple() async throws {
        let appleKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let apple = try JWSSigner.rs256(appleKey, keyID: "apple-1")
        let now = Int64(Date().timeIntervalSince1970)
        let idToken = try apple.sign(claims: [
            "iss": .string(Apple.issuer), "aud": "com.example.app", "sub": "001234.abcdef.0042",
            "iat": .number(JSONNumber(now)), "exp": .number(JSONNumber(now + 600)),
            "nonce": .string(Hex.encode(SHA256.hash(data: Array("n-0S6_WzA2Mj".utf8)))), "email": "a@example.com",
            "email_verified": "true",
        ])
        let appleKeys = try JWKSProvider.serving(JWKSet(keys: [apple.publicJWK()]))
        let p8 = P256.Signing.PrivateKey().pemRepresentation

        // example: SignInWithApple
        // The app sends the identity token and the raw nonce it asked Apple to sign.
        let validator = AppleIdentityTokenValidator(clientIDs: ["com.example.app"], nonce: "n-0S6_WzA2Mj")
        let identity = try await validator.validate(idToken, keys: appleKeys)
        precondition(identity.subject == "001234.abcdef.0042")
        precondition(identity.emailVerified == true)

        // Calls to Apple's token endpoints carry a client secret: an ES256 JWT made from the
        // team's `.p8` key. The provider makes one and renews it before it expires.
        let builder = try ClientSecretBuilder(
            key: AppleSigningKey(pem: p8), teamID: "ABCDE12345", keyID: "KEY1234567", clientID: "com.example.app")
        let secrets = ClientSecretProvider(builder: builder)
        let secret = try secrets.secret()
        precondition(secret.expiresAt > Date())
        // end of example
        #expect(identity.subject == "001234.abcdef.0042")
        #expect(identity.email == "a@example.com")
        #expect(!secret.description.contains(secret.token))
    }

    /// Compiled, not run: it would fetch Apple's key set.
    func appleKeySetInProduction() throws {
        // example: SignInWithApple
        let transport = try DefaultHTTPTransport()
        let appleKeys = try JWKSProvider(configuration: .init(url: Apple.keysURL), transport: transport)
        // end of example
        _ = appleKeys
    }

    @Test func envelopeEncryption() throws {
        // example: EnvelopeEncryption
        // The key-encryption key: 32 random bytes kept in a keychain or a key file,
        // or `.passphrase(_:)` for one derived with PBKDF2-HMAC-SHA256.
        let kek = try KeyEncryptionKey.raw(SecretBytes.random(count: 32), id: "2026-11")

        // Each object gets its own data key, wrapped by the KEK. The context is authenticated:
        // the envelope opens only with the same pairs.
        let document = Array("notes of 2026-11-23".utf8)
        let context: EnvelopeContext = ["user": "user-42", "object": "notes"]
        let envelope = try Envelope.seal(document, kek: kek, context: context)

        let opened = try Envelope.open(envelope, kek: kek, context: context)
        precondition(opened == document)

        // Moving to a new KEK rewraps the data key; the ciphertext stays as it is.
        let next = try KeyEncryptionKey.raw(SecretBytes.random(count: 32), id: "2026-12")
        let rewrapped = try Envelope.rewrap(envelope, from: kek, to: next, context: context)
        let reopened = try Envelope.open(rewrapped, kek: next, context: context)
        precondition(reopened == document)
        // end of example
        #expect(opened == document)
        #expect(throws: ShadowCryptoError.self) {
            try Envelope.open(envelope, kek: kek, context: ["user": "user-43", "object": "notes"])
        }
        #expect(Integrity.sha256(document) == Integrity.sha256(opened))
    }

    @Test func tokenVault() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "shadow-keys-docs-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("tokens.skv").path
        let refreshToken = SecretBytes(utf8: "r.0123456789abcdef")

        // example: TokenVault
        // One file, sealed with AES-256-GCM under a 256-bit key (or a passphrase), written
        // atomically with mode 0600.
        let vaultKey = SecretBytes.random(count: 32)
        let vault = try await TokenVault.create(at: path, unlock: .key(vaultKey))

        try await vault.put(
            VaultEntry(
                name: "apple/001234.abcdef.0042", secret: refreshToken, provider: .apple, kind: .refreshToken,
                subject: "001234.abcdef.0042"))

        let entry = try await vault.entry(named: "apple/001234.abcdef.0042")
        precondition(entry.kind == .refreshToken)
        entry.secret.withUnsafeBytes { bytes in
            // Hand the token to the HTTP request here; never print it.
            _ = bytes.count
        }
        // end of example
        #expect(entry.secret.withUnsafeBytes { Array($0) } == Array("r.0123456789abcdef".utf8))
        #expect(!entry.description.contains("0123456789abcdef"))
    }

    @Test func credentialState() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "shadow-keys-docs-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("users.skv").path

        // example: CredentialState
        let vault = try await TokenVault.create(at: path, unlock: .key(SecretBytes.random(count: 32)))
        let store = VaultCredentialStore(vault: vault)

        // Events arrive in any order and any number of times; each user's state is the same.
        let signIn = try CredentialEvent(
            kind: .signIn, clientID: "com.example.app", subject: "001234.abcdef.0042",
            timeMilliseconds: 1_795_000_000_000, id: "sign-in-1")
        let revoked = try CredentialEvent(
            kind: .consentRevoked, clientID: "com.example.app", subject: "001234.abcdef.0042",
            timeMilliseconds: 1_795_000_060_000, id: "notification-1")
        _ = try await store.apply([revoked, signIn, revoked])

        let status = try await store.status(clientID: "com.example.app", subject: "001234.abcdef.0042")
        precondition(status.state == .revoked)

        // Every transition is in a hash-chained audit log.
        let history = try await store.history(clientID: "com.example.app", subject: "001234.abcdef.0042")
        precondition(history.count == 2)
        // end of example
        #expect(status.state == .revoked)
        #expect(history.count == 2)
        #expect(try await store.verifyAudit().entries == 2)
    }

    /// Each article's `swift` blocks, in order, are the examples above marked with its name.
    @Test(arguments: ["VerifyingTokens", "SignInWithApple", "EnvelopeEncryption", "TokenVault", "CredentialState"])
    func articlesShowTheCodeThatRuns(article: String) throws {
        let catalog = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "../../Sources/ShadowKeys/ShadowKeys.docc")
        let text = try String(contentsOf: catalog.appendingPathComponent(article + ".md"), encoding: .utf8)
        let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let printed = Self.blocks(in: text, opening: "```swift", closing: "```")
        let tested = Self.blocks(in: source, opening: "// example: " + article, closing: "// end of example")
        #expect(!printed.isEmpty, "\(article) has no example")
        #expect(printed == tested, "\(article).md and this file's examples differ")
    }

    /// Docs/server.md's Vapor adapter is the code of Docs/Examples/VaporAdapter, which CI builds.
    @Test func theVaporAdapterInTheDocsIsTheOneCIBuilds() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..")
        let document = try String(contentsOf: root.appendingPathComponent("Docs/server.md"), encoding: .utf8)
        let section = try #require(document.range(of: "## Vapor 4")).upperBound
        let printed = Self.blocks(in: String(document[section...]), opening: "```swift", closing: "```").first
        let source = try String(
            contentsOf: root.appendingPathComponent(
                "Docs/Examples/VaporAdapter/Sources/VaporAdapter/AppleNotifications.swift"), encoding: .utf8)
        let built = Self.blocks(in: source, opening: "// docs: vapor-adapter", closing: "// end of docs").first
        #expect(
            printed != nil && printed == built, "Docs/server.md's Vapor adapter differs from Docs/Examples/VaporAdapter"
        )
    }

    /// The lines between each `opening` line and the next `closing` line, without their common
    /// indentation.
    static func blocks(in text: String, opening: String, closing: String) -> [[String]] {
        var blocks: [[String]] = []
        var current: [String]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if current == nil {
                if trimmed == opening { current = [] }
            } else if trimmed == closing {
                let indent = current!.filter { !$0.isEmpty }.map { $0.prefix { $0 == " " }.count }.min() ?? 0
                blocks.append(current!.map { String($0.dropFirst(min(indent, $0.count))) })
                current = nil
            } else {
                current!.append(line)
            }
        }
        return blocks
    }
}
