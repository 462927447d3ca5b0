import Foundation
import ShadowTestSupport

/// One row of the results table: throughput of ours, the raw primitive, and a peer, in ops/s.
struct BenchRow {
    let name: String
    let unit: String
    let ours: Double
    let raw: Double?
    let peer: Double?
    let peerName: String?
    let note: String
    /// Medians of the per-round ratios ours/raw and ours/peer, when measured in paired rounds.
    var pairedRatios: (raw: Double?, peer: Double?) = (nil, nil)

    init(name: String, unit: String, ours: Double, raw: Double?, peer: Double?, peerName: String?, note: String) {
        self.name = name
        self.unit = unit
        self.ours = ours
        self.raw = raw
        self.peer = peer
        self.peerName = peerName
        self.note = note
    }

    /// A row from interleaved samples of [ours, raw, peer?].
    init(name: String, samples: Samples, peerName: String?, note: String) {
        self.init(
            name: name, unit: "ops/s", ours: samples.median(0), raw: samples.median(1),
            peer: samples.count > 2 ? samples.median(2) : nil, peerName: peerName, note: note)
        pairedRatios = (samples.pairedRatio(0, 1), samples.count > 2 ? samples.pairedRatio(0, 2) : nil)
    }

    var json: [String: Any] {
        [
            "name": name, "ours": ours, "raw": raw as Any, "peer": peer as Any, "peer_name": peerName as Any,
            "unit": unit, "note": note,
            "ours_over_raw": pairedRatios.raw ?? raw.map { ours / $0 } as Any,
            "ours_over_peer": pairedRatios.peer ?? peer.map { ours / $0 } as Any,
        ]
    }
}

/// Throughput samples per contender, taken in interleaved rounds (sample k of each contender
/// comes from the same round).
struct Samples {
    let values: [[Double]]
    var count: Int { values.count }
    func median(_ contender: Int) -> Double { Harness.median(values[contender]) }
    /// Median over rounds of contender a's throughput divided by b's in the same round.
    func pairedRatio(_ a: Int, _ b: Int) -> Double { Harness.median(zip(values[a], values[b]).map { $0 / $1 }) }
}

/// Measures throughput as the median of several timed samples. Contenders are sampled in
/// interleaved rounds so that machine noise hits each of them alike.
enum Harness {
    static let samples = 31
    static let sampleSeconds = 0.05

    /// ops/s medians for each contender, in the order given.
    static func compare(_ contenders: [() throws -> Void]) throws -> [Double] {
        let samples = try sample(contenders)
        return (0..<samples.count).map(samples.median)
    }

    /// Interleaved samples for each contender.
    static func sample(_ contenders: [() throws -> Void]) throws -> Samples {
        let iterations = try contenders.map { try calibrate($0) }
        var results = Array(repeating: [Double](), count: contenders.count)
        for _ in 0..<samples {
            for (index, body) in contenders.enumerated() {
                let n = iterations[index]
                let start = DispatchTime.now().uptimeNanoseconds
                for _ in 0..<n { try body() }
                let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
                results[index].append(Double(n) / elapsed)
            }
        }
        return Samples(values: results)
    }

    /// The async variant, for peers whose API is async.
    static func sampleAsync(_ contenders: [() async throws -> Void]) async throws -> Samples {
        var iterations: [Int] = []
        for body in contenders {
            var n = 1
            while true {
                let start = DispatchTime.now().uptimeNanoseconds
                for _ in 0..<n { try await body() }
                let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
                if elapsed > sampleSeconds / 4 {
                    iterations.append(max(1, Int(Double(n) * sampleSeconds / elapsed)))
                    break
                }
                n *= 2
            }
        }
        var results = Array(repeating: [Double](), count: contenders.count)
        for _ in 0..<samples {
            for (index, body) in contenders.enumerated() {
                let n = iterations[index]
                let start = DispatchTime.now().uptimeNanoseconds
                for _ in 0..<n { try await body() }
                let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
                results[index].append(Double(n) / elapsed)
            }
        }
        return Samples(values: results)
    }

    private static func calibrate(_ body: () throws -> Void) throws -> Int {
        var n = 1
        while true {
            let start = DispatchTime.now().uptimeNanoseconds
            for _ in 0..<n { try body() }
            let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            if elapsed > sampleSeconds / 4 { return max(1, Int(Double(n) * sampleSeconds / elapsed)) }
            n *= 2
        }
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        return sorted.count % 2 == 1
            ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    /// Median wall time of running a command, in seconds, over `runs` runs after `warmup`.
    /// Processes are started with posix_spawn and reaped with waitpid: Foundation's
    /// `Process.waitUntilExit` polls on Linux and would round every run up to ~50 ms.
    static func processWallTime(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], runs: Int = 41,
        warmup: Int = 5
    ) throws -> Double {
        var times: [Double] = []
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        let envStrings = env.map { "\($0.key)=\($0.value)" }
        for index in 0..<(runs + warmup) {
            let start = DispatchTime.now().uptimeNanoseconds
            let status = try spawnAndWait(executable, arguments, environment: envStrings)
            let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            guard status == 0 else {
                throw BenchError("\(executable) \(arguments.joined(separator: " ")) exited \(status)")
            }
            if index >= warmup { times.append(elapsed) }
        }
        return median(times)
    }

