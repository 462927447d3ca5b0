import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowDPoP
import ShadowJOSE
import ShadowTokenSource

/// `shadow-keys dpop proof|verify`: DPoP proofs (RFC 9449) for scripts and curl (Docs/dpop.md).
struct DPoPCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dpop",
        abstract: "Make or check DPoP proofs (RFC 9449): the per-request signature of a key-bound token.",
        discussion: "Docs/dpop.md describes the proofs, every check and its code.",
        subcommands: [Proof.self, Verify.self])
}

/// Where the access token `ath` covers comes from: a file or an environment variable, never argv.
struct AccessTokenOptions: ParsableArguments {
    @Option(
        name: .customLong("ath-of"),
        help: ArgumentHelp("A file holding the access token sent with the proof (its hash is ath).", valueName: "file"))
    var file: String?
    @Option(
        name: .customLong("ath-env"),
        help: ArgumentHelp("An environment variable holding that access token.", valueName: "name"))
    var environment: String?

    func validate() throws {
        if file != nil && environment != nil {
            throw ValidationError("give the access token once: --ath-of or --ath-env")
        }
    }

    /// The token, surrounding whitespace trimmed, or nil when none is named.
    func token() throws -> String? {
        let origin: SecretInput.Origin
        if let file {
            origin = .file(file)
        } else if let environment {
            origin = .environment(environment)
        } else {
            return nil
        }
        return try SecretInput(origin: origin, what: "access token").text(
            limit: TokenOptions.readLimit, oversize: .malformedInput, trimmingWhitespace: true)
    }
}

