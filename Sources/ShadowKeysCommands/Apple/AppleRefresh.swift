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
    struct Refresh: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "refresh",
            abstract: "Validate a refresh token with Apple (about once a day per token at most).")
        @OptionGroup var credentials: ClientSecretOptions
        @OptionGroup var endpoint: AppleEndpointOptions
        @OptionGroup var token: BearerTokenOptions
        @Flag(help: "Print compact JSON.") var json = false

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func run() async throws {
            try await reportingFailures(json: json) {
                let response = try await endpoint.client(credentials).refresh(try token.input().secret())
                Console.out(tokenJSON(response).serializedForTerminal(pretty: !json))
            }
        }
    }
}
