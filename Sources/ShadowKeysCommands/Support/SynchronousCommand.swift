/// A command that, for some command lines, does nothing that waits: no network, no database, no
/// lock held by another task. `shadow-keys` then runs it on the main thread and exits without
/// starting the concurrency runtime's worker threads (Docs/cli.md, "Start-up").
protocol SynchronousCommand {
    /// Runs the command on the calling thread and returns true; or, when this command line needs
    /// to wait for something, does nothing and returns false.
    func runIfSynchronous() throws -> Bool
}
