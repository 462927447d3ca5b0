import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowJOSE

/// `shadow-keys sign`: mint a JWT, for scripts and for testing `verify-token`.
struct Sign: AsyncParsableCommand, QuietCommand {
    static let configuration = CommandConfiguration(
        commandName: "sign",
        abstract: "Sign a JWT with a private key (PEM, .p8 or JWK): RS256 or ES256.",
        discussion: """
            The claims come from --claims (a JSON object, '-' for stdin; default {}). iat is set to now \
            unless the claims or --iat give it; --exp sets exp. Without --kid the kid is the key's \
            RFC 7638 thumbprint, as 'jwks from-key' gives it. Prints the token and a newline. \
            Exit 0, 64 usage, 65 an unusable key or claims, 66 a file that cannot be read.
            """)

    @Option(help: ArgumentHelp("The private key: PEM (PKCS#8, EC, RSA), a .p8, or a private JWK.", valueName: "file"))
    var key: String

    @Option(help: "RS256 or ES256 (any case); must match the key. Default: the key's.")
    var alg: String?

    @Option(help: "The kid header. Default: the key's RFC 7638 thumbprint.")
    var kid: String?

    @Option(help: ArgumentHelp("A file holding the claims as a JSON object, or '-' for stdin.", valueName: "file"))
    var claims: String?

    @Option(
        help: ArgumentHelp("Issued-at: 'now', +/-N[s|m|h|d] from now, epoch seconds or RFC 3339.", valueName: "time"))
    var iat: String?

    @Option(help: ArgumentHelp("Expiry: +N[s|m|h|d] from now, epoch seconds or RFC 3339.", valueName: "time"))
    var exp: String?

    @Flag(help: "Print {\"token\",\"header\",\"claims\"} as JSON.")
    var json = false

    @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

    func validate() throws {
        if let alg, VerificationOptions.algorithm(alg) == nil {
            throw ValidationError("--alg \(alg): only RS256 and ES256 can sign")
        }
        if let kid, kid.isEmpty || kid.utf8.count > 256 { throw ValidationError("--kid: 1 to 256 bytes") }
        if let iat { _ = try Self.time(iat, option: "--iat") }
        if let exp { _ = try Self.time(exp, option: "--exp") }
    }

    func run() async throws {
        try await reportingFailures(json: json) {
            let keyBytes = try SecretInput(origin: .file(key), what: "key").bytes(
                limit: 64 * 1024, oversize: .malformedInput)
            let signer: JWSSigner
            do {
                signer = try KeyFiles.signer(
                    keyBytes, algorithm: alg.flatMap(VerificationOptions.algorithm), keyID: kid)
            } catch let error as JOSEError {
                throw CLIError(.malformedInput, code: "invalid_key", "--key \(key.terminalSafe): \(error.reason)")
            }
            var object = try readClaims()
            if let iat {
                object.set("iat", .int(try Self.time(iat, option: "--iat").wholeSeconds))
            } else if object["iat"] == nil, let now = Timestamp(Date()) {
                object.set("iat", .int(now.wholeSeconds))
            }
            if let exp { object.set("exp", .int(try Self.time(exp, option: "--exp").wholeSeconds)) }
            try Self.checkRegisteredClaims(object)
            // What verify-token would refuse to read, sign refuses to write.
            let token: String
            do {
                token = try signer.sign(claims: object)
            } catch let error as JOSEError {
                throw CLIError(.malformedInput, code: "invalid_claims", error.reason)
            }
            guard token.utf8.count <= TokenOptions.readLimit else {
                throw CLIError(
                    .malformedInput, code: "token_too_large",
                    "the token would be \(token.utf8.count) bytes; verify-token reads at most \(TokenOptions.readLimit)"
                )
            }
            if token.utf8.count > CompactJWS.defaultMaxBytes {
                Console.warn(
                    """
                    the token is \(token.utf8.count) bytes; verify-token needs --max-token-bytes above \
                    \(CompactJWS.defaultMaxBytes)
                    """
                )
            }
            if json {
                let header: JSONObject = [
                    "alg": .string(signer.algorithm.rawValue), "kid": signer.keyID.map(JSONValue.string) ?? .null,
                ]
                Console.json(["token": .string(token), "header": .object(header), "claims": .object(object)])
            } else {
                Console.out(token)
            }
        }
    }

    /// The claims object from `--claims` (a file or stdin), or {}.
    private func readClaims() throws -> JSONObject {
        guard let claims else { return [:] }
        let bytes: [UInt8]?
        do {
            bytes =
                claims == "-"
                ? try Files.readAll(0, limit: TokenOptions.readLimit, path: "stdin")
                : try Files.read(claims, limit: TokenOptions.readLimit)
        } catch let error as FileError {
            throw CLIError(.noInput, code: "io", "cannot read the claims: \(error)")
        }
        guard let bytes else { throw CLIError(.malformedInput, "the claims exceed \(TokenOptions.readLimit) bytes") }
        do {
            guard let object = try StrictJSON.parse(bytes).objectValue else {
                throw CLIError(.malformedInput, code: "invalid_claims", "the claims are not a JSON object")
            }
            return object
        } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError(.malformedInput, code: "invalid_claims", "the claims are not valid JSON: \(error)")
        }
    }

    /// The registered claims must be what a verifier accepts: times as whole numbers within the
    /// years 0001 to 9999, `iss`/`sub`/`jti` strings, `aud` a string or an array of strings.
    static func checkRegisteredClaims(_ claims: JSONObject) throws {
        for name in ["exp", "nbf", "iat"] {
            guard let value = claims[name] else { continue }
            guard case .number(let number) = value, let seconds = number.int64Value,
                Timestamp(wholeSeconds: seconds) != nil
            else {
                throw CLIError(
                    .malformedInput, code: "invalid_claims",
                    "claim \(name) must be a whole number of seconds since the epoch, a date in the years 0001 to 9999")
            }
        }
        for name in ["iss", "sub", "jti"] where claims[name] != nil && claims[name]?.stringValue == nil {
            throw CLIError(.malformedInput, code: "invalid_claims", "claim \(name) must be a string")
        }
        if let audience = claims["aud"], audience.stringValue == nil,
            !(audience.arrayValue?.allSatisfy { $0.stringValue != nil } ?? false)
        {
            throw CLIError(.malformedInput, code: "invalid_claims", "claim aud must be a string or an array of strings")
        }
    }

    /// `now`, `+N[s|m|h|d]` / `-N[…]` from now, or an absolute time.
    static func time(_ value: String, option: String) throws -> Timestamp {
        if value == "now" { return try timeFromNow(seconds: 0, option: option) }
        if let sign = value.first, sign == "+" || sign == "-", let unit = value.last,
            let scale = ["s": 1, "m": 60, "h": 3600, "d": 86400][unit],
            let count = value.dropFirst().dropLast().asciiDigitsValue(maxDigits: 7), count <= 3_650_000
        {
            return try timeFromNow(seconds: (sign == "-" ? -1 : 1) * count * scale, option: option)
        }
        return try parseTime(value, option: option)
    }
}
