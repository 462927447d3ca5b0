#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif
import ArgumentParser
import ShadowCore

/// Unbuffered writes to stdout and stderr, and reading of bounded inputs.
enum Console {
    /// Writes `text` and a newline to stdout.
    static func out(_ text: String) { write(1, text + "\n") }

    /// Writes `text` and a newline to stderr.
    static func err(_ text: String) { write(2, text + "\n") }

    /// Writes `text` to stderr without a newline (progress lines).
    static func errNoNewline(_ text: String) { write(2, text) }

    /// Writes a JSON value as one line on stdout.
    static func json(_ value: JSONValue) { out(value.serialized()) }

    private static func write(_ fd: Int32, _ text: String) {
        var text = text
        text.withUTF8 { buffer in
            var offset = 0
            while offset < buffer.count {
                #if canImport(Glibc) || canImport(Musl)
                let written = Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                #else
                let written = Darwin.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                #endif
                if written < 0 {
                    if errno == EINTR { continue }
                    return
                }
                offset += written
            }
        }
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
