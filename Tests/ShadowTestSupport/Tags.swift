// Swift Testing is there for test targets only; the benchmarks also link this module.
#if canImport(Testing)
public import Testing
import Foundation

extension Tag {
    /// Tests that start other processes: the CLI binary, servers, killed writers. Run alone with
    /// `swift test --filter MultiProcess` (their suites' names say so) or skip with `--skip`.
    @Tag public static var multiProcess: Self
    /// Long loops under load or fault injection: killed writers, concurrent writers, crash loops.
    /// Run alone with `swift test --filter Stress`.
    @Tag public static var stress: Self
    /// Tests that need the throwaway PostgreSQL server. `SHADOW_KEYS_SKIP_POSTGRES=1 swift test`
    /// leaves them out (a quick run); CI runs them.
    @Tag public static var postgres: Self
}

/// False under `SHADOW_KEYS_SKIP_POSTGRES=1`: the tests that need PostgreSQL are then left out.
public let postgresWanted: Bool = ProcessInfo.processInfo.environment["SHADOW_KEYS_SKIP_POSTGRES"] != "1"
#endif
