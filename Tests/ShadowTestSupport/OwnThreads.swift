#if canImport(Testing)
public import Testing
import Foundation

/// Runs every test of a suite, synchronous or not, on threads of its own instead of Swift's
/// cooperative pool.
///
/// A test that starts a process and waits for it (`CLIRunner.run`, a killed writer, a server
/// brought up and down) blocks the thread it runs on for the whole wait. On the cooperative
/// pool, which has one thread per core, two such tests on a two-core machine stall every async
/// test beside them (a transport waiting for its body, a PostgreSQL connect) until one
/// finishes; queued one after another they starve them for minutes. Under this trait the
/// test's jobs run on a new thread each (through a task executor preference, SE-0417), so
/// a blocking wait costs a thread, never the pool.
public struct OwnThreadsTrait: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await withTaskExecutorPreference(ThreadPerJobExecutor.shared) { try await function() }
    }
}

extension Trait where Self == OwnThreadsTrait {
    /// See ``OwnThreadsTrait``: for suites whose tests start processes and wait for them.
    public static var ownThreads: Self { OwnThreadsTrait() }
}

/// A task executor that runs each job on a thread started for it. Jobs of a test body are few
/// (a synchronous test is one), so a thread each costs little and never waits for another.
final class ThreadPerJobExecutor: TaskExecutor {
    static let shared = ThreadPerJobExecutor()

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        let thread = Thread { job.runSynchronously(on: executor) }
        thread.stackSize = 8 << 20
        thread.start()
    }
}
#endif
