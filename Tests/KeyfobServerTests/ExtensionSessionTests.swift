import Foundation
import HTTPTypes
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import Testing
import WebAuthnTestSupport

@testable import KeyfobServer

/// #45: the browser extension's session. Only Keyfob's own page (a cookie session, from an allowed
/// Origin) gives one, with a passkey assertion made for it; its Polkadot requests are the
/// browser-verified origins the extension reports; "Sign out everywhere" ends it.
@Suite struct ExtensionSessionTests {
    /// What the extension draws: a token only it keeps, and the claim (its SHA-256) the page sends.
    static func claim() -> (token: String, claim: String) {
        let secret = randomBytes(32)
        return (Base64URL.encode(secret), Base64URL.encode(sha256(secret)))
    }

    @Test func onlyKeyfobsPageGivesTheExtensionASessionAndSignOutEverywhereEndsIt() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var (token, authenticator) = try await client.newAccount("exa")
            var page: HTTPFields = [.cookie: "keyfob_session=\(token)"]
            page[.origin] = Harness.origin
            // An app's bearer session cannot mint one, nor a page without the passkey.
            let bearer = try await client.call(.post, "/api/extension/session", json: [:], headers: Client.bearer(token))
            #expect(bearer.status == .forbidden && bearer.error == "permission_denied", "\(bearer.json)")
            let (extensionToken, claim) = ExtensionSessionTests.claim()
            let bare = try await client.call(.post, "/api/extension/session", json: ["claim": claim], headers: page)
            #expect(bare.status == .forbidden && bare.error == "confirmation_required")
            // No claim, or not a SHA-256: refused before the confirmation is spent.
            for wrong: Any in [[:] as [String: Any], ["claim": "short"], ["claim": 7]] {
                let refused = try await client.call(.post, "/api/extension/session", json: wrong, headers: page)
                #expect(refused.status == .badRequest, "\(wrong): \(refused.json)")
            }
            var foreign = page
            foreign[.origin] = "https://evil.example"
            let body = try await client.confirmed(["claim": claim], "extension.connect", by: &authenticator, token: token)
            #expect(try await client.call(.post, "/api/extension/session", json: body, headers: foreign).status == .forbidden)

            let connect = try await client.confirmed(["claim": claim], "extension.connect", by: &authenticator, token: token)
            let given = try await client.call(.post, "/api/extension/session", json: connect, headers: page)
            // The reply carries no token: the extension holds it, the page only its hash.
            #expect(given.status == .created && given["username"] as? String == "exa" && given["token"] == nil, "\(given.json)")
            let secondUse = try await client.confirmed(["claim": claim], "extension.connect", by: &authenticator, token: token)
            let reused = try await client.call(.post, "/api/extension/session", json: secondUse, headers: page)
            #expect(reused.status == .conflict, "a claim names one session: \(reused.json)")
            #expect(try await client.call(.get, "/session", headers: Client.bearer(extensionToken))["username"] as? String == "exa")

