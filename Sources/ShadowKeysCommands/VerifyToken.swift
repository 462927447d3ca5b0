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
            Pass the token on stdin (a pipe, or '-'), --token-file or --token-env to keep it out of argv. \
            With --each-line, stdin holds one token a line, and one result is printed a line, in order; \
            the exit code is then the highest of the tokens' codes.
            """
    )

    @OptionGroup var token: TokenOptions

    @OptionGroup var keySource: KeySourceOptions

    @OptionGroup var options: VerificationOptions

    @Flag(
        help:
            """
            Sign in with Apple identity token: Apple's JWKS by default, iss Apple, RS256 only, --aud required; \
            --nonce matches the raw nonce or its SHA-256 hex.
            """
    )
    var apple = false

    @Flag(
        help:
            """
            With --apple: refuse (exit 14) a token issued at or before its subject's revocation or transfer, as \
            recorded in the credential-state store (--store).
            """
    )
    var state = false

    @Option(
        name: .customLong("client-id"),
        help:
            """
            With --state: the client ID the state is kept under, one of the --aud values (default: the token's aud, \
            which must be one string).
            """
    )
    var clientID: String?

    @OptionGroup(title: "Credential state (--state)") var store: StoreOptions

    @Flag(help: "Print a JSON result on stdout instead of the claims.")
    var json = false

    @Flag(
        name: .customLong("each-line"),
        help:
            "Verify every line of stdin as a token (keys and policy load once; all cores); one result a line, in order."
    )
    var eachLine = false

    @Flag(name: .shortAndLong, help: "Print no warnings (a token on argv, no --iss or --aud).")
    var quiet = false

    func validate() throws {
        if !eachLine { try token.requireInput() }
        try keySource.validate(default: apple ? Apple.keysURL : nil)
        if apple { try options.validateApple() }
        if state {
            guard apple else {
                throw ValidationError("--state applies to Sign in with Apple identity tokens: add --apple")
            }
            try store.requireKey()
            // State is kept per client ID: only one the token can be accepted for may key it.
            if let clientID, !options.audiences.contains(where: { $0.exactlyEquals(clientID) }) {
                throw ValidationError("--client-id must be one of the --aud values")
            }
            if token.usesStdin && store.keyUsesStdin {
                throw ValidationError("the token and the passphrase cannot both come from stdin")
            }
        } else if store.isGiven || clientID != nil {
            throw ValidationError("--store, --vault, their key options and --client-id apply with --state only")
        }
        if eachLine {
            guard !token.isGiven else {
                throw ValidationError(
                    "--each-line reads the tokens from stdin: give no TOKEN, --token-file or --token-env")
            }
            if keySource.jwks == "-" {
                throw ValidationError("--each-line reads the tokens from stdin: --jwks - cannot be used with it")
            }
            if state && store.keyUsesStdin {
                throw ValidationError(
                    "--each-line reads the tokens from stdin: the store's passphrase cannot come from it")
            }
        }
        if token.usesStdin && keySource.jwks == "-" {
            throw ValidationError("the token and --jwks cannot both come from stdin")
        }
    }

    func run() async throws {
        if try runIfSynchronous() { return }
        try await reportingFailures(json: json, valid: true) {
            warnWithoutIssuerOrAudience()
            guard state else { return try await verifyAndPrint(try verification(store: nil)) }
            try await store.withStore(create: false) { try await verifyAndPrint(try verification(store: $0)) }
        }
    }

    private func warnWithoutIssuerOrAudience() {
        if !apple && options.issuer == nil && options.audiences.isEmpty {
            Console.warn("neither --iss nor --aud given; tokens from any issuer for any audience pass")
        }
    }

    /// Verifies the token, or with `--each-line` every line of stdin, and prints the results.
    private func verifyAndPrint(_ verify: @escaping TokenVerification) async throws {
        if eachLine {
            let worst = try await TokenLines.verifyAll(verify, json: json)
            if worst != .success { throw ExitCode(worst.rawValue) }
        } else {
            let (verified, extra) = try await verify(try token.read())
            printVerified(verified, json: json, extra: extra)
        }
    }

    /// What checks one token: the keys and the policy loaded once, the state store opened once.
    private func verification(store: (any AuditedCredentialStore)?) throws -> TokenVerification {
        guard apple else {
            let verifier = try options.verifier(), keys = try keySource.keys()
            return { (try await verifier.verify($0, keys: keys), []) }
        }
        let validator = try options.appleValidator(), keys = try keySource.appleKeys(),
            clientID = self.clientID
        return { token in
            let identity = try await validator.validate(token, keys: keys)
            if let store {
                try await store.record(clientID: clientID ?? identity.audience, subject: identity.subject).enforce(
                    identity)
            }
            return (identity.jwt, [.init(name: "apple", value: .object(identity.json))])
        }
    }
}

/// Checks one token: its verified form, and the members `--json` adds for it.
typealias TokenVerification = @Sendable (String) async throws -> (VerifiedJWT, [JSONObject.Member])

/// Prints a verified token: the claims, or with `--json` the whole result.
func printVerified(_ verified: VerifiedJWT, json: Bool, extra: [JSONObject.Member] = []) {
    if json {
        var result: JSONObject = ["valid": true]
        for member in verifiedJSON(verified, extra: extra) { result.set(member.name, member.value) }
        Console.json(.object(result))
    } else {
        Console.prettyJSON(.object(verified.claims.json))
    }
}

/// The members `--json` prints for a verified token: header, claims, key, and `extra`.
func verifiedJSON(_ verified: VerifiedJWT, extra: [JSONObject.Member]) -> [JSONObject.Member] {
    let key: JSONObject = [
        "kid": verified.key.keyID.map(JSONValue.string) ?? .null, "thumbprint": .string(verified.key.thumbprint),
        "alg": .string(verified.algorithm.rawValue),
    ]
    return [
        .init(name: "header", value: .object(verified.header.json)),
        .init(name: "claims", value: .object(verified.claims.json)), .init(name: "key", value: .object(key)),
    ]
        + extra
}

extension VerificationOptions {
    /// The checks `--apple` adds to the generic ones.
    func validateApple() throws {
        guard !audiences.isEmpty else {
            throw ValidationError("--apple needs --aud: the bundle IDs and Services IDs you accept")
        }
        if algorithms.contains(where: { $0 != "RS256" }) {
            throw ValidationError("Apple identity tokens are RS256 only")
        }
        if let issuer, issuer != Apple.issuer {
            throw ValidationError("Apple identity tokens are issued by \(Apple.issuer)")
        }
        if allowMissingExpiration { throw ValidationError("Apple identity tokens always carry exp") }
    }

    /// Apple's validator with these options.
    func appleValidator() throws -> AppleIdentityTokenValidator {
        var validator = AppleIdentityTokenValidator(
            clientIDs: audiences, nonce: try nonce.value(), leeway: leeway, maxAge: maxAge,
            requiredClaims: requiredClaims, clock: try parseNow(now))
        validator.nonceMustBeHashed = nonce.isHashed
        validator.expectedType = type
        validator.maxTokenBytes = maxTokenBytes
        return validator
    }
}

extension VerifyToken: SynchronousCommand {
    /// One token against a key set from a file or stdin, no state store: nothing waits, and
    /// ``run()``'s checks run in the same order on this thread.
    func runIfSynchronous() throws -> Bool {
        guard let source = keySource.jwks, !state, !eachLine, !KeySourceOptions.isURL(source) else { return false }
        try reportingFailuresSynchronously(json: json, valid: true) {
            warnWithoutIssuerOrAudience()
            if apple {
                let validator = try options.appleValidator(), keys = try readKeySet(source)
                let identity = try validator.validate(try token.read(), keys: keys)
                printVerified(identity.jwt, json: json, extra: [.init(name: "apple", value: .object(identity.json))])
            } else {
                let verifier = try options.verifier(), keys = try readKeySet(source)
                printVerified(try verifier.verify(try token.read(), keys: keys), json: json)
            }
        }
        return true
    }
}
