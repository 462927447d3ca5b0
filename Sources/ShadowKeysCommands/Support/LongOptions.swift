import ArgumentParser

/// A command line of long options, read without argument-parser's reflection, for the commands
/// scripts run once per token or secret (Docs/cli.md, "Start-up"): `--name value`,
/// `--name=value`, flags, a command's own short names standing alone (`-o FILE`, `-q`), and as
/// many positional arguments as the command takes (a lone `-` among them, stdin, where the
/// command says so). It declines (nil) anything it would have to interpret: any other short
/// option or a cluster of them, anything else starting with `-` in a value or positional place,
/// `--`, an unknown name, a single-value option or flag given twice, a value missing at the end
/// or empty after `=` (`--name=`), or a positional too many or too few. argument-parser then
/// parses the whole command line as usual, so every message and exit code stays its own.
struct LongOptions {
    enum Kind {
        case flag, value, repeating
    }

    private var values: [String: [String]] = [:]
    private var flags: Set<String> = []
    /// The positional arguments, in order.
    private(set) var positionals: [String] = []

    /// Reads `arguments` against the names the command declares and the number of positional
    /// arguments it takes; nil when it declines.
    /// - Parameter shortNames: the short names the command declares (`"o"` for `-o`), each with
    ///   the name its value is kept under and its kind; a name that has no long form is not in
    ///   `kinds`, so only the short form sets it.
    init?(
        _ arguments: ArraySlice<String>, kinds: [String: Kind], shortNames: [String: (String, Kind)] = [:],
        positionals count: ClosedRange<Int> = 0...0, dashIsPositional: Bool = false
    ) {
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            index += 1
            if !argument.hasPrefix("-") || (dashIsPositional && argument == "-") {
                guard positionals.count < count.upperBound else { return nil }
                positionals.append(argument)
                continue
            }
            var name: String
            var value: String?
            let kind: Kind?
            if argument.utf8.count == 2, let short = shortNames[String(argument.dropFirst())] {
                (name, kind) = short
            } else {
                guard argument.hasPrefix("--"), argument.count > 2 else { return nil }
                name = String(argument.dropFirst(2))
                // By Character, as argument-parser splits `--name=value`: this reader takes
                // exactly the command lines that parser takes (a value that begins with a
                // combining mark, which joins the `=`, is its usage error; `--name value` works).
                if let equals = name.firstIndex(of: "=") {
                    value = String(name[name.index(after: equals)...])
                    name = String(name[..<equals])
                    // `--name=` with nothing after it is argument-parser's "Missing value".
                    guard value?.isEmpty == false else { return nil }
                }
                kind = kinds[name]
            }
            switch kind {
            case nil:
                return nil
            case .flag:
                guard value == nil, flags.insert(name).inserted else { return nil }
            case .value, .repeating:
                if value == nil {
                    guard index < arguments.endIndex else { return nil }
                    value = arguments[index]
                    index += 1
                }
                guard let value, !value.hasPrefix("-") else { return nil }
                if kind == .value, values[name] != nil { return nil }
                values[name, default: []].append(value)
            }
        }
        guard count.contains(positionals.count) else { return nil }
    }

    /// Whether `groups` all pass their `validate()`, run in the order given (argument-parser's:
    /// each option group's, then the command's).
    static func validate(_ groups: any ParsableArguments...) -> Bool {
        do {
            for var group in groups { try group.validate() }
        } catch {
            return false
        }
        return true
    }

    func flag(_ name: String) -> Bool { flags.contains(name) }

    func value(_ name: String) -> String? { values[name]?.first }

    func all(_ name: String) -> [String] { values[name] ?? [] }

    /// The option's value as `T`, `fallback` when it was not given, nil when it does not convert.
    func number<T: LosslessStringConvertible>(_ name: String, default fallback: T) -> T? {
        guard let text = value(name) else { return fallback }
        return T(text)
    }
}
