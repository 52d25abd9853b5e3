// swift-tools-version:6.1
// Benchmarks live in their own package so the main build and CI never compile
// the benchmark harness. Run: `cd Benchmarks && swift package benchmark` (see README).
import PackageDescription

let package = Package(
    name: "keyfob-benchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "keyfob", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark.git", exact: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "WebAuthnBenchmarks",
            dependencies: [
                .product(name: "WebAuthn", package: "keyfob"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "WebAuthnBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]),
        .executableTarget(
            name: "NostrBenchmarks",
            dependencies: [
                .product(name: "Nostr", package: "keyfob"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "NostrBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]),
    ]
)
