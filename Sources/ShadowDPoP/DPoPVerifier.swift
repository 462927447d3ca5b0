import Crypto
import Synchronization
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import ShadowCore
public import ShadowJOSE

/// A DPoP proof that passed every check of RFC 9449 §4.3 but the replay check, which needs a
/// store (``DPoPVerifier/verify(_:method:url:accessToken:boundTo:nonces:replay:)``).
public struct DPoPProof: Sendable {
    /// The public key's RFC 7638 thumbprint (`jkt`).
    public let thumbprint: String
    /// The public key from the header.
    public let key: JWK
    public let algorithm: JWSAlgorithm
    /// `jti`.
    public let id: String
    /// `htm`.
    public let method: String
    /// `htu`, normalized (``HTTPTargetURI/normalized(_:)``).
    public let targetURI: String
    /// `iat`.
    public let issuedAt: Date
    /// `nonce`, when present.
    public let nonce: String?
    /// When the proof stops being accepted: `iat` plus the accepted age and the leeway.
    public let acceptedUntil: Date

    /// The replay cache's key (Docs/dpop.md, "Replay"): the first 16 bytes of
    /// SHA-256("shadow-keys dpop v1 jti" ‖ 0x00 ‖ jkt ‖ 0x00 ‖ htu ‖ 0x00 ‖ jti).
    public var replayKey: [UInt8] {
        var hasher = SHA256()
        for (index, part) in ["shadow-keys dpop v1 jti", thumbprint, targetURI, id].enumerated() {
            if index > 0 { withUnsafeBytes(of: UInt8(0)) { hasher.update(bufferPointer: $0) } }
            var part = part
            part.withUTF8 { hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }
        }
        return Array(hasher.finalize().prefix(16))
    }
}

/// Checks DPoP proofs as RFC 9449 §4.3 says, each step with its own ``DPoPErrorCode`` (Docs/dpop.md).
public struct DPoPVerifier: Sendable {
    /// The algorithms a proof may use (asymmetric only: `none` and HMAC are never accepted).
    public var algorithms: Set<JWSAlgorithm>
    /// How old a proof's `iat` may be (default 60 s; 1 to 3600).
    public var maxAge: TimeInterval
    /// Clock difference allowed either way (default 10 s; 0 to 300).
    public var leeway: TimeInterval
    /// The largest proof read (default 8 KiB; 512 to 65536).
    public var maxProofBytes: Int
    public var clock: WallClock
    /// Headers already checked, shared by the copies of this verifier.
    let headers = HeaderCache()

    public init(
        algorithms: Set<JWSAlgorithm> = [.es256, .rs256], maxAge: TimeInterval = 60, leeway: TimeInterval = 10,
        maxProofBytes: Int = 8192, clock: WallClock = .system
    ) {
        (self.algorithms, self.maxAge, self.leeway, self.maxProofBytes, self.clock) =
            (algorithms, maxAge, leeway, maxProofBytes, clock)
    }

    /// The `algs` a `WWW-Authenticate: DPoP` challenge lists: the allowed algorithms, sorted.
    public var challengeAlgorithms: String { algorithms.map(\.rawValue).sorted().joined(separator: " ") }

    private func checkSettings() throws {
        guard !algorithms.isEmpty, (1...3600).contains(maxAge), (0...300).contains(leeway),
            (512...65536).contains(maxProofBytes)
        else {
            throw DPoPError(
                .invalidParameter,
                "a DPoP verifier allows at least one algorithm, an age of 1 to 3600 s, a leeway of 0 to 300 s and "
                    + "proofs of 512 to 65536 bytes")
        }
    }

    /// Checks the request's `DPoP` header values (all of them: more than one is refused).
    /// - Parameters:
    ///   - method: the request's method.
    ///   - url: the request's URL as the client addressed it (scheme, host and path).
    ///   - accessToken: the access token presented with the proof, if any: `ath` must be its hash.
    ///   - thumbprint: the key the presented token is bound to (`cnf.jkt`), if any.
    ///   - nonces: the server's nonces, when it requires one in every proof.
    /// - Throws: ``DPoPError``, naming the first check that failed.
    public func verify(
        _ values: [String], method: String, url: String, accessToken: String? = nil, boundTo thumbprint: String? = nil,
        nonces: DPoPNonces? = nil
    ) throws -> DPoPProof {
        guard let value = values.first else { throw DPoPError(.missingProof, "the request has no DPoP header") }
        guard values.count == 1 else {
            throw DPoPError(.multipleProofs, "the request has \(values.count) DPoP headers; exactly one is allowed")
        }
        return try verify(
            value, method: method, url: url, accessToken: accessToken, boundTo: thumbprint, nonces: nonces)
    }

