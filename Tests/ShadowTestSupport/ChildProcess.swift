public import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process started with posix_spawn: stdin from bytes, stdout and stderr captured, and a
/// `kill` for crash tests. Foundation's `Process` polls for exit every 50 ms on Linux, which adds
/// up over the hundreds of runs the CLI tests make.
public final class ChildProcess: @unchecked Sendable {
    public let pid: pid_t
    private let group = DispatchGroup()
    private var out = Data()
    private var err = Data()

    /// Starts `executable` with `arguments`; the environment is this process's plus
    /// `environment`, without the variables named in `removing`.
    public init(
        _ executable: String, _ arguments: [String], stdin: Data? = nil, environment: [String: String] = [:],
        removing: Set<String> = [],
        currentDirectory: String? = nil
    ) throws {
        _ = Self.ignoreBrokenPipes
        var input: [Int32] = [0, 0], output: [Int32] = [0, 0], errors: [Int32] = [0, 0]
        guard pipe(&input) == 0, pipe(&output) == 0, pipe(&errors) == 0 else { throw CLIRunnerError("pipe failed") }
        for fd in input + output + errors { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        #if os(Linux)
        var actions = posix_spawn_file_actions_t()
        #else
        var actions: posix_spawn_file_actions_t?
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, input[0], 0)
        posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errors[1], 2)
        // Nothing else this process has open (sockets to a test's servers, above all) reaches the
        // child, or a daemon it starts, such as a restarted PostgreSQL.
        if let closeFrom = Self.addCloseFrom { _ = closeFrom(&actions, 3) }
        if let currentDirectory {
            guard let addChdir = Self.addChdir, addChdir(&actions, currentDirectory) == 0 else {
                throw CLIRunnerError("cannot set the child's directory")
            }
        }

        var merged = ProcessInfo.processInfo.environment
        for (key, value) in environment { merged[key] = value }
        for key in removing { merged[key] = nil }
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        var spawned = CleanSpawn.spawn(&pid, executable, &actions, argv, envp)
        // A just-written executable is "busy" while a child that another thread is spawning still
        // holds the writer's descriptor between its fork and its exec: wait that out.
        for _ in 0..<100 where spawned == ETXTBSY {
            usleep(20_000)
            spawned = CleanSpawn.spawn(&pid, executable, &actions, argv, envp)
        }
        close(input[0])
        close(output[1])
        close(errors[1])
        guard spawned == 0 else {
            for fd in [input[1], output[0], errors[0]] { close(fd) }
            throw CLIRunnerError("cannot start \(executable): \(String(cString: strerror(spawned)))")
        }
        self.pid = pid

        // Peak memory is sampled from /proc (VmHWM, a high-water mark) while the child runs:
        // wait4's ru_maxrss would report this process's size, which posix_spawn's shared-memory
        // start passes on to the child. Every 10 ms for the first two seconds, then every 50 ms.
        let sampled = peakMemory, child = pid
        Thread.detachNewThread {
            var samples = 0
            while let peak = Self.highWaterMark(child) {
                sampled.value.withLock { $0 = max($0, peak) }
                samples += 1
                usleep(samples < 200 ? 10_000 : 50_000)
            }
        }

