#if canImport(Darwin)
import Darwin
#else
import Glibc
#endif

/// Reads a descriptor to its end in large batches with read(2). When the input is a regular
/// file, its size is taken at the start, and a file that shrinks or grows while it is read is an
/// error rather than a short or long read (or, as with a mapping, a SIGBUS).
package struct InputReader {
    /// Why reading stopped: the file changed size under the reader.
    package struct ChangedError: Error, CustomStringConvertible {
        package let name: String
        package let expected: Int
        package let found: Int
        package var description: String {
            """
            \(name) changed size while it was read (\(expected) bytes at the start, \(found) \
            \(found > expected ? "or more " : "")by the end)
            """
        }
    }

    package let fd: Int32
    package let name: String
    /// For a regular file: the bytes from the current offset to the end, at the start.
    package let expectedBytes: Int?
    /// Bytes read so far.
    package private(set) var consumed = 0

    /// A reader of `fd` from its current offset.
    package init(fd: Int32, name: String) {
        self.fd = fd
        self.name = name
        var info = stat()
        if fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG {
            let offset = lseek(fd, 0, SEEK_CUR)
            expectedBytes = max(0, Int(info.st_size) - Int(max(offset, 0)))
            #if os(Linux)
            _ = posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL)
            #endif
        } else {
            expectedBytes = nil
        }
    }

    /// Fills `buffer` as far as the input allows; 0 at the end. For a regular file, throws
    /// ``ChangedError`` once more bytes arrive than it had, or the end comes early.
    package mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let count = try Files.readFull(fd, into: buffer, path: name)
        consumed += count
        if let expectedBytes {
            if consumed > expectedBytes { throw ChangedError(name: name, expected: expectedBytes, found: consumed) }
            // At the end, exactly the bytes the file had at the start must have been read.
            if count < buffer.count, consumed != expectedBytes {
                throw ChangedError(name: name, expected: expectedBytes, found: consumed)
            }
        }
        return count
    }

    /// Copies the rest of the input to `output`, in 1 MiB pieces, with the same size checks.
    package mutating func copyAll(to output: Int32, path: String) throws {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 64)
        defer { buffer.deallocate() }
        while true {
            let count = try read(into: buffer)
            if count == 0 { return }
            try Files.writeAll(output, UnsafeRawBufferPointer(rebasing: buffer[0..<count]), path: path)
            if count < buffer.count { return }
        }
    }
}
