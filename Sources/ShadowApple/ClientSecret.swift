public import Crypto
import CryptoExtras
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import ShadowCore
import ShadowJOSE
import Synchronization

/// A Sign in with Apple private key: the `.p8` file from the developer account, a PKCS#8 PEM
/// P-256 key (`-----BEGIN PRIVATE KEY-----`).
public struct AppleSigningKey: Sendable {
    let key: P256.Signing.PrivateKey

    /// Reads a `.p8` PEM. Refuses encrypted PEM, RSA keys, other curves, SEC1 (`EC PRIVATE KEY`)
    /// and anything else, saying which.
    public init(pem: String) throws {
        // PEM is ASCII (RFC 7468, section 2); its label is compared as a String below, and a
        // Kelvin sign (U+212A) equals a K there.
        if let offset = pem.utf8.firstNonASCIIOffset {
            throw AppleError(.invalidKey, "a .p8 key file is ASCII, as PEM is (RFC 7468); byte \(offset) is not")
        }
        // Every "-----BEGIN <label>-----" marker, wherever it stands.
        let labels = pem.split(separator: "-----BEGIN ", omittingEmptySubsequences: false).dropFirst().map { rest in
            String(rest.prefix { $0 != "-" && $0 != "\n" })
        }
        guard labels.count == 1, let label = labels.first else {
            throw AppleError(
                .invalidKey,
                labels.isEmpty
                    ? "the key file is not PEM (no BEGIN line)"
                    : "the key file holds \(labels.count) PEM blocks; a .p8 holds one")
        }
        switch label {
        case "PRIVATE KEY": break
        case "ENCRYPTED PRIVATE KEY":
            throw AppleError(.invalidKey, "the key is encrypted; Apple's .p8 keys are not, and no passphrase is taken")
        case "RSA PRIVATE KEY":
            throw AppleError(
                .invalidKey, "the key is an RSA key; Sign in with Apple client secrets need the P-256 .p8 key")
        case "EC PRIVATE KEY":
            throw AppleError(
                .invalidKey,
                """
                the key is SEC1 (EC PRIVATE KEY); Apple's .p8 is PKCS#8 (BEGIN PRIVATE KEY); convert it with `openssl \
                pkcs8 -topk8 -nocrypt`
                """
            )
        default: throw AppleError(.invalidKey, "the PEM block is \(label), not a PKCS#8 PRIVATE KEY")
        }
        if let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) {
            self.key = key
            return
        }
        if (try? _RSA.Signing.PrivateKey(pemRepresentation: pem)) != nil {
            throw AppleError(
                .invalidKey, "the key is an RSA key; Sign in with Apple client secrets need the P-256 .p8 key")
        }
        if (try? P384.Signing.PrivateKey(pemRepresentation: pem)) != nil {
            throw AppleError(.invalidKey, "the key is on curve P-384; Apple's .p8 keys are P-256")
        }
        if (try? P521.Signing.PrivateKey(pemRepresentation: pem)) != nil {
            throw AppleError(.invalidKey, "the key is on curve P-521; Apple's .p8 keys are P-256")
        }
        if (try? Curve25519.Signing.PrivateKey(pemRepresentation: pem)) != nil {
            throw AppleError(.invalidKey, "the key is Ed25519; Apple's .p8 keys are P-256")
        }
        throw AppleError(.invalidKey, "the PEM does not hold a P-256 private key")
    }

    /// A key from an existing swift-crypto key (tests, key stores).
    public init(_ key: P256.Signing.PrivateKey) { self.key = key }

    /// The public key, to check secrets made with this key.
    public var publicKey: P256.Signing.PublicKey { key.publicKey }
}

/// The JWT a server sends to Apple as `client_secret` (ES256, raw 64-byte signature).
public struct ClientSecretBuilder: Sendable {
    /// The longest lifetime Apple accepts: 15,777,000 s (six months).
    public static let maximumLifetime: TimeInterval = 15_777_000
    /// The default lifetime: one day.
    public static let defaultLifetime: TimeInterval = 86400

    public let teamID: String
    public let keyID: String
    public let clientID: String
    public let lifetime: TimeInterval
    private let signer: JWSSigner

