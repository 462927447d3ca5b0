import ArgumentParser
import ShadowApple
import ShadowCore
import ShadowCredentials
import ShadowJOSE

struct VerifyToken: AsyncParsableCommand, QuietCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify-token",
        abstract: "Verify a JWS/JWT against a JWK Set and a claim policy.",
        discussion: """
            Prints the verified claims and exits 0, or exits 10 (malformed), 11 (signature, key or \
            algorithm rejected), 12 (claims rejected), 13 (keys unavailable), 14 (with --state: the \
            credential was revoked or transferred after the token was issued), 64 (usage). \
            A --jwks URL is cached under $XDG_CACHE_HOME/shadow-keys/jwks (see Docs/jwks-caching.md). \
            Pass the token on stdin (a pipe, or '-'), --token-file or --token-env to keep it out of argv.
            """
    )

    @OptionGroup var token: TokenOptions

    @OptionGroup var keySource: KeySourceOptions

    @OptionGroup var options: VerificationOptions

    @Flag(help: "Sign in with Apple identity token: Apple's JWKS by default, iss Apple, RS256 only, --aud required; --nonce matches the raw nonce or its SHA-256 hex.")
    var apple = false

    @Flag(help: "With --apple: refuse (exit 14) a token issued at or before its subject's revocation or transfer, as recorded in the credential-state store (--store).")
    var state = false

    @Option(name: .customLong("client-id"), help: "With --state: the client ID the state is kept under, one of the --aud values (default: the token's aud, which must be one string).")
    var clientID: String?

    @OptionGroup(title: "Credential state (--state)") var store: StoreOptions

    @Flag(help: "Print a JSON result on stdout instead of the claims.")
    var json = false

    @Flag(name: .shortAndLong, help: "Print no warnings (a token on argv, no --iss or --aud).")
    var quiet = false

    func validate() throws {
        try keySource.validate(default: apple ? Apple.keysURL : nil)
        if apple { try options.validateApple() }
        if state {
            guard apple else { throw ValidationError("--state applies to Sign in with Apple identity tokens: add --apple") }
            try store.requireKey()
            // State is kept per client ID: only one the token can be accepted for may key it.
            if let clientID, !options.audiences.contains(where: { $0.exactlyEquals(clientID) }) {
                throw ValidationError("--client-id must be one of the --aud values")
            }
            if token.usesStdin && store.keyUsesStdin { throw ValidationError("the token and the passphrase cannot both come from stdin") }
        } else if store.isGiven || clientID != nil {
            throw ValidationError("--store, --vault, their key options and --client-id apply with --state only")
        }
        if token.usesStdin && keySource.jwks == "-" { throw ValidationError("the token and --jwks cannot both come from stdin") }
    }

    func run() async throws {
        try await reportingFailures(json: json) {
            let verifier = try options.verifier()
            let token = try self.token.read()
            if !apple && options.issuer == nil && options.audiences.isEmpty {
                Console.warn("neither --iss nor --aud given; tokens from any issuer for any audience pass")
            }
            guard apple else {
                printVerified(try await verifier.verify(token, keys: keySource.keys()), json: json)
                return
            }
            let identity = try await options.appleValidator().validate(token, keys: keySource.keys(default: Apple.keysURL))
            if state { try await store.withStore(create: false) { try await $0.record(clientID: clientID ?? identity.audience, subject: identity.subject) }.enforce(identity) }
            printVerified(identity.jwt, json: json, extra: [.init(name: "apple", value: .object(identity.json))])
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
        Console.prettyJSON(.object(verified.claims.json))
    }
}

extension VerificationOptions {
    /// The checks `--apple` adds to the generic ones.
    func validateApple() throws {
        guard !audiences.isEmpty else { throw ValidationError("--apple needs --aud: the bundle IDs and Services IDs you accept") }
        if algorithms.contains(where: { $0 != "RS256" }) { throw ValidationError("Apple identity tokens are RS256 only") }
        if let issuer, issuer != Apple.issuer { throw ValidationError("Apple identity tokens are issued by \(Apple.issuer)") }
        if allowMissingExpiration { throw ValidationError("Apple identity tokens always carry exp") }
    }

    /// Apple's validator with these options.
    func appleValidator() throws -> AppleIdentityTokenValidator {
        var validator = AppleIdentityTokenValidator(
            clientIDs: audiences, nonce: try nonce.value(), leeway: leeway, maxAge: maxAge, requiredClaims: requiredClaims, clock: try parseNow(now))
        validator.nonceMustBeHashed = nonce.isHashed
        validator.expectedType = type
        validator.maxTokenBytes = maxTokenBytes
        return validator
    }
}
