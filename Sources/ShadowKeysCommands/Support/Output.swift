import ArgumentParser
#if canImport(Darwin)
import Darwin
import Foundation
#else
import Glibc
import FoundationEssentials
#endif
import ShadowCore
import ShadowCrypto

/// An input file or stdin, opened for reading.
struct InputFile {
    let fd: Int32
    let name: String
    let size: Int?

    init(_ path: String) throws {
        if path == "-" {
            fd = 0
            name = "stdin"
        } else {
            fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw CLIError(.noInput, "cannot open \(path): \(String(cString: strerror(errno)))") }
            name = path
        }
        var info = stat()
        size = fstat(fd, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG ? Int(info.st_size) : nil
    }

    func close() { if fd > 0 { systemClose(fd) } }
}

/// Progress on stderr for large inputs, only when stderr is a terminal and `--quiet` is not given.
final class Progress {
    private let total: Int
    private let verb: String
    private var lastDraw = 0.0
    private let enabled: Bool
    private let events: Bool

    /// Bytes: drawn for inputs of 16 MiB or more.
    init(verb: String, total: Int?) {
        self.verb = verb
        self.total = total ?? 0
        events = false
        enabled = isatty(2) == 1 && !Console.isQuiet && (total ?? 0) >= 16 << 20
    }

    /// Events: drawn for more than one batch.
    init(verb: String, events total: Int, wanted: Bool = true) {
        self.verb = verb
        self.total = total
        events = true
        enabled = wanted && isatty(2) == 1 && !Console.isQuiet && total > 1000
    }

    func update(_ done: Int) {
        guard enabled else { return }
        let now = monotonicSeconds()
        guard now - lastDraw >= 0.1 || done >= total else { return }
        lastDraw = now
        let fraction = total > 0 ? min(1, Double(done) / Double(total)) : 0
        let filled = Int(fraction * 30)
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: 30 - filled)
        let amount = events ? "\(done)/\(total) events" : "\(done >> 20)/\(total >> 20) MiB"
        Console.errNoNewline("\r\(verb) [\(bar)] \(Int(fraction * 100))% \(amount)")
    }

    func finish() { if enabled { Console.err("") } }
}

/// Runs `body` with the descriptor to write to: a new file that appears atomically when `body`
/// succeeds, or stdout.
func withOutput(_ path: String, _ body: (_ fd: Int32) throws -> Void) throws {
    if path == "-" {
        guard isatty(1) == 0 else {
            throw CLIError(.usage, "refusing to write binary data to a terminal; use -o FILE or a pipe")
        }
        try body(1)
        return
    }
    let writer = try AtomicFileWriter(path: path)
    try body(writer.fd)
    try writer.commit()
}
