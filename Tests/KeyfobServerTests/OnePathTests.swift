import Foundation
import HTTPTypes
import Hummingbird
import Nostr
import Testing
import WebAuthn

@testable import KeyfobServer
@testable import KeyfobStore

/// Every key operation goes through `SignerDispatcher.perform` (#44): over its limit it is refused
/// and audited, on every transport — one entry for a burst of refusals, not one each — and when
/// its audit entry cannot be written, nothing is answered.
@Suite struct OnePathTests {
    /// The caller's audit entries refused for their limit.
    static func limitEntries(_ client: Client, token: String, transport: String) async throws -> [[String: Any]] {
        let history = try await client.call(.get, "/api/signer/history", headers: Client.bearer(token))
        let entries = try #require(history["entries"] as? [[String: Any]], "\(history.json)")
        return entries.filter { $0["transport"] as? String == transport && $0["code"] as? String == "rate_limited" }
    }

    @Test func restSigningOverTheLimitIsRefusedAndAuditedOnce() async throws {
        try await Harness { $0.signRate = 2 }.run { client in
            let (token, _) = try await client.newAccount("rita")
            #expect(try await client.signNote(token).status == .ok)
            #expect(try await client.signNote(token).status == .ok)
            for _ in 0..<3 {
                let refused = try await client.signNote(token)
                #expect(refused.status == .tooManyRequests && refused.error == "rate_limited", "\(refused.json)")
            }
            let entries = try await Self.limitEntries(client, token: token, transport: "rest")
            #expect(entries.count == 1 && entries[0]["method"] as? String == "sign_event" && entries[0]["outcome"] as? String == "failed")
        }
    }

