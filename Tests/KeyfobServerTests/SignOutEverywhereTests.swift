import Foundation
import HTTPTypes
import KeyfobCodecs
import KeyfobCrypto
import Nostr
import Testing
import WebAuthn
import WebAuthnTestSupport

@testable import KeyfobServer
@testable import KeyfobStore

/// The break-in remedy and the lock (DESIGN.md §3): "Sign out everywhere" ends every session,
/// NIP-46 client (and its secret), grant and dapp permission; "Lock now" locks every session;
/// removing a passkey shuts what it opened; strangers cannot fill a sealed signer's queue; a
/// wrong PRF output never replaces a working wrap.
@Suite struct SignOutEverywhereTests {
    static let note = #"{"kind":1,"content":"from the intruder's client","tags":[],"created_at":1700000000}"#

    @Test func signingOutEverywhereDisconnectsEveryAppAndNothingSignsAfterTheOwnerSignsInAgain() async throws {
        let hub = RelayHub()
        try await Harness().run(hub: hub) { client in
            var (token, passkey) = try await client.newAccount("alice")
            let auth = Client.bearer(token)
            // The intruder's NIP-46 client, allowed kind 1 "forever".
            let url = try await client.bunkerURL(token: token)
            let intruder = try NIP46TestClient(hub: hub, signer: url.signer)
            #expect(try await intruder.call("connect", [url.signer.hex, url.secret!])?["result"] as? String == "ack")
            let id = try approvalID(try await intruder.call("sign_event", [Self.note]))
            let approved = try await client.call(.post, "/api/requests/\(id)/approve", json: ["remember": "forever"], headers: auth)
            #expect(approved.status == .ok, "\(approved.json)")
            #expect(try await intruder.reply(to: nil)?["result"] != nil)
            #expect((try await intruder.call("sign_event", [Self.note])?["result"] as? String)?.contains("\"sig\"") == true)
            // A web app's redirect-flow grant ("until I revoke it"), as NIP-07's popup leaves one.
            let link = try SignerCodec.buildURL(keyfobRequest(.signEvent, content: RedirectFlowTests.note, transport: .keyfobLink))
            _ = try await client.approveFlow(link, token: token, remember: "forever")
            #expect(try await client.open(serverTarget(link), token: token).1?.hasPrefix("https://client.example/cb") == true)
            // A Polkadot dapp connected.
            _ = try await client.call(.post, "/api/polkadot/accounts", json: ["name": "Main"], headers: auth)
            let authorize = PolkadotBridgeTests.message("pub(authorize.tab)", nil)
            #expect(try await client.call(.post, "/api/polkadot/message", json: authorize, headers: auth).status == .ok)
            // An unused connect URL the intruder copied.
            let spare = try await client.bunkerURL(token: token)

            let confirmation = try await client.confirmation("sessions.revoke", by: &passkey, token: token)
            let out = try await client.call(.post, "/logout?everywhere=1", json: ["confirmation": confirmation], headers: auth)
            #expect(out.status == .ok && out["apps"] as? Int == 1 && out["grants"] as? Int == 3 && out["sessions"] as? Int == 1, "\(out.json)")
            // #56: what ended, by name, and the passkeys to check.
            let ended = try #require(out["ended"] as? [String: Any], "\(out.json)")
            #expect(ended["extensionSession"] as? Bool == false)
            #expect((ended["apps"] as? [String])?.count == 1)
            #expect((ended["sites"] as? [String])?.contains { $0.contains("client.example") } == true, "\(ended)")
            #expect(out["passkeys"] as? Int == 1 && out["passkeysAddedToday"] as? Int == 1, "\(out.json)")

            // The owner comes back and unlocks: the old client gets nothing, its URL connects nothing.
            let again = try #require(try await client.signIn(&passkey)["token"] as? String)
            #expect(try await client.signNote(again).status == .ok)  // unlocked: the owner signs
            #expect(try await intruder.reply(to: intruder.send("sign_event", [Self.note]), wait: 0.5) == nil)
            #expect(try await intruder.reply(to: intruder.send("get_public_key", []), wait: 0.3) == nil)
            let retry = try NIP46TestClient(hub: hub, signer: spare.signer)
            let refused = try await retry.call("connect", [spare.signer.hex, spare.secret!])
            #expect((refused?["error"] as? String)?.hasPrefix("unauthorized") == true, "\(refused ?? [:])")
            // The web app asks on the approval page again; the dapp must ask again.
            #expect(try await client.open(serverTarget(link), token: again).1?.hasPrefix("/approve/") == true)
            let list = PolkadotBridgeTests.message("pub(accounts.list)", nil)
            let denied = try await client.call(.post, "/api/polkadot/message", json: list, headers: Client.bearer(again))
            #expect(denied.status == .forbidden && denied.error == "permission_denied")
            #expect((try await client.call(.get, "/api/signer/grants", headers: Client.bearer(again))["grants"] as? [Any])?.isEmpty == true)
        }
    }

