public import Foundation

/// What a run of the `shadow-keys` binary printed and how it exited.
public struct CLIResult: Sendable {
    public let status: Int32
    public let stdout: String
    public let stderr: String
    /// The child's peak resident memory (VmHWM, sampled every 10 ms while it ran), in KiB; 0 where
    /// /proc does not tell.
    public let peakMemoryKiB: Int

    public init(status: Int32, stdout: String, stderr: String, peakMemoryKiB: Int = 0) {
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
        self.peakMemoryKiB = peakMemoryKiB
    }

    /// stdout parsed as one JSON object.
    public func json() throws -> [String: Any] {
        guard let object = try JSONSerialization.jsonObject(with: Data(stdout.utf8)) as? [String: Any] else {
            throw CLIRunnerError("stdout is not a JSON object: \(stdout)")
        }
        return object
    }
}

public struct CLIRunnerError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Runs the built `shadow-keys` executable, as a script would.
public enum CLIRunner {
    /// `shadow-keys`, next to the test bundle (`.build/<config>/shadow-keys`), or `$SHADOW_KEYS_BIN`.
    public static let executable: URL = built("shadow-keys", override: "SHADOW_KEYS_BIN")

    /// `shadow-keys-server` (serve, PostgreSQL stores), or `$SHADOW_KEYS_SERVER_BIN`.
    public static let serverExecutable: URL = built("shadow-keys-server", override: "SHADOW_KEYS_SERVER_BIN")

    /// The built executable `name`, looked for beside the running test bundle.
    private static func built(_ name: String, override: String) -> URL {
        if let path = ProcessInfo.processInfo.environment[override] { return URL(fileURLWithPath: path) }
        let runner = URL(
            fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                ?? CommandLine.arguments[0])
        var directory = runner.deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return PackagePaths.root.appendingPathComponent(".build/debug/\(name)")
    }

    /// Runs `shadow-keys-server` with `arguments`, as
    /// ``run(_:stdin:environment:removing:currentDirectory:timeout:)`` runs `shadow-keys`.
    public static func runServer(
        _ arguments: [String], stdin: String? = nil, environment: [String: String] = [:], removing: Set<String> = [],
        timeout: TimeInterval = 60
    ) throws -> CLIResult {
        try run(
            executable: serverExecutable, arguments, stdin: stdin.map { Data($0.utf8) }, environment: environment,
            removing: removing, timeout: timeout)
    }

    /// Runs `shadow-keys` with `arguments`, feeding `stdin`, with extra environment variables.
    public static func run(
        _ arguments: [String], stdin: String? = nil, environment: [String: String] = [:], removing: Set<String> = [],
        currentDirectory: URL? = nil,
        timeout: TimeInterval = 60
    ) throws -> CLIResult {
        try run(
            executable: executable, arguments, stdin: stdin.map { Data($0.utf8) }, environment: environment,
            removing: removing, currentDirectory: currentDirectory,
            timeout: timeout)
    }

    /// Runs any executable, reading stdout and stderr concurrently so neither pipe can fill up.
    public static func run(
        executable: URL, _ arguments: [String], stdin: Data?, environment: [String: String] = [:],
        removing: Set<String> = [], currentDirectory: URL? = nil,
        timeout: TimeInterval = 60
    ) throws -> CLIResult {
        let child = try ChildProcess(
            executable.path, arguments, stdin: stdin, environment: environment, removing: removing,
            currentDirectory: currentDirectory?.path)
        do { return try child.wait(timeout: timeout) } catch {
            throw CLIRunnerError(
                "\(executable.lastPathComponent) \(arguments.joined(separator: " ")) did not finish within \(timeout) s"
            )
        }
    }
}
