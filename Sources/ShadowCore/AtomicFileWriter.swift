#if canImport(Darwin)
import Darwin
#else
import Glibc
#endif

/// A file written in pieces that appears at its path only when complete.
///
/// On Linux the bytes go to an unnamed file (`O_TMPFILE`) in the destination's folder: until
/// ``commit()`` links it under a temporary name and renames it into place, it has no name at all,
/// so an error, a crash or a `SIGKILL` leaves nothing behind (the kernel frees it). Where the
/// file system cannot make unnamed files (and on other systems) a dot-named temporary file from
/// `mkstemp` is used instead, removed on any failure.
///
/// A path that names an existing device, FIFO or socket (`/dev/null`, `/dev/stdout`, a named
/// pipe) is written to directly: a file renamed over it would replace the device itself.
package final class AtomicFileWriter {
    package let path: String
    /// The staging file's name, when it has one (the fallback), for error messages and cleanup.
    private var temporary: String?
    /// The staging file's descriptor, for writers that write to it directly.
    package private(set) var fd: Int32
    private var finished = false
    /// True when writing straight to an existing device, FIFO or socket.
    private var direct = false

    /// Starts a file that will become `path`, with permission bits `mode`. With `exclusive`, an
    /// existing path of any kind is refused here, before a byte is written (EEXIST).
    package init(path: String, mode: UInt32 = 0o600, exclusive: Bool = false) throws {
        self.path = path
        var info = stat()
        if stat(path, &info) == 0 {
            if exclusive { throw FileError("create", path, errno: EEXIST) }
            switch info.st_mode & S_IFMT {
            case S_IFDIR: throw FileError("write", path, errno: EISDIR)
            case S_IFCHR, S_IFIFO, S_IFSOCK:
                let device = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY)
                guard device >= 0 else { throw FileError("open", path) }
                fd = device
                direct = true
                return
            default: break
            }
        }
        let directory = Files.parentDirectory(path)
        #if os(Linux)
        let unnamed = open(directory, Self.unnamedFileFlags | O_RDWR | O_CLOEXEC, mode_t(mode))
        if unnamed >= 0 {
            // The mode passed to open is filtered by the umask; fchmod sets it exactly.
            guard fchmod(unnamed, mode_t(mode)) == 0 else {
                let failure = FileError("chmod a staging file in", directory)
                close(unnamed)
                throw failure
            }
            fd = unnamed
            temporary = nil
            return
        }
        #endif
        let (named, name) = try Self.makeTemporary(in: directory, for: path, suffix: ".partial-")
        guard fchmod(named, mode_t(mode)) == 0 else {
            let failure = FileError("chmod", name)
            close(named)
            unlink(name)
            throw failure
        }
        fd = named
        temporary = name
    }

    #if os(Linux)
    /// `O_TMPFILE` (`__O_TMPFILE | O_DIRECTORY`), which the Glibc module does not export.
    private static let unnamedFileFlags: Int32 = 0o20_000_000 | O_DIRECTORY
    #endif

    /// A new file named `.<name><suffix>XXXXXX` beside `path`, from mkstemp.
    private static func makeTemporary(in directory: String, for path: String, suffix: String) throws -> (Int32, String)
    {
        var template = Array((directory + "/." + Files.baseName(path) + suffix + "XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { $0.baseAddress.map { mkstemp($0) } ?? -1 }
        guard fd >= 0 else { throw FileError("create temporary file in", directory) }
        return (fd, String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    /// Where errors say the bytes were going.
    private var stagingName: String { direct ? path : temporary ?? "a staging file for \(path)" }

    /// Appends bytes.
    package func write(_ bytes: some Collection<UInt8>) throws {
        try Files.writeAll(fd, Array(bytes), path: stagingName)
    }

    /// Appends bytes from a buffer.
    package func write(_ buffer: UnsafeRawBufferPointer) throws {
        try Files.writeAll(fd, buffer, path: stagingName)
    }

    /// Makes the file durable and moves it into place. With `replacing` false, an existing
    /// file at the path is left alone and the commit fails with EEXIST (the staging file is discarded).
    package func commit(replacing: Bool = true) throws {
        guard !finished else { return }
        if direct {
            guard replacing else { throw FileError("create", path, errno: EEXIST) }
            close(fd)
            fd = -1
            finished = true
            return
        }
        guard fsync(fd) == 0 else { throw FileError("fsync", stagingName) }
        let directory = Files.parentDirectory(path)
        if !replacing {
            // link (or linkat for the unnamed file) never replaces an existing name.
            let linked =
                temporary.map { link($0, path) }
                ?? linkat(AT_FDCWD, "/proc/self/fd/\(fd)", AT_FDCWD, path, AT_SYMLINK_FOLLOW)
            guard linked == 0 else {
                let error = FileError("create", path)
                abort()
                throw error
            }
            if let temporary { unlink(temporary) }
            close(fd)
            fd = -1
            finished = true
            try Files.syncDirectory(directory)
            return
        }
        if temporary == nil {
            // Give the unnamed file a temporary name, then rename that over the destination:
            // linkat cannot replace an existing file, rename can.
            var linked: String?
            for _ in 0..<16 {
                let candidate = directory + "/." + Files.baseName(path) + ".tmp-" + Self.randomSuffix()
                if linkat(AT_FDCWD, "/proc/self/fd/\(fd)", AT_FDCWD, candidate, AT_SYMLINK_FOLLOW) == 0 {
                    linked = candidate
                    break
                }
                guard errno == EEXIST else { throw FileError("link a staging file into", directory) }
            }
            guard let linked else { throw FileError("link a staging file into", directory, errno: EEXIST) }
            temporary = linked
        }
        close(fd)
        fd = -1
        guard let name = temporary, rename(name, path) == 0 else { throw FileError("rename into", path) }
        finished = true
        try Files.syncDirectory(directory)
    }

    private static func randomSuffix() -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        var generator = SystemRandomNumberGenerator()
        return String((0..<12).map { _ in alphabet[Int(generator.next(upperBound: UInt64(alphabet.count)))] })
    }

    /// Copies the finished staging file's bytes to a descriptor, then discards it.
    package func copyContents(to output: Int32) throws {
        guard !direct, lseek(fd, 0, SEEK_SET) == 0 else { throw FileError("seek", stagingName) }
        var reader = InputReader(fd: fd, name: stagingName)
        try reader.copyAll(to: output, path: "output")
        abort()
    }

    /// Discards the staging file.
    package func abort() {
        guard !finished else { return }
        if fd >= 0 {
            close(fd)
            fd = -1
        }
        if let temporary { unlink(temporary) }
        finished = true
    }

    deinit { abort() }
}