    /// The break-in story with requests left waiting (#55): the intruder's NIP-46 request, a web
    /// app's redirect request and a Polkadot site's request are cancelled with everything else, the
    /// reply counts them, and each page says the request was cancelled — none can be approved.
    @Test func signingOutEverywhereCancelsEveryWaitingRequest() async throws {
        let hub = RelayHub()
        try await Harness().run(hub: hub) { client in
            var (token, passkey) = try await client.newAccount("brenda")
            let auth = Client.bearer(token)
            let url = try await client.bunkerURL(token: token)
            let intruder = try NIP46TestClient(hub: hub, signer: url.signer)
            #expect(try await intruder.call("connect", [url.signer.hex, url.secret!])?["result"] as? String == "ack")
            let nip46 = try approvalID(try await intruder.call("sign_event", [Self.note]))
            let link = try SignerCodec.buildURL(keyfobRequest(.signEvent, content: RedirectFlowTests.note, transport: .keyfobLink))
            let opened = try #require(try await client.open(serverTarget(link), token: token).1)
            let redirect = String(opened.dropFirst("/approve/".count))
            #expect(try await client.call(.get, "/api/requests/\(redirect)", headers: auth).status == .ok)
            let address = try await client.connectedPolkadotAccount(token: token)
            let asked = try await client.call(
                .post, "/api/polkadot/message",
                json: PolkadotBridgeTests.message("pub(bytes.sign)", ["address": address, "data": "0x6869", "type": "bytes"]), headers: auth)
            let polkadot = try #require((asked["pending"] as? [String: Any])?["id"] as? String, "\(asked.json)")

            let confirmation = try await client.confirmation("sessions.revoke", by: &passkey, token: token)
            let out = try await client.call(.post, "/logout?everywhere=1", json: ["confirmation": confirmation], headers: auth)
            #expect(out.status == .ok && out["requests"] as? Int == 3, "\(out.json)")

            let again = Client.bearer(try #require(try await client.signIn(&passkey)["token"] as? String))
            for id in [nip46, redirect] {
                let gone = try await client.call(.get, "/api/requests/\(id)", headers: again)
                #expect(gone.status == .notFound && gone["state"] as? String == "cancelled", "\(gone.json)")
                #expect((gone["message"] as? String)?.contains("cancelled") == true)
                let approve = try await client.call(.post, "/api/requests/\(id)/approve", json: [:], headers: again)
                #expect(approve.status == .notFound, "\(approve.json)")
            }
            let details = try await client.call(.get, "/api/polkadot/requests/\(polkadot)/details", headers: again)
            #expect(details["state"] as? String == "cancelled", "\(details.json)")
            let challenge = try await client.call(.post, "/api/polkadot/requests/\(polkadot)/challenge", json: [:], headers: again)
            #expect(challenge.status == .notFound, "\(challenge.json)")
        }
    }

    /// A NIP-46 request whose client was disconnected is shown as cancelled, never approved into the void.
    @Test func aRequestWhoseClientIsGoneIsCancelled() async throws {
        let hub = RelayHub()
        try await Harness().run(hub: hub) { client in
            let (token, _) = try await client.newAccount("carla")
            let auth = Client.bearer(token)
            let url = try await client.bunkerURL(token: token)
            let app = try NIP46TestClient(hub: hub, signer: url.signer)
            #expect(try await app.call("connect", [url.signer.hex, url.secret!])?["result"] as? String == "ack")
            let id = try approvalID(try await app.call("sign_event", [Self.note]))
            let clients = try await client.call(.get, "/api/signer/bunker/clients", headers: auth)
            let listed = try #require((clients["clients"] as? [[String: Any]])?.first, "\(clients.json)")
            let pubkey = try #require(listed["pubkey"] as? String ?? listed["clientPubkey"] as? String, "\(listed)")
            let removed = try await client.call(.delete, "/api/signer/bunker/clients/\(pubkey)", headers: auth)
            #expect(removed.status == .ok, "\(removed.json)")
            // No longer listed as waiting, and its page says it is gone.
            let waiting = try await client.call(.get, "/api/requests", headers: auth)
            #expect((waiting["requests"] as? [Any])?.isEmpty == true, "\(waiting.json)")
            let gone = try await client.call(.get, "/api/requests/\(id)", headers: auth)
            #expect(gone.status == .notFound && gone["state"] as? String == "cancelled", "\(gone.json)")
        }
    }

    @Test func lockNowLocksEverySessionOfTheAccountAndIsAudited() async throws {
        try await Harness().run { client in
            var (token, passkey) = try await client.newAccount("bob")
            let other = try #require(try await client.signIn(&passkey)["token"] as? String)
            #expect(try await client.signNote(token).status == .ok)
            #expect(try await client.signNote(other).status == .ok)
            let locked = try await client.call(.post, "/api/signer/lock", headers: Client.bearer(token))
            #expect(locked.status == .ok && locked["sessions"] as? Int == 2, "\(locked.json)")
            #expect(try await client.signNote(token).error == "signer_locked")
            #expect(try await client.signNote(other).error == "signer_locked")
            #expect(try await client.session(other)["signerLocked"] as? Bool == true)  // still signed in
            let history = try await client.call(.get, "/api/signer/history", headers: Client.bearer(token))["entries"] as? [[String: Any]]
            #expect(history?.contains { $0["method"] as? String == "lock" && $0["outcome"] as? String == "approved" } == true)
            #expect(try await client.call(.post, "/api/signer/lock").status == .unauthorized)
        }
    }

    @Test func removingAPasskeyShutsWhatWasOpen() async throws {
        let hub = RelayHub()
        let harness = try Harness()
        try await harness.run(hub: hub) { client in
            var owner = SoftwareAuthenticator.withPRF()
            let token = try #require(try await client.signUp(&owner, username: "carol")["token"] as? String)
            var second = SoftwareAuthenticator.withPRF()
            #expect(try await client.addPasskey(&second, username: "carol", token: token, by: &owner).status == .ok)
            #expect(try await client.seal(&owner, token: token).status == .ok)
            // The sealed signer is open (the sealing session is unlocked): a client connects and asks.
            let nip46 = try await client.connectedClient(token: token, hub: hub)
            #expect(try await nip46.call("ping", [])?["result"] as? String == "pong")
            let confirmation = try await client.confirmation(
                "passkey.remove", target: Base64URL.encode(second.credentialID), by: &owner, token: token)
            let removed = try await client.call(
                .delete, "/account/credentials/\(Base64URL.encode(second.credentialID))", json: ["confirmation": confirmation],
                headers: Client.bearer(token))
            #expect(removed.status == .ok, "\(removed.json)")
            #expect(try await client.signNote(token).error == "signer_locked")
            // The opened sealed signer is shut: the client's request waits, unanswered.
            #expect(try await nip46.reply(to: nip46.send("ping", []), wait: 0.5) == nil)
        }
    }

    /// A sealed account with a connected NIP-46 client, its signer shut by Lock now.
    static func sealedAndLocked(
        _ name: String, _ client: Client, _ hub: RelayHub
    ) async throws -> (SoftwareAuthenticator, String, NIP46TestClient) {
        var owner = SoftwareAuthenticator.withPRF()
        let token = try #require(try await client.signUp(&owner, username: name)["token"] as? String)
        #expect(try await client.seal(&owner, token: token).status == .ok)
        let app = try await client.connectedClient(token: token, hub: hub)
        #expect(try await client.call(.post, "/api/signer/lock", headers: Client.bearer(token)).status == .ok)
        return (owner, token, app)
    }

    /// A sealed signer while its owner is away keeps requests only from clients connected to it:
    /// 40 strangers' requests do not push the real client's out of the queue.
    @Test func strangersCannotFillASealedSignersQueue() async throws {
        let hub = RelayHub()
        try await Harness().run(hub: hub) { client in
            var (owner, token, real) = try await Self.sealedAndLocked("dana", client, hub)
            for _ in 0..<40 {
                try NIP46TestClient(hub: hub, signer: real.signer).send("sign_event", [Self.note])
            }
            let waiting = try real.send("ping", [])
            // Shut: it waits (and only it: the strangers' requests were dropped). A busy machine
            // can take seconds to work through the 41 requests.
            let deadline = Date().addingTimeInterval(30)
            var queued = 0
            while Date() < deadline {
                queued = try await client.session(token)["waitingForUnlock"] as? Int ?? 0
                if queued > 0 { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            try await Task.sleep(for: .milliseconds(200))  // the strangers' last requests handled too
            #expect(try await client.session(token)["waitingForUnlock"] as? Int == 1)
            #expect(try await client.unlock(&owner, token: token).status == .ok)
            #expect(try await real.reply(to: waiting, wait: 15)?["result"] as? String == "pong")
        }
    }

    /// What waits for a shut sealed signer (kept in memory, not in the store) is dropped by sign
    /// out everywhere and counted with the other cancelled requests.
    @Test func signingOutEverywhereCountsWhatWaitedForASealedSigner() async throws {
        let hub = RelayHub()
        try await Harness().run(hub: hub) { client in
            var (owner, token, app) = try await Self.sealedAndLocked("dara", client, hub)
            _ = try app.send("ping", [])
            let deadline = Date().addingTimeInterval(30)
            while Date() < deadline, try await client.session(token)["waitingForUnlock"] as? Int != 1 {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(try await client.session(token)["waitingForUnlock"] as? Int == 1)
            let confirmation = try await client.confirmation("sessions.revoke", by: &owner, token: token)
            let out = try await client.call(
                .post, "/logout?everywhere=1", json: ["confirmation": confirmation], headers: Client.bearer(token))
            #expect(out.status == .ok && out["requests"] as? Int == 1, "\(out.json)")
            let again = try #require(try await client.signIn(&owner)["token"] as? String)
            #expect(try await client.session(again)["waitingForUnlock"] as? Int == 0)
        }
    }

    @Test func aWrongPRFOutputNeverReplacesAWorkingWrap() async throws {
        try await Harness().run { client in
            var passkey = SoftwareAuthenticator.withPRF()
            let token = try #require(try await client.signUp(&passkey, username: "erin")["token"] as? String)
            #expect(try await client.seal(&passkey, token: token).status == .ok)
            let real = passkey.prfSecret
            passkey.prfSecret = randomBytes(32)  // the same passkey, answering with a wrong PRF output
            let wrong = try await client.seal(&passkey, token: token)
            #expect(wrong.status == .conflict && wrong.error == "decrypt_failed", "\(wrong.json)")
            passkey.prfSecret = real
            // The wrap still opens the key.
            _ = try await client.call(.post, "/logout", headers: Client.bearer(token))
            let again = try #require(try await client.signIn(&passkey)["token"] as? String)
            #expect(try await client.unlock(&passkey, token: again).status == .ok)
            #expect(try await client.signNote(again).status == .ok)
        }
    }

    /// Connect secrets are random, single-use and never issued twice: each URL shown has a new one
    /// (the unused one before it stops working), within the same second too.
    @Test func aConnectSecretIsNeverIssuedTwice() async throws {
        let hub = RelayHub()
        try await Harness().run(hub: hub) { client in
            let (token, _) = try await client.newAccount("fay")
            let urls = try await [client.bunkerURL(token: token), client.bunkerURL(token: token), client.bunkerURL(token: token)]
            let secrets = urls.compactMap(\.secret)
            #expect(Set(secrets).count == 3 && secrets.allSatisfy { Base64URL.decode($0)?.count == 32 })
            let replaced = try NIP46TestClient(hub: hub, signer: urls[0].signer)
            #expect((try await replaced.call("connect", [urls[0].signer.hex, secrets[0]])?["error"] as? String)?.hasPrefix("unauthorized") == true)
            let first = try NIP46TestClient(hub: hub, signer: urls[2].signer)
            #expect(try await first.call("connect", [urls[2].signer.hex, secrets[2]])?["result"] as? String == "ack")
            let second = try NIP46TestClient(hub: hub, signer: urls[2].signer)
            #expect((try await second.call("connect", [urls[2].signer.hex, secrets[2]])?["error"] as? String)?.hasPrefix("unauthorized") == true)
            #expect(try await client.bunkerURL(token: token).secret.map { !secrets.contains($0) } == true)
        }
    }

    /// An expired request strands no one: the page gets the way back, which tells a redirect-flow
    /// app in its own spec's form; a decided one says so, with no link (the app has its answer).
    @Test(arguments: [SignerRequest.Transport.keyfobLink, .nip155, .dip05])
    func anExpiredRequestLeadsBackToTheAppWithItsSpecsError(_ transport: SignerRequest.Transport) async throws {
        let harness = try Harness()
        try await harness.run { client in
            let (token, _) = try await client.newAccount("gil")
            let auth = Client.bearer(token)
            let request = try keyfobRequest(.signEvent, content: RedirectFlowTests.note, transport: transport)
            let (_, location, _) = try await client.open(serverTarget(SignerCodec.buildURL(request)), token: token)
            let id = String(try #require(location).dropFirst("/approve/".count))
            harness.clock.advance(301)
            let gone = try await client.call(.get, "/api/requests/\(id)", headers: auth)
            #expect(gone.status == .notFound && gone.error == "request_not_found" && gone["state"] as? String == "expired", "\(gone.json)")
            let back = try #require(gone["back"] as? String, "\(gone.json)")
            #expect(back.hasPrefix("https://client.example/cb"), "\(back)")
            switch transport {
            case .nip155: #expect(back.contains("code=user_cancelled"), "\(back)")
            case .dip05: #expect(back.contains("error=user_rejected"), "\(back)")
            default: #expect(back.contains("ok=0"), "\(back)")
            }

            // Decided: said so, no way back offered (the app got its answer).
            let fresh = try keyfobRequest(.signEvent, content: RedirectFlowTests.note, transport: transport)
            let (_, second, _) = try await client.open(serverTarget(SignerCodec.buildURL(fresh)), token: token)
            let decided = String(try #require(second).dropFirst("/approve/".count))
            #expect(try await client.call(.post, "/api/requests/\(decided)/reject", json: [:], headers: auth).status == .ok)
            let answered = try await client.call(.get, "/api/requests/\(decided)", headers: auth)
            #expect(answered.status == .notFound && answered["state"] as? String == "rejected" && answered["back"] == nil, "\(answered.json)")
            // Someone else's: nothing about it.
            let (other, _) = try await client.newAccount("hal")
            let hidden = try await client.call(.get, "/api/requests/\(decided)", headers: Client.bearer(other))
            #expect(hidden.status == .notFound && hidden["state"] as? String == "unknown" && hidden["back"] == nil)
        }
    }
}