    /// Median wall times of several commands, run in interleaved rounds so noise hits each alike.
    /// `prepare` runs before every round (outside the timing); stdin comes from `stdin` or /dev/null.
    /// The first command must exit with `firstStatus`, every other with 0.
    static func interleavedWallTimes(
        _ commands: [(String, [String])], stdin: String = "/dev/null", runs: Int = 41, warmup: Int = 3,
        firstStatus: Int32 = 0, prepare: () throws -> Void = {}
    ) throws -> [Double] {
        let environment = Self.environment
        var times = Array(repeating: [Double](), count: commands.count)
        for round in 0..<(runs + warmup) {
            for (index, command) in commands.enumerated() {
                try prepare()
                let start = DispatchTime.now().uptimeNanoseconds
                let status = try spawn(command.0, command.1, environment: environment, stdin: stdin).status
                let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
                guard status == (index == 0 ? firstStatus : 0) else {
                    throw BenchError("\(command.0) \(command.1.joined(separator: " ")) exited \(status)")
                }
                if round >= warmup { times[index].append(elapsed) }
            }
        }
        return times.map(median)
    }

    /// This process's environment as `NAME=value` strings, read now.
    static var environment: [String] { ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" } }

    /// Runs a program with stdin, stdout and stderr on /dev/null and returns its exit status.
    static func spawnAndWait(_ path: String, _ arguments: [String], environment: [String]) throws -> Int32 {
        try spawn(path, arguments, environment: environment).status
    }

    /// Runs a program (stdin from /dev/null, stdout to `stdout` or /dev/null, stderr to
    /// /dev/null); returns its exit status and peak resident set in KiB.
    static func spawn(
        _ path: String, _ arguments: [String], environment: [String], stdin: String = "/dev/null",
        stdout: String = "/dev/null", timeout: Double = 120
    ) throws -> (status: Int32, maxRSSKiB: Int) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, stdin, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = CleanSpawn.spawn(&pid, path, &actions, argv, envp)
        guard result == 0 else { throw BenchError("cannot run \(path): error \(result)") }
        // A run that outlives the timeout is killed, so no benchmark waits forever.
        let child = pid
        let watchdog = DispatchWorkItem { kill(child, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
        watchdog.cancel()
        guard (status & 0x7F) == 0 else {
            throw BenchError("\(path) \(arguments.joined(separator: " ")) was killed by signal \(status & 0x7F)")
        }
        return ((status >> 8) & 0xFF, Int(usage.ru_maxrss))
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Prints the table and writes bench-results.json.
func report(_ rows: [BenchRow], to path: String) throws {
    func format(_ value: Double?, unit: String) -> String {
        guard let value else { return "—" }
        if unit == "count" { return String(Int(value)) }
        if unit == "B/s" { return String(format: "%.2f GB/s", value / 1e9) }
        if unit == "op/s" { return String(format: "%.2f ms", 1000 / value) }
        if unit == "ms/run" { return String(format: "%.2f ms", 1000 / value) }
        if unit == "us/op" { return String(format: "%.1f µs", 1e6 / value) }
        if unit == "ms" { return String(format: "%.3f ms", value) }
        if value >= 1e6 { return String(format: "%.2fM/s", value / 1e6) }
        if value >= 1e3 { return String(format: "%.1fk/s", value / 1e3) }
        return String(format: "%.1f/s", value)
    }
    func ratio(_ paired: Double?, _ a: Double, _ b: Double?) -> String {
        if let paired { return String(format: "%.2f×", paired) }
        guard let b, b > 0 else { return "—" }
        return String(format: "%.2f×", a / b)
    }
    let header = ["benchmark", "ours", "raw", "ours/raw", "peer", "ours/peer", "peer name"]
    var lines = [header]
    for row in rows {
        lines.append([
            row.name, format(row.ours, unit: row.unit), format(row.raw, unit: row.unit),
            ratio(row.pairedRatios.raw, row.ours, row.raw),
            format(row.peer, unit: row.unit), ratio(row.pairedRatios.peer, row.ours, row.peer), row.peerName ?? "—",
        ])
    }
    let widths = (0..<header.count).map { column in lines.map { $0[column].count }.max() ?? 0 }
    for (index, line) in lines.enumerated() {
        print(
            "| "
                + line.enumerated().map { $1.padding(toLength: widths[$0], withPad: " ", startingAt: 0) }.joined(
                    separator: " | ") + " |")
        if index == 0 { print("|" + widths.map { String(repeating: "-", count: $0 + 2) }.joined(separator: "|") + "|") }
    }
    for row in rows where !row.note.isEmpty { print("- \(row.name): \(row.note)") }
    let data = try JSONSerialization.data(withJSONObject: rows.map(\.json), options: [.prettyPrinted, .sortedKeys])
    try data.write(to: URL(fileURLWithPath: path))
}
