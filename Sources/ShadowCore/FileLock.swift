#if canImport(Darwin)
import Darwin
#else
import Glibc
#endif
import Synchronization

/// An advisory lock (flock) on a lock file, held until released or deinitialised.
package final class FileLock: Sendable {
    private let fd: Mutex<Int32>

    /// Takes an exclusive lock on `path` (created 0600 if missing), polling until `timeout`
    /// seconds pass; `nil` when the timeout expires first.
    /// A symbolic link at `path` is refused (ELOOP) rather than followed, so a planted link cannot
    /// make the lock create or open a file elsewhere.
    package static func acquire(_ path: String, timeout: Double, shared: Bool = false) throws -> FileLock? {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
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
