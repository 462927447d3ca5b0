import Crypto
import Foundation
import ShadowApple
import ShadowCore
import ShadowCredentials
import ShadowJOSE

enum AppleTargets {
    static let now = Date(timeIntervalSince1970: 1_700_001_000)
    static let validator = AppleIdentityTokenValidator(
        clientIDs: ["com.example.app", "com.example.web"], nonce: "nonce-1", clock: .fixed(now))

    static func claims(_ bytes: [UInt8]) -> JWTClaims? {
        (try? StrictJSON.parse(bytes, limits: .jose))?.objectValue.map(JWTClaims.init)
    }

    /// A claims set (the payload, past its signature): Apple's policy, then the typed token.
    /// Whatever the policy accepts must make a token, and a sign-in event the state can record.
    static let identityToken: FuzzTargets.Harness = { data in
        guard let claims = claims(Array(data)) else { return }
        guard validator.verifier.policy.evaluate(claims, now: now).isEmpty else { return }
        let verified = VerifiedJWT(header: header, claims: claims, algorithm: .rs256, key: key)
        guard let token = try? AppleIdentityToken(verified) else {
            preconditionFailure("claims Apple's policy accepts make no token")
        }
        precondition(validator.clientIDs.contains(token.audience), "the token's audience is not an accepted client ID")
        _ = token.json.serialized()
        guard let events = try? CredentialEvent.signIn(token, rawToken: "x", clientID: token.audience) else {
            preconditionFailure("an accepted token's sign-in cannot be recorded")
        }
        precondition(!events.isEmpty)
    }

    static let notificationVerifier = AppleNotificationVerifier(clientIDs: ["com.example.app"], clock: .fixed(now))

    /// Mode 0: a POST body. Otherwise: notification claims through the policy and the event
    /// reader; an event it returns is in range and records.
    static let notification: FuzzTargets.Harness = { data in
        let input = Input(data)
        if input.mode & 1 == 0 {
            _ = try? AppleNotificationVerifier.payload(fromBody: input.rest)
            return
        }
        guard let claims = claims(input.rest), notificationVerifier.verifier.policy.evaluate(claims, now: now).isEmpty
        else { return }
        let verified = VerifiedJWT(header: header, claims: claims, algorithm: .rs256, key: key)
        guard let notification = try? notificationVerifier.notification(from: verified) else { return }
        precondition(notification.audience == "com.example.app")
        precondition(Timestamp(notification.eventTime) != nil)
        _ = notification.json.serialized()
        _ = try? CredentialEvent.notification(notification, clientID: notification.audience)
    }

    static let header: JOSEHeader = {
        guard let header = try? JOSEHeader(["alg": "RS256"]) else { preconditionFailure("fixed header") }
        return header
    }()

    static let key: JWK = {
        guard let key = JOSETargets.keys.keys.first else { preconditionFailure("fixed key") }
        return key
    }()

    /// A `.p8` key file: refused with a reason, or a P-256 key that signs a client secret.
    static let p8: FuzzTargets.Harness = { data in
        guard let key = try? AppleSigningKey(pem: String(decoding: data, as: UTF8.self)) else { return }
        guard
            let builder = try? ClientSecretBuilder(
                key: key, teamID: "TEAM123456", keyID: "KEY1234567", clientID: "com.example.app"),
            let secret = try? builder.make(issuedAt: now)
        else { preconditionFailure("a key the reader accepts cannot sign a client secret") }
        precondition((try? CompactJWS(secret.token))?.signature.count == 64)
    }
}
