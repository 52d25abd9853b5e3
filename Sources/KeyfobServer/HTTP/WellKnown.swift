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
        router.get("/.well-known/nostr.json") { request, _ in nostrJSON(name: request.queryValue("name")) }
    }

    /// NIP-05 discovery with NIP-46's `nip46` block: where the bunker listens and where a client
    /// sends its `nostrconnect://` URL (`<nostrconnect>` is replaced by the URL, percent-encoded).
    /// `names` is empty: each account has a signer key of its own, there is no server-wide one.
    func nostrJSON(name: String?) -> Response {
        var body: [String: Any] = ["names": [String: String]()]
        if name == nil || name == "_" {
            body["nip46"] = ["relays": configuration.bunkerRelays,
                             "nostrconnect_url": "\(configuration.effectiveOrigins.first ?? "")/connect/<nostrconnect>"]
        }
        var response = jsonObjectResponse(body)
        response.headers[.accessControlAllowOrigin] = "*"  // NIP-05: clients fetch it from any page
        return response
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