    /// Checks one proof (``verify(_:method:url:accessToken:boundTo:nonces:)-([String],_,_,_,_,_)`` for a
    /// request's headers).
    public func verify(
        _ proof: String, method: String, url: String, accessToken: String? = nil, boundTo thumbprint: String? = nil,
        nonces: DPoPNonces? = nil
    ) throws -> DPoPProof {
        try checkSettings()
        guard let expectedURI = headers.normalized(url) else {
            let refusal = HTTPTargetURI.refusal(url).map { ": \($0)" } ?? ""
            throw DPoPError(.invalidParameter, "the request URL is not an absolute http(s) URL" + refusal)
        }
        // A device sends the same header with every proof: one already checked (its type, its
        // algorithm, no crit, its key) is taken from the cache by its exact text.
        let headerText = CompactJWS.headerSegment(of: proof, maxBytes: HeaderCache.maxHeaderBytes)
        let cached = headerText.flatMap { headers.entry($0) }
        // Step 2: a well-formed JWS whose header and payload are JSON objects.
        let jws: CompactJWS
        do {
            jws = try CompactJWS(proof, maxBytes: maxProofBytes, knownHeader: cached?.header)
        } catch let error as JOSEError {
            if error.code == .disallowedAlgorithm { throw DPoPError(.disallowedAlgorithm, error.reason) }
            throw DPoPError(.malformedProof, error.reason)
        }
        let (key, algorithm): (JWK, JWSAlgorithm)
        if let cached, algorithms.contains(cached.algorithm) {
            (key, algorithm) = (cached.key, cached.algorithm)
        } else {
            (key, algorithm) = try checkedHeader(jws.header)
            if let headerText {
                headers.insert(headerText, HeaderCache.Entry(header: jws.header, key: key, algorithm: algorithm))
            }
        }
        // Step 3: the claims, present and of their types.
        let claims = try Claims(try payload(jws))
        // Step 6: the signature.
        do {
            try jws.withSigningInput { input in
                try key.verifySignature(jws.signature, signingInput: input, algorithm: algorithm)
            }
        } catch let error as JOSEError {
            throw DPoPError(.invalidSignature, error.reason)
        }
        // Step 8: htm, exactly (methods are case-sensitive).
        guard claims.method.exactlyEquals(method) else {
            throw DPoPError(
                .methodMismatch, "htm is \(claims.method.quotedForMessage); the request's method is \(method)")
        }
        // Step 9: htu, normalized, without query and fragment.
        // A claim already in the normal form the request's URI has is that form (normalizing is
        // idempotent); anything else is normalized first.
        let normal =
            claims.target.exactlyEquals(expectedURI) ? .success(expectedURI) : HTTPTargetURI.normalize(claims.target)
        guard case .success(let target) = normal, target.exactlyEquals(expectedURI) else {
            var found = claims.target.quotedForMessage
            if case .failure(let refusal) = normal { found += " (\(refusal))" }
            throw DPoPError(.uriMismatch, "htu is \(found); the request's URI is \(expectedURI.quotedForMessage)")
        }
        // Step 10: the server's nonce.
        if let nonces {
            guard let nonce = claims.nonce, nonces.accepts(nonce) else {
                throw DPoPError(
                    .useNonce,
                    claims.nonce == nil
                        ? "the server requires a nonce in every DPoP proof: use the DPoP-Nonce header's"
                        : "the proof's nonce is not the server's current one: use the DPoP-Nonce header's")
            }
        }
        // Step 11: iat within the window.
        let now = clock.now.timeIntervalSince1970
        guard claims.issuedAt >= now - maxAge - leeway, claims.issuedAt <= now + leeway else {
            let age = Int64((now - claims.issuedAt).rounded())
            throw DPoPError(
                .iatOutOfWindow,
                age >= 0
                    ? "the proof was made \(age) s ago; proofs are accepted for \(Int(maxAge)) s"
                    : "the proof's iat is \(-age) s in the future; the leeway is \(Int(leeway)) s")
        }
        // Step 12: ath and the bound key.
        if let accessToken {
            guard let hash = claims.accessTokenHash else {
                throw DPoPError(.missingClaim, "a proof sent with an access token carries ath, its hash")
            }
            guard ConstantTime.equals(hash.utf8, DPoPClaims.accessTokenHash(accessToken).utf8) else {
                throw DPoPError(.athMismatch, "ath is not the hash of the access token sent with the proof")
            }
        }
        if let thumbprint, !ConstantTime.equals(thumbprint.utf8, key.thumbprint.utf8) {
            throw DPoPError(.keyMismatch, "the proof is signed by another key than the one the token is bound to")
        }
        return DPoPProof(
            thumbprint: key.thumbprint, key: key, algorithm: algorithm, id: claims.id, method: claims.method,
            targetURI: target, issuedAt: Date(timeIntervalSince1970: claims.issuedAt),
            nonce: claims.nonce,
            acceptedUntil: Date(timeIntervalSince1970: claims.issuedAt + maxAge + leeway))
    }

