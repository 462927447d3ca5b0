import ArgumentParser

/// The one rule of the direct command-line readers (Docs/cli.md, "Start-up"), checked on any
/// command line: a line a direct reader takes, argument-parser takes too, and makes the same
/// command of it, property for property. The `argv` fuzz harness runs it on arbitrary words;
/// `DirectParseTests` on fixed ones.
package enum DirectReaderAgreement {
    /// The commands with a direct reader, in the order the harness's first byte picks them.
    package static let commands = ["verify-token", "vault get", "vault token", "encrypt", "decrypt"]

    /// Reads `arguments` (the words after the command's name) both ways as `commands[command]`;
    /// nil when they agree (or the direct reader declined), else what differs.
    package static func disagreement(command: Int, _ arguments: [String]) -> String? {
        switch command {
        case 0:
            return compare(VerifyToken.parsedDirectly(arguments[...]), arguments)
        case 1:
            guard let direct = VaultCommand.Get.readDirectly(arguments[...]) else { return nil }
            guard let parsed = try? VaultCommand.Get.parse(arguments) else {
                return "argument-parser refuses a line the direct reader took"
            }
            guard String(describing: direct.line) == String(describing: parsed.line), direct.quiet == parsed.quiet
            else { return "the two readers made different commands" }
            return nil
        case 2:
            return compare(VaultCommand.Token.parsedDirectly(arguments[...]), arguments)
        case 3:
            return compare(Encrypt.parsedDirectly(arguments[...]), arguments)
        default:
            return compare(Decrypt.parsedDirectly(arguments[...]), arguments)
        }
    }

    private static func compare<Command: ParsableCommand>(_ direct: Command?, _ arguments: [String]) -> String? {
        guard let direct else { return nil }
        guard let parsed = try? Command.parse(arguments) else {
            return "argument-parser refuses a line the direct reader took"
        }
        let text = String(describing: direct)
        guard text == String(describing: parsed) else { return "the two readers made different commands" }
        guard !text.contains("*definition*") else { return "the direct reader left a property unset" }
        return nil
    }
}
