public import Crypto
import CryptoExtras
import Foundation
import ShadowCore
public import ShadowJOSE
import Synchronization

/// A loopback stand-in for appleid.apple.com: `/auth/keys`, `/auth/token`, `/auth/revoke` and
/// `/auth/usermigrationinfo`. It checks client secrets as Apple does (ES256 signature against
/// the registered key, `kid`, `iss`, `sub`, `aud`, `exp` and its six-month limit), keeps codes,
/// refresh tokens and revocations, answers with Apple's response and error shapes, and can be
/// told to fail the next requests to a path.
public final class FakeAppleServer: Sendable {
    public let server: LoopbackHTTPServer
    public let teamID: String
    public let keyID: String
    public let clientIDs: [String]
    /// Signs the identity tokens the fake issues; published at /auth/keys.
    public let identitySigner: JWSSigner
    private let clientKeys: JWKSet
    private let state = Mutex(State())

    private struct State {
        var codes: [String: (sub: String, nonce: String?, clientID: String)] = [:]
        var refreshTokens: [String: (sub: String, clientID: String)] = [:]
        var revoked: Set<String> = []
        var revokeCalls: [String: Int] = [:]
        var migrationTokens: Set<String> = []
        var transfers: [String: String] = [:]  // transfer_sub -> new sub
        var injected: [String: [LoopbackHTTPServer.Reply]] = [:]
        var counter = 0
    }

    /// A fake that trusts client secrets signed by `clientKey` under `keyID` for `teamID`.
    public init(
        teamID: String = "TEAM123456", keyID: String = "KEY1234567", clientKey: P256.Signing.PublicKey,
        clientIDs: [String] = ["com.example.app"]
    ) throws {
        self.teamID = teamID
        self.keyID = keyID
        self.clientIDs = clientIDs
        identitySigner = try JWSSigner.rs256(TestKeys.rsa2, keyID: "fake-apple-1")
        clientKeys = try JWKSet(keys: [JWK(p256: clientKey, keyID: keyID)])
        server = try LoopbackHTTPServer { _ in .close }
        server.setHandler { [weak self] request in
            guard let self else { return .close }
            return self.handle(request)
        }
    }

    /// `http://127.0.0.1:<port>`.
    public var baseURL: String { "http://127.0.0.1:\(server.port)" }

    /// Every request so far.
    public var requests: [LoopbackHTTPServer.Request] { server.requests }

    /// A one-time authorization code for `sub`, as Apple hands the client after sign-in.
    public func issueCode(for sub: String, nonce: String? = nil, clientID: String? = nil) -> String {
        state.withLock { state in
            state.counter += 1
            let code = "c\(state.counter).0.mrxr.\(UUID().uuidString.prefix(8))"
            state.codes[code] = (sub, nonce, clientID ?? clientIDs[0])
            return code
        }
    }

    /// The next requests to `path` get these replies, in order, instead of normal handling.
    public func inject(_ path: String, _ replies: [LoopbackHTTPServer.Reply]) {
        state.withLock { $0.injected[path, default: []] += replies }
    }

    /// True when `token` has been revoked.
    public func isRevoked(_ token: String) -> Bool { state.withLock { $0.revoked.contains(token) } }

    /// How many accepted `/auth/revoke` calls named each token.
    public var revokeCalls: [String: Int] { state.withLock { $0.revokeCalls } }

    /// Apple's error body.
    public static func error(_ code: String, status: Int = 400, description: String? = nil) -> LoopbackHTTPServer.Reply
    {
        var object: JSONObject = ["error": .string(code)]
        if let description { object.set("error_description", .string(description)) }
        return .json(object.serialized(), status: status)
    }

