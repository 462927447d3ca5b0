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
    public var clock: Clock

    /// A verifier; by default RS256 and ES256, no `typ` check, 16 KiB cap, system clock.
    public init(
        algorithms: Set<JWSAlgorithm> = [.rs256, .es256],
        policy: ClaimPolicy = ClaimPolicy(),
        expectedType: String? = nil,
        understoodCriticalHeaders: Set<String> = [],
        maxTokenBytes: Int = CompactJWS.defaultMaxBytes,
        clock: Clock = .system
    ) {
        self.algorithms = algorithms
        self.policy = policy
        self.expectedType = expectedType
        self.understoodCriticalHeaders = understoodCriticalHeaders
        self.maxTokenBytes = maxTokenBytes
        self.clock = clock
    }

    /// Verifies `token` against a local key set.
    ///
    /// - Throws: ``JOSEError``; its code says which stage failed, and for claims
    ///   ``JOSEError/claimFailures`` lists every rule that failed.
    public func verify(_ token: String, keys: JWKSet) throws -> VerifiedJWT {
        let (jws, algorithm) = try parse(token)
        let key = try keys.key(for: jws.header.keyID, algorithm: algorithm)
        return try finish(jws, algorithm: algorithm, key: key)
    }

    /// Splits the token and checks its header: the algorithm allow-list and `crit`.
    package func parse(_ token: String) throws -> (CompactJWS, JWSAlgorithm) {
        let jws = try CompactJWS(token, maxBytes: maxTokenBytes)
        let algorithm = try JWSAlgorithm.resolve(jws.header.algorithm, allowed: algorithms)
        if let critical = jws.header.critical {
            for name in critical where !understoodCriticalHeaders.contains(where: { $0.exactlyEquals(name) }) {
                throw JOSEError(.unsupportedCriticalHeader, "header \"crit\" lists \(name.quotedForMessage), an extension this verifier does not understand")
            }
        }
        return (jws, algorithm)
    }

    /// Checks the signature with the selected key, then the claims.
    package func finish(_ jws: CompactJWS, algorithm: JWSAlgorithm, key: JWK) throws -> VerifiedJWT {
        try jws.withSigningInput { input in
            try key.verifySignature(jws.signature, signingInput: input, algorithm: algorithm)
        }
        let claims = JWTClaims(try jws.unverifiedPayload())
        var failures: [ClaimFailure] = []
        if let expectedType, !jws.header.typeMatches(expectedType) {
            let actual = jws.header.type
            failures.append(ClaimFailure(
                claim: "header.typ", rule: actual == nil ? .missing : .mismatch, expected: expectedType.quotedForMessage,
                actual: actual?.quotedForMessage,
                message: actual.map { "typ \($0.quotedForMessage) does not name \(expectedType.quotedForMessage)" } ?? "typ is required to be \(expectedType.quotedForMessage) but absent"))
        }
        failures += policy.evaluate(claims, now: clock.now)
        guard failures.isEmpty else {
            let summary = failures.map(\.message).joined(separator: "; ")
            throw JOSEError(.claimsRejected, summary, claimFailures: failures)
        }
        return VerifiedJWT(header: jws.header, claims: claims, algorithm: algorithm, key: key)
    }
}
