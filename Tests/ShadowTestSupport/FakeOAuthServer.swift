import Foundation
import ShadowCore
import ShadowDPoP
import Synchronization

/// A loopback OAuth 2.0 token endpoint (RFC 6749) for token-source tests. Refresh tokens
/// rotate when `rotates` is set: a refresh with token n issues n+1, and n stays valid until n+1
/// is first used (so a client that crashed before saving n+1 can still refresh with n). A
/// refresh token in `revoked` answers `invalid_grant`.
public final class FakeOAuthServer: Sendable {
    public struct State: Sendable {
        public var rotates = true
        public var valid: Set<String> = ["rt-0"]
        public var revoked: Set<String> = []
        public var refreshes = 0
        public var issued = 0
        public var accessLifetime = 3600
        /// Answers the next requests with this status (and `Retry-After`, when set) first.
        public var failures: [(status: Int, retryAfter: String?)] = []
        /// Waits this long before answering, to widen race windows.
        public var delay: Double = 0
        /// What the code grant saw: the code and the PKCE verifier.
        public var codes: [(code: String, verifier: String?)] = []
        public var clientSecret = "client-secret-1"
        /// Demand a DPoP proof (RFC 9449 §5) with every request, and bind the tokens to its key.
        public var dpop = false
        /// With `dpop`: the nonce every proof must carry; a proof without it is answered
        /// `use_dpop_nonce` with this one in `DPoP-Nonce`.
        public var dpopNonce: String?
        /// The key each refresh token is bound to (its thumbprint).
        public var boundKeys: [String: String] = [:]
        /// The thumbprints of the proofs accepted, in order, and how many nonce challenges went out.
        public var proofKeys: [String] = []
        public var nonceChallenges = 0

        public init() {}
    }

    final class Box: Sendable {
        let state: Mutex<State>
        init(_ state: State) { self.state = Mutex(state) }
    }

    public let server: LoopbackHTTPServer
    private let box: Box

    public init(_ initial: State = State()) throws {
        let box = Box(initial)
        self.box = box
        server = try LoopbackHTTPServer { request in Self.handle(request, box: box) }
    }

    /// Reads or changes the server's state.
    @discardableResult
    public func withState<R>(_ body: (inout State) -> R) -> R { box.state.withLock { body(&$0) } }

    public var url: String { server.url("/token") }

    /// Whether `token` would refresh now.
    public func accepts(_ token: String) -> Bool {
        withState { $0.valid.contains(token) && !$0.revoked.contains(token) }
    }

    static func handle(_ request: LoopbackHTTPServer.Request, box: Box) -> LoopbackHTTPServer.Reply {
        let delay = box.state.withLock { $0.delay }
        if delay > 0 { Thread.sleep(forTimeInterval: delay) }
        return box.state.withLock { state in
            if !state.failures.isEmpty {
                let failure = state.failures.removeFirst()
                return .json(
                    #"{"error":"temporarily_unavailable"}"#, status: failure.status,
                    headers: failure.retryAfter.map { [("Retry-After", $0)] } ?? [])
            }
            let form = request.form
            // Client authentication: Basic or the form, with the one client secret.
            let basic = "Basic " + Data("client-1:\(state.clientSecret)".utf8).base64EncodedString()
            let authenticated =
                request.headers["authorization"] == basic
                || (form["client_id"] == "client-1" && form["client_secret"] == state.clientSecret)
                || (form["client_id"] == "public-client" && form["client_secret"] == nil)
                || (form["client_id"] == "com.example.app" && form["client_secret"]?.split(separator: ".").count == 3)
            guard authenticated else { return .json(#"{"error":"invalid_client"}"#, status: 401) }
            var key: String?
            if state.dpop {
                switch checkProof(request, state: &state) {
                case .success(let thumbprint): key = thumbprint
                case .failure(let refusal): return refusal.reply
                }
            }
            let tokenType = key == nil ? "Bearer" : "DPoP"
            switch form["grant_type"] {
            case "refresh_token":
                guard let token = form["refresh_token"], state.valid.contains(token), !state.revoked.contains(token)
                else { return .json(#"{"error":"invalid_grant"}"#, status: 400) }
                // A bound refresh token needs a proof by its key (RFC 9449 §5).
                if let bound = state.boundKeys[token], bound != key {
                    return .json(#"{"error":"invalid_dpop_proof"}"#, status: 400)
                }
                state.refreshes += 1
                state.issued += 1
                let access = "at-\(state.issued)"
                var body: JSONObject = [
                    "access_token": .string(access), "token_type": .string(tokenType),
                    "expires_in": .int(state.accessLifetime),
                    "scope": "drive.file",
                ]
                if state.rotates {
                    let number = Int(token.dropFirst(3)) ?? 0
                    // Using token n ends n-1; n stays valid until n+1 is used.
                    state.valid.remove("rt-\(number - 1)")
                    let next = "rt-\(number + 1)"
                    state.valid.insert(next)
                    if let key { state.boundKeys[next] = key }
                    body.set("refresh_token", .string(next))
                }
                return .json(JSONValue.object(body).serialized())
            case "authorization_code":
                state.codes.append((form["code"] ?? "", form["code_verifier"]))
                state.issued += 1
                state.valid.insert("rt-code")
                if let key { state.boundKeys["rt-code"] = key }
                let body: JSONObject = [
                    "access_token": "at-code", "token_type": .string(tokenType), "expires_in": 3600,
                    "refresh_token": "rt-code",
                ]
                return .json(JSONValue.object(body).serialized())
            default:
                return .json(#"{"error":"unsupported_grant_type"}"#, status: 400)
            }
        }
    }

    /// The answer a provider gives to a proof it refuses.
    struct Refusal: Error {
        let reply: LoopbackHTTPServer.Reply
        init(_ reply: LoopbackHTTPServer.Reply) { self.reply = reply }
    }

    /// The request's DPoP proof for `POST http://<host>/token`: its key's thumbprint, or the
    /// answer a provider gives (`invalid_dpop_proof`; `use_dpop_nonce` with the nonce).
    static func checkProof(_ request: LoopbackHTTPServer.Request, state: inout State) -> Result<String, Refusal> {
        guard let header = request.headers["dpop"], let host = request.headers["host"] else {
            return .failure(Refusal(.json(#"{"error":"invalid_dpop_proof"}"#, status: 400)))
        }
        guard let proof = try? DPoPVerifier().verify([header], method: "POST", url: "http://\(host)/token") else {
            return .failure(Refusal(.json(#"{"error":"invalid_dpop_proof"}"#, status: 400)))
        }
        if let nonce = state.dpopNonce, proof.nonce != nonce {
            state.nonceChallenges += 1
            return .failure(
                Refusal(.json(#"{"error":"use_dpop_nonce"}"#, status: 400, headers: [("DPoP-Nonce", nonce)])))
        }
        state.proofKeys.append(proof.thumbprint)
        return .success(proof.thumbprint)
    }
}
