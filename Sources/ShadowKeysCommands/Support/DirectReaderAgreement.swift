import ArgumentParser

/// The one rule of the direct command-line readers (Docs/cli.md, "Start-up"), checked on any
/// command line: a line a direct reader takes, argument-parser takes too, and makes the same
/// command of it, property for property. `DirectParseTests` checks it on fixed lines, the `argv`
/// fuzz harness on arbitrary ones.
package enum DirectReaderAgreement {
    /// What the two readers made of one command line.
    package enum Outcome: Equatable, Sendable {
        /// The direct reader left the line to argument-parser.
        case declined
        /// Both read it, to the same command.
        case agreed
        /// The direct reader took it and argument-parser did not, or made another command of it.
        case disagreed(String)
    }

    /// The commands with a direct reader, in the order the harness's first byte picks them.
    package static let commands = ["verify-token", "vault get", "vault token", "encrypt", "decrypt", "state check"]

    /// Reads `arguments` (the words after the command's name) both ways as `command`, one of
    /// ``commands``.
    package static func compare(_ command: String, _ arguments: [String]) -> Outcome {
        switch command {
        case "verify-token": return compare(VerifyToken.parsedDirectly(arguments[...]), arguments)
        case "vault token": return compare(VaultCommand.Token.parsedDirectly(arguments[...]), arguments)
        case "encrypt": return compare(Encrypt.parsedDirectly(arguments[...]), arguments)
        case "decrypt": return compare(Decrypt.parsedDirectly(arguments[...]), arguments)
        case "state check": return compare(StateCommand.Check.parsedDirectly(arguments[...]), arguments)
        case "vault get":
            // The direct reader builds plain values: they must be the parsed command's, field for field.
            guard let direct = VaultCommand.Get.readDirectly(arguments[...]) else { return .declined }
            guard let parsed = try? VaultCommand.Get.parse(arguments) else {
                return .disagreed("argument-parser refuses a line the direct reader took")
            }
            guard String(describing: direct.line) == String(describing: parsed.line), direct.quiet == parsed.quiet
            else { return .disagreed("the two readers made different commands") }
            return .agreed
        default: preconditionFailure("\(command) has no direct reader")
        }
    }

    /// The description of a parsed command prints every value, nested groups included.
    private static func compare<Command: ParsableCommand>(_ direct: Command?, _ arguments: [String]) -> Outcome {
        guard let direct else { return .declined }
        guard let parsed = try? Command.parse(arguments) else {
            return .disagreed("argument-parser refuses a line the direct reader took")
        }
        let text = String(describing: direct)
        guard text == String(describing: parsed) else { return .disagreed("the two readers made different commands") }
        guard !text.contains("*definition*") else { return .disagreed("the direct reader left a property unset") }
        return .agreed
    }
}