        // The pipes are drained and fed on threads of their own: a blocking read on Dispatch's
        // global queue holds one of its few threads for as long as the child runs (a server for
        // minutes), and the reads of every other child then wait for a thread.
        let stdinFD = input[1], stdoutFD = output[0], stderrFD = errors[0]
        group.enter()
        Thread.detachNewThread {
            self.out = Self.drain(stdoutFD)
            self.group.leave()
        }
        group.enter()
        Thread.detachNewThread {
            self.err = Self.drain(stderrFD)
            self.group.leave()
        }
        Thread.detachNewThread {
            if let stdin {
                stdin.withUnsafeBytes { buffer in
                    var offset = 0
                    while offset < buffer.count {
                        let written = write(stdinFD, buffer.baseAddress! + offset, buffer.count - offset)
                        if written < 0 && errno == EINTR { continue }
                        if written <= 0 { break }
                        offset += written
                    }
                }
            }
            close(stdinFD)
        }
    }

    private final class Peak: Sendable { let value = Mutex(0) }
    private let peakMemory = Peak()

    /// VmHWM of a running process, in KiB; nil once it has exited (or where /proc has no such field).
    private static func highWaterMark(_ pid: pid_t) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
        else { return nil }
        return Int(line.dropFirst(6).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "")
    }

    /// A child killed before it read its stdin must not take the test process down with SIGPIPE.
    private static let ignoreBrokenPipes: Void = { signal(SIGPIPE, SIG_IGN) }()

    #if os(Linux)
    private typealias AddChdir =
        @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
    #else
    private typealias AddChdir =
        @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t?>, UnsafePointer<CChar>) -> Int32
    #endif

    /// `posix_spawn_file_actions_addchdir_np` (glibc 2.29, macOS 10.15), which the C module maps do not export.
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<CleanSpawn.FileActions>, Int32) -> Int32
    private static let addCloseFrom: AddCloseFrom? = {
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "posix_spawn_file_actions_addclosefrom_np")
        else { return nil }
        return unsafeBitCast(symbol, to: AddCloseFrom.self)
    }()

    private static let addChdir: AddChdir? = {
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "posix_spawn_file_actions_addchdir_np")
        else { return nil }
        return unsafeBitCast(symbol, to: AddChdir.self)
    }()

    private static func drain(_ fd: Int32) -> Data {
        defer { close(fd) }
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return data }
            data.append(contentsOf: chunk[0..<count])
        }
    }

    /// True once the child has exited (its output streams closed).
    public var hasExited: Bool { group.wait(timeout: .now()) == .success }

    /// Sends `signal` to the child.
    public func kill(_ signal: Int32 = SIGKILL) {
        #if canImport(Glibc)
        _ = Glibc.kill(pid, signal)
        #else
        _ = Darwin.kill(pid, signal)
        #endif
    }

    /// Waits for the child to exit, or kills it after `timeout` seconds; the exit status is
    /// 128 + signal for a killed child, as a shell reports it.
    public func wait(timeout: TimeInterval = 60) throws -> CLIResult {
        let timedOut = group.wait(timeout: .now() + timeout) == .timedOut
        if timedOut { kill() }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        if timedOut { throw CLIRunnerError("the child did not finish within \(timeout) s") }
        // The pipes can outlive the child when it left a process of its own holding them.
        guard group.wait(timeout: .now() + 10) == .success else {
            throw CLIRunnerError("the child's output stayed open after it exited")
        }
        let exit = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        return CLIResult(
            status: exit, stdout: String(decoding: out, as: UTF8.self), stderr: String(decoding: err, as: UTF8.self),
            peakMemoryKiB: peakMemory.value.withLock { $0 })
    }
}

/// posix_spawn with a clean signal state: the child starts with no signal blocked and every signal
/// at its default action, whatever this process (or the spawning thread) has blocked or ignored.
/// A child that inherited a blocked SIGTERM would never stop when told to.
public enum CleanSpawn {
    #if os(Linux)
    public typealias FileActions = posix_spawn_file_actions_t
    #else
    public typealias FileActions = posix_spawn_file_actions_t?
    #endif

    /// posix_spawn's result: 0, or the error number.
    public static func spawn(
        _ pid: inout pid_t, _ path: String, _ actions: inout FileActions, _ argv: [UnsafeMutablePointer<CChar>?],
        _ envp: [UnsafeMutablePointer<CChar>?]
    ) -> Int32 {
        #if os(Linux)
        var attributes = posix_spawnattr_t()
        #else
        var attributes: posix_spawnattr_t?
        #endif
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t(), allSignals = sigset_t()
        sigemptyset(&noSignals)
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        return posix_spawn(&pid, path, &actions, &attributes, argv, envp)
    }
}
