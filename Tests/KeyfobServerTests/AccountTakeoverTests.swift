import Foundation
import HTTPTypes
@testable import KeyfobServer
import KeyfobStore
import NIOConcurrencyHelpers
import Nostr
import Testing
import WebAuthn
import WebAuthnTestSupport

/// DESIGN.md §3: a stolen session token alone must not be able to hand the account to someone else.
@Suite struct AccountTakeoverTests {
    @Test func aLockedSessionCannotAddOrRemoveAPasskey() async throws {
        let harness = try Harness { $0.signerUnlockTTL = 30 }
        try await harness.run { client in
            var (token, _) = try await client.newAccount("alice")
            var second = SoftwareAuthenticator()
            #expect(try await client.signUp(&second, username: "alice", headers: Client.bearer(token)).status == .ok)
            harness.clock.advance(31)  // the thief's copy of the token is locked now
            var thief = SoftwareAuthenticator()
            let add = try await client.signUp(&thief, username: "alice", headers: Client.bearer(token))
            #expect(add.status == .forbidden && add.error == "signer_locked")
            let remove = try await client.call(.delete, "/account/credentials/\(Base64URL.encode(second.credentialID))",
                                               headers: Client.bearer(token))
            #expect(remove.status == .forbidden && remove.error == "signer_locked")
            #expect(try await harness.store.credentials(ofUser: harness.store.user(named: "alice")!.id).count == 2)
            // Options fetched while unlocked do not help once the lock falls before verification.
            var again = SoftwareAuthenticator()
            token = try await client.signIn(&second)["token"] as! String
            let options = try await client.registrationOptions(username: "alice", headers: Client.bearer(token))
            #expect(options.status == .ok)
            harness.clock.advance(31)
            again.userHandle = Base64URL.decode((options["user"] as! [String: Any])["id"] as! String)
            let fields = again.registrationFields(challenge: Base64URL.decode(options["challenge"] as! String)!,
                                                  rpID: "localhost", origin: Harness.origin)
            let late = try await client.verifyRegistration(again.register(fields), username: "alice",
                                                           challengeKey: "alice", headers: Client.bearer(token))
            #expect(late.error == "signer_locked")
        }
    }

    @Test func aSessionBornFromAddingAPasskeyStartsLocked() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("alice")
            var second = SoftwareAuthenticator()
            let added = try await client.signUp(&second, username: "alice", headers: Client.bearer(token))
            let newToken = try #require(added["token"] as? String)
            let session = try await client.call(.get, "/session", headers: Client.bearer(newToken))
            #expect(session.status == .ok && session["signerLocked"] as? Bool == true)
            #expect(try await client.signer("sign_event", ["event": ["kind": 1, "content": "x"]], token: newToken).error == "signer_locked")
            var third = SoftwareAuthenticator()
            #expect(try await client.signUp(&third, username: "alice", headers: Client.bearer(newToken)).error == "signer_locked")
            // Signing in with the new passkey is what unlocks.
            let signIn = try await client.signIn(&second)
            #expect(try await client.signer("get_public_key", token: signIn["token"] as? String).status == .ok)
        }
    }

    @Test func removingAPasskeyEndsTheSessionsItStarted() async throws {
        try await Harness().run { client in
            let (first, _) = try await client.newAccount("alice")
            var second = SoftwareAuthenticator()
            let bornLocked = try await client.signUp(&second, username: "alice", headers: Client.bearer(first))["token"] as! String
            let viaSecond = try await client.signIn(&second)["token"] as! String
            let removed = try await client.call(.delete, "/account/credentials/\(Base64URL.encode(second.credentialID))",
                                                headers: Client.bearer(first))
            #expect(removed.status == .ok)
            for token in [bornLocked, viaSecond] {
                #expect(try await client.call(.get, "/session", headers: Client.bearer(token)).status == .unauthorized)
            }
            #expect(try await client.call(.get, "/session", headers: Client.bearer(first)).status == .ok)
        }
    }

    @Test func logoutEverywhereEndsEverySession() async throws {
        try await Harness().run { client in
            var (first, authenticator) = try await client.newAccount("alice")
            let second = try await client.signIn(&authenticator)["token"] as! String
            let (bob, _) = try await client.newAccount("bob")
            _ = try await client.call(.post, "/logout?everywhere=1", headers: Client.bearer(first))
            for token in [first, second] {
                #expect(try await client.call(.get, "/session", headers: Client.bearer(token)).status == .unauthorized)
            }
            #expect(try await client.call(.get, "/session", headers: Client.bearer(bob)).status == .ok)
        }
    }
}

