#if canImport(Darwin)
import Darwin
#else
import Glibc
#endif
import ShadowCore

/// Asks for a secret on the controlling terminal with echo off, as ssh-keygen and age do.
enum TerminalPrompt {
    /// True when stdin is a terminal: then a command that needs a passphrase and was given none
    /// asks for it instead of failing.
    static var available: Bool { isatty(0) == 1 }

    /// Reads one line from /dev/tty without echo; with `confirm`, twice, and they must match.
    static func secret(what: String, confirm: Bool, limit: Int) throws -> [UInt8] {
        let tty = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)
        guard tty >= 0 else { throw CLIError(.usage, "no terminal to ask for the \(what) on; give it with an option") }
        defer { close(tty) }
        let first = try ask(tty, "Enter \(what): ", limit: limit)
        guard !first.isEmpty else { throw CLIError(.usage, "the \(what) is empty") }
        if confirm {
            var second = try ask(tty, "Enter the \(what) again: ", limit: limit)
            defer { for index in second.indices { second[index] = 0 } }
            guard ConstantTime.equals(first, second) else { throw CLIError(.usage, "the two \(what)s differ") }
        }
        return first
    }

    /// One line, echo off for its duration (restored even when reading fails).
    private static func ask(_ tty: Int32, _ prompt: String, limit: Int) throws -> [UInt8] {
        _ = prompt.withCString { write(tty, $0, strlen($0)) }
        var saved = termios()
        let canSilence = tcgetattr(tty, &saved) == 0
        if canSilence {
            var silent = saved
            silent.c_lflag &= ~tcflag_t(ECHO)
            silent.c_lflag |= tcflag_t(ICANON)
            tcsetattr(tty, TCSANOW, &silent)
        }
        defer {
            if canSilence { tcsetattr(tty, TCSANOW, &saved) }
            _ = "\n".withCString { write(tty, $0, 1) }
        }
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let count = read(tty, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 || byte == 0x0A { break }
            guard line.count < limit else { throw CLIError(.usage, "the answer exceeds \(limit) bytes") }
            line.append(byte)
        }
        if line.last == 0x0D { line.removeLast() }
        return line
    }
}