    /// ``verify(_:method:url:accessToken:boundTo:nonces:)-([String],_,_,_,_,_)``, then the replay
    /// check (§11.1): the proof's ``DPoPProof/replayKey`` recorded in `replay` until it would stop
    /// being accepted. Nothing is written for a proof that fails any other check.
    public func verify(
        _ values: [String], method: String, url: String, accessToken: String? = nil, boundTo thumbprint: String? = nil,
        nonces: DPoPNonces? = nil, replay: some DPoPReplayCache
    ) async throws -> DPoPProof {
        let proof = try verify(
            values, method: method, url: url, accessToken: accessToken, boundTo: thumbprint, nonces: nonces)
        try await spend(proof, in: replay)
        return proof
    }

    /// The replay check (§11.1) of a proof that passed every other: its ``DPoPProof/replayKey``
    /// recorded in `replay` until it would stop being accepted. A server that writes other rows
    /// for the same request checks the proof first, then sends this write beside them.
    /// - Throws: ``DPoPErrorCode/replayed``; ``DPoPErrorCode/unavailable`` when `replay` fails.
    public func spend(_ proof: DPoPProof, in replay: some DPoPReplayCache) async throws {
        let entry = replayEntry(proof)
        let answer: Result<Bool, any Error>
        do {
            answer = .success(try await replay.firstUse(of: entry.key, until: entry.expiresAt, now: entry.now))
        } catch {
            answer = .failure(error)
        }
        try Self.spent(answer)
    }

    /// The replay check of `proof` (``spend(_:in:)``) for a caller that hands it to its store
    /// with other writes: the key, kept until the proof stops being accepted, checked now.
    public func replayEntry(_ proof: DPoPProof) -> DPoPReplayEntry {
        DPoPReplayEntry(
            key: proof.replayKey, expiresAt: Int64((proof.acceptedUntil.timeIntervalSince1970 * 1000).rounded(.up)),
            now: Int64((clock.now.timeIntervalSince1970 * 1000).rounded(.down)))
    }

    /// The replay check's answer (``DPoPReplayCache/firstUse(of:until:now:)``) as ``spend(_:in:)``
    /// gives it: a replay or an unreachable cache is a ``DPoPError``.
    public static func spent(_ firstUse: Result<Bool, any Error>) throws {
        let first: Bool
        do {
            first = try firstUse.get()
        } catch let error as DPoPError {
            throw error
        } catch {
            throw DPoPError(.unavailable, "the DPoP replay cache cannot be reached: try again")
        }
        guard first else { throw DPoPError(.replayed, "this proof (its jti) was used before") }
    }

    /// Steps 3 to 6: typ, the algorithm, no crit, and a public JWK that can verify the algorithm.
    private func checkedHeader(_ header: JOSEHeader) throws -> (JWK, JWSAlgorithm) {
        guard header.typeMatches("dpop+jwt") else {
            let found = header.type.map { $0.quotedForMessage } ?? "absent"
            throw DPoPError(.wrongType, "typ is \(found); a DPoP proof's typ is \"dpop+jwt\"")
        }
        let algorithm: JWSAlgorithm
        do {
            algorithm = try JWSAlgorithm.resolve(header.algorithm, allowed: algorithms)
        } catch let error as JOSEError {
            throw DPoPError(.disallowedAlgorithm, error.reason)
        }
        if let critical = header.critical {
            throw DPoPError(
                .unsupportedCriticalHeader,
                "crit lists \(critical.map(\.quotedForMessage).joined(separator: ", ")), which this verifier "
                    + "does not understand")
        }
        // Before the key is used: a public JWK that can verify the algorithm.
        return (try publicKey(header, algorithm: algorithm), algorithm)
    }

