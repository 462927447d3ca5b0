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
let metrics = Target.Dependency.product(name: "Metrics", package: "swift-metrics")
let httpTypes = Target.Dependency.product(name: "HTTPTypes", package: "swift-http-types")
let argumentParser = Target.Dependency.product(name: "ArgumentParser", package: "swift-argument-parser")
/// AsyncHTTPClient is the HTTP client on Linux only; Apple platforms use URLSession.
let asyncHTTPClient = Target.Dependency.product(
    name: "AsyncHTTPClient", package: "async-http-client", condition: .when(platforms: [.linux]))
let nioLinux: [Target.Dependency] =
    ["NIOCore", "NIOPosix", "NIOHTTP1"].map {
        .product(name: $0, package: "swift-nio", condition: .when(platforms: [.linux]))
    }
    + [.product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(platforms: [.linux]))]

let sqliteNIO = Target.Dependency.product(name: "SQLiteNIO", package: "sqlite-nio")
let postgresNIO = Target.Dependency.product(name: "PostgresNIO", package: "postgres-nio")
let nioCore = Target.Dependency.product(name: "NIOCore", package: "swift-nio")
let nioPosix = Target.Dependency.product(name: "NIOPosix", package: "swift-nio")
let nioSSL = Target.Dependency.product(name: "NIOSSL", package: "swift-nio-ssl")

