// swift-tools-version:6.1
// A Swift client generated from Keyfob's OpenAPI document (docs/openapi.json) by Apple's
// swift-openapi-generator, and a small program that uses it: sign up and sign in with a software
// passkey, then sign a nostr note. Not part of the server's build.
//
// The generated code is committed (Sources/KeyfobClientExample/Generated): `make openapi-client`
// in the repository regenerates it with swift-openapi-generator 1.14.3, so building this package
// needs only the runtime, the URLSession transport and swift-crypto (the passkey's P-256).
import PackageDescription

let package = Package(
    name: "KeyfobClient",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.4"),
        .package(url: "https://github.com/apple/swift-openapi-urlsession.git", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
    ],
    targets: [
        .executableTarget(
            name: "KeyfobClientExample",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIURLSession", package: "swift-openapi-urlsession"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)])
    ]
)
