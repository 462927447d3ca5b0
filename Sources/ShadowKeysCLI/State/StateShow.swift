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
    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "show", abstract: "Print a user's state, since when, its cause and any linked subject.")
        @OptionGroup var user: UserOptions
        @OptionGroup var vault: VaultOptions
        @Flag(help: "Print JSON.") var json = false

        func validate() throws { try vault.requireKey() }

        func run() async throws {
            try await reportingFailures(json: json) {
                let status = try credentialStore(vault).recordSync(clientID: user.clientID, subject: user.subject).status
                printStatus(status, user: user, json: json)
            }
        }
    }
}