    private func publicKey(_ header: JOSEHeader, algorithm: JWSAlgorithm) throws -> JWK {
        guard let value = header.json["jwk"] else {
            throw DPoPError(.invalidKey, "the header has no jwk: a DPoP proof carries its public key")
        }
        guard let object = value.objectValue else {
            throw DPoPError(.invalidKey, "jwk must be a JSON object, found \(value.typeName)")
        }
        let key: JWK
        do {
            key = try JWK(json: object)
        } catch let error as JOSEError {
            throw DPoPError(.invalidKey, error.reason)
        }
        if let refusal = key.refusal(for: algorithm) { throw DPoPError(.invalidKey, refusal) }
        return key
    }

    private func payload(_ jws: CompactJWS) throws -> JSONObject {
        do {
            return try jws.unverifiedPayload()
        } catch let error as JOSEError {
            throw DPoPError(.malformedProof, error.reason)
        }
    }

    /// The claims §4.2 defines, read and typed.
    private struct Claims {
        let id: String
        let method: String
        let target: String
        let issuedAt: Double
        let accessTokenHash: String?
        let nonce: String?

        init(_ json: JSONObject) throws {
            func string(_ name: String, required: Bool) throws -> String? {
                guard let value = json[name] else {
                    if required { throw DPoPError(.missingClaim, "the proof has no \(name) claim") }
                    return nil
                }
                guard let text = value.stringValue else {
                    throw DPoPError(.malformedProof, "\(name) must be a string, found \(value.typeName)")
                }
                return text
            }
            let id = try string("jti", required: true) ?? ""
            guard (1...DPoPClaims.maxIDBytes).contains(id.utf8.count) else {
                throw DPoPError(.malformedProof, "jti must be 1 to \(DPoPClaims.maxIDBytes) bytes")
            }
            self.id = id
            method = try string("htm", required: true) ?? ""
            target = try string("htu", required: true) ?? ""
            guard let iat = json["iat"] else { throw DPoPError(.missingClaim, "the proof has no iat claim") }
            guard let number = iat.numberValue, (0...DPoPClaims.maxTime).contains(number.doubleValue) else {
                throw DPoPError(.malformedProof, "iat must be a number of seconds between 1970 and 9999")
            }
            issuedAt = number.doubleValue
            accessTokenHash = try string("ath", required: false)
            nonce = try string("nonce", required: false)
        }
    }
}

/// Proof headers that passed steps 3 to 6, by their base64url text, with their key: parsing
/// the header and building the key (a point check) is a fifth of a proof's check. At most 4,096
/// headers of at most 2 KiB, and the normal forms of up to 1,024 request URLs of at most 2 KiB.
final class HeaderCache: Sendable {
    struct Entry: Sendable {
        let header: JOSEHeader
        let key: JWK
        let algorithm: JWSAlgorithm
    }

    private let entries = BoundedCache<String, Entry>(capacity: 4096)
    /// Request URLs and their normal forms: a server checks proofs for few URLs.
    private let targets = BoundedCache<String, String>(capacity: 1024)
    static let maxHeaderBytes = 2048

    /// ``HTTPTargetURI/normalized(_:)``, remembered.
    func normalized(_ url: String) -> String? {
        if let known = targets[url] { return known }
        guard let normal = HTTPTargetURI.normalized(url) else { return nil }
        if url.utf8.count <= Self.maxHeaderBytes { targets.insert(url, normal) }
        return normal
    }

    func entry(_ text: String) -> Entry? {
        guard text.utf8.count <= Self.maxHeaderBytes else { return nil }
        return entries[text]
    }

    func insert(_ text: String, _ entry: Entry) {
        guard text.utf8.count <= Self.maxHeaderBytes else { return }
        entries.insert(text, entry)
    }
}