    /// - Parameters:
    ///   - teamID: the 10-character Team ID (A-Z, 0-9), the `iss`.
    ///   - keyID: the 10-character Key ID of the .p8 key, the header `kid`.
    ///   - clientID: the App ID or Services ID, the `sub` (case kept).
    ///   - lifetime: `exp − iat`, at most 15,777,000 s.
    public init(
        key: AppleSigningKey, teamID: String, keyID: String, clientID: String,
        lifetime: TimeInterval = ClientSecretBuilder.defaultLifetime
    ) throws {
        try Self.checkIdentifier(teamID, "team ID")
        try Self.checkIdentifier(keyID, "key ID")
        guard !clientID.isEmpty, clientID.utf8.count <= 255,
            clientID.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F })
        else {
            throw AppleError(.invalidParameter, "client ID must be 1 to 255 printable ASCII characters without spaces")
        }
        guard lifetime >= 1, lifetime <= Self.maximumLifetime else {
            throw AppleError(
                .invalidParameter,
                "client secret lifetime \(Int(lifetime)) s is outside 1...\(Int(Self.maximumLifetime)) s")
        }
        self.teamID = teamID
        self.keyID = keyID
        self.clientID = clientID
        self.lifetime = lifetime
        signer = .es256(key.key, keyID: keyID)
    }

    private static func checkIdentifier(_ value: String, _ name: String) throws {
        guard value.utf8.count == 10,
            value.utf8.allSatisfy({ ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x30 && $0 <= 0x39) })
        else {
            throw AppleError(
                .invalidParameter, "\(name) must be 10 characters A-Z and 0-9, found \(value.quotedForMessage)")
        }
    }

    /// The claims of a secret issued at `now` (whole seconds).
    /// - Throws: ``AppleError/Code/invalidParameter`` when `now` or the expiry lies outside the
    ///   supported range (years 0001 to 9999).
    public func claims(issuedAt now: Date) throws -> JSONObject {
        guard let issued = Timestamp(now),
            let expiry = Timestamp(wholeSeconds: issued.wholeSeconds)?.adding(seconds: lifetime)
        else {
            throw AppleError(
                .invalidParameter,
                "a client secret issued at \(now.timeIntervalSince1970) s lies outside \(Timestamp.rangeDescription)")
        }
        return [
            "iss": .string(teamID), "iat": .int(issued.wholeSeconds), "exp": .int(expiry.wholeSeconds),
            "aud": .string(Apple.issuer), "sub": .string(clientID),
        ]
    }

    /// A secret issued at `now`.
    public func make(issuedAt now: Date) throws -> ClientSecret {
        let claims = try claims(issuedAt: now)
        let token = try signer.sign(claims: claims)
        let iat = claims["iat"]?.numberValue?.int64Value ?? 0
        let exp = claims["exp"]?.numberValue?.int64Value ?? 0
        return ClientSecret(
            token: token, issuedAt: Date(timeIntervalSince1970: Double(iat)),
            expiresAt: Date(timeIntervalSince1970: Double(exp)))
    }
}

/// A client secret and its validity.
public struct ClientSecret: Sendable, CustomStringConvertible {
    /// The JWT. It is a credential: do not log it.
    public let token: String
    public let issuedAt: Date
    public let expiresAt: Date

    public var description: String { "ClientSecret(expires \(Timestamp.rfc3339(expiresAt)), redacted)" }
}

/// Hands out a client secret, minting a new one only when the current one is within `margin`
/// of expiry (by default a tenth of its lifetime, at least 60 s).
public final class ClientSecretProvider: Sendable {
    private let builder: ClientSecretBuilder
    private let margin: TimeInterval
    private let clock: WallClock
    private let current = Mutex<ClientSecret?>(nil)

    public init(builder: ClientSecretBuilder, margin: TimeInterval? = nil, clock: WallClock = .system) {
        self.builder = builder
        self.margin = margin ?? max(60, builder.lifetime / 10)
        self.clock = clock
    }

    /// The client ID the secrets are for.
    public var clientID: String { builder.clientID }

    /// A secret valid for at least `margin` more seconds.
    public func secret() throws -> ClientSecret {
        let now = clock.now
        if let cached = current.withLock({ $0 }), cached.expiresAt.timeIntervalSince(now) > margin,
            cached.issuedAt <= now
        {
            return cached
        }
        let fresh = try builder.make(issuedAt: now)
        current.withLock { $0 = fresh }
        return fresh
    }
}
