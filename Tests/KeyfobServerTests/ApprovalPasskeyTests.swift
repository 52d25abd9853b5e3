import Foundation
import Nostr

import Testing

@testable import KeyfobServer

/// #56: what the extension's popup promises of a site's nostr calls — "each request is approved
/// in a Keyfob window (Polkadot always with your passkey; nostr with it when locked or for
/// protected kinds), unless you allowed it before" — for every NIP-07 call and a spread of kinds.
@Suite struct ApprovalPasskeyTests {
    /// Opens `request` as a page's call and reads what its approval page is told.
    static func asked(_ client: Client, _ request: SignerRequest, token: String) async throws -> (id: String, view: Reply) {
        let (_, location, _) = try await client.open(serverTarget(SignerCodec.buildURL(request)), token: token)
        let id = String(try #require(location).dropFirst("/approve/".count))
        return (id, try await client.call(.get, "/api/requests/\(id)", headers: Client.bearer(token)))
    }

    @Test func nostrCallsAskForThePasskeyOnlyWhenLockedOrForProtectedKinds() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("alice")
            let peer = SecretKey.generate().publicKey
            func event(_ kind: Int) -> String { #"{"kind":\#(kind),"content":"x","tags":[]}"# }
            var plain: [SignerRequest] = [
                try keyfobRequest(.getPublicKey, transport: .keyfobLink),
                try keyfobRequest(.nip04Encrypt, content: "hi", transport: .nip155, peer: peer),
                try keyfobRequest(.nip44Encrypt, content: "hi", transport: .nip155, peer: peer),
            ]
            for kind in [1, 6, 7, 16, 1111, 9734, 30023] { plain.append(try keyfobRequest(.signEvent, content: event(kind), transport: .keyfobLink)) }
            // Unlocked: one click, no passkey.
            for request in plain {
                let (id, view) = try await Self.asked(client, request, token: token)
                #expect(view["needsPasskey"] as? Bool == false && view["signerLocked"] as? Bool == false, "\(request.method) \(view.json)")
                let approved = try await client.call(.post, "/api/requests/\(id)/approve", json: [:], headers: Client.bearer(token))
                #expect(approved.status == .ok, "\(request.method) \(request.content): \(approved.json)")
            }
            // Protected kinds: always the passkey, locked or not; never allowed in advance.
            for kind in [0, 3, 5, 10002, 22242, 24133, 27235, 30078] {
                let request = try keyfobRequest(.signEvent, content: event(kind), transport: .keyfobLink)
                let (id, view) = try await Self.asked(client, request, token: token)
                #expect(view["needsPasskey"] as? Bool == true && view["remember"] as? [String] == ["once"], "kind \(kind)")
                let refused = try await client.call(.post, "/api/requests/\(id)/approve", json: [:], headers: Client.bearer(token))
                #expect(refused.status == .forbidden && refused.error == "user_verification_required", "kind \(kind): \(refused.json)")
            }
            // Locked: every call asks the passkey, and a click alone signs nothing.
            #expect(try await client.call(.post, "/api/signer/lock", json: [:], headers: Client.bearer(token)).status == .ok)
            for request in plain {
                let (id, view) = try await Self.asked(client, request, token: token)
                #expect(view["signerLocked"] as? Bool == true, "\(request.method) \(view.json)")
                let refused = try await client.call(.post, "/api/requests/\(id)/approve", json: [:], headers: Client.bearer(token))
                #expect(refused.status == .forbidden && refused.error == "signer_locked", "\(request.method): \(refused.json)")
            }
        }
    }
}
