/// A first-come, first-served lock for async code: one holder at a time, waiters suspended (not
/// blocking a thread) in arrival order.
package actor AsyncLock {
    private var held = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    package init() {}

    package func withLock<R: Sendable>(_ body: @Sendable () async throws -> R) async throws -> R {
        await acquire()
        do {
            let result = try await body()
            release()
            return result
        } catch {
            release()
            throw error
        }
    }

    private func acquire() async {
        guard held else {
            held = true
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    private func release() {
        if waiters.isEmpty {
            held = false
        } else {
            waiters.removeFirst().resume()
        }
    }
}
