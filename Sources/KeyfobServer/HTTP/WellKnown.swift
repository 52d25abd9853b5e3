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
        var body = NostrJSON(names: [:])
        if name == nil || name == "_" {
            body.nip46 = .init(
                relays: configuration.bunkerRelays,
                nostrconnectURL: "\(configuration.effectiveOrigins.first ?? "")/connect/<nostrconnect>")
        }
        var response = jsonResponse(body)
        response.headers[.accessControlAllowOrigin] = "*"  // NIP-05: clients fetch it from any page
        return response
    }

    func notConfigured(_ flag: String) -> KeyfobError {
        KeyfobError(.invalidRequest, "not configured on this server (\(flag))", status: .notFound)
    }

    func appleAppSiteAssociation() throws -> Response {
        guard !configuration.appleAppIDs.isEmpty else { throw notConfigured("--apple-app-id") }
        return jsonResponse(
            AppleAppSiteAssociation(
                webcredentials: .init(apps: configuration.appleAppIDs),
                applinks: .init(details: [.init(appIDs: configuration.appleAppIDs, components: [["/": "/app/*"]])])))
    }

    func assetLinks() throws -> Response {
        guard let package = configuration.androidPackage else { throw notConfigured("--android-package") }
        let statement = AssetLinkStatement(
            relation: ["delegate_permission/common.handle_all_urls", "delegate_permission/common.get_login_creds"],
            target: .init(namespace: "android_app", packageName: package, sha256CertFingerprints: configuration.androidCertFingerprints))
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: jsonBytes([statement]))))
    }

    func relatedOrigins() throws -> Response {
        guard !configuration.relatedOrigins.isEmpty else { throw notConfigured("--related-origin") }
        return jsonResponse(["origins": configuration.relatedOrigins])
    }
}

/// `/.well-known/nostr.json` (NIP-05 with NIP-46's block).
struct NostrJSON: Encodable {
    struct NIP46: Encodable {
        let relays: [String]
        let nostrconnectURL: String
        enum CodingKeys: String, CodingKey {
            case relays
            case nostrconnectURL = "nostrconnect_url"
        }
    }
    let names: [String: String]
    var nip46: NIP46?
}

/// Apple's `apple-app-site-association`: passkeys (webcredentials) and the redirect flows' universal links.
struct AppleAppSiteAssociation: Encodable {
    struct WebCredentials: Encodable { let apps: [String] }
    struct AppLinks: Encodable {
        struct Detail: Encodable {
            let appIDs: [String]
            let components: [[String: String]]
        }
        let details: [Detail]
    }
    let webcredentials: WebCredentials
    let applinks: AppLinks
}

/// One statement of Android's Digital Asset Links.
struct AssetLinkStatement: Encodable {
    struct Target: Encodable {
        let namespace, packageName: String
        let sha256CertFingerprints: [String]
        enum CodingKeys: String, CodingKey {
            case namespace
            case packageName = "package_name"
            case sha256CertFingerprints = "sha256_cert_fingerprints"
        }
    }
    let relation: [String]
    let target: Target
}
