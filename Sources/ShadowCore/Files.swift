#if canImport(Darwin)
import Darwin
package import Foundation
#else
import Glibc
package import FoundationEssentials
#endif

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
    /// True when the path already existed.
    package var alreadyExists: Bool { code == EEXIST }
}

/// File operations with the guarantees secrets need: atomic replacement, owner-only modes,
/// durable writes, and advisory locks with a timeout.
package enum Files {
    /// Reads a whole file; `nil` when it is larger than `limit`. With `followSymlinks: false` a
    /// symbolic link at `path` is refused (ELOOP), for files only this program writes.
    package static func read(_ path: String, limit: Int, followSymlinks: Bool = true) throws -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | (followSymlinks ? 0 : O_NOFOLLOW))
        guard fd >= 0 else { throw FileError("open", path) }
        defer { close(fd) }
        // A regular file is read straight into a buffer of its size, without growing copies.
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size > 0 else {
            return try readAll(fd, limit: limit, path: path)
        }
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
            let count = chunk.withUnsafeMutableBytes { systemRead(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw FileError("read", path)
            }
            if count == 0 { return result }
            result += chunk[0..<count]
            if result.count > limit { return nil }
        }
    }

    /// Writes `bytes` to `path` so that readers see either the old file or the whole new one
    /// (``AtomicFileWriter``: a staging file in the same directory with `mode`, written, fsynced
    /// and renamed over `path`, then the directory fsynced; nothing left behind on failure).
    package static func writeAtomically(_ path: String, _ bytes: some Collection<UInt8>, mode: UInt32 = 0o600) throws {
        let writer = try AtomicFileWriter(path: path, mode: mode)
        try writer.write(bytes)
        try writer.commit()
    }

    /// Writes every byte, retrying short writes and interruptions.
    package static func writeAll(_ fd: Int32, _ bytes: [UInt8], path: String) throws {
        try bytes.withUnsafeBytes { try writeAll(fd, $0, path: path) }
    }

    /// Writes every byte of a buffer, retrying short writes and interruptions.
    package static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, path: String) throws {
        var offset = 0
        while offset < buffer.count {
            guard let base = buffer.baseAddress else { return }
            let written = systemWrite(fd, base + offset, buffer.count - offset)
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
    private static func withIOVecs(
        _ pieces: ArraySlice<Data>, _ iovecs: inout [iovec], _ body: ([iovec]) throws -> Void
    ) throws {
        guard let first = pieces.first else { return try body(iovecs) }
        try first.withUnsafeBytes { bytes in
            if bytes.count > 0 {
                iovecs.append(
                    iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress), iov_len: bytes.count))
            }
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

    /// Why `path` is not a folder only this user controls, or nil when it is: it must be a real
    /// directory (not a symbolic link), owned by the current user, and not writable by group or
    /// others. A missing folder is no problem (it will be created 0700).
    ///
    /// With `asParent`, `path` holds such a folder rather than files: then it may be any user's,
    /// and writable by others if its sticky bit is set (as `/tmp` is), since others can then
    /// neither remove nor rename what this user keeps in it.
    package static func privateDirectoryProblem(_ path: String, asParent: Bool = false) -> String? {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            return errno == ENOENT ? nil : "cannot inspect the folder \(path): \(String(cString: strerror(errno)))"
        }
        if (info.st_mode & S_IFMT) != S_IFDIR { return "\(path) is not a directory (a symbolic link or another file)" }
        let owner = UInt32(info.st_uid)
        let mode = UInt32(info.st_mode & 0o7777)
        if asParent {
            if owner != currentUser && owner != 0 {
                return "the folder \(path) belongs to user \(owner), neither this user nor root"
            }
            if mode & 0o022 != 0 && mode & 0o1000 == 0 {
                return
                    """
                    the folder \(path) is writable by group or others (mode \(String(mode, radix: 8))) without the \
                    sticky bit
                    """
            }
            return nil
        }
        if owner != currentUser {
            return "the folder \(path) belongs to user \(owner), not to this user (\(currentUser))"
        }
        if mode & 0o022 != 0 {
            return "the folder \(path) is writable by group or others (mode \(String(mode, radix: 8)))"
        }
        return nil
    }

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
            let read = bytes.withUnsafeMutableBytes { buffer in
                buffer.baseAddress.map { pread(fd, $0 + total, count - total, off_t(total)) } ?? 0
            }
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
    package static func readFull(
        _ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, path: String = "input"
    ) throws -> Int {
        var total = 0
        while total < buffer.count {
            guard let base = buffer.baseAddress else { return total }
            let count = systemRead(fd, base + total, buffer.count - total)
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

#if canImport(Glibc)
package let systemRead = Glibc.read
package let systemWrite = Glibc.write
#elseif canImport(Musl)
package let systemRead = Musl.read
package let systemWrite = Musl.write
#else
package let systemRead = Darwin.read
package let systemWrite = Darwin.write
#endif

/// open(2) with a mode, through the platform's C library (a method named `open` or `close`
/// shadows the free function, so callers name the library; this names it once for all).
package func systemOpen(_ path: String, _ flags: Int32, _ mode: UInt16) -> Int32 {
    #if canImport(Glibc)
    Glibc.open(path, flags, mode_t(mode))
    #elseif canImport(Musl)
    Musl.open(path, flags, mode_t(mode))
    #else
    Darwin.open(path, flags, mode_t(mode))
    #endif
}

/// close(2), through the platform's C library.
@discardableResult
package func systemClose(_ fd: Int32) -> Int32 {
    #if canImport(Glibc)
    Glibc.close(fd)
    #elseif canImport(Musl)
    Musl.close(fd)
    #else
    Darwin.close(fd)
    #endif
}
