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
    struct Show: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "show", abstract: "Print a user's state, since when, its cause and any linked subject.")
        @OptionGroup var query: UserQueryOptions

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func run() async throws {
            try await reportingFailures(json: query.json) {
                let status = try await query.record().status
                printStatus(status, user: query.user, json: query.json)
            }
        }
    }
}
