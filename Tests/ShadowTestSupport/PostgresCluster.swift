import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A throwaway PostgreSQL cluster: `initdb` into a temporary folder as an unprivileged user (the
/// `postgres` account, else `nobody`, when the tests run as root), listening on a free loopback
/// port and on a Unix socket in that folder, with fsync off unless `durable`. Stopped and
/// deleted by ``stop()`` or at process exit.
///
/// The server binaries come from `$SHADOW_KEYS_PG_BIN`, else the newest
/// `/usr/lib/postgresql/*/bin`, else `pg_config --bindir`. Without them, ``start()`` throws a
/// message saying how to install them; it never skips.
public final class PostgresCluster: @unchecked Sendable {
    public let root: String
    public let port: Int
    public let user = "shadow"
    /// fsync on (for benchmarks), or off (for tests, whose data is thrown away).
    let durable: Bool
    public let binaries: String
    let runAs: String?
    private var stopped = false
    private let lock = NSLock()

    /// One cluster for the whole test process, started on first use.
    public static let shared: Result<PostgresCluster, any Error> = Result { try PostgresCluster.start() }

    /// A TCP URL for `database` (sslmode=disable: loopback).
    public func url(_ database: String = "postgres") -> String {
        "postgres://\(user)@127.0.0.1:\(port)/\(database)?sslmode=disable"
    }

    private init(root: String, port: Int, binaries: String, runAs: String?, durable: Bool) {
        self.durable = durable
        self.root = root
        self.port = port
        self.binaries = binaries
        self.runAs = runAs
    }

    public static func start(durable: Bool = false) throws -> PostgresCluster {
        let binaries = try findBinaries()
        var template = Array("/tmp/shadow-pg-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CLIRunnerError("mkdtemp failed") }
        let root = String(cString: made)
        var runAs: String?
        if geteuid() == 0 {
            let name = getpwnam("postgres") != nil ? "postgres" : "nobody"
            guard let account = getpwnam(name) else {
                throw CLIRunnerError("no unprivileged account to run PostgreSQL as")
            }
            guard chown(root, account.pointee.pw_uid, account.pointee.pw_gid) == 0 else {
                throw CLIRunnerError("chown \(root) failed")
            }
            runAs = name
        }
        let cluster = PostgresCluster(
            root: root, port: try freePort(), binaries: binaries, runAs: runAs, durable: durable)
        try cluster.run(
            "initdb",
            ["-D", "\(root)/data", "-U", cluster.user, "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"],
            timeout: 120)
        try cluster.startServer()
        registerForExit(cluster)
        return cluster
    }

    var serverOptions: String {
        "-c listen_addresses=127.0.0.1 -p \(port) -k \(root) -c max_connections=500"
            + (durable ? "" : " -c fsync=off -c full_page_writes=off")
    }

    public func startServer() throws {
        let options = serverOptions
        try run(
            "pg_ctl", ["-D", "\(root)/data", "-l", "\(root)/log", "-w", "-t", "60", "-o", options, "start"], timeout: 90
        )
    }

    /// `pg_ctl restart -m immediate`: the server stops without a shutdown checkpoint (as after a
    /// crash) and starts again, recovering from its WAL.
    public func restartImmediately() throws {
        let options = serverOptions
        try run(
            "pg_ctl",
            ["-D", "\(root)/data", "-l", "\(root)/log", "-w", "-t", "60", "-m", "immediate", "-o", options, "restart"],
            timeout: 90)
    }

    /// Creates a database named `name` and returns its TCP URL.
    public func createDatabase(_ name: String) throws -> String {
        try run("createdb", ["-h", root, "-p", String(port), "-U", user, name], timeout: 60)
        return url(name)
    }

    /// A database with a fresh random name.
    public func freshDatabase() throws -> String {
        try createDatabase("t" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(20))
    }

    /// Runs SQL with psql against `database`, returning its output (unaligned, tuples only).
    @discardableResult
    public func psql(_ database: String, _ sql: String) throws -> String {
        try run(
            "psql",
            [
                "-h", root, "-p", String(port), "-U", user, "-d", database, "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                "-c", sql,
            ], timeout: 60)
    }

    /// Stops the server at once (`pg_ctl stop -m immediate`), keeping its data: the database is
    /// then unreachable, as after a crash, until ``startServer()``.
    public func stopServer() throws {
        try run("pg_ctl", ["-D", "\(root)/data", "-m", "immediate", "-w", "-t", "30", "stop"], timeout: 60)
    }

    public func stop() {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped else { return }
        stopped = true
        _ = try? run("pg_ctl", ["-D", "\(root)/data", "-m", "immediate", "-w", "-t", "30", "stop"], timeout: 60)
        try? FileManager.default.removeItem(atPath: root)
    }

    @discardableResult
    func run(_ tool: String, _ arguments: [String], timeout: TimeInterval) throws -> String {
        let path = "\(binaries)/\(tool)"
        let (executable, all) =
            runAs.map {
                ("/usr/bin/setpriv", ["--reuid=\($0)", "--regid=\($0)", "--init-groups", "--", path] + arguments)
            } ?? (path, arguments)
        let result = try CLIRunner.run(
            executable: URL(fileURLWithPath: executable), all, stdin: nil, environment: ["PGTZ": "UTC", "LC_ALL": "C"],
            currentDirectory: URL(fileURLWithPath: root), timeout: timeout)
        guard result.status == 0 else {
            let log =
                (try? String(contentsOfFile: "\(root)/log", encoding: .utf8)).map {
                    "\nserver log:\n\($0.suffix(2000))"
                } ?? ""
            throw CLIRunnerError(
                """
                PostgreSQL \(tool) \(arguments.joined(separator: " ")) failed (\(result.status)): \
                \(result.stderr)\(result.stdout)\(log)
                """
            )
        }
        return result.stdout
    }

    static func findBinaries() throws -> String {
        let fileManager = FileManager.default
        if let configured = ProcessInfo.processInfo.environment["SHADOW_KEYS_PG_BIN"], !configured.isEmpty {
            guard fileManager.isExecutableFile(atPath: configured + "/initdb") else {
                throw CLIRunnerError("SHADOW_KEYS_PG_BIN=\(configured) holds no initdb")
            }
            return configured
        }
        let versions = ((try? fileManager.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []).compactMap(
            Int.init
        ).sorted()
        for version in versions.reversed()
        where fileManager.isExecutableFile(atPath: "/usr/lib/postgresql/\(version)/bin/initdb") {
            return "/usr/lib/postgresql/\(version)/bin"
        }
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":")
        where fileManager.isExecutableFile(atPath: "\(directory)/initdb") {
            return String(directory)
        }
        throw CLIRunnerError(
            """
            the PostgreSQL tests need a PostgreSQL server (initdb, pg_ctl, postgres) and none was found in \
            /usr/lib/postgresql/*/bin or on PATH: \
            install it (apt-get install postgresql; .ci/run does this), or set SHADOW_KEYS_PG_BIN to its bin folder
            """)
    }

    /// A loopback port free at the time of asking, and never handed out before in this process:
    /// two tests asking at once never get the same one for their servers.
    public static func freePortForTests() throws -> Int { try freePort() }

    private static let handedOut = Mutex(Set<Int>())

    static func freePort() throws -> Int {
        for _ in 0..<100 {
            let port = try ephemeralPort()
            if handedOut.withLock({ $0.insert(port).inserted }) { return port }
        }
        throw CLIRunnerError("cannot find a loopback port not handed out before")
    }

    private static func ephemeralPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw CLIRunnerError("socket failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else { throw CLIRunnerError("cannot find a free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    nonisolated(unsafe) private static var clusters: [PostgresCluster] = []
    private static let registry = NSLock()

    static func registerForExit(_ cluster: PostgresCluster) {
        registry.lock()
        defer { registry.unlock() }
        if clusters.isEmpty { atexit { PostgresCluster.stopAll() } }
        clusters.append(cluster)
    }

    static func stopAll() {
        registry.lock()
        let all = clusters
        registry.unlock()
        for cluster in all { cluster.stop() }
    }
}
