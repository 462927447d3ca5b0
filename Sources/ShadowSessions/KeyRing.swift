import Crypto
import CryptoExtras
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import ShadowCore
public import ShadowJOSE
import ShadowCrypto
import Synchronization

/// The access-token signing keys, opened: which one signs now, and which are published.
struct KeyRing: Sendable {
    struct Key: Sendable {
        let stored: StoredSigningKey
        let signer: JWSSigner
        let publicKey: JWK
    }

    let loadedAt: Int64
    let keys: [Key]
    /// Every key in the ring: keys about to sign, the one signing, and retired ones whose tokens
    /// may still be live (maintenance deletes the rest).
    let published: JWKSet
    /// The access-token verifier over ``published``, built once per read of the ring.
    let verifier: AccessTokenVerifier

    init(loadedAt: Int64, keys: [Key], configuration: SessionConfiguration, clock: WallClock) throws {
        self.loadedAt = loadedAt
        self.keys = keys
        published = try JWKSet(keys: keys.map(\.publicKey))
        verifier = AccessTokenVerifier(configuration: configuration, keys: published, clock: clock)
    }

    /// The newest key whose time to sign has come.
    func signer(at now: Int64) throws -> JWSSigner {
        guard
            let key = keys.filter({ $0.stored.activatesAt <= now }).max(by: {
                $0.stored.activatesAt < $1.stored.activatesAt
            })
        else { throw SessionError(.corrupted, "the session key ring holds no key that signs yet") }
        return key.signer
    }
}

extension SessionAuthority {
    static let keyLabel = Array("shadow-keys session v1 signing key".utf8)

    /// The ring, re-read from the store when it is older than ``ringRefresh`` (or `force`); an
    /// empty ring gets its first key, signing at once.
    func currentRing(force: Bool = false) async throws -> KeyRing {
        let now = self.now
        if !force, let ring = ring.withLock({ $0 }), now - ring.loadedAt < Self.ringRefresh { return ring }
        var stored = try await store.signingKeys()
        if stored.isEmpty {
            // The first key signs at once, so only one may be made: the store decides which,
            // under a lock on the ring, and every instance then reads that one.
            _ = try await store.insertFirstSigningKey(try makeKey(now: now, activatesAt: now))
            stored = try await store.signingKeys()
        }
        let loaded = try KeyRing(
            loadedAt: now, keys: try stored.map(open), configuration: configuration, clock: clock)
        ring.withLock { $0 = loaded }
        return loaded
    }

    func makeKey(now: Int64, activatesAt: Int64) throws -> StoredSigningKey {
        let der: [UInt8]
        let publicKey: JWK
        switch configuration.algorithm {
        case .rs256:
            let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
            der = Array(key.derRepresentation)
            publicKey = try JWK(rsa: key.publicKey)
        default:
            let key = P256.Signing.PrivateKey()
            der = Array(key.derRepresentation)
            publicKey = try JWK(p256: key.publicKey)
        }
        let keyID = publicKey.thumbprint
        let nonce = AES256GCM.randomNonce()
        let sealed =
            nonce + (try AES256GCM.seal(der, key: keys.seal, nonce: nonce, aad: Self.keyLabel + Array(keyID.utf8)))
        return StoredSigningKey(
            keyID: keyID, algorithm: configuration.algorithm.rawValue, sealedPrivateKey: sealed, createdAt: now,
            activatesAt: activatesAt, retiredAt: nil)
    }

