// swift-tools-version:6.0
// The Vapor adapter of Docs/server.md, built by .ci/run so the example there always compiles.
import PackageDescription

let package = Package(
    name: "VaporAdapter",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "ShadowKeys", path: "../../.."),
        .package(url: "https://github.com/vapor/vapor.git", from: "4.100.0"),
    ],
    targets: [
        .executableTarget(
            name: "VaporAdapter",
            dependencies: [
                .product(name: "ShadowKeys", package: "ShadowKeys"), .product(name: "Vapor", package: "vapor"),
            ])
    ]
)
