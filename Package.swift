// swift-tools-version:6.0
import PackageDescription

/// Settings every ShadowKeys target shares: Swift 6 mode (strict concurrency) plus the
/// upcoming features that keep imports and existentials explicit.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let crypto = Target.Dependency.product(name: "Crypto", package: "swift-crypto")
let cryptoExtras = Target.Dependency.product(name: "CryptoExtras", package: "swift-crypto")
let logging = Target.Dependency.product(name: "Logging", package: "swift-log")
let argumentParser = Target.Dependency.product(name: "ArgumentParser", package: "swift-argument-parser")

let package = Package(
    name: "ShadowKeys",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "ShadowKeys", targets: ["ShadowKeys"]),
        .library(name: "ShadowCore", targets: ["ShadowCore"]),
        .library(name: "ShadowJOSE", targets: ["ShadowJOSE"]),
        .library(name: "ShadowJWKS", targets: ["ShadowJWKS"]),
        .library(name: "ShadowURLSession", targets: ["ShadowURLSession"]),
        .library(name: "ShadowApple", targets: ["ShadowApple"]),
        .library(name: "ShadowCrypto", targets: ["ShadowCrypto"]),
        .library(name: "ShadowVault", targets: ["ShadowVault"]),
        .library(name: "ShadowCredentials", targets: ["ShadowCredentials"]),
        .executable(name: "shadow-keys", targets: ["ShadowKeysCLI"]),
        // For FuzzTesting/ (a separate package) and the regression tests; not API.
        .library(name: "ShadowFuzzTargets", targets: ["ShadowFuzzTargets"]),
        .executable(name: "shadow-keys-fetch", targets: ["ShadowKeysFetch"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", "4.0.0"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.6.0"),
    ],
    targets: [
        .target(name: "ShadowCore", dependencies: [crypto], swiftSettings: strictSettings),
        .target(name: "ShadowJOSE", dependencies: ["ShadowCore", crypto, cryptoExtras], swiftSettings: strictSettings),
        .target(name: "ShadowJWKS", dependencies: ["ShadowCore", "ShadowJOSE", crypto, logging], swiftSettings: strictSettings),
        .target(name: "ShadowCrypto", dependencies: ["ShadowCore", crypto, cryptoExtras], swiftSettings: strictSettings),
        .target(name: "ShadowVault", dependencies: ["ShadowCore", "ShadowCrypto", crypto], swiftSettings: strictSettings),
        .target(name: "ShadowCredentials", dependencies: ["ShadowCore", "ShadowJOSE", "ShadowJWKS", "ShadowApple", "ShadowVault", crypto], swiftSettings: strictSettings),
        .target(name: "ShadowApple", dependencies: ["ShadowCore", "ShadowJOSE", "ShadowJWKS", crypto, cryptoExtras], swiftSettings: strictSettings),
        // URLSession lives apart from ShadowJWKS: on Linux, linking FoundationNetworking (and libcurl)
        // adds ~9 ms to every process start, so the CLI reaches it through `shadow-keys-fetch`.
        .target(name: "ShadowURLSession", dependencies: ["ShadowJWKS"], swiftSettings: strictSettings),
        // The helper compiles the transport through a symlink to ShadowURLSession's source instead of
        // depending on that library: SwiftPM links an executable dependency's libraries into the
        // dependent executable, and this one must stay out of the CLI.
        .executableTarget(name: "ShadowKeysFetch", dependencies: ["ShadowJWKS", "ShadowCore"], swiftSettings: strictSettings),
        .target(name: "ShadowSelfTest", dependencies: ["ShadowCore", "ShadowJOSE", "ShadowCrypto", "ShadowApple", "ShadowVault", "ShadowCredentials", crypto, cryptoExtras], swiftSettings: strictSettings),
        .target(
            name: "ShadowFuzzTargets",
            dependencies: ["ShadowCore", "ShadowJOSE", "ShadowJWKS", "ShadowApple", "ShadowCrypto", "ShadowVault", "ShadowCredentials", crypto],
            swiftSettings: strictSettings),
        .target(name: "ShadowKeys", dependencies: ["ShadowCore", "ShadowJOSE", "ShadowJWKS", "ShadowURLSession", "ShadowApple", "ShadowCrypto", "ShadowVault", "ShadowCredentials"], swiftSettings: strictSettings),
        .executableTarget(
            name: "ShadowKeysCLI",
            // ShadowKeysFetch is a build-order dependency only: it is built beside the CLI, not linked into it.
            dependencies: ["ShadowCore", "ShadowJOSE", "ShadowJWKS", "ShadowApple", "ShadowCrypto", "ShadowVault", "ShadowCredentials", "ShadowSelfTest", "ShadowKeysFetch", argumentParser, logging],
            swiftSettings: strictSettings
        ),

        .target(name: "ShadowTestSupport", dependencies: ["ShadowCore", "ShadowJOSE", "ShadowJWKS", crypto, cryptoExtras], path: "Tests/ShadowTestSupport", swiftSettings: strictSettings),
        .testTarget(name: "ShadowCoreTests", dependencies: ["ShadowCore", "ShadowTestSupport"], swiftSettings: strictSettings),
        .testTarget(name: "ShadowJOSETests", dependencies: ["ShadowJOSE", "ShadowSelfTest", "ShadowTestSupport", crypto, cryptoExtras], swiftSettings: strictSettings),
        .testTarget(name: "ShadowJWKSTests", dependencies: ["ShadowJWKS", "ShadowURLSession", "ShadowTestSupport", "ShadowJOSE", logging], swiftSettings: strictSettings),
        .testTarget(name: "ShadowCryptoTests", dependencies: ["ShadowCrypto", "ShadowCore", "ShadowSelfTest", "ShadowTestSupport", crypto], swiftSettings: strictSettings),
        .testTarget(name: "ShadowVaultTests", dependencies: ["ShadowVault", "ShadowCrypto", "ShadowCore", "ShadowSelfTest", "ShadowTestSupport"], swiftSettings: strictSettings),
        .testTarget(name: "ShadowCredentialsTests", dependencies: ["ShadowCredentials", "ShadowSelfTest", "ShadowApple", "ShadowVault", "ShadowCrypto", "ShadowJOSE", "ShadowCore", "ShadowTestSupport"], swiftSettings: strictSettings),
        .testTarget(name: "ShadowAppleTests", dependencies: ["ShadowApple", "ShadowJWKS", "ShadowURLSession", "ShadowCrypto", "ShadowCore", "ShadowTestSupport", "ShadowJOSE", crypto, cryptoExtras], swiftSettings: strictSettings),
        .testTarget(name: "ShadowFuzzRegressionTests", dependencies: ["ShadowFuzzTargets", "ShadowTestSupport"], swiftSettings: strictSettings),
        .testTarget(name: "ShadowKeysCLITests", dependencies: ["ShadowKeysCLI", "ShadowTestSupport", "ShadowJOSE", "ShadowCore", "ShadowApple", "ShadowCrypto", "ShadowVault", "ShadowCredentials", crypto, cryptoExtras], swiftSettings: strictSettings),
    ]
)