    func open(_ stored: StoredSigningKey) throws -> KeyRing.Key {
        let sealed = stored.sealedPrivateKey
        guard sealed.count > AES256GCM.nonceBytes + AES256GCM.tagBytes else {
            throw SessionError(.corrupted, "the signing key \(stored.keyID) is malformed")
        }
        let der: [UInt8]
        do {
            der = try AES256GCM.open(
                sealed[AES256GCM.nonceBytes...], key: keys.seal, nonce: sealed[..<AES256GCM.nonceBytes],
                aad: Self.keyLabel + Array(stored.keyID.utf8))
        } catch {
            throw SessionError(.corrupted, "the signing key \(stored.keyID) does not open: it was edited or moved")
        }
        let signer: JWSSigner
        let publicKey: JWK
        do {
            switch stored.algorithm {
            case "ES256": signer = .es256(try P256.Signing.PrivateKey(derRepresentation: der), keyID: stored.keyID)
            case "RS256": signer = try .rs256(try _RSA.Signing.PrivateKey(derRepresentation: der), keyID: stored.keyID)
            default:
                throw SessionError(.corrupted, "the signing key \(stored.keyID) names algorithm \(stored.algorithm)")
            }
            publicKey = try signer.publicJWK()
        } catch let error as SessionError {
            throw error
        } catch {
            // A key that opened but is not a key of its algorithm (or of a size JWS allows) is as
            // unusable as one that did not open.
            throw SessionError(
                .corrupted, "the signing key \(stored.keyID) is not a usable \(stored.algorithm) private key")
        }
        guard publicKey.thumbprint == stored.keyID else {
            throw SessionError(.corrupted, "the signing key \(stored.keyID) is not the key its ID names")
        }
        return KeyRing.Key(stored: stored, signer: signer, publicKey: publicKey)
    }

    /// Publishes a new key that signs after ``SessionConfiguration/publishLead``; the key signing
    /// now retires then (and stays published until the last token it signed has expired).
    /// Returns the new key's ID.
    @discardableResult
    public func rotateKeys() async throws -> String {
        let now = self.now
        let ring = try await currentRing(force: true)
        let next = try makeKey(now: now, activatesAt: now + milliseconds(configuration.publishLead))
        try await store.insertSigningKey(next)
        for key in ring.keys where key.stored.retiredAt == nil {
            try await store.retireSigningKey(key.stored.keyID, at: next.activatesAt)
        }
        _ = try await currentRing(force: true)
        return next.keyID
    }

    /// The scheduled part: rotates when the newest key is older than the key lifetime, and
    /// deletes retired keys whose last tokens have expired (with a minute's leeway). Returns
    /// whether it rotated.
    @discardableResult
    public func maintainKeys() async throws -> Bool {
        let now = self.now
        let ring = try await currentRing(force: true)
        let keep = milliseconds(configuration.accessTokenLifetime) + 60_000
        for key in ring.keys {
            if let retiredAt = key.stored.retiredAt, retiredAt + keep < now {
                try await store.deleteSigningKey(key.stored.keyID)
            }
        }
        let newest = ring.keys.map(\.stored.createdAt).max() ?? 0
        guard newest + milliseconds(configuration.keyLifetime) <= now else {
            _ = try await currentRing(force: true)
            return false
        }
        try await rotateKeys()
        return true
    }

    /// The signing keys: ID, algorithm, created, signs from, retired.
    public func signingKeys() async throws -> [StoredSigningKey] {
        try await currentRing(force: true).keys.map(\.stored)
    }

    /// The JWK Set to serve at `/.well-known/jwks.json`, and its `Cache-Control: max-age`.
    public func jwks() async throws -> (document: String, maxAge: Int) {
        (JSONValue.object(try await currentRing().published.json).serialized(), configuration.jwksMaxAge)
    }

    /// A verifier of this authority's access tokens, over the published keys.
    public func verifier() async throws -> AccessTokenVerifier { try await currentRing().verifier }
}

/// Checks access tokens (RFC 9068) against a key set, with no store read: what a middleware
/// runs on every request. Revocation reaches it within one access-token lifetime; for a check of
/// the session too, call ``SessionAuthority/isLive(_:)``.
///
/// A client sends the same access token with every request until it expires, so the verifier
/// keeps the tokens it has verified (Docs/sessions.md, "Access tokens (RFC 9068)"): a token whose exact
/// bytes verified before skips the signature and the parse, and its time claims (`exp`, `nbf`,
/// `iat`) are checked again against the clock, so it stops verifying at its `exp` as it would
/// have uncached. Its other rules (issuer, audience, required claims) do not change with time and
/// held when it was kept. The cache belongs to one reading of the key ring, so a key that leaves
/// the ring takes its tokens' entries with it; only tokens that verified are kept, at most
/// ``cacheCapacity``, each as its typed claims and three numbers.
public struct AccessTokenVerifier: Sendable {
    let verifier: JWTVerifier
    public let keys: JWKSet
    let verified: VerifiedTokens

