// swift-tools-version:6.0
import PackageDescription

// The libFuzzer harnesses, built apart from the main package because they need
// `-sanitize=fuzzer,address` (Scripts/fuzz passes it). The harness code itself lives in the main
// package (ShadowFuzzTargets), where the regression tests replay every corpus file through it;
// this package adds only the entry point, which hands control to libFuzzer's driver.
let package = Package(
    name: "ShadowKeysFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "ShadowKeys", path: "../")],
    targets: [
        .target(name: "CFuzzerDriver"),
        .executableTarget(
            name: "ShadowFuzz",
            dependencies: ["CFuzzerDriver", .product(name: "ShadowFuzzTargets", package: "ShadowKeys")]),
    ]
)
