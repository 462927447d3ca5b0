#if canImport(Darwin)
import Darwin
#else
import Glibc
#endif
package import ArgumentParser
package import ShadowCore
import Synchronization

/// Unbuffered writes to stdout and stderr, and reading of bounded inputs.
package enum Console {
    /// Set from the command's `-q/--quiet` before it runs: no warnings and no progress on stderr.
    private static let quiet = Atomic(false)

    static var isQuiet: Bool { quiet.load(ordering: .relaxed) }

    static func setQuiet(_ on: Bool) { quiet.store(on, ordering: .relaxed) }

    /// Writes `shadow-keys: warning: text` to stderr, unless `--quiet` was given.
    package static func warn(_ text: String) {
        if !isQuiet { err("shadow-keys: warning: " + text) }
    }

    /// Writes `shadow-keys: text` to stderr (what was done, for a person), unless `--quiet` was given.
    static func note(_ text: String) {
        if !isQuiet { err("shadow-keys: " + text) }
    }

    /// Writes `text` and a newline to stdout.
    package static func out(_ text: String) { write(1, text + "\n") }

    /// Writes `text` to stdout as it is (lines the caller has already ended).
    static func outRaw(_ text: String) { write(1, text) }

    /// Writes `text` and a newline to stderr, with terminal controls escaped (messages quote
    /// file names, claims and `kid`s that came from outside).
    static func err(_ text: String) { write(2, text.terminalSafe + "\n") }

    /// Writes `text` to stderr without a newline (progress lines).
    static func errNoNewline(_ text: String) { write(2, text) }

    /// Writes raw bytes to stdout, then a newline if asked.
    static func outBytes(_ bytes: UnsafeRawBufferPointer, newline: Bool) {
        write(1, bytes)
        if newline { write(1, "\n") }
    }

    /// Writes a JSON value as one line on stdout, terminal controls escaped (still the same JSON).
    package static func json(_ value: JSONValue) { out(value.serializedForTerminal()) }

    /// Writes a JSON value indented, terminal controls escaped.
    static func prettyJSON(_ value: JSONValue) { out(value.serializedForTerminal(pretty: true)) }

    private static func write(_ fd: Int32, _ text: String) {
        var text = text
        text.withUTF8 { write(fd, UnsafeRawBufferPointer($0)) }
    }

    /// Writes every byte; a closed or failing stream (a gone reader) is not an error here.
    private static func write(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) {
        try? Files.writeAll(fd, buffer, path: fd == 1 ? "stdout" : "stderr")
    }

    /// The path of the running executable, when the system says.
    static var executablePath: String? {
        #if os(Linux)
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return CommandLine.arguments.first }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        #else
        return CommandLine.arguments.first
        #endif
    }
}

/// Every leaf command takes `-q/--quiet` (Docs/cli.md): warnings and progress bars are then not
/// written; errors always are.
package protocol QuietCommand: ParsableCommand {
    var quiet: Bool { get }
}
