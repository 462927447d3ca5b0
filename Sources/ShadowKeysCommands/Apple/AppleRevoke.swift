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
    struct Revoke: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke", abstract: "Revoke a refresh or access token.")
        @OptionGroup var credentials: ClientSecretOptions
        @OptionGroup var endpoint: AppleEndpointOptions
        @OptionGroup var token: BearerTokenOptions
        @Option(help: "What the token is: refresh or access.") var kind: String = "refresh"
        @Flag(help: "Print {\"revoked\": true}.") var json = false

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func validate() throws {
            guard kind == "refresh" || kind == "access" else { throw ValidationError("--kind is refresh or access") }
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                try await endpoint.client(credentials).revoke(
                    try token.input().secret(), kind: kind == "refresh" ? .refreshToken : .accessToken)
                if json { Console.json(["revoked": true]) }
            }
        }
    }
}