@Suite struct AuditLogTests {
    @Test func historyIsNewestFirstPagedAndHoldsNoSecrets() async throws {
        let harness = try Harness()
        try await harness.run { client in
            let (token, _) = try await client.newAccount("alice")
            let peer = SecretKey.generate().publicKey.hex
            _ = try await client.signer("sign_event", ["event": ["kind": 1, "content": "plaintext-one"]], token: token)
            _ = try await client.signer("nip44_encrypt", ["plaintext": "plaintext-two", "pubkey": peer], token: token)
            _ = try await client.signer("nip44_decrypt", ["ciphertext": "garbage-ciphertext", "pubkey": peer], token: token)
            _ = try await client.signer("sign_event", ["event": ["kind": 14, "content": "plaintext-three"]], token: token)
            let (other, _) = try await client.newAccount("bob")
            _ = try await client.signer("get_public_key", token: other)

            let page1 = try await client.call(.get, "/api/signer/history?limit=3", headers: Client.bearer(token))
            let entries1 = try #require(page1["entries"] as? [[String: Any]])
            #expect(entries1.map { $0["method"] as? String } == ["sign_event", "nip44_decrypt", "nip44_encrypt"])
            #expect(entries1[0]["outcome"] as? String == "failed" && entries1[0]["code"] as? String == "permission_denied")
            #expect(entries1[0]["kind"] as? Int == 14)
            #expect(entries1[1]["code"] as? String == "decrypt_failed")
            #expect(entries1.allSatisfy { $0["client"] as? String == "api" && $0["transport"] as? String == "rest" })
            let cursor = try #require(page1["next"] as? String)
            let page2 = try await client.call(.get, "/api/signer/history?limit=3&before=\(cursor)", headers: Client.bearer(token))
            let entries2 = try #require(page2["entries"] as? [[String: Any]])
            #expect(entries2.count == 1 && entries2[0]["method"] as? String == "sign_event")
            #expect(entries2[0]["outcome"] as? String == "approved" && (entries2[0]["eventId"] as? String)?.count == 64)
            #expect(page2["next"] == nil)
            let all = try await harness.store.auditEntries(ofUser: harness.store.user(named: "alice")!.id, before: nil, limit: 100)
            for secret in ["plaintext-one", "plaintext-two", "plaintext-three", "garbage-ciphertext", token] {
                #expect(!"\(all)".contains(secret))
            }
            #expect(try await client.call(.get, "/api/signer/history?limit=0", headers: Client.bearer(token)).status == .badRequest)
            #expect(try await client.call(.get, "/api/signer/history?before=x", headers: Client.bearer(token)).status == .badRequest)
            #expect(try await client.call(.get, "/api/signer/history").status == .unauthorized)
        }
    }
}

/// A full run of every signer path with a capturing logger; then every secret the run used is
/// looked for in every log line.
@Suite struct NoSecretsInLogsTests {
    @Test func noTokenKeyOrPlaintextReachesALogLine() async throws {
        let harness = try Harness()
        let collected = NIOLockedValueBox<[String]>([])
        try await harness.run { client in
            func note(_ values: String...) { collected.withLockedValue { $0 += values } }
            var (token, authenticator) = try await client.newAccount("alice")
            note(token)
            let key = SecretKey.generate()
            let nsec = NIP19.nsec(key)
            let hex = key.withUnsafeSecretBytes { Hex.encode($0) }
            note(nsec, hex, hex.uppercased())
            _ = try await client.signer("key", ["nsec": nsec], token: token)
            _ = try await client.signer("key", ["secret": hex], token: token)
            let ncryptsec = try NIP49.encrypt(key, password: "import-password-1", logN: 1)
            note(ncryptsec, "import-password-1")
            _ = try await client.signer("key", ["ncryptsec": ncryptsec, "password": "import-password-1"], token: token)
            _ = try await client.signer("key", ["ncryptsec": ncryptsec, "password": "wrong-password-2"], token: token)
            note("wrong-password-2")
            let export = try await client.call(.post, "/api/signer/key/export", json: ["password": "export-password-3"],
                                               headers: Client.bearer(token))
            note("export-password-3", export["ncryptsec"] as! String)
            let peer = SecretKey.generate()
            let mine = key.publicKey
            _ = try await client.signer("sign_event", ["event": ["kind": 1, "content": "note-plaintext-4"]], token: token)
            let c04 = try await client.signer("nip04_encrypt", ["plaintext": "nip04-plaintext-5", "pubkey": peer.publicKey.hex], token: token)
            let c44 = try await client.signer("nip44_encrypt", ["plaintext": "nip44-plaintext-6", "pubkey": peer.publicKey.hex], token: token)
            note("note-plaintext-4", "nip04-plaintext-5", "nip44-plaintext-6", c04["result"] as! String, c44["result"] as! String)
            let inbound = try NIP44.encrypt("inbound-plaintext-7", from: peer, to: mine)
            note("inbound-plaintext-7", inbound)
            _ = try await client.signer("nip44_decrypt", ["ciphertext": inbound, "pubkey": peer.publicKey.hex], token: token)
            _ = try await client.signer("nip44_decrypt", ["ciphertext": inbound + "AA", "pubkey": peer.publicKey.hex], token: token)
            _ = try await client.signer("nip04_decrypt", ["ciphertext": "bad-ciphertext-8", "pubkey": peer.publicKey.hex], token: token)
            note("bad-ciphertext-8")
            let second = try await client.signIn(&authenticator)["token"] as! String
            note(second)
            harness.clock.advance(601)
            _ = try await client.signer("sign_event", ["event": ["kind": 1, "content": "locked-plaintext-9"]], token: second)
            note("locked-plaintext-9")
            _ = try await client.call(.post, "/logout", headers: Client.bearer(second))
        }
        let lines = harness.logs.lines
        #expect(lines.count > 10)
        #expect(lines.contains { $0.contains("signer.approved") } && lines.contains { $0.contains("signer.failed") })
        for secret in collected.withLockedValue({ $0 }) {
            for line in lines where line.contains(secret) {
                Issue.record("a secret (\(secret.prefix(6))…) reached a log line: \(line.prefix(120))")
            }
        }
    }
}
