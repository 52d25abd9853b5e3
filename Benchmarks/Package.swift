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
        benchmark("WebAuthnBenchmarks", of: "WebAuthn"),
        benchmark("NostrBenchmarks", of: "Nostr"),
        benchmark("PolkadotBenchmarks", of: "Polkadot"),
    ]
)

/// One benchmark executable over one of Keyfob's libraries, in the folder of its name.
func benchmark(_ name: String, of library: String) -> Target {
    .executableTarget(
        name: name,
        dependencies: [
            .product(name: library, package: "keyfob"), .product(name: "KeyfobCodecs", package: "keyfob"),
            .product(name: "Benchmark", package: "benchmark"),
        ],
        path: name,
        plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")])
}
