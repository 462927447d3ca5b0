#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif
import Dispatch
#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
import Synchronization

/// A failed file-system operation, naming the path and the system's reason.
package struct FileError: Error, Equatable, Sendable, CustomStringConvertible {
    package let path: String
    package let operation: String
    package let code: Int32

    package init(_ operation: String, _ path: String, errno code: Int32 = errno) {
        self.operation = operation
        self.path = path
        self.code = code
    }

    package var description: String { "\(operation) \(path): \(String(cString: strerror(code)))" }

    /// True when the path did not exist.
    package var isNotFound: Bool { code == ENOENT }
}

/// File operations with the guarantees secrets need: atomic replacement, owner-only modes,
/// durable writes, and advisory locks with a timeout.
package enum Files {
    /// Reads a whole file; `nil` when it is larger than `limit`.
    package static func read(_ path: String, limit: Int) throws -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw FileError("open", path) }
        defer { close(fd) }
        // A regular file is read straight into a buffer of its size, without growing copies.
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size > 0 else { return try readAll(fd, limit: limit, path: path) }
        let size = Int(info.st_size)
        if size > limit { return nil }
        var result = [UInt8](repeating: 0, count: size)
        let count = try result.withUnsafeMutableBytes { try readFull(fd, into: $0, path: path) }
        guard count == size else { return Array(result[..<count]) }
        // The file may have grown since fstat: read the rest the slow way.
        guard let rest = try readAll(fd, limit: limit - size, path: path) else { return nil }
        return rest.isEmpty ? result : result + rest
    }

    /// Reads a descriptor to its end; `nil` when more than `limit` bytes arrive.
    package static func readAll(_ fd: Int32, limit: Int, path: String = "input") throws -> [UInt8]? {
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc_read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw FileError("read", path)
            }
            if count == 0 { return result }
            result += chunk[0..<count]
            if result.count > limit { return nil }
        }
    }

    /// Writes `bytes` to `path` so that readers see either the old file or the whole new one:
    /// a temporary file in the same directory, created with `mode`, written and fsynced, renamed
    /// over `path`, then the directory fsynced. The temporary file is removed on any failure.
    package static func writeAtomically(_ path: String, _ bytes: some Collection<UInt8>, mode: UInt32 = 0o600) throws {
        let directory = parentDirectory(path)
        var template = Array((directory + "/." + baseName(path) + ".tmp-XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw FileError("create temporary file in", directory) }
        let temporary = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var committed = false
        defer {
            if !committed { unlink(temporary) }
        }
        do {
            defer { close(fd) }
            guard fchmod(fd, mode_t(mode)) == 0 else { throw FileError("chmod", temporary) }
            if try bytes.withContiguousStorageIfAvailable({ try writeAll(fd, UnsafeRawBufferPointer($0), path: temporary) }) == nil {
                try writeAll(fd, Array(bytes), path: temporary)
            }
            guard fsync(fd) == 0 else { throw FileError("fsync", temporary) }
        }
        guard rename(temporary, path) == 0 else { throw FileError("rename into", path) }
        committed = true
        try syncDirectory(directory)
    }

    /// Writes every byte, retrying short writes and interruptions.
    package static func writeAll(_ fd: Int32, _ bytes: [UInt8], path: String) throws {
        try bytes.withUnsafeBytes { try writeAll(fd, $0, path: path) }
    }

    /// Writes every byte of a buffer, retrying short writes and interruptions.
    package static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, path: String) throws {
        var offset = 0
        while offset < buffer.count {
            let written = Glibc_write(fd, buffer.baseAddress! + offset, buffer.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                throw FileError("write", path)
            }
            offset += written
        }
    }

    /// Writes pieces in order with as few system calls as writev allows.
    package static func writeAll(_ fd: Int32, _ pieces: [Data], path: String) throws {
        var index = 0
        while index < pieces.count {
            let group = pieces[index..<min(pieces.count, index + 64)]
            index += group.count
            var iovecs: [iovec] = []
            iovecs.reserveCapacity(group.count)
            try withIOVecs(group, &iovecs) { try writeVector(fd, $0, path: path) }
        }
    }

    /// Calls `body` with iovecs for every piece, each pointer valid inside its own
    /// `withUnsafeBytes` scope, which encloses the call.
    private static func withIOVecs(_ pieces: ArraySlice<Data>, _ iovecs: inout [iovec], _ body: ([iovec]) throws -> Void) throws {
        guard let first = pieces.first else { return try body(iovecs) }
        try first.withUnsafeBytes { bytes in
            if bytes.count > 0 { iovecs.append(iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress), iov_len: bytes.count)) }
            try withIOVecs(pieces.dropFirst(), &iovecs, body)
        }
    }

    private static func writeVector(_ fd: Int32, _ vectors: [iovec], path: String) throws {
        var vectors = vectors
        var cursor = 0
        var remaining = vectors.reduce(0) { $0 + $1.iov_len }
        while remaining > 0 {
            let written = vectors[cursor...].withUnsafeBufferPointer { writev(fd, $0.baseAddress, Int32($0.count)) }
            if written < 0 {
                if errno == EINTR { continue }
                throw FileError("write", path)
            }
            remaining -= written
            var advance = written
            while advance > 0 && cursor < vectors.count {
                if advance >= vectors[cursor].iov_len {
                    advance -= vectors[cursor].iov_len
                    cursor += 1
                } else {
                    vectors[cursor].iov_base += advance
                    vectors[cursor].iov_len -= advance
                    advance = 0
                }
            }
        }
    }

    /// fsyncs a directory so a rename in it is durable.
    package static func syncDirectory(_ directory: String) throws {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw FileError("open directory", directory) }
        defer { close(fd) }
        guard fsync(fd) == 0 || errno == EINVAL else { throw FileError("fsync directory", directory) }
    }

    /// Creates `path` and any missing parents with `mode` (0700 by default).
    package static func makeDirectory(_ path: String, mode: UInt32 = 0o700) throws {
        if isDirectory(path) { return }
        let parent = parentDirectory(path)
        if parent != path && !parent.isEmpty && !isDirectory(parent) { try makeDirectory(parent, mode: mode) }
        if mkdir(path, mode_t(mode)) != 0 && errno != EEXIST { throw FileError("create directory", path) }
    }

    /// True when `path` is a directory.
    package static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    /// The owner and permission bits of a path, or nil if it does not exist.
    package static func ownerAndMode(_ path: String) throws -> (owner: UInt32, mode: UInt32)? {
        var info = stat()
        if stat(path, &info) != 0 {
            if errno == ENOENT { return nil }
            throw FileError("stat", path)
        }
        return (UInt32(info.st_uid), UInt32(info.st_mode & 0o7777))
    }

    /// The current process's user id.
    package static var currentUser: UInt32 { UInt32(getuid()) }

    /// The directory part of a path (`.` for a bare name).
    package static func parentDirectory(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        if slash == path.startIndex { return "/" }
        return String(path[..<slash])
    }

    /// The last component of a path.
    package static func baseName(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }
}

