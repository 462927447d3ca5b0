// swift-tools-version:6.0
import PackageDescription

// A separate package so that peers measured against ShadowKeys (vapor/jwt-kit) never enter the
// main package graph. Run it through Scripts/bench.
let package = Package(
    name: "ShadowKeysBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "ShadowKeys", path: "../"),
        .package(url: "https://github.com/vapor/jwt-kit.git", exact: "5.8.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", "4.0.0"..<"5.0.0"),
        .package(url: "https://github.com/vapor/sqlite-nio.git", from: "1.13.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.4.0"),
    ],
    targets: [
        .executableTarget(
            name: "ShadowBench",
            dependencies: [
                .product(name: "ShadowKeys", package: "ShadowKeys"),
                .product(name: "ShadowCore", package: "ShadowKeys"),
                .product(name: "ShadowJWKS", package: "ShadowKeys"),
                .product(name: "ShadowCrypto", package: "ShadowKeys"),
                .product(name: "ShadowApple", package: "ShadowKeys"),
                .product(name: "ShadowVault", package: "ShadowKeys"),
                .product(name: "ShadowCredentials", package: "ShadowKeys"),
                .product(name: "ShadowSQLite", package: "ShadowKeys"),
                .product(name: "ShadowOperationLog", package: "ShadowKeys"),
                .product(name: "ShadowSessions", package: "ShadowKeys"),
                .product(name: "ShadowServer", package: "ShadowKeys"),
                .product(name: "ShadowPostgres", package: "ShadowKeys"),
                .product(name: "ShadowHummingbird", package: "ShadowKeys"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ShadowJOSE", package: "ShadowKeys"),
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "ShadowTestSupport", package: "ShadowKeys"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // The process-start floor: a hello world that links FoundationEssentials, built like shadow-keys.
        .executableTarget(name: "HelloFloor"),
    ]
)
