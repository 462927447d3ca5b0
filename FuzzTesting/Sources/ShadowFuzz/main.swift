// One libFuzzer binary for every harness: SHADOW_FUZZ_TARGET names the one to run; the
// arguments are libFuzzer's (corpus folders, -max_total_time=…, or files to replay).
#if canImport(Darwin)
import Darwin
#else
import Glibc
#endif
import CFuzzerDriver
import ShadowFuzzTargets

/// The harness SHADOW_FUZZ_TARGET names; set once, before the driver runs any input.
nonisolated(unsafe) var selected: FuzzTargets.Harness = { _ in }

/// libFuzzer's entry point, called for every input.
@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    selected(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

let name = getenv("SHADOW_FUZZ_TARGET").map { String(cString: $0) } ?? ""
guard let harness = FuzzTargets.harness(named: name) else {
    let message = Array(
        "set SHADOW_FUZZ_TARGET to one of: \(FuzzTargets.all.map(\.name).joined(separator: ", "))\n".utf8)
    _ = write(2, message, message.count)
    exit(64)
}
selected = harness
FuzzTargets.prepare()
var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in testOneInput(data, size) })