/// An advisory lock (flock) on a lock file, held until released or deinitialised.
package final class FileLock: Sendable {
    private let fd: Mutex<Int32>

    /// Takes an exclusive lock on `path` (created 0600 if missing), polling until `timeout`
    /// seconds pass; `nil` when the timeout expires first.
    package static func acquire(_ path: String, timeout: Double, shared: Bool = false) throws -> FileLock? {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw FileError("open lock file", path) }
        let deadline = monotonicSeconds() + timeout
        var pause: UInt32 = 1_000
        while true {
            if flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0 { return FileLock(fd: fd) }
            let failure = errno
            guard failure == EWOULDBLOCK || failure == EINTR else {
                close(fd)
                throw FileError("lock", path, errno: failure)
            }
            if monotonicSeconds() >= deadline {
                close(fd)
                return nil
            }
            usleep(pause)
            pause = min(pause * 2, 50_000)
        }
    }

    private init(fd: Int32) { self.fd = Mutex(fd) }

    /// Releases the lock.
    package func release() {
        fd.withLock { fd in
            guard fd >= 0 else { return }
            flock(fd, LOCK_UN)
            close(fd)
            fd = -1
        }
    }

    deinit { release() }
}

/// Seconds on a monotonic clock, for timeouts.
package func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

#if canImport(Glibc)
private let Glibc_read = Glibc.read
private let Glibc_write = Glibc.write
#elseif canImport(Musl)
private let Glibc_read = Musl.read
private let Glibc_write = Musl.write
#else
private let Glibc_read = Darwin.read
private let Glibc_write = Darwin.write
#endif

