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

    @Option(name: .customLong("nonce"), help: "Required nonce, compared as is (visible in `ps`: prefer --nonce-file or --nonce-env).")
    var nonceArgument: String?

    @Option(name: .customLong("nonce-file"), help: "Read the required nonce from this file (one trailing newline dropped).")
    var nonceFile: String?

    @Option(name: .customLong("nonce-env"), help: "Read the required nonce from this environment variable.")
    var nonceEnvironment: String?

    @Option(name: .customLong("nonce-sha256"), help: "Required nonce given raw; the token must carry its SHA-256 hex.")
    var nonceSHA256Argument: String?

    @Option(name: .customLong("nonce-sha256-file"), help: "As --nonce-sha256, the raw nonce read from this file.")
    var nonceSHA256File: String?

    @Option(name: .customLong("nonce-sha256-env"), help: "As --nonce-sha256, the raw nonce read from this environment variable.")
    var nonceSHA256Environment: String?

    /// How many nonce options were given (at most one is allowed).
    private var nonceSources: Int {
        [nonceArgument, nonceFile, nonceEnvironment, nonceSHA256Argument, nonceSHA256File, nonceSHA256Environment].compactMap { $0 }.count
    }

    /// True when the nonce must be the SHA-256 hex of the given value.
    var nonceIsHashed: Bool { nonceSHA256Argument != nil || nonceSHA256File != nil || nonceSHA256Environment != nil }

    /// The expected nonce, read from wherever it was given; nil when none was.
    func nonce() throws -> String? {
        if let value = nonceArgument ?? nonceSHA256Argument {
            Console.err("shadow-keys: warning: a nonce on the command line is visible to other users (ps); prefer --nonce-file or --nonce-env")
            return value
        }
        if let file = nonceFile ?? nonceSHA256File { return try readSecretText(file: file, what: "nonce") }
        if let name = nonceEnvironment ?? nonceSHA256Environment { return try readSecretText(environment: name, what: "nonce") }
        return nil
    }

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

    /// The longest `--max-age`: 100 years.
    static let maxAgeLimit: Double = 100 * 365.25 * 86400

    func validate() throws {
        for name in algorithms where JWSAlgorithm(rawValue: name) == nil {
            throw ValidationError("--alg \(name): only RS256 and ES256 can be allowed; none and HMAC algorithms never are")
        }
        if nonceSources > 1 { throw ValidationError("give one nonce option: --nonce(-file|-env) or --nonce-sha256(-file|-env)") }
        try checkLeeway(leeway)
        if let maxAge, !(0...Self.maxAgeLimit).contains(maxAge) { throw ValidationError("--max-age: 0 to \(Int(Self.maxAgeLimit)) seconds (100 years)") }
        guard (1...TokenInput.readLimit).contains(maxTokenBytes) else { throw ValidationError("--max-token-bytes: 1 to \(TokenInput.readLimit)") }
        _ = try parseNow(now)
    }

    /// The verifier these options describe.
    func verifier(defaultAlgorithms: Set<JWSAlgorithm> = [.rs256, .es256]) throws -> JWTVerifier {
        let allowed = algorithms.isEmpty ? defaultAlgorithms : Set(algorithms.compactMap(JWSAlgorithm.init(rawValue:)))
        let nonceRule: ClaimPolicy.NonceRule? = try nonce().map { nonceIsHashed ? .sha256HexOf($0) : .equals($0) }
        let policy = ClaimPolicy(
            issuer: issuer, audiences: audiences, requireEveryAudienceAccepted: everyAudienceAccepted,
            requireExpiration: !allowMissingExpiration, leeway: leeway, maxAge: maxAge, requiredClaims: requiredClaims, nonce: nonceRule)
        return JWTVerifier(algorithms: allowed, policy: policy, expectedType: type, maxTokenBytes: maxTokenBytes, clock: try parseNow(now))
    }
}

/// `--leeway`: 0 to 86400 seconds (a day of clock skew is already far more than any clock drifts).
func checkLeeway(_ leeway: Double) throws {
    guard (0...86400).contains(leeway) else { throw ValidationError("--leeway: 0 to 86400 seconds, not \(leeway)") }
}
