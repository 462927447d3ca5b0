import Foundation

// Usage: ShadowBench <shadow-keys binary> <output json> [section ...]
let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    FileHandle.standardError.write(
        Data(
            """
            usage: ShadowBench <shadow-keys binary> <results.json> [jwt jwks crypto apple vault state db import \
            oplog sessions dpop serve cli net]\n
            """
            .utf8))
    exit(64)
}
let binary = arguments[1]
let output = arguments[2]
let sections = Set(arguments.dropFirst(3))
func wants(_ section: String) -> Bool { sections.isEmpty || sections.contains(section) }

let work = FileManager.default.temporaryDirectory.appendingPathComponent("shadow-bench-\(getpid())").path
try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: work) }

if sections.contains("stages") {
    try JWTBenchmarks.stages()
    exit(0)
}
if sections.contains("profile") {
    try JWTBenchmarks.profile(
        iterations: Int(ProcessInfo.processInfo.environment["ITERATIONS"] ?? "20000") ?? 20000,
        algorithm: ProcessInfo.processInfo.environment["ALG"] ?? "rs256")
    exit(0)
}
if sections.contains("refresh-sqlite") {
    // The SQLite refresh row alone (with its no-op peer), for profiling the store's path; with
    // SHADOW_BENCH_DPOP=1, of sessions bound to a key, each refresh with a proof.
    let dpop = ProcessInfo.processInfo.environment["SHADOW_BENCH_DPOP"] == "1"
    try report(try await SessionBenchmarks.sqliteRefreshes(workDirectory: work, dpop: dpop), to: output)
    exit(0)
}
if sections.contains("refresh-postgres") {
    // The two-instance PostgreSQL refresh row alone (with its no-op peer), for profiling.
    try report(try await SessionBenchmarks.postgres(storage: false), to: output)
    exit(0)
}
if sections.contains("dpop-profile") {
    // The middleware's check of new tokens alone, in a loop, for a profiler (prints its window).
    try await DPoPBenchmarks.profile(workDirectory: work)
    exit(0)
}
if sections.contains("oplog-profile") {
    // `verify` of a SQLite log alone (SHADOW_BENCH_ENTRIES entries, built first), for a profiler
    // (prints its window).
    try await OperationLogBenchmarks.profileVerify(directory: work)
    exit(0)
}
var rows: [BenchRow] = []
if wants("jwt") { rows += try await JWTBenchmarks.run() }
if wants("jwks") { rows += try await JWKSBenchmarks.run() }
if wants("crypto") { rows += try await CryptoBenchmarks.run(binary: binary, workDirectory: work) }
if wants("apple") { rows += try await AppleBenchmarks.run(binary: binary, workDirectory: work) }
if wants("vault") { rows += try await VaultBenchmarks.run(binary: binary, workDirectory: work) }
if wants("state") { rows += try await StateBenchmarks.run(binary: binary, workDirectory: work) }
if wants("db") { rows += try await DatabaseBenchmarks.run(binary: binary, workDirectory: work) }
// shadow-keys-server (serve, PostgreSQL stores) is built beside shadow-keys.
let server = URL(fileURLWithPath: binary).deletingLastPathComponent().appendingPathComponent("shadow-keys-server").path
if wants("import") {
    rows += try await ImportBenchmarks.run(binary: binary, server: server, workDirectory: work)
}
if wants("oplog") { rows += try await OperationLogBenchmarks.run(workDirectory: work) }
if wants("sessions") { rows += try await SessionBenchmarks.run(workDirectory: work) }
if wants("dpop") { rows += try await DPoPBenchmarks.run(workDirectory: work) }
if wants("serve") { rows += try await ServeBenchmarks.run(binary: server, workDirectory: work) }
// HelloFloor is built beside this program, the same way.
let hello = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(
    "HelloFloor"
).path
if wants("cli") { rows += try CLIBenchmarks.run(binary: binary, hello: hello, workDirectory: work) }
if wants("net") { rows += try await NetworkBenchmarks.run(binary: binary, hello: hello, workDirectory: work) }
try report(rows, to: output)
