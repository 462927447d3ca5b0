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
    struct Check: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "check",
            abstract: "Exit 0 if the user is authorized, 14 otherwise (revoked, transferred or notFound).")
        @OptionGroup var query: UserQueryOptions

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func run() async throws {
            try await reportingFailures(json: query.json) {
                let status = try await query.record().status
                if query.json { printStatus(status, user: query.user, json: true) }
                guard status.state == .authorized else {
                    Console.note(
                        """
                        \(query.user.subject.quotedForMessage) is \
                        \(status.state)\(status.since.map { " since \(Timestamp.rfc3339Exact($0))" } ?? "")
                        """
                    )
                    throw ExitCode(ExitStatus.credentialRevoked.rawValue)
                }
                if !query.json { Console.out("authorized") }
            }
        }
    }
}
