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
    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "check", abstract: "Exit 0 if the user is authorized, 14 otherwise (revoked, transferred or notFound).")
        @OptionGroup var user: UserOptions
        @OptionGroup var vault: VaultOptions
        @Flag(help: "Print the state as JSON.") var json = false

        func validate() throws { try vault.requireKey() }

        func run() async throws {
            try await reportingFailures(json: json) {
                let status = try credentialStore(vault).recordSync(clientID: user.clientID, subject: user.subject).status
                if json { printStatus(status, user: user, json: true) }
                guard status.state == .authorized else {
                    Console.err("shadow-keys: \(user.subject.quotedForMessage) is \(status.state)\(status.since.map { " since \(Timestamp.rfc3339($0))" } ?? "")")
                    throw ExitCode(ExitStatus.credentialRevoked.rawValue)
                }
                if !json { Console.out("authorized") }
            }
        }
    }
}
