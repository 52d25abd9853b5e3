import Foundation
import HTTPTypes
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import Testing

@testable import KeyfobServer

/// #55 review: what a site or a session was given ends with it. A Polkadot site's waiting request
/// is cancelled once its permission is revoked; grants written by a request whose session ended
/// meanwhile (sign out everywhere committing in between) are removed; the extension's token sees
/// only the Polkadot requests the extension asked.
@Suite struct PermissionEndTests {
    @Test func aRevokedSitesWaitingRequestIsCancelledNotSigned() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("rena")
            let auth = Client.bearer(token)
            let address = try await client.connectedPolkadotAccount(token: token)
            let asked = try await client.call(
                .post, "/api/polkadot/message",
                json: PolkadotBridgeTests.message("pub(bytes.sign)", ["address": address, "data": "0x6869", "type": "bytes"]), headers: auth)
            let id = try #require((asked["pending"] as? [String: Any])?["id"] as? String, "\(asked.json)")
            let grants = try await client.call(.get, "/api/signer/grants", headers: auth)["grants"] as? [[String: Any]] ?? []
            for grant in grants where (grant["client"] as? String)?.hasPrefix("https://dapp.example") == true {
                #expect(try await client.call(.delete, "/api/signer/grants/\(grant["id"] as! String)", headers: auth).status == .ok)
            }
            let details = try await client.call(.get, "/api/polkadot/requests/\(id)/details", headers: auth)
            #expect(details["state"] as? String == "cancelled", "\(details.json)")
            // Nothing left to sign: no challenge to sign it with.
            let challenge = try await client.call(.post, "/api/polkadot/requests/\(id)/challenge", json: [:], headers: auth)
            #expect(challenge.status == .notFound, "\(challenge.json)")
            let state = try await client.call(.get, "/api/polkadot/requests/\(id)", headers: auth)
            #expect(state["state"] as? String == "cancelled", "\(state.json)")
            #expect((state["outcome"] as? [String: Any])?["result"] == nil, "\(state.json)")
        }
    }

    @Test func theExtensionsTokenSeesOnlyTheRequestsTheExtensionAsked() async throws {
        try await Harness().run { client in
            let (token, extensionToken) = try await ExtensionSessionTests.connectedExtension("tova", client)
            let address = try await client.connectedPolkadotAccount(token: token)
            let asked = try await client.call(
                .post, "/api/polkadot/message",
                json: PolkadotBridgeTests.message("pub(bytes.sign)", ["address": address, "data": "0x6869", "type": "bytes"]),
                headers: Client.bearer(token))
            let id = try #require((asked["pending"] as? [String: Any])?["id"] as? String, "\(asked.json)")
            let ext = Client.bearer(extensionToken)
            #expect(try await client.call(.get, "/api/polkadot/requests/\(id)", headers: ext).status == .notFound)
            #expect(try await client.call(.post, "/api/polkadot/requests/\(id)/reject", json: [:], headers: ext).status == .notFound)
            // The app that asked still sees it waiting.
            #expect(try await client.call(.get, "/api/polkadot/requests/\(id)", headers: Client.bearer(token))["state"] as? String == "pending")
        }
    }

    @Test func grantsWrittenAfterTheirSessionEndedAreRemoved() async throws {
        let harness = try Harness()
        let store = harness.store
        try await harness.run { client in
            let (token, _) = try await client.newAccount("sven")
            let now = Date()
            let raw = try #require(Base64URL.decode(token))
            let session = try #require(try await store.session(tokenHash: sha256(raw), now: now))
            let user = try #require(try await store.user(named: "sven"))
            let auth = Sessions.Authenticated(session: session, user: user, viaCookie: false, token: raw)
            for id in ["g1", "g2"] {
                try await store.insertGrant(
                    GrantRecord(
                        id: id, userID: auth.user.id, client: "evil.example", method: "sign_event", kind: 1, allow: true, createdAt: now,
                        expiresAt: nil))
            }
            // The session still there: nothing happens.
            try await SessionBound.recheck(auth, client: "evil.example", sessions: store, store: store, now: now)
            #expect(try await store.grants(ofUser: auth.user.id, now: now).count == 2)
            // Ended meanwhile: the grants go and the request fails.
            try await store.deleteSession(tokenHash: auth.session.tokenHash)
            await #expect(throws: KeyfobError.self) {
                try await SessionBound.recheck(auth, client: "evil.example", sessions: store, store: store, now: now)
            }
            #expect(try await store.grants(ofUser: auth.user.id, now: now).isEmpty)
        }
    }
}
