import Foundation
import Hummingbird

/// Files platforms fetch to trust this domain, from configuration (DESIGN.md §6): iOS apps
/// (webcredentials for passkeys, applinks for the /app/* signer links), Android apps, and related
/// origins for WebAuthn. Each is 404 until configured.
struct WellKnownController: Sendable {
    let configuration: ServerConfiguration

    func addRoutes(to router: Router<KeyfobRequestContext>) {
        router.get("/.well-known/apple-app-site-association") { _, _ in try appleAppSiteAssociation() }
        router.get("/.well-known/assetlinks.json") { _, _ in try assetLinks() }
        router.get("/.well-known/webauthn") { _, _ in try relatedOrigins() }
    }

    func notConfigured(_ flag: String) -> APIError {
        APIError("invalid_request", "not configured on this server (\(flag))", status: .notFound)
    }

    func appleAppSiteAssociation() throws -> Response {
        guard !configuration.appleAppIDs.isEmpty else { throw notConfigured("--apple-app-id") }
        return jsonObjectResponse([
            "webcredentials": ["apps": configuration.appleAppIDs],
            "applinks": ["details": [["appIDs": configuration.appleAppIDs, "components": [["/": "/app/*"]]]]],
        ])
    }

    func assetLinks() throws -> Response {
        guard let package = configuration.androidPackage else { throw notConfigured("--android-package") }
        let statement: [String: Any] = [
            "relation": ["delegate_permission/common.handle_all_urls", "delegate_permission/common.get_login_creds"],
            "target": ["namespace": "android_app", "package_name": package,
                       "sha256_cert_fingerprints": configuration.androidCertFingerprints],
        ]
        let data = try JSONSerialization.data(withJSONObject: [statement], options: [.sortedKeys, .withoutEscapingSlashes])
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    func relatedOrigins() throws -> Response {
        guard !configuration.relatedOrigins.isEmpty else { throw notConfigured("--related-origin") }
        return jsonObjectResponse(["origins": configuration.relatedOrigins])
    }
}