/// A file written in pieces that appears at its path only when complete: the bytes go to a
/// temporary file in the same directory, which ``commit()`` fsyncs and renames into place. If the
/// writer is abandoned (an error, a crash), the temporary file is removed (or, after a crash,
/// left under a dot-name and never mistaken for the output).
package final class AtomicFileWriter {
    package let path: String
    private let temporary: String
    /// The temporary file's descriptor, for writers that write to it directly.
    package private(set) var fd: Int32
    private var committed = false

    /// Starts a file that will become `path`, with permission bits `mode`.
    package init(path: String, mode: UInt32 = 0o600) throws {
        self.path = path
        let directory = Files.parentDirectory(path)
        var template = Array((directory + "/." + Files.baseName(path) + ".partial-XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw FileError("create temporary file in", directory) }
        temporary = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard fchmod(fd, mode_t(mode)) == 0 else {
            let failure = FileError("chmod", temporary)
            close(fd)
            unlink(temporary)
            throw failure
        }
        self.fd = fd
    }

    /// Appends bytes.
    package func write(_ bytes: some Collection<UInt8>) throws {
        try Files.writeAll(fd, Array(bytes), path: temporary)
    }

    /// Appends bytes from a buffer.
    package func write(_ buffer: UnsafeRawBufferPointer) throws {
        var offset = 0
        while offset < buffer.count {
            let written = Glibc_write(fd, buffer.baseAddress! + offset, buffer.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                throw FileError("write", temporary)
            }
            offset += written
        }
    }

    /// Makes the file durable and moves it into place.
    package func commit() throws {
        guard !committed else { return }
        guard fsync(fd) == 0 else { throw FileError("fsync", temporary) }
        close(fd)
        fd = -1
        guard rename(temporary, path) == 0 else { throw FileError("rename into", path) }
        committed = true
        try Files.syncDirectory(Files.parentDirectory(path))
    }

    /// Copies the finished temporary file's bytes to a descriptor, then removes it.
    package func copyContents(to output: Int32) throws {
        guard lseek(fd, 0, SEEK_SET) == 0 else { throw FileError("seek", temporary) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc_read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw FileError("read", temporary)
            }
            if count == 0 { break }
            try Files.writeAll(output, Array(buffer[0..<count]), path: "output")
        }
        abort()
    }

    /// Discards the temporary file.
    package func abort() {
        guard !committed else { return }
        if fd >= 0 {
            close(fd)
            fd = -1
        }
        unlink(temporary)
        committed = true
    }

    deinit { abort() }
}

extension Files {
    /// Reads up to `count` bytes, fewer only at the end of the input.
    package static func readFull(_ fd: Int32, count: Int, path: String = "input") throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let read = try bytes.withUnsafeMutableBytes { try readFull(fd, into: $0, path: path) }
        bytes.removeLast(count - read)
        return bytes
    }

    /// Reads up to `count` bytes from the start of a file without moving its offset.
    package static func peek(_ fd: Int32, count: Int, path: String = "input") throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var total = 0
        while total < count {
            let read = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + total, count - total, off_t(total)) }
            if read < 0 {
                if errno == EINTR { continue }
                throw FileError("read", path)
            }
            if read == 0 { break }
            total += read
        }
        bytes.removeLast(count - total)
        return bytes
    }

    /// Reads until `buffer` is full or the input ends; returns the bytes read.
    package static func readFull(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, path: String = "input") throws -> Int {
        var total = 0
        while total < buffer.count {
            let count = Glibc_read(fd, buffer.baseAddress! + total, buffer.count - total)
            if count < 0 {
                if errno == EINTR { continue }
                throw FileError("read", path)
            }
            if count == 0 { break }
            total += count
        }
        return total
    }
}

/// Writes batches to a descriptor on a background thread, in order, with at most `depth`
/// batches in flight, so that the kernel's copying overlaps the caller's work.
package final class PipelinedWriter: Sendable {
    private let fd: Int32
    private let path: String
    private let queue = DispatchQueue(label: "shadow-keys.pipelined-writer")
    private let slots: DispatchSemaphore
    private let failure = Mutex<FileError?>(nil)

    package init(fd: Int32, path: String, depth: Int = 2) {
        self.fd = fd
        self.path = path
        slots = DispatchSemaphore(value: depth)
    }

    /// Queues `bytes` for writing; throws a failure from an earlier batch.
    package func submit(_ bytes: [UInt8]) throws {
        guard !bytes.isEmpty else { return }
        try submit([Data(bytes)])
    }

    /// Queues pieces to be written in order, as one batch.
    package func submit(_ pieces: [Data]) throws {
        if let failure = failure.withLock({ $0 }) { throw failure }
        guard !pieces.isEmpty else { return }
        slots.wait()
        queue.async { [self] in
            defer { slots.signal() }
            guard failure.withLock({ $0 == nil }) else { return }
            do {
                try Files.writeAll(fd, pieces, path: path)
            } catch let error as FileError {
                failure.withLock { $0 = error }
            } catch {
                failure.withLock { $0 = FileError("write", path, errno: EIO) }
            }
        }
    }

    /// Waits for every queued batch; throws the first failure.
    package func drain() throws {
        queue.sync {}
        if let failure = failure.withLock({ $0 }) { throw failure }
    }
}

/// A regular file mapped read-only, for reading large inputs without copying them through
/// read(2). Pages already consumed can be dropped so the mapping never grows the resident set.
package final class MappedInput {
    package let bytes: UnsafeRawBufferPointer
    private let length: Int

    /// Maps `fd` when it is a non-empty regular file; `nil` otherwise (pipes, terminals).
    package init?(fd: Int32) {
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size > 0, lseek(fd, 0, SEEK_CUR) == 0 else { return nil }
        let length = Int(info.st_size)
        guard let base = mmap(nil, length, PROT_READ, MAP_PRIVATE, fd, 0), base != MAP_FAILED else { return nil }
        _ = madvise(base, length, MADV_SEQUENTIAL)
        self.length = length
        bytes = UnsafeRawBufferPointer(start: base, count: length)
    }

    /// Drops the pages of `range` (rounded inward to whole pages) from the resident set.
    package func release(_ range: Range<Int>) {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let start = (range.lowerBound + page - 1) / page * page
        let end = range.upperBound / page * page
        guard end > start, let base = bytes.baseAddress else { return }
        _ = madvise(UnsafeMutableRawPointer(mutating: base + start), end - start, MADV_DONTNEED)
    }

    deinit {
        if let base = bytes.baseAddress { munmap(UnsafeMutableRawPointer(mutating: base), length) }
    }
}
