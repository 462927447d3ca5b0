public import ShadowCore

/// Verifies compact JWS tokens: structure, header, key selection, signature, then claims.
///
/// ```swift
/// let keys = try JWKSet(json: jwksBytes)
/// let verifier = JWTVerifier(policy: ClaimPolicy(issuer: "https://issuer.example", audiences: ["my-app"]))
/// let jwt = try verifier.verify(token, keys: keys)
/// ```
public struct JWTVerifier: Sendable {
    /// Algorithms a header may name. `none` and HMAC algorithms can never be allowed.
    public var algorithms: Set<JWSAlgorithm>
    /// The claim rules.
    public var policy: ClaimPolicy
    /// When set, the header's `typ` must name this media type (RFC 7515 §4.1.9 comparison).
    public var expectedType: String?
    /// `crit` extensions the caller processes itself; any other listed name rejects the token.
    public var understoodCriticalHeaders: Set<String>
    /// Largest accepted token, in bytes. Default 16 KiB.
    public var maxTokenBytes: Int
    /// Where "now" comes from.
    public var clock: WallClock
    /// The parsed headers of tokens whose signature verified, by their segment's text, shared by
    /// the copies of this verifier: an issuer's tokens share one header per signing key, and
    /// decoding and parsing it is a fifth of a token's check outside the signature. A header is
    /// kept only once a signature under it verified, so forged tokens cannot crowd the cache;
    /// what is taken from it is checked again (algorithm, `crit`, `typ`) as a parsed one is.
    let headers = BoundedCache<String, JOSEHeader>(capacity: 64)
    /// The longest header segment kept.
    static let maxCachedHeaderBytes = 1024

    /// A verifier; by default RS256 and ES256, no `typ` check, 16 KiB cap, system clock.
    public init(
        algorithms: Set<JWSAlgorithm> = [.rs256, .es256],
        policy: ClaimPolicy = ClaimPolicy(),
        expectedType: String? = nil,
        understoodCriticalHeaders: Set<String> = [],
        maxTokenBytes: Int = CompactJWS.defaultMaxBytes,
        clock: WallClock = .system
    ) {
        self.algorithms = algorithms
        self.policy = policy
        self.expectedType = expectedType
        self.understoodCriticalHeaders = understoodCriticalHeaders
        self.maxTokenBytes = maxTokenBytes
        self.clock = clock
    }

    /// Verifies `token` against a local key set, synchronously.
    ///
    /// - Throws: ``JOSEError``; its code says which stage failed, and for claims
    ///   ``JOSEError/claimFailures`` lists every rule that failed.
    public func verify(_ token: String, keys: JWKSet) throws -> VerifiedJWT {
        let (jws, algorithm, segment) = try checkedHeader(token)
        return try verified(
            jws, algorithm: algorithm, key: try keys.key(for: jws.header.keyID, algorithm: algorithm),
            headerSegment: segment)
    }

    /// Verifies `token` against any key source: a ``JWKSet``, or a fetched set such as
    /// `JWKSProvider`, which may refresh once for an unknown `kid`.
    ///
    /// - Throws: ``JOSEError``, as ``verify(_:keys:)``; a source may also throw its own errors.
    public func verify(_ token: String, keys: some JWKSource) async throws -> VerifiedJWT {
        let (jws, algorithm, segment) = try checkedHeader(token)
        return try verified(
            jws, algorithm: algorithm, key: try await keys.key(for: jws.header.keyID, algorithm: algorithm),
            headerSegment: segment)
    }

    /// Steps 1 to 6 of Docs/architecture.md: size, split, decode, header, algorithm, `crit`; and
    /// the header's segment when it may be cached, with whether it was.
    private func checkedHeader(_ token: String) throws -> (CompactJWS, JWSAlgorithm, (String, cached: Bool)?) {
        let segment = CompactJWS.headerSegment(of: token, maxBytes: Self.maxCachedHeaderBytes)
        let known = segment.flatMap { headers[$0] }
        let jws = try CompactJWS(token, maxBytes: maxTokenBytes, knownHeader: known)
        let algorithm = try JWSAlgorithm.resolve(jws.header.algorithm, allowed: algorithms)
        if let critical = jws.header.critical {
            for name in critical where !understoodCriticalHeaders.contains(where: { $0.exactlyEquals(name) }) {
                throw JOSEError(
                    .unsupportedCriticalHeader,
                    "header \"crit\" lists \(name.quotedForMessage), an extension this verifier does not understand")
            }
        }
        return (jws, algorithm, segment.map { ($0, known != nil) })
    }

    /// Steps 8 to 10: the signature with the selected key, then the payload and the claims.
    private func verified(
        _ jws: CompactJWS, algorithm: JWSAlgorithm, key: JWK, headerSegment: (String, cached: Bool)?
    ) throws -> VerifiedJWT {
        try jws.withSigningInput { input in
            try key.verifySignature(jws.signature, signingInput: input, algorithm: algorithm)
        }
        if let (segment, cached) = headerSegment, !cached { headers.insert(segment, jws.header) }
        let claims = JWTClaims(try jws.unverifiedPayload())
        var failures: [ClaimFailure] = []
        if let expectedType, !jws.header.typeMatches(expectedType) {
            let actual = jws.header.type
            failures.append(
                ClaimFailure(
                    claim: "header.typ", rule: actual == nil ? .missing : .mismatch,
                    expected: expectedType.quotedForMessage,
                    actual: actual?.quotedForMessage,
                    message: actual.map { "typ \($0.quotedForMessage) does not name \(expectedType.quotedForMessage)" }
                        ?? "typ is required to be \(expectedType.quotedForMessage) but absent"))
        }
        failures += policy.evaluate(claims, now: clock.now)
        guard failures.isEmpty else {
            let summary = failures.map(\.message).joined(separator: "; ")
            throw JOSEError(.claimsRejected, summary, claimFailures: failures)
        }
        return VerifiedJWT(header: jws.header, claims: claims, algorithm: algorithm, key: key)
    }
}

/// Where a verifier finds the key for a token: a local ``JWKSet``, or a fetched, cached set
/// (`JWKSProvider` in ShadowJWKS). A source gives the key whose `kid` is exactly the token's
/// (or, without a `kid`, the one key able to verify the algorithm), able to verify that
/// algorithm; never a fallback.
public protocol JWKSource: Sendable {
    /// The key for a token with this `kid` and algorithm.
    /// - Throws: ``JOSEError`` with ``JOSEError/Code/unknownKey``,
    ///   ``JOSEError/Code/algorithmKeyMismatch`` or ``JOSEError/Code/keysUnavailable``.
    func key(for keyID: String?, algorithm: JWSAlgorithm) async throws -> JWK
}

extension JWKSet: JWKSource {}
