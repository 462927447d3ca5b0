import Dispatch

/// Runs blocking file work on a Dispatch thread, keeping Swift's cooperative pool free.
package func runBlocking<R: Sendable>(_ work: @escaping @Sendable () throws -> R) async throws -> R {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
    }
}
