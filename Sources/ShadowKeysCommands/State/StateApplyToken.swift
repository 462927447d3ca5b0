import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowApple
import ShadowCore
import ShadowCredentials
import ShadowJOSE

extension StateCommand {
    struct ApplyToken: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "apply-token",
            abstract: "Verify a Sign in with Apple identity token and record the sign-in (and any transfer_sub).",
            discussion: """
                Verification is that of `verify-token --apple`. Exit 14 when the sign-in is recorded but the \
                token is superseded: its subject was revoked or transferred at or after its iat.
                """)
        @OptionGroup var token: TokenOptions
        @Option(
            name: .customLong("client-id"),
            help: "The client ID the state belongs to (default: the token's aud); --aud defaults to it.")
        var clientID: String?
        @OptionGroup var keySource: KeySourceOptions
        @OptionGroup var options: VerificationOptions
        @OptionGroup var store: StoreOptions
        @Flag(help: "Print JSON.") var json = false
        @Flag(name: .shortAndLong, help: "Print no warnings.") var quiet = false

        private var appleOptions: VerificationOptions {
            var options = options
            if options.audiences.isEmpty, let clientID { options.audiences = [clientID] }
            return options
        }

        func validate() throws {
            try token.requireInput()
            try store.requireKey()
            try keySource.validate(default: Apple.keysURL)
            try appleOptions.validateApple()
            if let clientID, !options.audiences.isEmpty,
                !options.audiences.contains(where: { $0.exactlyEquals(clientID) })
            {
                throw ValidationError("--client-id must be one of the --aud values")
            }
            let stdinUsers = [token.usesStdin, keySource.jwks == "-", store.keyUsesStdin].filter { $0 }.count
            if stdinUsers > 1 {
                throw ValidationError("only one of the token, --jwks and the passphrase can come from stdin")
            }
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                let raw = try token.read()
                let identity = try await appleOptions.appleValidator().validate(
                    raw, keys: keySource.appleKeys())
                let client = clientID ?? identity.audience
                let events = try CredentialEvent.signIn(identity, rawToken: raw, clientID: client)
                let (changes, record) = try await store.withStore(create: true) { store in
                    (try await store.apply(events), try await store.record(clientID: client, subject: identity.subject))
                }
                try record.enforce(identity)
                printChanges(changes, json: json)
            }
        }
    }
}