    /// The most tokens kept verified at once (the oldest kept makes room for the next).
    public static let cacheCapacity = 4096

    public init(configuration: SessionConfiguration, keys: JWKSet, clock: WallClock = .system) {
        // Only the time rules may change their answer for a kept token (``VerifiedToken``):
        // no maximum age, nonce or further rule.
        let policy = ClaimPolicy(
            issuer: configuration.issuer, audiences: [configuration.audience], leeway: 30,
            requiredClaims: ["sub", "iat", "jti", "client_id", "sid"])
        verifier = JWTVerifier(
            algorithms: [configuration.algorithm], policy: policy, expectedType: "at+jwt", clock: clock)
        self.keys = keys
        verified = VerifiedTokens(capacity: Self.cacheCapacity)
    }

    /// The token's typed claims.
    /// - Throws: ``SessionErrorCode/invalidToken`` naming what failed.
    public func verify(_ token: String) throws -> SessionClaims {
        let digest = DigestKey(SHA256.hash(utf8: token))
        if let entry = verified[digest] {
            if entry.isCurrent(at: verifier.clock.now.timeIntervalSince1970, leeway: verifier.policy.leeway) {
                return entry.session
            }
            verified.remove(digest)  // past its exp: the full check below says why
        }
        let claims: JWTClaims
        do {
            claims = try verifier.verify(token, keys: keys).claims
        } catch let error as JOSEError {
            throw SessionError(.invalidToken, error.reason)
        }
        let session = try Self.sessionClaims(claims)
        verified.insert(
            digest,
            VerifiedToken(
                session: session, notBefore: claims["nbf"]?.numberValue?.doubleValue,
                issuedAt: claims["iat"]?.numberValue?.doubleValue, expiresAt: claims["exp"]?.numberValue?.doubleValue))
        return session
    }

    /// The typed claims of a verified token.
    static func sessionClaims(_ claims: JWTClaims) throws -> SessionClaims {
        guard let subject = claims.subject, let user = UUID(text: subject),
            let sid = claims["sid"]?.stringValue, let session = SessionID(sid), let jti = claims.jwtID,
            let clientID = claims["client_id"]?.stringValue, let issuedAt = claims.issuedAt,
            let expiresAt = claims.expiresAt
        else {
            throw SessionError(.invalidToken, "the access token's sub, sid, jti, client_id, iat or exp is malformed")
        }
        var thumbprint: String?
        if let confirmation = claims["cnf"] {
            guard let jkt = confirmation.objectValue?["jkt"]?.stringValue,
                SessionRow.thumbprintBytes(jkt) != nil
            else { throw SessionError(.invalidToken, "the access token's cnf is not {\"jkt\": a key thumbprint}") }
            thumbprint = jkt
        }
        return SessionClaims(
            userID: user, session: session, tokenID: jti, clientID: clientID, issuedAt: issuedAt, expiresAt: expiresAt,
            keyThumbprint: thumbprint)
    }
}

/// The access tokens one key-ring reading has verified, by the SHA-256 of their exact text
/// (keys compare in constant time).
typealias VerifiedTokens = BoundedCache<DigestKey, VerifiedToken>

/// A verified access token: its typed claims, and the NumericDates the policy's time rules read,
/// as it read them.
struct VerifiedToken: Sendable {
    let session: SessionClaims
    let notBefore: Double?
    let issuedAt: Double?
    let expiresAt: Double?

    /// Whether the token passes ``ClaimPolicy``'s time rules at `now` (seconds since 1970), as
    /// it passed them when verified: not at or past `exp` + leeway, not before `nbf` − leeway,
    /// `iat` not after now + leeway.
    func isCurrent(at now: Double, leeway: Double) -> Bool {
        guard let expiresAt, now < expiresAt + leeway else { return false }
        if let notBefore, now < notBefore - leeway { return false }
        if let issuedAt, issuedAt > now + leeway { return false }
        return true
    }
}

extension SessionAuthority {
    /// The opt-in per-request check: whether the token's session is still live.
    public func isLive(_ claims: SessionClaims) async throws -> Bool {
        try await liveSession(claims.session, of: claims.userID) != nil
    }
}
