import ArgumentParser
import ShadowCore

/// Finds an option the command line names but the command does not have, so that it is reported
/// before any other problem: a misspelled `--jwk FILE` would otherwise have its value taken as the
/// token and be reported as "give the token once". Read from argument-parser's own description of
/// the commands (`_dumpHelp`), only after parsing has failed.
enum UnknownOptions {
    struct Finding {
        let option: String
        let suggestions: [String]
        let commandPath: [String]

        var message: String {
            switch suggestions.count {
            case 0: return "Unknown option '\(option)'."
            case 1: return "Unknown option '\(option)'. Did you mean '\(suggestions[0])'?"
            default:
                return "Unknown option '\(option)'. Did you mean one of "
                    + suggestions.map { "'\($0)'" }.joined(separator: ", ") + "?"
            }
        }
    }

    /// The first unknown option in `arguments` (argv without the program name), or nil.
    static func first(in arguments: [String], root: any ParsableCommand.Type) -> Finding? {
        // Subcommand names come first. Only the command they lead to is described: describing
        // the whole tree builds every command's arguments (in a debug build, argument-parser
        // also validates each of them, over a second per usage error).
        var leaf = root
        var path: [String] = []
        var index = 0
        while index < arguments.count,
            let sub = leaf.configuration.subcommands.first(where: { $0._commandName == arguments[index] })
        {
            leaf = sub
            path.append(arguments[index])
            index += 1
        }
        guard let help = try? StrictJSON.parse(Array(leaf._dumpHelp().utf8)), let command = help.objectValue?["command"]
        else { return nil }
        var long: Set<String> = ["help"], short: Set<Character> = ["h"], takesValue: Set<String> = []
        if path.isEmpty { long.insert("version") }
        for argument in command.objectValue?["arguments"]?.arrayValue ?? [] {
            let isOption = argument.objectValue?["kind"]?.stringValue == "option"
            for name in argument.objectValue?["names"]?.arrayValue ?? [] {
                guard let text = name.objectValue?["name"]?.stringValue else { continue }
                switch name.objectValue?["kind"]?.stringValue {
                case "long", "longWithSingleDash":
                    long.insert(text)
                    if isOption { takesValue.insert("--" + text) }
                case "short":
                    if let character = text.first { short.insert(character) }
                    if isOption { takesValue.insert("-" + text) }
                default:
                    break
                }
            }
        }
        while index < arguments.count {
            let token = arguments[index]
            index += 1
            if token == "--" { break }
            guard token.hasPrefix("-"), token != "-", !isNumber(token) else { continue }
            if token.hasPrefix("--") {
                let name = String(token.dropFirst(2).prefix { $0 != "=" })
                guard long.contains(name) else {
                    return Finding(
                        option: "--" + name, suggestions: closest(name, in: long).map { "--" + $0 }, commandPath: path)
                }
                if takesValue.contains("--" + name), !token.contains("=") { index += 1 }
            } else {
                for character in token.dropFirst() where !short.contains(character) {
                    return Finding(option: "-" + String(character), suggestions: [], commandPath: path)
                }
                if token.count == 2, takesValue.contains(token) { index += 1 }
            }
        }
        return nil
    }

    private static func isNumber(_ token: String) -> Bool {
        let digits = token.dropFirst()
        return !digits.isEmpty && digits.allSatisfy { $0.isASCII && ($0.isNumber || $0 == ".") }
    }

    /// The known names nearest to `name`: the closest within two edits, else (for three letters
    /// or more) every name it begins, at most four.
    private static func closest(_ name: String, in names: Set<String>) -> [String] {
        let ranked = names.map { ($0, distance(name, $0)) }.sorted { ($0.1, $0.0) < ($1.1, $1.0) }
        if let best = ranked.first, best.1 <= 2 { return [best.0] }
        guard name.count >= 3 else { return [] }
        return Array(names.filter { $0.hasPrefix(name) }.sorted().prefix(4))
    }

    /// Levenshtein distance.
    private static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1]
            for (j, y) in b.enumerated() {
                current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1)))
            }
            previous = current
        }
        return previous[b.count]
    }
}
