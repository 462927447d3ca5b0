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

extension StateCommand.Check {
    /// Every long option `state check` declares.
    static let longOptions: [String: LongOptions.Kind] = [
        "client-id": .value, "sub": .value, "store": .value, "json": .flag, "quiet": .flag,
    ].merging(VaultOptions.longOptions) { _, _ in preconditionFailure("state check declares a vault option twice") }

    /// `state check --client-id C --sub S …` read as ``VerifyToken/parsedDirectly(_:)`` reads
    /// `verify-token`: a script asks it once per user.
    static func parsedDirectly(_ arguments: ArraySlice<String>) -> Self? {
        guard let given = LongOptions(arguments, kinds: longOptions, shortNames: ["q": ("quiet", .flag)]),
            let clientID = given.value("client-id"), let subject = given.value("sub"),
            let store = StoreOptions.direct(given)
        else { return nil }
        var user = UserOptions()
        user.clientID = clientID
        user.subject = subject
        var query = UserQueryOptions()
        query.user = user
        query.store = store
        query.json = given.flag("json")
        var command = Self()
        command.query = query
        command.quiet = given.flag("quiet")
        // The validations argument-parser runs: each option group's, then the command's.
        return LongOptions.validate(user, store, query, command) ? command : nil
    }
}