let package = Package(
    name: "ShadowKeys",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "ShadowKeys", targets: ["ShadowKeys"]),
        .library(name: "ShadowCore", targets: ["ShadowCore"]),
        .library(name: "ShadowJOSE", targets: ["ShadowJOSE"]),
        .library(name: "ShadowJWKS", targets: ["ShadowJWKS"]),
        .library(name: "ShadowHTTP", targets: ["ShadowHTTP"]),
        .library(name: "ShadowApple", targets: ["ShadowApple"]),
        .library(name: "ShadowCrypto", targets: ["ShadowCrypto"]),
        .library(name: "ShadowVault", targets: ["ShadowVault"]),
        .library(name: "ShadowStorage", targets: ["ShadowStorage"]),
        .library(name: "ShadowCredentials", targets: ["ShadowCredentials"]),
        // The tamper-evident operation log for sync tools (RFC 9162 tree, C2SP checkpoints).
        .library(name: "ShadowOperationLog", targets: ["ShadowOperationLog"]),
        // Access tokens that refresh themselves, from refresh tokens in the vault.
        .library(name: "ShadowTokenSource", targets: ["ShadowTokenSource"]),
        // First-party sessions after Sign in with Apple: access tokens, rotating refresh tokens.
        .library(name: "ShadowSessions", targets: ["ShadowSessions"]),
        .library(name: "ShadowDPoP", targets: ["ShadowDPoP"]),
        // The framework-neutral server side: the notification receiver (HTTP statuses, JSON
        // bodies, metrics) and Apple's revoke call for the revocation worker.
        .library(name: "ShadowServer", targets: ["ShadowServer"]),
        // The database stores: each its own product, so `import ShadowKeys` builds no database.
        .library(name: "ShadowSQLite", targets: ["ShadowSQLite"]),
        .library(name: "ShadowPostgres", targets: ["ShadowPostgres"]),
        // Hummingbird 2: the bearer-token middleware and the notification route (its own product).
        .library(name: "ShadowHummingbird", targets: ["ShadowHummingbird"]),
        // The command line: `shadow-keys` for scripts, `shadow-keys-server` for serve and PostgreSQL.
        .executable(name: "shadow-keys", targets: ["shadow-keys"]),
        .executable(name: "shadow-keys-server", targets: ["shadow-keys-server"]),
        // For FuzzTesting/ (a separate package) and the regression tests; not API.
        .library(name: "ShadowFuzzTargets", targets: ["ShadowFuzzTargets"]),
        // Loopback servers and process helpers, for Benchmarks/ (a separate package); not API.
        .library(name: "ShadowTestSupport", targets: ["ShadowTestSupport"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", "4.0.0"..<"5.0.0"),
        // Pinned to a minor version: the fast path calls its underscored `_dumpHelp()` (tests only)
        // and relies on how it fills option groups (DirectParseTests compares the two readers).
        .package(url: "https://github.com/apple/swift-argument-parser.git", .upToNextMinor(from: "1.8.0")),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.0"),
        .package(url: "https://github.com/vapor/sqlite-nio.git", from: "1.13.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.24.0"),
        // `swift package generate-documentation` (a command plugin; nothing of it is linked).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.4.0"),
    ],
    targets: [
        .target(name: "ShadowCore", dependencies: [crypto], swiftSettings: strictSettings),
        .target(name: "ShadowJOSE", dependencies: ["ShadowCore", crypto, cryptoExtras], swiftSettings: strictSettings),
        .target(
            name: "ShadowJWKS", dependencies: ["ShadowCore", "ShadowJOSE", crypto, logging, httpTypes],
            swiftSettings: strictSettings),
        .target(
            name: "ShadowCrypto", dependencies: ["ShadowCore", crypto, cryptoExtras], swiftSettings: strictSettings),
        .target(
            name: "ShadowVault", dependencies: ["ShadowCore", "ShadowCrypto", crypto], swiftSettings: strictSettings),
        // The storage kernel under every database store: the row seam (SQLDatabase), the one
        // migrator, the sealed store secret, and StorageError.
        .target(
            name: "ShadowStorage", dependencies: ["ShadowCore", "ShadowCrypto", "ShadowVault", crypto],
            swiftSettings: strictSettings),
        .target(
            name: "ShadowCredentials",
            dependencies: [
                "ShadowCore", "ShadowJOSE", "ShadowApple", "ShadowCrypto", "ShadowVault", "ShadowStorage", crypto,
                logging,
                metrics,
            ], swiftSettings: strictSettings),
        .target(
            name: "ShadowOperationLog",
            dependencies: ["ShadowCore", "ShadowCrypto", "ShadowVault", "ShadowStorage", crypto],
            swiftSettings: strictSettings),
        .target(
            name: "ShadowTokenSource",
            dependencies: ["ShadowCore", "ShadowJWKS", "ShadowApple", "ShadowVault", "ShadowDPoP", crypto, httpTypes],
            swiftSettings: strictSettings),
        // DPoP (RFC 9449): proofs made and checked, nonces, the replay cache's interface.
        .target(
            name: "ShadowDPoP", dependencies: ["ShadowCore", "ShadowJOSE", crypto, cryptoExtras],
            swiftSettings: strictSettings),
        .target(
            name: "ShadowSessions",
            dependencies: [
                "ShadowCore", "ShadowJOSE", "ShadowDPoP", "ShadowCrypto", "ShadowVault", "ShadowStorage", crypto,
                cryptoExtras,
            ],
            swiftSettings: strictSettings),
        .target(
            name: "ShadowServer",
            dependencies: [
                "ShadowCore", "ShadowJOSE", "ShadowApple", "ShadowCredentials", "ShadowSessions", "ShadowOperationLog",
                "ShadowDPoP", logging, metrics, httpTypes,
            ],
            swiftSettings: strictSettings),
        // SQLite through sqlite-nio (which bundles SQLite), PostgreSQL through postgres-nio.
        .target(
            name: "ShadowSQLite",
            dependencies: [
                "ShadowCore", "ShadowVault", "ShadowStorage", "ShadowCredentials", "ShadowOperationLog",
                "ShadowSessions",
                sqliteNIO, logging, nioCore, nioPosix,
            ],
            swiftSettings: strictSettings),
        .target(
            name: "ShadowPostgres",
            dependencies: [
                "ShadowCore", "ShadowVault", "ShadowStorage", "ShadowCredentials", "ShadowOperationLog",
                "ShadowSessions",
                postgresNIO, logging, nioCore, nioSSL,
            ],
            swiftSettings: strictSettings),
        .target(
            name: "ShadowHummingbird",
            dependencies: [
                "ShadowCore", "ShadowJOSE", "ShadowApple", "ShadowCredentials", "ShadowServer", "ShadowSessions",
                "ShadowDPoP",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"), logging,
                httpTypes, nioCore,
            ],
            swiftSettings: strictSettings),
        .target(
            name: "ShadowApple",
            dependencies: ["ShadowCore", "ShadowJOSE", "ShadowJWKS", crypto, cryptoExtras, httpTypes],
            swiftSettings: strictSettings),
        // The platform's HTTP client behind ShadowJWKS' HTTPTransport: AsyncHTTPClient on Linux,
        // URLSession on Apple platforms (Docs/architecture.md).
        .target(
            name: "ShadowHTTP", dependencies: ["ShadowJWKS", "ShadowCore", httpTypes, asyncHTTPClient] + nioLinux,
            swiftSettings: strictSettings),
        .target(
            name: "ShadowSelfTest",
            dependencies: [
                "ShadowCore", "ShadowJOSE", "ShadowCrypto", "ShadowApple", "ShadowVault", "ShadowStorage",
                "ShadowCredentials", "ShadowDPoP", crypto, cryptoExtras,
            ], swiftSettings: strictSettings),
        .target(
            name: "ShadowFuzzTargets",
            dependencies: [
                "ShadowCore", "ShadowJOSE", "ShadowJWKS", "ShadowApple", "ShadowCrypto", "ShadowVault",
                "ShadowCredentials", "ShadowPostgres", "ShadowHTTP", "ShadowOperationLog", "ShadowSessions",
                "ShadowTokenSource", "ShadowStorage", "ShadowDPoP", "ShadowKeysCommands", "ShadowServer", crypto,
                httpTypes,
            ],
            swiftSettings: strictSettings),
        .target(
            name: "ShadowKeys",
            dependencies: [
                "ShadowCore", "ShadowJOSE", "ShadowJWKS", "ShadowHTTP", "ShadowApple", "ShadowCrypto", "ShadowVault",
                "ShadowStorage", "ShadowCredentials", "ShadowServer", "ShadowOperationLog", "ShadowTokenSource",
                "ShadowSessions", "ShadowDPoP", httpTypes,
            ], swiftSettings: strictSettings),
        // The commands, as libraries; each executable is a thin `main` that lists its commands.
        // ShadowKeysCommands holds everything `shadow-keys` does: no server, no PostgreSQL client,
        // no full Foundation (a test reads the binary's links).
        .target(
            name: "ShadowKeysCommands",
            dependencies: [
                "ShadowCore", "ShadowJOSE", "ShadowJWKS", "ShadowHTTP", "ShadowApple", "ShadowCrypto", "ShadowVault",
                "ShadowCredentials", "ShadowSQLite", "ShadowSelfTest", "ShadowOperationLog", "ShadowTokenSource",
                "ShadowDPoP", argumentParser,
            ],
            swiftSettings: strictSettings),
        .target(
            name: "ShadowKeysServerCommands",
            dependencies: [
                "ShadowKeysCommands", "ShadowCore", "ShadowJOSE", "ShadowApple", "ShadowVault", "ShadowCredentials",
                "ShadowOperationLog", "ShadowPostgres", "ShadowHummingbird", "ShadowServer", "ShadowSessions",
                "ShadowSQLite", "ShadowDPoP",
                argumentParser,
                logging, metrics,
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"), nioCore,
            ],
            swiftSettings: strictSettings),
        .executableTarget(name: "shadow-keys", dependencies: ["ShadowKeysCommands"], swiftSettings: strictSettings),
        .executableTarget(
            name: "shadow-keys-server", dependencies: ["ShadowKeysServerCommands"], swiftSettings: strictSettings),

        .target(
            name: "ShadowTestSupport",
            dependencies: ["ShadowCore", "ShadowJOSE", "ShadowDPoP", crypto, cryptoExtras] + nioLinux,
            path: "Tests/ShadowTestSupport", swiftSettings: strictSettings),
        .testTarget(
            name: "ShadowCoreTests", dependencies: ["ShadowCore", "ShadowTestSupport", crypto],
            swiftSettings: strictSettings),
        .testTarget(
            name: "ShadowJOSETests",
            dependencies: ["ShadowJOSE", "ShadowCore", "ShadowSelfTest", "ShadowTestSupport", crypto, cryptoExtras],
            swiftSettings: strictSettings),
        .testTarget(
            name: "ShadowJWKSTests",
            dependencies: [
                "ShadowJWKS", "ShadowHTTP", "ShadowTestSupport", "ShadowJOSE", "ShadowCore", asyncHTTPClient,
                httpTypes, crypto,
            ],
            swiftSettings: strictSettings),
        .testTarget(
            name: "ShadowCryptoTests",
            dependencies: ["ShadowCrypto", "ShadowCore", "ShadowSelfTest", "ShadowTestSupport"],
            swiftSettings: strictSettings),
        .testTarget(
            name: "ShadowVaultTests",
            dependencies: ["ShadowVault", "ShadowCrypto", "ShadowCore", "ShadowSelfTest", "ShadowTestSupport"],
            swiftSettings: strictSettings),
        .testTarget(
            name: "ShadowDPoPTests",
            dependencies: ["ShadowDPoP", "ShadowJOSE", "ShadowCore", "ShadowTestSupport", crypto, cryptoExtras],
            swiftSettings: strictSettings),
        .testTarget(
            name: "ShadowSessionsTests",
            dependencies: [
                "ShadowSessions", "ShadowSQLite", "ShadowPostgres", "ShadowCore", "ShadowJOSE", "ShadowVault",
                "ShadowStorage", "ShadowDPoP", "ShadowTestSupport", crypto, logging, nioPosix, postgresNIO,
            ],
            swiftSettings: strictSettings),
        .testTarget(
            name: "ShadowTokenSourceTests",
            dependencies: [
                "ShadowTokenSource", "ShadowCore", "ShadowHTTP", "ShadowJWKS", "ShadowVault", "ShadowTestSupport",
                "ShadowDPoP", crypto,
            ],
            swiftSettings: strictSettings),
        .testTarget(
            name: "ShadowOperationLogTests",
            dependencies: [
                "ShadowOperationLog", "ShadowSQLite", "ShadowPostgres", "ShadowCore", "ShadowVault",
                "ShadowCredentials",
                "ShadowTestSupport", sqliteNIO, nioCore, crypto,
            ],
            swiftSettings: strictSettings),
        .testTarget(
            name: "ShadowCredentialsTests",
            dependencies: [
                "ShadowCredentials", "ShadowServer", "ShadowSQLite", "ShadowPostgres", sqliteNIO, "ShadowSelfTest",
                "ShadowApple",
                "ShadowVault", "ShadowCrypto", "ShadowJOSE", "ShadowJWKS", "ShadowHTTP", "ShadowCore",
                "ShadowTestSupport", crypto, logging, httpTypes,
            ], swiftSettings: strictSettings),
        .testTarget(
            name: "ShadowAppleTests",
            dependencies: [
                "ShadowApple", "ShadowJWKS", "ShadowHTTP", "ShadowCrypto", "ShadowCore", "ShadowTestSupport",
                "ShadowJOSE", crypto, cryptoExtras,
            ], swiftSettings: strictSettings),
        .testTarget(
            name: "ShadowHummingbirdTests",
            dependencies: [
                "ShadowHummingbird", "ShadowServer", "ShadowSQLite", "ShadowCredentials", "ShadowApple", "ShadowJOSE",
                "ShadowCore",
                "ShadowVault", "ShadowTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                httpTypes, nioCore,
            ],
            swiftSettings: strictSettings),
        .testTarget(
            name: "ShadowServerTests",
            dependencies: [
                "ShadowServer", "ShadowSessions", "ShadowSQLite", "ShadowPostgres", "ShadowCredentials", "ShadowApple",
                "ShadowJOSE", "ShadowJWKS", "ShadowHTTP", "ShadowCore", "ShadowVault", "ShadowDPoP",
                "ShadowTestSupport", crypto, httpTypes,
            ],
            swiftSettings: strictSettings),
        // The DocC articles' examples, through `import ShadowKeys` alone, as a user writes them.
        .testTarget(
            name: "ShadowKeysTests", dependencies: ["ShadowKeys", crypto, cryptoExtras], swiftSettings: strictSettings),
        .testTarget(
            name: "ShadowFuzzRegressionTests", dependencies: ["ShadowFuzzTargets", "ShadowTestSupport"],
            swiftSettings: strictSettings),
        .testTarget(
            name: "ShadowKeysCommandsTests",
            dependencies: ["ShadowKeysCommands", "ShadowCore", "ShadowJOSE", argumentParser],
            swiftSettings: strictSettings),
        .testTarget(
            name: "ShadowKeysCLITests",
            dependencies: [
                "shadow-keys", "shadow-keys-server", "ShadowTestSupport", "ShadowSQLite", "ShadowPostgres",
                "ShadowJOSE", "ShadowCore", "ShadowCrypto", "ShadowVault", "ShadowCredentials", "ShadowDPoP", crypto,
                cryptoExtras, asyncHTTPClient,
            ]
                + ["NIOCore", "NIOHTTP1"].map {
                    .product(name: $0, package: "swift-nio", condition: .when(platforms: [.linux]))
                },
            swiftSettings: strictSettings),
    ]
)