    private func handle(_ request: LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Reply {
        let path = String(request.path.split(separator: "?").first ?? "")
        if let injected = state.withLock({ state -> LoopbackHTTPServer.Reply? in
            guard var queue = state.injected[path], !queue.isEmpty else { return nil }
            let first = queue.removeFirst()
            state.injected[path] = queue
            return first
        }) {
            return injected
        }
        switch (request.method, path) {
        case ("GET", "/auth/keys"):
            let jwk = (try? identitySigner.publicJWK().json) ?? [:]
            return .json(
                JSONValue.object(["keys": [.object(jwk)]]).serialized(), headers: [("Cache-Control", "max-age=3600")])
        case ("POST", "/auth/token"): return token(request)
        case ("POST", "/auth/revoke"): return revoke(request)
        case ("POST", "/auth/usermigrationinfo"): return migration(request)
        default: return .json("{}", status: 404)
        }
    }

    /// Checks `client_id` and `client_secret` as Apple does; nil when they pass.
    private func clientFailure(
        _ form: [String: String], _ request: LoopbackHTTPServer.Request
    ) -> LoopbackHTTPServer.Reply? {
        guard request.headers["content-type"]?.hasPrefix("application/x-www-form-urlencoded") == true else {
            return Self.error("invalid_request", description: "content type must be application/x-www-form-urlencoded")
        }
        guard let clientID = form["client_id"], clientIDs.contains(clientID), let secret = form["client_secret"] else {
            return Self.error("invalid_client")
        }
        let verifier = JWTVerifier(
            algorithms: [.es256],
            policy: ClaimPolicy(
                issuer: teamID, audiences: ["https://appleid.apple.com"], leeway: 0, requiredClaims: ["iat", "sub"]))
        guard let verified = try? verifier.verify(secret, keys: clientKeys), verified.header.keyID == keyID,
            verified.claims.subject == clientID, let iat = verified.claims.issuedAt,
            let exp = verified.claims.expiresAt,
            exp.timeIntervalSince(iat) <= 15_777_000, iat <= Date().addingTimeInterval(60)
        else { return Self.error("invalid_client") }
        return nil
    }

    private func token(_ request: LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Reply {
        let form = request.form
        if let failure = clientFailure(form, request) { return failure }
        let clientID = form["client_id"] ?? ""
        switch form["grant_type"] {
        case nil:
            return Self.error("invalid_request", description: "grant_type is required")
        case "authorization_code":
            guard let code = form["code"] else { return Self.error("invalid_request") }
            let grant = state.withLock { state -> (sub: String, nonce: String?, clientID: String)? in
                guard let grant = state.codes.removeValue(forKey: code), grant.clientID == clientID else { return nil }
                return grant
            }
            guard let grant else {
                return Self.error("invalid_grant", description: "The code has expired or has been revoked.")
            }
            let refresh =
                "r\(UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: ""))"
                + ".0.srxr.\(Int.random(in: 1000...9999))"
            state.withLock { $0.refreshTokens[refresh] = (grant.sub, clientID) }
            return tokenReply(sub: grant.sub, clientID: clientID, nonce: grant.nonce, refreshToken: refresh)
        case "refresh_token":
            guard let refresh = form["refresh_token"] else { return Self.error("invalid_request") }
            let owner = state.withLock { state in state.revoked.contains(refresh) ? nil : state.refreshTokens[refresh] }
            guard let owner, owner.clientID == clientID else {
                return Self.error("invalid_grant", description: "The refresh token is invalid.")
            }
            return tokenReply(sub: owner.sub, clientID: clientID, nonce: nil, refreshToken: nil)
        case "client_credentials":
            guard form["scope"] == "user.migration" else { return Self.error("invalid_scope") }
            let token = "m" + UUID().uuidString.lowercased()
            state.withLock { _ = $0.migrationTokens.insert(token) }
            return .json(
                JSONValue.object(["access_token": .string(token), "token_type": "Bearer", "expires_in": 3600])
                    .serialized())
        default:
            return Self.error("unsupported_grant_type")
        }
    }

    private func tokenReply(
        sub: String, clientID: String, nonce: String?, refreshToken: String?
    ) -> LoopbackHTTPServer.Reply {
        let now = Int64(Date().timeIntervalSince1970)
        var claims: JSONObject = [
            "iss": "https://appleid.apple.com", "aud": .string(clientID), "exp": .int(now + 86400), "iat": .int(now),
            "sub": .string(sub),
            "at_hash": "x3vS1sWGJzVgkN6Y1l7lQw", "email": "relay@privaterelay.appleid.com", "email_verified": true,
            "is_private_email": true,
            "auth_time": .int(now), "nonce_supported": true,
        ]
        if let nonce { claims.set("nonce", .string(nonce)) }
        let idToken = (try? identitySigner.sign(claims: claims)) ?? ""
        var body: JSONObject = [
            "access_token": .string("a" + UUID().uuidString.lowercased()), "token_type": "Bearer", "expires_in": 3600,
            "id_token": .string(idToken),
        ]
        if let refreshToken { body.set("refresh_token", .string(refreshToken)) }
        return .json(body.serialized())
    }

    private func revoke(_ request: LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Reply {
        let form = request.form
        if let failure = clientFailure(form, request) { return failure }
        guard let token = form["token"], let hint = form["token_type_hint"],
            ["refresh_token", "access_token"].contains(hint)
        else {
            return Self.error("invalid_request")
        }
        state.withLock {
            _ = $0.revoked.insert(token)
            $0.revokeCalls[token, default: 0] += 1
        }
        return .respond(status: 200, headers: [], body: [])
    }

    private func migration(_ request: LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Reply {
        let form = request.form
        if let failure = clientFailure(form, request) { return failure }
        let bearer = request.headers["authorization"].map { String($0.dropFirst("Bearer ".count)) } ?? ""
        guard state.withLock({ $0.migrationTokens.contains(bearer) }) else {
            return Self.error("invalid_client", status: 401)
        }
        if let sub = form["sub"], let target = form["target"], !target.isEmpty {
            let transfer = "t\(abs(sub.hashValue) % 1_000_000).\(target).transfer"
            state.withLock { $0.transfers[transfer] = "000777.\(sub.suffix(6)).moved" }
            return .json(JSONValue.object(["transfer_sub": .string(transfer)]).serialized())
        }
        if let transfer = form["transfer_sub"] {
            guard let newSub = state.withLock({ $0.transfers[transfer] }) else {
                return Self.error("invalid_request", description: "unknown transfer_sub")
            }
            return .json(
                JSONValue.object([
                    "sub": .string(newSub), "email": "moved@privaterelay.appleid.com", "is_private_email": "true",
                ]).serialized())
        }
        return Self.error("invalid_request")
    }
}
