// swift-tools-version:6.1
import PackageDescription

/// Settings shared by every target: Swift 6 language mode (complete strict concurrency).
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
]

let package = Package(
    name: "tabsync",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "tabsync-server", targets: ["tabsync-server"]),
        .executable(name: "tabsync", targets: ["tabsync"]),
        .library(name: "TabsyncCore", targets: ["TabsyncCore"]),
        .library(name: "TabsyncClient", targets: ["TabsyncClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        // Signed access tokens (JWT): verification and `tabsync-server token`. Brings swift-crypto.
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.8.0"),
        // HMAC-SHA256 of webhook signatures (already built for jwt-kit: named here to use it directly).
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        // Test only: parses docker-compose.yml in TabsyncServerTests.
        .package(url: "https://github.com/jpsim/Yams", from: "5.0.1"),
    ],
    targets: [
        // Pure model, operations, validation, ordering rules and position keys. Standard library only.
        .target(name: "TabsyncCore", swiftSettings: swiftSettings),
        // Code generated from proto/tabsync/v1/tabsync.proto, plus the one boundary converting it to core types.
        .target(
            name: "TabsyncProto",
            dependencies: ["TabsyncCore", .product(name: "SwiftProtobuf", package: "swift-protobuf")],
            swiftSettings: swiftSettings
        ),
        // Thin C interop.
        .systemLibrary(name: "CLibwebsockets", pkgConfig: "libwebsockets",
                       providers: [.apt(["libwebsockets-dev", "libev-dev", "libwebsockets-evlib-ev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // ThreadSanitizer's acquire/release annotations, weakly declared (a header only, nothing linked).
        .systemLibrary(name: "CThreadSanitizer"),
        // The one lock of every threaded target: a `Mutex` ThreadSanitizer can see.
        .target(name: "TabsyncLock", dependencies: ["CThreadSanitizer"], swiftSettings: swiftSettings),
        // The libwebsockets plumbing every lws user shares: context on libev (epoll) or poll(),
        // timers, the cross-thread inbox, log routing, the open-file limit, the write paths.
        .target(name: "TabsyncLoop", dependencies: ["CLibwebsockets", "TabsyncLock"], swiftSettings: swiftSettings),
        .systemLibrary(name: "CLibpq", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // libcurl for webhook deliveries (a connect-time address check; docs/design.md, "Webhooks").
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // Durable storage behind the store protocol.
        .target(
            name: "TabsyncStore",
            dependencies: [
                "TabsyncCore", "TabsyncProto", "TabsyncLock", "CSQLite", "CLibpq",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: swiftSettings
        ),
        // Every decision of the server, without sockets, threads or clocks: events in, actions out.
        .target(
            name: "TabsyncServerCore",
            dependencies: [
                "TabsyncCore", "TabsyncProto", "TabsyncStore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: swiftSettings
        ),
        // The driver of the core on libwebsockets: WebSocket + HTTP, TLS, admission, the store executor.
        .target(
            name: "TabsyncServer",
            dependencies: [
                "TabsyncCore", "TabsyncProto", "TabsyncStore", "TabsyncServerCore", "TabsyncLoop", "TabsyncLock", "CLibwebsockets", "CCurl",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "JWTKit", package: "jwt-kit"),
                // HMAC for webhook signatures (WebhookSignature); jwt-kit builds it already.
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // Client library on libwebsockets.
        .target(
            name: "TabsyncClient",
            dependencies: ["TabsyncCore", "TabsyncProto", "TabsyncLoop", "TabsyncLock", "CLibwebsockets"],
            swiftSettings: swiftSettings
        ),
        // Load generator and benchmark reports (`tabsync bench`), directly on libwebsockets.
        .target(
            name: "TabsyncBench",
            dependencies: [
                "TabsyncCore", "TabsyncProto", "TabsyncLoop", "CLibwebsockets",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                // Its flags are declared here (`BenchOptions`), next to the configuration they make.
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        // The terminal client's pure layout, rendering and key decoding, plus a small termios/ANSI layer.
        .target(name: "TabsyncTerminal", dependencies: ["TabsyncCore", "TabsyncLock"], swiftSettings: swiftSettings),
        // The server's settings, each declared once (flag, variable, default, doc, accepted values),
        // its flags (`ServerOptions`) and their resolution into a `Server.Configuration`.
        .target(
            name: "TabsyncServerSettings",
            dependencies: [
                "TabsyncServer", "TabsyncStore", "TabsyncCore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "tabsync-server",
            dependencies: [
                "TabsyncServer", "TabsyncServerSettings", "TabsyncLock",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "tabsync",
            dependencies: [
                "TabsyncClient", "TabsyncTerminal", "TabsyncBench", "TabsyncProto", "TabsyncLock", "CLibwebsockets",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: swiftSettings
        ),

        // test targets
        // Shared by every test target: the seeded generator, waits on a condition with a deadline,
        // `withTimeout`, temporary directories, the rule 7 oracle. Standard library, Foundation,
        // TabsyncLock and TabsyncCore only, so the core, store and terminal tests use it without
        // building or linking the server.
        .target(
            name: "TabsyncTestSupport", dependencies: ["TabsyncLock", "TabsyncCore"], path: "Tests/TabsyncTestSupport",
            swiftSettings: swiftSettings
        ),
        // The in-process server harness (port 0, memory or SQLite store) of the integration tests.
        .target(
            name: "TabsyncTestServer",
            dependencies: [
                "TabsyncTestSupport", "TabsyncServer", "TabsyncStore", "TabsyncCore", "TabsyncLock",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
            ],
            path: "Tests/TabsyncTestServer",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TabsyncCoreTests",
            dependencies: [
                "TabsyncCore", "TabsyncTestSupport",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            exclude: ["check_group_rules.py"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TabsyncServerTests",
            dependencies: [
                "TabsyncServer", "TabsyncStore", "TabsyncProto", "TabsyncCore", "TabsyncLock", "TabsyncTestSupport",
                "TabsyncTestServer",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TabsyncServerSettingsTests",
            dependencies: [
                "TabsyncServerSettings", "TabsyncServer", "TabsyncStore", "TabsyncCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TabsyncServerCoreTests",
            dependencies: [
                "TabsyncServerCore", "TabsyncCore", "TabsyncProto", "TabsyncStore", "TabsyncClient", "TabsyncTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TabsyncClientTests",
            dependencies: [
                "TabsyncClient", "TabsyncCore", "TabsyncProto", "TabsyncServer", "TabsyncStore", "TabsyncLock",
                "TabsyncTestSupport", "TabsyncTestServer",
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TabsyncBenchTests",
            dependencies: [
                "TabsyncBench", "TabsyncServer", "TabsyncStore", "TabsyncCore", "TabsyncProto", "TabsyncTestSupport", "TabsyncTestServer",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: swiftSettings
        ),
        // Several tabsync-server nodes on one PostgreSQL behind HAProxy, as processes (scripts/cluster);
        // run by scripts/test with TABSYNC_TEST_CLUSTER=1, skipped otherwise.
        .testTarget(
            name: "TabsyncClusterTests",
            dependencies: [
                "TabsyncClient", "TabsyncCore", "TabsyncStore", "TabsyncLock", "TabsyncTestSupport", "TabsyncTestServer",
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TabsyncLockTests",
            dependencies: ["TabsyncLock", "TabsyncTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TabsyncLoopTests",
            dependencies: ["TabsyncLoop", "CLibwebsockets"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TabsyncProtoTests",
            dependencies: ["TabsyncProto", "TabsyncCore"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TabsyncStoreTests",
            dependencies: ["TabsyncStore", "TabsyncCore", "TabsyncTestSupport"],
            exclude: ["Fixtures"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TabsyncTerminalTests",
            dependencies: ["TabsyncTerminal", "TabsyncCore", "TabsyncTestSupport"],
            swiftSettings: swiftSettings
        ),
    ]
)
