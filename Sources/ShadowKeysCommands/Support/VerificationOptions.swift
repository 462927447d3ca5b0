import ArgumentParser
import ShadowCore
import ShadowJOSE

/// The claim and header options shared by every command that verifies a token.
struct VerificationOptions: ParsableArguments {
    @Option(name: .customLong("alg"), help: "Allowed algorithm (RS256, ES256, any case); repeatable. Default: both.")
    var algorithms: [String] = []

    @Option(name: .customLong("iss"), help: "Required issuer (exact match).")
    var issuer: String?

    @Option(name: .customLong("aud"), help: "Accepted audience; repeatable. The token must name at least one.")
    var audiences: [String] = []

    @Flag(name: .customLong("all-aud-accepted"), help: "Require every aud value to be an accepted audience.")
    var everyAudienceAccepted = false

    @OptionGroup var nonce: NonceOptions

    @Option(help: "Allowed clock skew for exp, nbf, iat and --max-age, in seconds.")
    var leeway: Double = Self.defaultLeeway

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

    /// `--leeway` when none is given, in seconds.
    static let defaultLeeway: Double = 60

    /// The longest `--max-age`: 100 years.
    static let maxAgeLimit: Double = 100 * 365.25 * 86400

    /// An `--alg` value in any ASCII case (`rs256`, `Es256`), compared by bytes: `uppercased()`
    /// made `rſ256` (a long s, U+017F) RS256. The token's own `alg` header stays exact, as RFC 7515 says.
    static func algorithm(_ name: String) -> JWSAlgorithm? {
        let lowered = name.asciiLowercased()
        return JWSAlgorithm.allCases.first { $0.rawValue.asciiLowercased().utf8.elementsEqual(lowered.utf8) }
    }

    func validate() throws {
        for name in algorithms where Self.algorithm(name) == nil {
            throw ValidationError(
                "--alg \(name): only RS256 and ES256 can be allowed; none and HMAC algorithms never are")
        }
        try checkLeeway(leeway)
        if let maxAge, !(0...Self.maxAgeLimit).contains(maxAge) {
            throw ValidationError("--max-age: 0 to \(Int(Self.maxAgeLimit)) seconds (100 years)")
        }
        guard (1...TokenOptions.readLimit).contains(maxTokenBytes) else {
            throw ValidationError("--max-token-bytes: 1 to \(TokenOptions.readLimit)")
        }
        _ = try parseNow(now)
    }

    /// The verifier these options describe.
    func verifier(defaultAlgorithms: Set<JWSAlgorithm> = [.rs256, .es256]) throws -> JWTVerifier {
        let allowed = algorithms.isEmpty ? defaultAlgorithms : Set(algorithms.compactMap(Self.algorithm))
        let nonceRule: ClaimPolicy.NonceRule? = try nonce.value().map {
            nonce.isHashed ? .sha256HexOf($0) : .equals($0)
        }
        let policy = ClaimPolicy(
            issuer: issuer, audiences: audiences, requireEveryAudienceAccepted: everyAudienceAccepted,
            requireExpiration: !allowMissingExpiration, leeway: leeway, maxAge: maxAge, requiredClaims: requiredClaims,
            nonce: nonceRule)
        return JWTVerifier(
            algorithms: allowed, policy: policy, expectedType: type, maxTokenBytes: maxTokenBytes,
            clock: try parseNow(now))
    }
}

/// The nonce a token must carry: `--nonce RAW` (visible in `ps`, so it draws a warning),
/// `--nonce-file F` or `--nonce-env VAR`, and the same with `-sha256` for a token that carries
/// the nonce's SHA-256 hex. It is a possible session secret: nothing prints it.
struct NonceOptions: ParsableArguments {
    @Option(
        name: .customLong("nonce"),
        help: "Required nonce, compared as is (visible in `ps`: prefer --nonce-file or --nonce-env).")
    var argument: String?
    @Option(
        name: .customLong("nonce-file"), help: "Read the required nonce from this file (one trailing newline dropped).")
    var file: String?
    @Option(name: .customLong("nonce-env"), help: "Read the required nonce from this environment variable.")
    var environment: String?
    @Option(name: .customLong("nonce-sha256"), help: "Required nonce given raw; the token must carry its SHA-256 hex.")
    var hashedArgument: String?
    @Option(name: .customLong("nonce-sha256-file"), help: "As --nonce-sha256, the raw nonce read from this file.")
    var hashedFile: String?
    @Option(
        name: .customLong("nonce-sha256-env"),
        help: "As --nonce-sha256, the raw nonce read from this environment variable.")
    var hashedEnvironment: String?

    /// True when the token must carry the SHA-256 hex of the nonce.
    var isHashed: Bool { hashedArgument != nil || hashedFile != nil || hashedEnvironment != nil }

    func validate() throws { _ = try input() }

    private func input() throws -> SecretInput? {
        let argument = self.argument ?? hashedArgument
        let candidates: Origins =
            [(argument != nil, .argument(argument ?? ""))]
            + origins(file: file ?? hashedFile, environment: environment ?? hashedEnvironment)
        let given = [self.argument, file, environment, hashedArgument, hashedFile, hashedEnvironment].compactMap { $0 }
            .count
        guard given <= 1 else {
            throw ValidationError("give one nonce option: --nonce(-file|-env) or --nonce-sha256(-file|-env)")
        }
        return try oneOrigin(candidates, options: "one nonce option").map { SecretInput(origin: $0, what: "nonce") }
    }

    /// The expected nonce, read from wherever it was given; nil when none was.
    func value() throws -> String? {
        guard let input = try input() else { return nil }
        if case .argument = input.origin {
            Console.warn(
                "a nonce on the command line is visible to other users (ps); prefer --nonce-file or --nonce-env")
        }
        return try input.text()
    }
}
