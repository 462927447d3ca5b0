import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowApple
import ShadowCore
import ShadowCrypto
import ShadowJOSE
import ShadowJWKS

extension AppleCommand {
    struct Token: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "token", abstract: "Exchange an authorization code for tokens; the id_token is verified.")
        @OptionGroup var credentials: ClientSecretOptions
        @OptionGroup var endpoint: AppleEndpointOptions
        @OptionGroup var code: CodeOptions
        @Option(
            name: .customLong("redirect-uri"), help: "The redirect URI used in the authorization request (web sign-in)."
        ) var redirectURI: String?
        @OptionGroup var nonce: NonceOptions
        @Flag(help: "Print compact JSON.") var json = false

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func validate() throws {
            // Apple's rule accepts the raw nonce or its SHA-256 hex: give the raw one.
            if nonce.isHashed {
                throw ValidationError(
                    """
                    give the raw nonce (--nonce, --nonce-file or --nonce-env); the id_token may carry it or its \
                    SHA-256 hex
                    """
                )
            }
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                let response = try await endpoint.client(credentials).exchange(
                    code: try code.input().secret(), redirectURI: redirectURI, nonce: try nonce.value())
                Console.out(tokenJSON(response).serializedForTerminal(pretty: !json))
            }
        }
    }
}
