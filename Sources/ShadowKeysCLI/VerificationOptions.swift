import ArgumentParser
import ShadowCore
import ShadowJOSE

/// The claim and header options shared by every command that verifies a token.
struct VerificationOptions: ParsableArguments {
    @Option(name: .customLong("alg"), help: "Allowed algorithm (RS256, ES256); repeatable. Default: both.")
    var algorithms: [String] = []

    @Option(name: .customLong("iss"), help: "Required issuer (exact match).")
    var issuer: String?

    @Option(name: .customLong("aud"), help: "Accepted audience; repeatable. The token must name at least one.")
    var audiences: [String] = []

    @Flag(name: .customLong("all-aud-accepted"), help: "Require every aud value to be an accepted audience.")
    var everyAudienceAccepted = false

    @Option(name: .customLong("nonce"), help: "Required nonce, compared as is.")
    var nonce: String?

    @Option(name: .customLong("nonce-sha256"), help: "Required nonce given raw; the token must carry its SHA-256 hex.")
    var nonceSHA256: String?

    @Option(help: "Allowed clock skew for exp, nbf, iat and --max-age, in seconds.")
    var leeway: Double = 60

    @Option(name: .customLong("max-age"), help: "Largest accepted age since iat, in seconds.")
    var maxAge: Double?

    @Option(name: .customLong("require"), help: "A claim that must be present; repeatable.")
    var requiredClaims: [String] = []

    @Option(name: .customLong("typ"), help: "Required header typ (compared as RFC 7515 says, e.g. JWT).")
    var type: String?

    @Flag(name: .customLong("allow-missing-exp"), help: "Accept tokens without exp.")
    var allowMissingExpiration = false

    @Option(help: "The time to verify at: epoch seconds or RFC 3339. Default: now.")
    var now: String?

    @Option(name: .customLong("max-token-bytes"), help: "Largest accepted token, in bytes.")
    var maxTokenBytes: Int = CompactJWS.defaultMaxBytes

    func validate() throws {
        for name in algorithms where JWSAlgorithm(rawValue: name) == nil {
            throw ValidationError("--alg \(name): only RS256 and ES256 can be allowed; none and HMAC algorithms never are")
        }
        if nonce != nil && nonceSHA256 != nil { throw ValidationError("give --nonce or --nonce-sha256, not both") }
        guard leeway >= 0, leeway.isFinite else { throw ValidationError("--leeway must be a non-negative number of seconds") }
        if let maxAge, !(maxAge >= 0 && maxAge.isFinite) { throw ValidationError("--max-age must be a non-negative number of seconds") }
        guard maxTokenBytes > 0 else { throw ValidationError("--max-token-bytes must be positive") }
        _ = try parseNow(now)
    }

    /// The verifier these options describe.
    func verifier(defaultAlgorithms: Set<JWSAlgorithm> = [.rs256, .es256]) throws -> JWTVerifier {
        let allowed = algorithms.isEmpty ? defaultAlgorithms : Set(algorithms.compactMap(JWSAlgorithm.init(rawValue:)))
        let nonceRule: ClaimPolicy.NonceRule? = nonce.map { .equals($0) } ?? nonceSHA256.map { .sha256HexOf($0) }
        let policy = ClaimPolicy(
            issuer: issuer, audiences: audiences, requireEveryAudienceAccepted: everyAudienceAccepted,
            requireExpiration: !allowMissingExpiration, leeway: leeway, maxAge: maxAge, requiredClaims: requiredClaims, nonce: nonceRule)
        return JWTVerifier(algorithms: allowed, policy: policy, expectedType: type, maxTokenBytes: maxTokenBytes, clock: try parseNow(now))
    }
}
