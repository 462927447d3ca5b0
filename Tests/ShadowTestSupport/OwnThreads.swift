#if canImport(Testing)
public import Testing
import Foundation
import Synchronization

/// Runs every test of a suite, synchronous or not, on threads of its own instead of Swift's
/// cooperative pool, and no more such tests at once than the machine can run side by side.
///
/// A test that starts a process and waits for it (`CLIRunner.run`, a killed writer, a server
/// brought up and down, `createdb`) blocks the thread it runs on for the whole wait. On the
/// cooperative pool, which has one thread per core, two such tests on a two-core machine stall
/// every async test beside them (a transport waiting for its body, a PostgreSQL connect) until
/// one finishes; queued one after another they starve them for minutes. Under this trait the
/// test's jobs run on a new thread each (through a task executor preference, SE-0417), so a
/// blocking wait costs a thread, never the pool.
///
/// Threads of their own would let every such test run at once: a hundred processes on two
/// cores, where a command that takes milliseconds misses a 60 s deadline. So each test first
/// takes slots from ``TestSlots/shared`` (twice the cores): one, or all of them for a test that
/// loads the machine by itself (``alone``), which then runs with no other such test beside it.
public struct OwnThreadsTrait: SuiteTrait, TestTrait, TestScoping {
    /// Slots taken: 1, or ``TestSlots/width`` for a test that must run alone.
    let weight: Int

    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await withTaskExecutorPreference(ThreadPerJobExecutor.shared) {
            // A suite's scope takes no slot: its tests take theirs. A test under both its suite's
            // trait and its own takes the larger weight once, in the outermost scope.
            guard testCase != nil else { return try await function() }
            let wanted = test.traits.compactMap { ($0 as? OwnThreadsTrait)?.weight }.max() ?? weight
            let held = TestSlots.held
            guard held < wanted else { return try await function() }
            let taken = await TestSlots.shared.acquire(wanted - held)
            defer { TestSlots.shared.release(taken) }
            try await TestSlots.$held.withValue(wanted) { try await function() }
        }
    }
}

extension Trait where Self == OwnThreadsTrait {
    /// See ``OwnThreadsTrait``: for suites whose tests start processes and wait for them.
    public static var ownThreads: Self { OwnThreadsTrait(weight: 1) }

    /// For a test that loads the machine by itself (several servers under a load generator, a
    /// thousand clients): it runs on threads of its own with no other process-starting test beside it.
    public static var alone: Self { OwnThreadsTrait(weight: TestSlots.width) }
}

/// A counting semaphore for tests that start processes, first come first served, so a test
/// waiting for every slot is not overtaken forever.
public final class TestSlots: Sendable {
    /// Twice the cores (at least 4): a test that starts a process mostly waits for it.
    public static let width = max(2, ProcessInfo.processInfo.activeProcessorCount) * 2
    public static let shared = TestSlots()

    /// How many slots the running test holds (so a nested scope takes none again).
    @TaskLocal static var held = 0

    private struct State {
        var used = 0
        var waiting: [(weight: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }
    private let state = Mutex(State())

    /// Takes `weight` slots (at most ``width``), waiting for them without holding a thread.
    /// Returns how many were taken.
    func acquire(_ weight: Int) async -> Int {
        let weight = min(weight, Self.width)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.waiting.isEmpty, state.used + weight <= Self.width {
                    state.used += weight
                    return true
                }
                state.waiting.append((weight, continuation))
                return false
            }
            if now { continuation.resume() }
        }
        return weight
    }

    func release(_ weight: Int) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.used -= weight
            var ready: [CheckedContinuation<Void, Never>] = []
            while let first = state.waiting.first, state.used + first.weight <= Self.width {
                state.waiting.removeFirst()
                state.used += first.weight
                ready.append(first.continuation)
            }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }
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
