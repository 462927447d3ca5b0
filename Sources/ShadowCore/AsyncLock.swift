import Synchronization

/// A first-come, first-served lock for async code: one holder at a time, waiters suspended (not
/// blocking a thread) in arrival order. Taking a free lock does not suspend.
package final class AsyncLock: Sendable {
    private struct State {
        var held = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    package init() {}

    package func withLock<R: Sendable>(_ body: @Sendable () async throws -> R) async throws -> R {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        let free = state.withLock { state in
            guard state.held else {
                state.held = true
                return true
            }
            return false
        }
        if free { return }
        await withCheckedContinuation { continuation in
            // The holder may have released in between: then take the lock at once.
            let resumeNow = state.withLock { state in
                guard state.held else {
                    state.held = true
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    private func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.waiters.isEmpty else {
                state.held = false
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}
