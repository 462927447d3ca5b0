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

    /// The options of the command `arguments` lead to, as argument-parser describes them.
    private struct Options {
        var long: Set<String> = ["help"]
        var short: Set<Character> = ["h"]
        /// The names written after one dash (`-name`), if any.
        var singleDash: Set<String> = []
        /// The options that take a value, as written (`--name`, `-o`).
        var takesValue: Set<String> = []
        /// The subcommand names the arguments begin with.
        var path: [String] = []
        /// Where the arguments after the subcommand names begin.
        var start = 0

        init?(_ arguments: [String], root: any ParsableCommand.Type) {
            // Subcommand names come first. Only the command they lead to is described: describing
            // the whole tree builds every command's arguments (in a debug build, argument-parser
            // also validates each of them, over a second per usage error).
            var leaf = root
            while start < arguments.count,
                let sub = leaf.configuration.subcommands.first(where: { $0._commandName == arguments[start] })
            {
                leaf = sub
                path.append(arguments[start])
                start += 1
            }
            guard let help = try? StrictJSON.parse(Array(leaf._dumpHelp().utf8)),
                let command = help.objectValue?["command"]
            else { return nil }
            if path.isEmpty { long.insert("version") }
            for argument in command.objectValue?["arguments"]?.arrayValue ?? [] {
                let isOption = argument.objectValue?["kind"]?.stringValue == "option"
                for name in argument.objectValue?["names"]?.arrayValue ?? [] {
                    guard let text = name.objectValue?["name"]?.stringValue else { continue }
                    let kind = name.objectValue?["kind"]?.stringValue
                    switch kind {
                    case "long", "longWithSingleDash":
                        long.insert(text)
                        if kind == "longWithSingleDash" { singleDash.insert(text) }
                        if isOption { takesValue.insert("--" + text) }
                    case "short":
                        if let character = text.first { short.insert(character) }
                        if isOption { takesValue.insert("-" + text) }
                    default:
                        break
                    }
                }
            }
        }

        /// Whether `token` (an option as written, with no `=value`) is followed by its value.
        func isFollowedByValue(_ token: String) -> Bool {
            if token.hasPrefix("--") { return !token.contains("=") && takesValue.contains(token) }
            return token.count == 2 && takesValue.contains(token)
        }
    }

    /// The first unknown option in `arguments` (argv without the program name), or nil.
    static func first(in arguments: [String], root: any ParsableCommand.Type) -> Finding? {
        guard let options = Options(arguments, root: root) else { return nil }
        var index = options.start
        while index < arguments.count {
            let token = arguments[index]
            index += 1
            if token == "--" { break }
            guard token.hasPrefix("-"), token != "-", !isNumber(token) else { continue }
            if token.hasPrefix("--") {
                let name = String(token.dropFirst(2).prefix { $0 != "=" })
                guard options.long.contains(name) else {
                    return Finding(
                        option: "--" + name, suggestions: closest(name, in: options.long).map { "--" + $0 },
                        commandPath: options.path)
                }
            } else if let equals = token.utf8.firstIndex(of: UInt8(ascii: "=")) {
                // `-o=value` is one option and its value, as argument-parser reads it (and as
                // ``joiningValues(_:root:)`` writes a short option's value); `-ab=value`, one
                // single-dash name.
                let name = String(token[token.index(after: token.startIndex)..<equals])
                let known =
                    if let short = name.first, name.count == 1 {
                        options.short.contains(short)
                    } else {
                        options.singleDash.contains(name)
                    }
                guard known else { return Finding(option: "-" + name, suggestions: [], commandPath: options.path) }
            } else {
                for character in token.dropFirst() where !options.short.contains(character) {
                    return Finding(option: "-" + String(character), suggestions: [], commandPath: options.path)
                }
            }
            if options.isFollowedByValue(token) { index += 1 }
        }
        return nil
    }

    /// `arguments` with each option that takes a value joined to the argument after it
    /// (`--nonce -x` as `--nonce=-x`), when one of those values begins with `-`; nil when none
    /// does. argument-parser reads an argument that begins with `-` as the next option and
    /// reports the value missing; Docs/cli.md, "Usage errors", says it is the value.
    static func joiningValues(_ arguments: [String], root: any ParsableCommand.Type) -> [String]? {
        guard let options = Options(arguments, root: root) else { return nil }
        var joined = Array(arguments[..<options.start])
        var changed = false
        var index = options.start
        while index < arguments.count {
            let token = arguments[index]
            index += 1
            if token == "--" {
                joined += arguments[(index - 1)...]
                break
            }
            if token.hasPrefix("-"), options.isFollowedByValue(token), index < arguments.count {
                let value = arguments[index]
                index += 1
                joined.append(token + "=" + value)
                changed = changed || value.hasPrefix("-")
            } else {
                joined.append(token)
            }
        }
        return changed ? joined : nil
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
