import ArgumentParser
import ShadowCore
import ShadowJOSE

struct VerifyToken: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify-token",
        abstract: "Verify a JWS/JWT against a JWK Set and a claim policy.",
        discussion: """
            Prints the verified claims and exits 0, or exits 10 (malformed), 11 (signature, key or
            algorithm rejected), 12 (claims rejected), 13 (keys unavailable), 64 (usage).
            Pass the token as '-' (stdin), --token-file or --token-env to keep it out of argv.
            """
    )

    @Argument(help: "The token, or '-' to read it from stdin.")
    var token: String?

    @Option(name: .customLong("token-file"), help: "Read the token from this file.")
    var tokenFile: String?

    @Option(name: .customLong("token-env"), help: "Read the token from this environment variable.")
    var tokenEnvironment: String?

    @Option(name: .customLong("jwks"), help: "The JWK Set: a file, or '-' for stdin.")
    var jwks: String

    @OptionGroup var options: VerificationOptions

    @Flag(help: "Print a JSON result on stdout instead of the claims.")
    var json = false

    private var tokenInput: TokenInput { TokenInput(argument: token, file: tokenFile, environmentVariable: tokenEnvironment) }

    func validate() throws {
        try tokenInput.validate()
        if tokenInput.usesStdin && jwks == "-" { throw ValidationError("the token and --jwks cannot both come from stdin") }
    }

    func run() async throws {
        try await reportingFailures(json: json) {
            let verifier = try options.verifier()
            let token = try tokenInput.read()
            let keys = try readKeySet(jwks)
            if options.issuer == nil && options.audiences.isEmpty {
                Console.err("shadow-keys: warning: neither --iss nor --aud given; tokens from any issuer for any audience pass")
            }
            let verified = try verifier.verify(token, keys: keys)
            printVerified(verified, json: json)
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
