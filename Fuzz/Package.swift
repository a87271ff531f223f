// swift-tools-version:6.1
import PackageDescription

/// libFuzzer targets for tabsync (see scripts/fuzz). Built only by scripts/fuzz, with
/// `-sanitize=fuzzer,address -parse-as-library`, in its own scratch path (.build-fuzz). SwiftPM
/// links an executable's entry as `<module>_main`: each target defines it (`@_cdecl`) and hands its
/// one-input function to libFuzzer's driver (CFuzzerDriver), instead of libFuzzer's own `main`.
///
/// The code under test is the main package's own sources, reached through the symlinks in Linked/
/// (a path dependency would see only the main package's products, and TabsyncProto is none);
/// `fuzz-wire` drives the server's socket-free core, so it links the core and the store's targets too;
/// `fuzz-text` links the one file it tests, TerminalText.swift, so it can reach its internal API.
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
]

let package = Package(
    name: "tabsync-fuzz",
    dependencies: [
        .package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        .target(name: "TabsyncCore", path: "Linked/TabsyncCore", swiftSettings: swiftSettings),
        .target(
            name: "TabsyncProto",
            dependencies: ["TabsyncCore", .product(name: "SwiftProtobuf", package: "swift-protobuf")],
            path: "Linked/TabsyncProto",
            swiftSettings: swiftSettings
        ),
        .systemLibrary(name: "CSQLite", path: "Linked/CSQLite", pkgConfig: "sqlite3"),
        .systemLibrary(name: "CLibpq", path: "Linked/CLibpq", pkgConfig: "libpq"),
        .systemLibrary(name: "CThreadSanitizer", path: "Linked/CThreadSanitizer"),
        .target(name: "TabsyncLock", dependencies: ["CThreadSanitizer"], path: "Linked/TabsyncLock", swiftSettings: swiftSettings),
        .target(
            name: "TabsyncStore",
            dependencies: [
                "TabsyncCore", "TabsyncProto", "TabsyncLock", "CSQLite", "CLibpq",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            path: "Linked/TabsyncStore",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TabsyncServerCore",
            dependencies: [
                "TabsyncCore", "TabsyncProto", "TabsyncStore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            path: "Linked/TabsyncServerCore",
            swiftSettings: swiftSettings
        ),
        // libFuzzer's driver, called from each target's entry point.
        .target(name: "CFuzzerDriver"),
        // Frames in both subprotocols, through the server's own core (ServerCore), one session after another.
        .executableTarget(
            name: "fuzz-wire",
            dependencies: [
                "CFuzzerDriver", "TabsyncCore", "TabsyncProto", "TabsyncStore", "TabsyncServerCore",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // PositionKey.between on any two valid keys.
        .executableTarget(name: "fuzz-keys", dependencies: ["CFuzzerDriver", "TabsyncCore"], swiftSettings: swiftSettings),
        // TerminalText.clean on any text.
        .executableTarget(name: "fuzz-text", dependencies: ["CFuzzerDriver"], swiftSettings: swiftSettings),
    ]
)
