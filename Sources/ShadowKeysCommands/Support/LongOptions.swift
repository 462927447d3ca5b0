/// A command line of long options, read without argument-parser's reflection, for the commands
/// scripts run once per token or secret (Docs/cli.md, "Start-up"): `--name value`,
/// `--name=value`, flags, and as many positional arguments as the command takes (a lone `-`
/// among them, stdin, where the command says so). It declines (nil) anything it would have to
/// interpret: a short option, anything else starting with `-` in a value or positional place,
/// `--`, an unknown name, a single-value option or flag given twice, a value missing at the end,
/// or a positional too many or too few. argument-parser then parses the whole command line as
/// usual, so every message and exit code stays its own.
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
    init?(
        _ arguments: ArraySlice<String>, kinds: [String: Kind], positionals count: ClosedRange<Int> = 0...0,
        dashIsPositional: Bool = false
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
            guard argument.hasPrefix("--"), argument.count > 2 else { return nil }
            var name = String(argument.dropFirst(2))
            var value: String?
            if let equals = name.firstIndex(of: "=") {
                value = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            switch kinds[name] {
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
                if kinds[name] == .value, values[name] != nil { return nil }
                values[name, default: []].append(value)
            }
        }
        guard count.contains(positionals.count) else { return nil }
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