extension DPoPCommand {
    struct Proof: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "proof",
            abstract: "Print a DPoP proof for one request, signed by a private key.",
            discussion: """
                The key is a PEM (PKCS#8, EC, RSA; a .p8) or a private JWK: ES256 for P-256, RS256 for RSA; or, \
                with --from-vault NAME, the key `vault login --dpop` keeps for the token source NAME. \
                Use the proof once, within a minute: curl -H "DPoP: $(shadow-keys dpop proof --key K --htm GET \
                --htu URL --ath-of token.txt)" -H "Authorization: DPoP $(cat token.txt)" URL. \
                Exit 0, 64 usage (a method, URL or nonce a proof cannot carry), 65 an unusable key, 66 a file that \
                cannot be read.
                """)

        @Option(help: ArgumentHelp("The private key file.", valueName: "file"))
        var key: String?
        @Option(
            name: .customLong("from-vault"),
            help: ArgumentHelp("The token source whose DPoP key to use (NAME.dpop in the vault).", valueName: "name"))
        var fromVault: String?
        @OptionGroup(title: "The vault (--from-vault)") var vault: VaultOptions
        @Option(help: ArgumentHelp("The request's method (htm), as sent: POST, GET.", valueName: "method"))
        var htm: String
        @Option(help: ArgumentHelp("The request's URL (htu is it without query and fragment).", valueName: "url"))
        var htu: String
        @OptionGroup var accessToken: AccessTokenOptions
        // A nonce may begin with "-": the next argument is its value, whatever it looks like.
        @Option(parsing: .unconditional, help: ArgumentHelp("The server's latest DPoP-Nonce.", valueName: "nonce"))
        var nonce: String?
        @Option(
            help: ArgumentHelp("iat: 'now' (default), +/-N[s|m|h|d], epoch seconds or RFC 3339.", valueName: "time"))
        var iat: String?
        @Flag(help: "Print {\"proof\",\"thumbprint\",\"jwk\"} as JSON.")
        var json = false
        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func validate() throws {
            if let iat { _ = try Sign.time(iat, option: "--iat") }
            guard (key == nil) != (fromVault == nil) else {
                throw ValidationError("give the key once: --key FILE or --from-vault NAME")
            }
            if fromVault != nil { try vault.requireKey() }
        }

        /// The signer: from the key file, or the token source's key in the vault.
        func signer() async throws -> DPoPSigner {
            if let fromVault {
                guard let signer = try await TokenSourceEntries.dpopSigner(in: try vault.open(), name: fromVault) else {
                    throw CLIError(
                        .usage, code: "no_dpop_key",
                        "\(fromVault.quotedForMessage) sends no DPoP proofs: it was not set up with vault login --dpop")
                }
                return signer
            }
            let path = key ?? ""
            let bytes = try SecretInput(origin: .file(path), what: "key").bytes(
                limit: 64 * 1024, oversize: .malformedInput)
            do {
                return try DPoPSigner.keyFile(bytes)
            } catch let error as any ShadowKeysError {
                throw CLIError(.malformedInput, code: "invalid_key", "--key \(path.terminalSafe): \(error.reason)")
            }
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                let signer = try await signer()
                let issuedAt = try iat.map { try Sign.time($0, option: "--iat").date } ?? Date()
                let proof = try signer.proof(
                    method: htm, url: htu, accessToken: try accessToken.token(), nonce: nonce, issuedAt: issuedAt)
                if json {
                    Console.json([
                        "proof": .string(proof), "thumbprint": .string(signer.thumbprint),
                        "jwk": .object(signer.publicKey.json),
                    ])
                } else {
                    Console.out(proof)
                }
            }
        }
    }

    struct Verify: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "verify",
            abstract: "Check a DPoP proof for one request, as a server does (RFC 9449 §4.3).",
            discussion: """
                Prints the key's thumbprint, or with --json the checked proof. Exit 0 valid; 10 not a proof (a \
                malformed JWS, the wrong size); 11 its type, algorithm, key or signature (wrong_type, \
                disallowed_algorithm, invalid_key, unsupported_critical_header, invalid_signature, key_mismatch); \
                12 its claims (missing_claim, method_mismatch, uri_mismatch, iat_out_of_window, ath_mismatch, \
                use_dpop_nonce); 64 usage. No replay check: that needs a server's memory.
                """)

        @OptionGroup var proof: TokenOptions
        @Option(help: ArgumentHelp("The request's method.", valueName: "method"))
        var htm: String
        @Option(help: ArgumentHelp("The request's URL.", valueName: "url"))
        var htu: String
        @OptionGroup var accessToken: AccessTokenOptions
        // A thumbprint is base64url and a nonce may begin with "-" too: the next argument is the
        // value, whatever it looks like.
        @Option(
            parsing: .unconditional,
            help: ArgumentHelp("The thumbprint the token is bound to (cnf.jkt).", valueName: "jkt"))
        var jkt: String?
        @Option(parsing: .unconditional, help: ArgumentHelp("The nonce the proof must carry.", valueName: "nonce"))
        var nonce: String?
        @Option(help: ArgumentHelp("Seconds a proof is accepted after its iat (1 to 3600).", valueName: "seconds"))
        var maxAge: Double = 60
        @Option(help: ArgumentHelp("Clock difference allowed either way (0 to 300 s).", valueName: "seconds"))
        var leeway: Double = 10
        @Option(help: ArgumentHelp("Check as of this time (epoch seconds or RFC 3339).", valueName: "time"))
        var now: String?
        @Flag(help: "Print {\"valid\",\"thumbprint\",\"header\",\"claims\"} as JSON.")
        var json = false
        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func validate() throws {
            try proof.requireInput()
            guard (1...3600).contains(maxAge), (0...300).contains(leeway) else {
                throw ValidationError("--max-age is 1 to 3600 s and --leeway 0 to 300 s")
            }
            if let now { _ = try parseTime(now, option: "--now") }
            if case .failure(let refusal) = HTTPTargetURI.normalize(htu) {
                throw ValidationError("--htu is not an absolute http(s) URL: \(refusal)")
            }
            // --jkt takes the next argument whatever it is: a mistake such as `--jkt --json` is a
            // usage error here, not a key mismatch.
            if let jkt, DPoPThumbprint.bytes(jkt) == nil {
                throw ValidationError("--jkt: a key thumbprint, 43 base64url characters")
            }
        }

        func run() async throws {
            try await reportingFailures(json: json, valid: true) {
                let text = try proof.read()
                let verifier = DPoPVerifier(maxAge: maxAge, leeway: leeway, clock: try parseNow(now))
                let checked = try verifier.verify(
                    [text], method: htm, url: htu, accessToken: try accessToken.token(), boundTo: jkt)
                if let nonce, checked.nonce != nonce {
                    throw DPoPError(.useNonce, "the proof's nonce is not \(nonce.quotedForMessage)")
                }
                if json {
                    let jws = try CompactJWS(text)
                    Console.json([
                        "valid": true, "thumbprint": .string(checked.thumbprint), "header": .object(jws.header.json),
                        "claims": .object(try jws.unverifiedPayload()),
                    ])
                } else {
                    Console.out(checked.thumbprint)
                }
            }
        }
    }
}
