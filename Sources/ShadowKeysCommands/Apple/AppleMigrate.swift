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
    struct Migrate: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "migrate",
            abstract:
                """
                User migration for app transfers: --sub S --target TEAM gives the transfer_sub (sending team); \
                --transfer-sub T gives the new sub (receiving team).
                """
        )
        @OptionGroup var credentials: ClientSecretOptions
        @OptionGroup var endpoint: AppleEndpointOptions
        @Option(help: "The user's sub under the sending team.") var sub: String?
        @Option(help: "The receiving team's Team ID.") var target: String?
        @Option(name: .customLong("transfer-sub"), help: "A transfer_sub received from the sending team.")
        var transferSub: String?
        @Flag(help: "Print compact JSON.") var json = false

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func validate() throws {
            switch (sub, target, transferSub) {
            case (.some, .some, nil), (nil, nil, .some): break
            default: throw ValidationError("give --sub and --target, or --transfer-sub")
            }
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                let client = try endpoint.client(credentials)
                let token = try await client.migrationAccessToken()
                if let sub, let target {
                    let transfer = try await client.transferSubject(for: sub, to: target, accessToken: token)
                    Console.out(
                        JSONValue.object(["transfer_sub": .string(transfer)]).serializedForTerminal(pretty: !json))
                } else if let transferSub {
                    let user = try await client.migratedUser(forTransferSubject: transferSub, accessToken: token)
                    Console.out(
                        JSONValue.object([
                            "sub": .string(user.subject), "email": user.email.map(JSONValue.string) ?? .null,
                            "is_private_email": user.isPrivateEmail.map(JSONValue.bool) ?? .null,
                        ]).serializedForTerminal(pretty: !json))
                }
            }
        }
    }
}
