import ArgumentParser
import ShadowApple
import ShadowCore
import ShadowJOSE

struct VerifyToken: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify-token",
        abstract: "Verify a JWS/JWT against a JWK Set and a claim policy.",
        discussion: """
            Prints the verified claims and exits 0, or exits 10 (malformed), 11 (signature, key or
            algorithm rejected), 12 (claims rejected), 13 (keys unavailable), 64 (usage).
            A --jwks URL is cached under $XDG_CACHE_HOME/shadow-keys/jwks (see Docs/jwks-caching.md).
            Pass the token as '-' (stdin), --token-file or --token-env to keep it out of argv.
            """
    )

    @Argument(help: "The token, or '-' to read it from stdin.")
    var token: String?

    @Option(name: .customLong("token-file"), help: "Read the token from this file.")
    var tokenFile: String?

    @Option(name: .customLong("token-env"), help: "Read the token from this environment variable.")
    var tokenEnvironment: String?

    @OptionGroup var keySource: KeySourceOptions

    @OptionGroup var options: VerificationOptions

    @Flag(help: "Sign in with Apple identity token: Apple's JWKS by default, iss Apple, RS256 only, --aud required; --nonce matches the raw nonce or its SHA-256 hex.")
    var apple = false

    @Flag(help: "Print a JSON result on stdout instead of the claims.")
    var json = false

    private var tokenInput: TokenInput { TokenInput(argument: token, file: tokenFile, environmentVariable: tokenEnvironment) }

    func validate() throws {
        try tokenInput.validate()
        try keySource.validate(default: apple ? Apple.keysURL : nil)
        if apple {
            guard !options.audiences.isEmpty else { throw ValidationError("--apple needs --aud: the bundle IDs and Services IDs you accept") }
            if options.algorithms.contains(where: { $0 != "RS256" }) { throw ValidationError("Apple identity tokens are RS256 only") }
            if let issuer = options.issuer, issuer != Apple.issuer { throw ValidationError("Apple identity tokens are issued by \(Apple.issuer)") }
            if options.allowMissingExpiration { throw ValidationError("Apple identity tokens always carry exp") }
        }
        if tokenInput.usesStdin && keySource.jwks == "-" { throw ValidationError("the token and --jwks cannot both come from stdin") }
    }

    func run() async throws {
        try await reportingFailures(json: json) {
            let verifier = try options.verifier()
            let token = try tokenInput.read()
            if !apple && options.issuer == nil && options.audiences.isEmpty {
                Console.err("shadow-keys: warning: neither --iss nor --aud given; tokens from any issuer for any audience pass")
            }
            guard apple else {
                printVerified(try await keySource.verify(token, with: verifier), json: json)
                return
            }
            let validator = AppleIdentityTokenValidator(
                clientIDs: options.audiences, nonce: options.nonce, leeway: options.leeway, maxAge: options.maxAge,
                requiredClaims: options.requiredClaims, clock: try parseNow(options.now))
            var appleVerifier = validator.verifier
            appleVerifier.expectedType = options.type
            appleVerifier.maxTokenBytes = options.maxTokenBytes
            if let hashed = options.nonceSHA256 { appleVerifier.policy.nonce = .sha256HexOf(hashed) }
            let verified = try await keySource.verify(token, with: appleVerifier, default: Apple.keysURL)
            let identity = try validator.token(from: verified)
            printVerified(verified, json: json, extra: [.init(name: "apple", value: .object(identity.json))])
        }
    }
}

/// Prints a verified token: the claims, or with `--json` the whole result.
func printVerified(_ verified: VerifiedJWT, json: Bool, extra: [JSONObject.Member] = []) {
    if json {
        var result: JSONObject = [
            "valid": true, "header": .object(verified.header.json), "claims": .object(verified.claims.json),
            "key": .object([
                "kid": verified.key.keyID.map(JSONValue.string) ?? .null, "thumbprint": .string(verified.key.thumbprint),
                "alg": .string(verified.algorithm.rawValue),
            ]),
        ]
        for member in extra { result.set(member.name, member.value) }
        Console.json(.object(result))
    } else {
        Console.out(JSONValue.object(verified.claims.json).serialized(pretty: true))
    }
}
