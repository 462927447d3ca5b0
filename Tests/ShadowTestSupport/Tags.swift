// Swift Testing is there for test targets only; the benchmarks also link this module.
#if canImport(Testing)
public import Testing

extension Tag {
    /// Tests that start other processes: the CLI binary, servers, killed writers. Run alone with
    /// `swift test --filter MultiProcess` (their suites' names say so) or skip with `--skip`.
    @Tag public static var multiProcess: Self
    /// Long loops under load or fault injection: killed writers, concurrent writers, crash loops.
    /// Run alone with `swift test --filter Stress`.
    @Tag public static var stress: Self
}
#endif
