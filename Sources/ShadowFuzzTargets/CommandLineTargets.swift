import ShadowKeysCommands

enum CommandLineTargets {
    /// The direct command-line readers against argument-parser: the first byte picks the command
    /// (`DirectReaderAgreement.commands`), the rest are its words, split at 0x00 (at most 40
    /// words). A line a direct reader takes must be one argument-parser takes and makes the same
    /// command of.
    static let argv: FuzzTargets.Harness = { data in
        guard let first = data.first, data.count <= 4096 else { return }
        let command = DirectReaderAgreement.commands[Int(first) % DirectReaderAgreement.commands.count]
        let words = data.dropFirst().split(separator: 0, omittingEmptySubsequences: false).map {
            String(decoding: $0, as: UTF8.self)
        }
        guard words.count <= 40 else { return }
        let arguments = words == [""] ? [] : words
        if case .disagreed(let why) = DirectReaderAgreement.compare(command, arguments) {
            preconditionFailure("\(command) \(arguments): \(why)")
        }
    }
}
