#if canImport(Darwin)
import Darwin
package import Foundation
#else
import Glibc
package import FoundationEssentials
#endif
import Dispatch
import Synchronization

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
