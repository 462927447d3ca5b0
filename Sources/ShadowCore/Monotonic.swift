#if canImport(Darwin)
import Darwin
#else
import Glibc
#endif

/// Seconds on a monotonic clock, for timeouts.
package func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

extension Duration {
    /// This duration in seconds, for arithmetic with `Date`s and deadlines.
    package var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