    @Test func nip46SigningOverTheLimitIsRefusedAndAudited() async throws {
        let hub = RelayHub()
        try await Harness { $0.signRate = 2 }.run(hub: hub) { client in
            let (token, _) = try await client.newAccount("nina")
            let nip46 = try await client.clientSigningForever(token: token, hub: hub)
            // The client's own limit (its key): two more run, the third is refused.
            for expected in ["\"sig\"", "\"sig\"", "rate_limited"] {
                let reply = try await nip46.call("sign_event", [#"{"kind":1,"content":"again","tags":[]}"#])
                let text = (reply?["result"] as? String ?? "") + (reply?["error"] as? String ?? "")
                #expect(text.contains(expected), "\(reply ?? [:])")
            }
            let entries = try await Self.limitEntries(client, token: token, transport: "nip46")
            #expect(entries.count == 1 && entries[0]["method"] as? String == "sign_event", "\(entries)")
        }
    }

    @Test func aRedirectApprovalOverTheLimitIsRefusedAndAudited() async throws {
        try await Harness { $0.signRate = 1 }.run { client in
            let (token, _) = try await client.newAccount("rhea")
            var outcomes: [String] = []
            for _ in 0..<2 {
                let request = try keyfobRequest(.signEvent, content: RedirectFlowTests.note, transport: .keyfobLink)
                let (_, location, _) = try await client.open(serverTarget(SignerCodec.buildURL(request)), token: token)
                let id = String(try #require(location).dropFirst("/approve/".count))
                let reply = try await client.call(
                    .post, "/api/requests/\(id)/approve", json: ["remember": "once"], headers: Client.bearer(token))
                #expect(reply.status == .ok, "\(reply.json)")
                outcomes.append(reply["redirect"] as? String ?? "")
            }
            // The second approval's way back carries the refusal, not a signature.
            #expect(outcomes[0].contains("sig") && !outcomes[1].contains("sig") && outcomes[1].contains("rate_limited"), "\(outcomes)")
            let entries = try await Self.limitEntries(client, token: token, transport: "redirect")
            #expect(entries.count == 1 && entries[0]["method"] as? String == "sign_event", "\(entries)")
        }
    }

    @Test func polkadotSigningOverTheLimitIsRefusedAndAudited() async throws {
        try await Harness { $0.signRate = 3 }.run { client in
            // Creating the account spends one token; queuing a request one more.
            let (token, _) = try await client.newAccount("pia")
            _ = try await client.pendingPolkadotSignature(token: token)
            let raw: [String: Any] = ["address": try await client.polkadotAddress(token: token), "data": "0x1234", "type": "bytes"]
            let message = PolkadotBridgeTests.message("pub(bytes.sign)", raw)
            let second = try await client.call(.post, "/api/polkadot/message", json: message, headers: Client.bearer(token))
            #expect(second.status == .accepted, "\(second.json)")
            let refused = try await client.call(.post, "/api/polkadot/message", json: message, headers: Client.bearer(token))
            #expect(refused.status == .tooManyRequests && refused.error == "rate_limited", "\(refused.json)")
            let entries = try await Self.limitEntries(client, token: token, transport: "polkadot-bridge")
            #expect(entries.count == 1 && entries[0]["method"] as? String == "polkadot.sign_raw", "\(entries)")
        }
    }

    @Test func aNip46SignatureIsNotAnsweredWhenItsEntryCannotBeWritten() async throws {
        let hub = RelayHub()
        let harness = try Harness()
        try await harness.run(hub: hub) { client in
            let (token, _) = try await client.newAccount("nell")
            let nip46 = try await client.clientSigningForever(token: token, hub: hub)
            try AuditFailureTests.breakAudit(harness.store)
            // The grant would run it at once; with no entry it answers no signature.
            let reply = try await nip46.reply(to: try nip46.send("sign_event", [#"{"kind":1,"content":"unrecorded","tags":[]}"#]), wait: 3)
            #expect(reply?["result"] as? String == nil || (reply?["result"] as? String)?.contains("\"sig\"") == false, "\(reply ?? [:])")
            #expect((reply?["error"] as? String)?.hasPrefix("store_unavailable") == true, "got \(String(describing: reply))")
        }
    }
}

extension OnePathTests {
    /// #55: a request that reaches the signer while its store cannot be read (the signer lookup
    /// itself fails) is answered `store_unavailable`, as every other transport answers, not silence.
    @Test func aNip46RequestDuringAStoreOutageIsAnsweredStoreUnavailable() async throws {
        let hub = RelayHub()
        let harness = try Harness()
        try await harness.run(hub: hub) { client in
            let (token, _) = try await client.newAccount("olga")
            let nip46 = try await client.connectedClient(token: token, hub: hub)
            let stranger = try NIP46TestClient(hub: hub, signer: try await client.bunkerURL(token: token).signer)
            try harness.store.write { try harness.store.connection.execute("ALTER TABLE bunker_signers RENAME TO bunker_signers_away") }
            // A key that never connected gets silence, outage or not.
            #expect(try await stranger.reply(to: try stranger.send("get_public_key", []), wait: 1) == nil)
            let reply = try await nip46.reply(to: try nip46.send("get_public_key", []), wait: 3)
            #expect((reply?["error"] as? String)?.hasPrefix("store_unavailable") == true, "got \(String(describing: reply))")
            try harness.store.write { try harness.store.connection.execute("ALTER TABLE bunker_signers_away RENAME TO bunker_signers") }
            let back = try await nip46.reply(to: try nip46.send("get_public_key", []), wait: 3)
            #expect((back?["result"] as? String)?.count == 64, "got \(String(describing: back))")
        }
    }
}

extension Client {
    /// A connected NIP-46 client whose first kind-1 signature was approved "forever" on the
    /// approval page: the next ones run at once, through the grant.
    func clientSigningForever(token: String, hub: RelayHub) async throws -> NIP46TestClient {
        let nip46 = try await connectedClient(token: token, hub: hub)
        let id = try approvalID(try await nip46.call("sign_event", [RedirectFlowTests.note]))
        let approved = try await call(.post, "/api/requests/\(id)/approve", json: ["remember": "forever"], headers: Client.bearer(token))
        #expect(approved.status == .ok, "\(approved.json)")
        return nip46
    }

    /// The address of the account's first Polkadot account.
    func polkadotAddress(token: String) async throws -> String {
        let listed = try await call(.get, "/api/polkadot/accounts", headers: Client.bearer(token))
        let accounts = try #require(listed["accounts"] as? [[String: Any]], "\(listed.json)")
        return try #require(accounts.first?["address"] as? String)
    }
}
