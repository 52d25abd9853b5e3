// swift-tools-version:6.1
import PackageDescription

let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

let package = Package(
    name: "keyfob",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "KeyfobCodecs", targets: ["KeyfobCodecs"]),
        .library(name: "WebAuthn", targets: ["WebAuthn"]),
        .library(name: "Nostr", targets: ["Nostr"]),
        .library(name: "Polkadot", targets: ["Polkadot"]),
        .library(name: "KeyfobStore", targets: ["KeyfobStore"]),
        .library(name: "KeyfobServer", targets: ["KeyfobServer"]),
        .executable(name: "keyfob", targets: ["keyfob"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // Already in the graph through postgres-nio; WebAuthn verifies ES256 with its BoringSSL P-256.
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
    ],
    targets: [
        // System libraries: one module map each, wrapped once by the Swift modules below.
        .systemLibrary(name: "CCBOR", pkgConfig: "libcbor", providers: [.apt(["libcbor-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSecp256k1", pkgConfig: "libsecp256k1", providers: [.apt(["libsecp256k1-dev"])]),
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),

        // The one crypto layer over OpenSSL: digests, HMAC, HKDF, scrypt, AES-GCM/CBC, ChaCha20(-Poly1305),
        // randomness, wiping, and SecretBytes. Everything above calls these, never OpenSSL's symmetric API.
        // The codec floor: hex, base64url, form decoding and the plain JSON reader, written once
        // for both cores and the server.
        .target(name: "KeyfobCodecs", swiftSettings: strict),
        .target(name: "KeyfobCrypto", dependencies: ["COpenSSL", "CSodium"], swiftSettings: strict),

        // Pure cores: no HTTP, no database.
        .target(
            name: "WebAuthn",
            dependencies: ["CCBOR", "COpenSSL", "KeyfobCodecs", "KeyfobCrypto", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strict),
        .target(name: "Nostr", dependencies: ["CSecp256k1", "KeyfobCodecs", "KeyfobCrypto", "CZlib"], swiftSettings: strict),
        // Substrate accounts: sr25519 (Ristretto255 on libsodium, Merlin), ed25519 (OpenSSL), ecdsa
        // (libsecp256k1 through Nostr's one wrapper), SS58, BIP-39, SCALE signing payloads, JSON backups.
        .target(name: "Polkadot", dependencies: ["KeyfobCodecs", "KeyfobCrypto", "Nostr"], swiftSettings: strict),

        // Persistence behind protocols.
        .target(
            name: "KeyfobStore",
            dependencies: [
                "CSQLite", .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "NIOPosix", package: "swift-nio"), .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strict),
        // The same protocols on PostgreSQL, for several instances on one database.
        .target(
            name: "KeyfobPostgres",
            dependencies: [
                "KeyfobStore", .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"), .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strict),

        // The Hummingbird application and the executable.
        .target(
            name: "KeyfobServer",
            dependencies: [
                "WebAuthn", "Nostr", "Polkadot", "KeyfobStore", "KeyfobPostgres", "KeyfobCodecs", "KeyfobCrypto",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "DequeModule", package: "swift-collections"),
                // Imported directly, so declared (not only reached through Hummingbird).
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict),
        .executableTarget(
            name: "keyfob",
            dependencies: [
                "KeyfobServer", "KeyfobStore", "WebAuthn", "KeyfobCodecs", "KeyfobCrypto",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"), .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strict),

        // The load harness's floor: a bare Hummingbird app (Benchmarks/floor, BENCHMARKS.md).
        .executableTarget(
            name: "keyfob-floor",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"), .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Benchmarks/floor", swiftSettings: strict),

        // libFuzzer target (see README "Fuzzing"); an empty program in normal builds.
        .executableTarget(name: "WebAuthnFuzz", dependencies: ["WebAuthn", "KeyfobCodecs"], swiftSettings: strict),
        .executableTarget(name: "NostrFuzz", dependencies: ["Nostr", "KeyfobCodecs"], swiftSettings: strict),
        .executableTarget(name: "PolkadotFuzz", dependencies: ["Polkadot", "KeyfobCodecs"], swiftSettings: strict),

        // A software authenticator for tests (ES256, RS256, EdDSA; none and packed self attestation).
        .target(
            name: "WebAuthnTestSupport", dependencies: ["WebAuthn", "KeyfobCodecs", "KeyfobCrypto", "COpenSSL"],
            path: "Tests/WebAuthnTestSupport", swiftSettings: strict),
        // Generic helpers the robustness tests share.
        .target(name: "TestSupport", path: "Tests/TestSupport", swiftSettings: strict),
        .testTarget(
            name: "WebAuthnTests", dependencies: ["WebAuthn", "KeyfobCodecs", "KeyfobCrypto", "WebAuthnTestSupport", "TestSupport", "COpenSSL"],
            swiftSettings: strict),
        .testTarget(name: "KeyfobCodecsTests", dependencies: ["KeyfobCodecs"], swiftSettings: strict),
        .testTarget(name: "KeyfobCryptoTests", dependencies: ["KeyfobCrypto", "KeyfobCodecs"], swiftSettings: strict),
        .testTarget(
            name: "PolkadotTests", dependencies: ["Polkadot", "KeyfobCodecs", "KeyfobCrypto", "Nostr", "COpenSSL", "TestSupport"],
            swiftSettings: strict),
        .testTarget(name: "NostrTests", dependencies: ["Nostr", "KeyfobCodecs", "KeyfobCrypto", "TestSupport"], swiftSettings: strict),
        .testTarget(
            name: "KeyfobStoreTests", dependencies: ["KeyfobStore", "KeyfobPostgres", .product(name: "PostgresNIO", package: "postgres-nio")],
            swiftSettings: strict),
        .testTarget(
            name: "KeyfobServerTests",
            dependencies: [
                "KeyfobServer", "KeyfobStore", "WebAuthn", "Nostr", "Polkadot", "KeyfobCodecs", "KeyfobCrypto", "WebAuthnTestSupport",
                "TestSupport",
                "COpenSSL",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HummingbirdWSTesting", package: "hummingbird-websocket"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                // Imported directly by the tests, so declared.
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict),
    ]
)
