import Foundation
import HTTPTypes
import KeyfobCrypto
import NIOConcurrencyHelpers
import Nostr
import Testing
import WebAuthn
import WebAuthnTestSupport

@testable import KeyfobServer
@testable import KeyfobStore

/// Collects response bodies as text.
final class NIOLockedBox: @unchecked Sendable {
    private let lock = NSLock()
    private var parts: [String] = []
    func add(_ json: [String: Any]) {
        let data = (try? JSONSerialization.data(withJSONObject: json)) ?? Data()
        lock.lock(); parts.append(String(decoding: data, as: UTF8.self)); lock.unlock()
    }
    var text: String { lock.lock(); defer { lock.unlock() }; return parts.joined(separator: "\n") }
}

/// Sealing seals the NIP-46 signer too (#24): a new signer key under the data key, the old one
/// gone with its clients; it answers only while its owner has an unlocked session, a request for
/// it waits (unread) until the owner unlocks, and its waiting requests are sealed under it.
@Suite struct SealedBunkerTests {
    @Test func sealingRotatesAndSealsTheSignerWhichAnswersOnlyWhileItsOwnerIsPresent() async throws {
        let harness = try Harness()
        let hub = RelayHub()
        try await harness.run(hub: hub) { client in
            var passkey = SoftwareAuthenticator.withPRF()
            let token = try #require(try await client.signUp(&passkey, username: "alice")["token"] as? String)
            let userID = try await harness.store.user(named: "alice")!.id
            let before = try await client.connectedClient(token: token, hub: hub)
            #expect(try await before.call("ping", [])?["result"] as? String == "pong")

            #expect(try await client.seal(&passkey, token: token).status == .ok)
            let signer = try #require(try await harness.store.bunkerSigner(ofUser: userID))
            #expect(signer.passkeySealed && signer.pubkey != before.signer.hex)
            #expect(try await harness.store.bunkerClients(ofUser: userID).isEmpty)
            // The old signer is gone: its client gets no answer.
            #expect(try await before.reply(to: before.send("ping", []), wait: 0.3) == nil)
            // The master key alone does not open the new signer key.
            let custody = KeyCustody(store: harness.store, vault: harness.vault, now: { harness.clock.now })
            #expect(throws: KeyfobError.self) { try custody.openSigner(signer) }
            if let outer = harness.vault.open(
                nonce: signer.nonce, sealed: signer.sealed, for: .bunkerKeys,
                context: KeyCustody.signerContext(userID, passkeySealed: true))
            {
                #expect((try? SecretKey(bytes: outer))?.publicKey.hex != signer.pubkey)
            }

            // The sealing session is unlocked: a client connects to the new signer and asks.
            let nip46 = try await client.connectedClient(token: token, hub: hub)
            #expect(nip46.signer.hex == signer.pubkey)
            let firstID = try nip46.send("sign_event", [#"{"kind":1,"content":"sealed bunker","tags":[],"created_at":1700000000}"#])
            let id = try approvalID(try await nip46.reply(to: firstID))
            // Waiting, sealed under the signer key: the master key does not open it.
            let waiting = try #require(try await harness.store.pendingRequests(ofUser: userID, now: harness.clock.now, limit: 10).first)
            #expect(waiting.nonce.isEmpty)
            #expect(PendingRequests(store: harness.store, vault: harness.vault, now: { harness.clock.now }).open(waiting) == nil)
            let approved = try await client.call(.post, "/api/requests/\(id)/approve", json: ["remember": "once"], headers: Client.bearer(token))
            #expect(approved.status == .ok, "\(approved.json)")
            let signed = try #require(try await nip46.reply(to: firstID, wait: 1)?["result"] as? String)
            #expect(try verifySignedEvent(JSONSerialization.jsonObject(with: Data(signed.utf8)) as! [String: Any]))

            // The kill switch: the signer shuts; a request waits unread and is answered after the
            // owner signs in and unlocks.
            #expect(try await harness.store.lockAllSessions() > 0)
            let laterID = try nip46.send("ping", [])
            #expect(try await nip46.reply(to: laterID, wait: 0.3) == nil)
            // Handled in the bunker's own task: wait until it has put the request aside.
            for _ in 0..<500 where !harness.logs.lines.contains(where: { $0.contains("nip46.sealed_signer_shut") }) {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(harness.logs.lines.contains { $0.contains("nip46.sealed_signer_shut") })
            let again = try #require(try await client.signIn(&passkey)["token"] as? String)
            #expect(try await nip46.reply(to: laterID, wait: 0.2) == nil)
            #expect(try await client.unlock(&passkey, token: again).status == .ok)
            #expect(try await nip46.reply(to: laterID, wait: 2)?["result"] as? String == "pong")

            // Unsealing keeps the signer key (and its clients) under the master key alone.
            #expect(try await client.seal(&passkey, token: again, path: "/api/signer/unseal").status == .ok)
            let plain = try #require(try await harness.store.bunkerSigner(ofUser: userID))
            #expect(!plain.passkeySealed && plain.pubkey == signer.pubkey)
            #expect(try custody.openSigner(plain).publicKey.hex == signer.pubkey)
            #expect(try await nip46.call("ping", [])?["result"] as? String == "pong")
        }
    }
}

/// Opened signer keys leave memory when their window ends, not when someone next asks (#24).
@Suite struct UnlockedSignersTests {
    @Test func keysPastTheirWindowAreDroppedAndWaitingRequestsAreBounded() throws {
        let signers = UnlockedSigners()
        let t0 = Date()
        let (a, b) = (SecretKey.generate(), SecretKey.generate())
        signers.open(a, userID: "a", until: t0.addingTimeInterval(10))
        signers.open(b, userID: "b", until: t0.addingTimeInterval(100))
        #expect(signers.key(userID: "a", pubkey: a.publicKey.hex, now: t0)?.publicKey == a.publicKey)
        #expect(signers.key(userID: "a", pubkey: b.publicKey.hex, now: t0) == nil)  // another key: not this one
        signers.open(a, userID: "a", until: t0.addingTimeInterval(10))
        signers.closeExpired(now: t0.addingTimeInterval(11))
        #expect(signers.openCount == 1 && signers.key(userID: "b", pubkey: b.publicKey.hex, now: t0.addingTimeInterval(11)) != nil)
        signers.closeAll()
        #expect(signers.openCount == 0)
        // Requests for a shut signer: 16 per user, 5 minutes.
        let event = try Event.parse(
            json: Array(
                #"{"id":"\#(String(repeating: "0", count: 64))","pubkey":"\#(a.publicKey.hex)","created_at":1,"kind":24133,"tags":[],"content":"","sig":"\#(String(repeating: "0", count: 128))"}"#
                    .utf8))
        for _ in 0..<UnlockedSigners.maxWaitingPerUser { #expect(signers.wait(event, userID: "a", now: t0)) }
        #expect(!signers.wait(event, userID: "a", now: t0))
        #expect(signers.waitingCount(userID: "a", now: t0.addingTimeInterval(UnlockedSigners.waitingLifetime + 1)) == 0)
        #expect(signers.takeWaiting(userID: "a", now: t0).count == UnlockedSigners.maxWaitingPerUser)
    }
}
