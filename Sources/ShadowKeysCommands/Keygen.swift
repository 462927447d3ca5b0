import ArgumentParser
import ShadowCore

/// `shadow-keys keygen FILE`: a new 256-bit key for `--key-file` (vaults, KEKs, stores).
struct Keygen: ParsableCommand, QuietCommand {
    static let configuration = CommandConfiguration(
        commandName: "keygen",
        abstract: "Write a new random 256-bit key to FILE (64 hex digits, mode 0600); never overwrites.",
        discussion:
            """
            The key is for --key-file wherever a command takes one. Exit 0, 73 when FILE exists, 66 when its folder \
            cannot be written.
            """
    )

    @Argument(help: ArgumentHelp("Where to write the key (a new file).", valueName: "file"))
    var file: String

    @Flag(help: "Print JSON.")
    var json = false

    @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

    func validate() throws {
        guard !file.isEmpty, file != "-" else {
            throw ValidationError("give a file to write the key to; keys are never printed")
        }
    }

    func run() throws {
        do {
            try writeNewKey(to: file)
        } catch let error as CLIError {
            if json { Console.json(["created": false, "error": error.json]) }
            Console.err("shadow-keys: \(error.message)")
            throw ExitCode(error.status.rawValue)
        }
        if json {
            Console.json(["created": true, "key_file": .string(file), "bits": 256, "format": "hex"])
        } else {
            Console.note("wrote a new 256-bit key to \(file.terminalSafe) (mode 0600)")
        }
    }
}

/// Writes a fresh 256-bit key as 64 hex digits and a newline, atomically, mode 0600; refuses an
/// existing file (exit 73) and reports a folder it cannot write to (exit 66).
func writeNewKey(to path: String) throws {
    let key = SecretBytes.random(count: 32)
    var text = key.withUnsafeBytes { Array(Hex.encode($0).utf8) } + [0x0A]
    defer { for index in text.indices { text[index] = 0 } }
    do {
        let writer = try AtomicFileWriter(path: path, exclusive: true)
        try text.withUnsafeBytes { try writer.write($0) }
        try writer.commit(replacing: false)
    } catch let error as FileError {
        if error.alreadyExists {
            throw CLIError(.cannotCreate, code: "exists", "\(path.terminalSafe) exists; keygen never overwrites a key")
        }
        throw CLIError(.noInput, code: "io", "cannot write the key: \(error)")
    }
}