            // Its Polkadot requests carry the origin the browser reported to the extension.
            let address = try await client.connectedPolkadotAccount(token: token)
            let ext = Client.bearer(extensionToken)
            // #55: the token alone connects no site: whoever holds it could name any origin. The
            // person connects it in Keyfob's window, signed in there (here, the page's cookie).
            let named = "https://named.example/"
            let asked = try await client.call(
                .post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(authorize.tab)", nil, url: named), headers: ext)
            #expect(asked.status == .forbidden && asked.error == "permission_denied", "\(asked.json)")
            let unlisted = try await client.call(
                .post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(accounts.list)", nil, url: named), headers: ext)
            #expect(unlisted.status == .forbidden && unlisted.error == "permission_denied", "\(unlisted.json)")
            let consented = try await client.call(
                .post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(authorize.tab)", nil, url: named), headers: page)
            #expect(consented.status == .ok, "\(consented.json)")
            // Once connected, the extension asking again changes nothing and is answered.
            let again = try await client.call(
                .post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(authorize.tab)", nil, url: named), headers: ext)
            #expect(again.status == .ok, "\(again.json)")
            let widened = try await client.call(
                .post, "/api/polkadot/message",
                json: PolkadotBridgeTests.message("pub(authorize.tab)", ["origin": "x", "accounts": [address]], url: named), headers: ext)
            #expect(widened.status == .forbidden, "\(widened.json)")
            func origin(of auth: HTTPFields) async throws -> (String?, Bool?) {
                let asked = try await client.call(
                    .post, "/api/polkadot/message",
                    json: PolkadotBridgeTests.message("pub(bytes.sign)", ["address": address, "data": "0x6869"]), headers: auth)
                let id = try #require((asked["pending"] as? [String: Any])?["id"] as? String, "\(asked.json)")
                let details = try await client.call(.get, "/api/polkadot/requests/\(id)/details", headers: Client.bearer(token))
                return (details["transport"] as? String, details["verifiedOrigin"] as? Bool)
            }
            #expect(try await origin(of: ext) == ("polkadot-extension", true))
            #expect(try await origin(of: Client.bearer(token)) == ("polkadot-bridge", false))

            // #55: the extension's session answers sites' Polkadot calls, not account changes: every
            // other endpoint refuses it (403), while its own calls still work. (#56: Lock now and
            // revoking a site's grant, which take power away, are its popup's: the test below.)
            let refusals: [(HTTPRequest.Method, String, Any?)] = [
                (.post, "/api/polkadot/accounts", ["name": "Planted"]), (.get, "/api/signer/grants", nil),
                (.post, "/api/signer/sign_event", ["event": ["kind": 1, "content": "x"]]), (.post, "/api/confirmations", ["action": "key.export"]),
                (.get, "/api/signer/history", nil), (.post, "/api/extension/session", [:]), (.get, "/account/credentials", nil),
                (.get, "/api/signer/bunker", nil), (.post, "/logout?everywhere=1", [:]),
                (.get, "/api/polkadot/accounts", nil),
            ]
            for (method, path, body) in refusals {
                let reply = try await client.call(method, path, json: body, headers: ext)
                #expect(reply.status == .forbidden && reply.error == "permission_denied", "\(method) \(path): \(reply.json)")
            }
            // The token sent as a cookie (with a forged Origin) is no session at all: no scope to skip.
            var asCookie: HTTPFields = [.cookie: "keyfob_session=\(extensionToken)"]
            asCookie[.origin] = Harness.origin
            #expect(try await client.call(.get, "/session", headers: asCookie).status == .unauthorized)
            #expect(try await client.call(.get, "/api/signer/history", headers: asCookie).status == .unauthorized)
            let list = try await client.call(
                .post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(accounts.list)", nil), headers: ext)
            #expect(list.status == .ok, "\(list.json)")

            // The sites that may read the public key without asking, for the extension's cache:
            // a site's get_public_key grant, until it is revoked.
            #expect(try await client.call(.get, "/session", headers: ext)["sites"] as? [String] == [])
            #expect(try await client.call(.get, "/session", headers: Client.bearer(token))["sites"] == nil)
            let user = try #require(try await harness.store.user(named: "exa"))
            try await harness.store.insertGrant(
                GrantRecord(
                    id: "g1", userID: user.id, client: "site.example", method: "get_public_key", kind: nil, allow: true,
                    createdAt: Date(), expiresAt: nil))
            #expect(try await client.call(.get, "/session", headers: ext)["sites"] as? [String] == ["site.example"])
            #expect(try await client.call(.delete, "/api/signer/grants/g1", headers: Client.bearer(token)).status == .ok)
            #expect(try await client.call(.get, "/session", headers: ext)["sites"] as? [String] == [])

            // Sign out everywhere: the extension's session ends with the others.
            let ended = try await client.call(
                .post, "/logout?everywhere=1", json: try await client.confirmed([:], "sessions.revoke", by: &authenticator, token: token),
                headers: Client.bearer(token))
            #expect(ended["signedOut"] as? Bool == true, "\(ended.json)")
            #expect(try await client.call(.get, "/session", headers: ext).status == .unauthorized)
            #expect(
                try await client.call(.post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(accounts.list)", nil), headers: ext)
                    .status == .unauthorized)
        }
    }
}

extension ExtensionSessionTests {
    /// A new account (its session token) and the extension connected to it from Keyfob's page (its token).
    static func connectedExtension(_ name: String, _ client: Client) async throws -> (token: String, extensionToken: String) {
        var (token, authenticator) = try await client.newAccount(name)
        var page: HTTPFields = [.cookie: "keyfob_session=\(token)"]
        page[.origin] = Harness.origin
        let (extensionToken, claim) = ExtensionSessionTests.claim()
        let connect = try await client.confirmed(["claim": claim], "extension.connect", by: &authenticator, token: token)
        #expect(try await client.call(.post, "/api/extension/session", json: connect, headers: page).status == .created)
        return (token, extensionToken)
    }

    /// #55: every route the router registers, walked with the extension's token. Outside its scope
    /// (its state, the Polkadot bridge, its own requests, Lock now, a site's grant, signing itself
    /// out) and the public endpoints that take no session, each answers 403 permission_denied.
    @Test func theExtensionsTokenIsRefusedByEveryRouteOutsideItsScope() async throws {
        let harness = try Harness()
        let routes = harness.routes()
        try await harness.run { client in
            let (_, extensionToken) = try await Self.connectedExtension("walk", client)
            let scope: Set<String> = [
                "GET /session", "GET /api/polkadot/requests/{id}", "GET /api/polkadot/requests/{id}/details",
                "POST /api/polkadot/message", "POST /api/polkadot/requests/{id}/reject", "POST /api/signer/lock", "POST /logout",
                "DELETE /api/signer/grants/{id}",
            ]
            // Public: they take no session, so the token is only ignored there.
            let open: Set<String> = [
                "GET /.well-known/apple-app-site-association", "GET /.well-known/assetlinks.json", "GET /.well-known/nostr.json",
                "GET /.well-known/webauthn", "GET /healthz", "GET /metrics", "GET /sealed-account", "GET /callback.html",
                "GET /generate-registration-options", "POST /generate-registration-options", "GET /generate-authentication-options",
                "POST /generate-authentication-options", "POST /verify-registration", "POST /verify-authentication",
                "GET /app/pubkey", "GET /app/sign", "GET /nostrsigner", "GET /nostrsigner/**", "GET /approve/{id}", "GET /connect/**",
                "GET /dashboard", "POST /dashboard/confirm",
            ]
            var walked = 0
            for (method, path) in routes where !scope.contains("\(method) \(path)") && !open.contains("\(method) \(path)") {
                let concrete = path.replacingOccurrences(of: "{method}", with: "sign_event")
                    .replacingOccurrences(of: #"\{[a-z]+\}"#, with: "x", options: .regularExpression)
                    .replacingOccurrences(of: "**", with: "x")
                let body: Any? = method == .get ? nil : [String: Any]()
                let reply = try await client.call(method, concrete, json: body, headers: Client.bearer(extensionToken))
                #expect(reply.status == .forbidden && reply.error == "permission_denied", "\(method) \(path): \(reply.json)")
                walked += 1
            }
            #expect(walked >= 40, "the walk found \(walked) routes outside the scope")
            #expect(Set(routes.map { "\($0.method) \($0.path)" }).isSuperset(of: scope))
        }
    }

    /// #56: the popup says what the current site may do, revokes it, and locks the signer; the
    /// token reaches only web origins' grants (never a bunker app's) and cannot unlock anything.
    @Test func thePopupSeesRevokesAndLocksButNeverABunkerAppsGrant() async throws {
        let harness = try Harness()
        try await harness.run { client in
            let (token, extensionToken) = try await Self.connectedExtension("pop", client)
            let ext = Client.bearer(extensionToken)
            let userID = try await harness.store.user(named: "pop")!.id
            let now = Date()
            let grants = [
                ("g-web", "dapp.example", true), ("g-app", "nip46:" + String(repeating: "b", count: 64), true),
                ("g-refused", "other.example", false), ("g-scheme", "primal", true), ("g-local", "http://127.0.0.1:8080", true),
            ]
            for (id, client, allow) in grants {
                try await harness.store.insertGrant(
                    GrantRecord(id: id, userID: userID, client: client, method: "sign_event", kind: 1, allow: allow, createdAt: now, expiresAt: nil))
            }
            let session = try await client.call(.get, "/session", headers: ext)
            let listed = (session["siteGrants"] as? [[String: Any]])?.compactMap { $0["client"] as? String }
            #expect(Set(listed ?? []) == ["dapp.example", "http://127.0.0.1:8080"], "only web sites' allowances: \(session.json)")
            // A cookie session's /session lists none of it.
            #expect(try await client.call(.get, "/session", headers: Client.bearer(token))["siteGrants"] == nil)

            // A bunker app's grant, a refusal (lifting it would give power back) and an app's: not the token's.
            for id in ["g-app", "g-refused", "g-scheme"] {
                #expect(try await client.call(.delete, "/api/signer/grants/\(id)", headers: ext).status == .notFound, "\(id)")
            }
            #expect(try await client.call(.delete, "/api/signer/grants/g-web", headers: ext).status == .ok)
            #expect(Set(try await harness.store.grants(ofUser: userID, now: now).map(\.id)) == ["g-app", "g-refused", "g-scheme", "g-local"])

            #expect(try await client.call(.post, "/api/signer/lock", json: [:], headers: ext).status == .ok)
            #expect(try await client.session(token)["signerLocked"] as? Bool == true)
            // Locking takes power away; unlocking is not the token's.
            #expect(try await client.call(.post, "/api/signer/unlock", json: [:], headers: ext).status == .forbidden)
        }
    }
}
