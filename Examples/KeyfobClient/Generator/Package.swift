// swift-tools-version:6.1
// Only to run Apple's swift-openapi-generator (make openapi-client), so the example's own build
// does not compile the generator.
import PackageDescription

let package = Package(
    name: "Generator",
    dependencies: [.package(url: "https://github.com/apple/swift-openapi-generator.git", exact: "1.14.3")],
    targets: []
)
