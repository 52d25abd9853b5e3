import Foundation
import HTTPTypes
import KeyfobCodecs
import KeyfobStore
import NIOConcurrencyHelpers
import Nostr
import Testing
import WebAuthn
import WebAuthnTestSupport

@testable import KeyfobServer

/// DESIGN.md §3: a stolen session token alone must not be able to hand the account to someone else
/// (#24): every account change needs a passkey assertion made for it, by a passkey the account
/// had before the session signed in.
@Suite struct AccountTakeoverTests {
    /// The review's attack, step by step, with nothing but a session token taken inside the
    /// unlock window: each step is refused and nothing changes.
    @Test func aStolenUnlockedTokenCannotTakeTheAccount() async throws {
        let harness = try Harness()
        try await harness.run { client in
            let (token, _) = try await client.newAccount("alice")
            let userID = try #require(try await harness.store.user(named: "alice")).id
            let before = try await client.signer("get_public_key", token: token)["result"] as? String
            let bearer = Client.bearer(token)
            // 1. Register the thief's authenticator.
            var thief = SoftwareAuthenticator()
            let add = try await client.signUp(&thief, username: "alice", headers: bearer)
            #expect(add.status == .forbidden && add.error == "confirmation_required", "\(add)")
            // 2. Make a passkey join the seal with an ordinary sign-in assertion (the old "fresh assertion").
            let options = try await client.authenticationOptions()
            var fields = thief.authenticationFields(
                challenge: Base64URL.decode(options["challenge"] as! String)!,
                rpID: "localhost", origin: Harness.origin)
            fields.userHandle = userID
            let seal = try await client.call(
                .post, "/api/signer/seal", json: ["cred": try jsonObject(thief.authenticate(fields))],
                headers: bearer)
            #expect(seal.error == "challenge_not_found", "\(seal)")
            // 3. Export the key under the thief's password.
            let export = try await client.call(.post, "/api/signer/key/export", json: ["password": "thief-password"], headers: bearer)
            #expect(export.status == .forbidden && export.error == "confirmation_required")
            // 4. Replace the key with one the thief knows.
            let imported = try await client.signer("key", ["nsec": NIP19.nsec(SecretKey.generate())], token: token)
            #expect(imported.error == "confirmation_required")
            // 5. Delete the owner's passkey, and sign every device out.
            let owners = try await harness.store.credentials(ofUser: userID)
            let remove = try await client.call(.delete, "/account/credentials/\(Base64URL.encode(owners[0].id))", headers: bearer)
            #expect(remove.error == "confirmation_required")
            let everywhere = try await client.call(.post, "/logout?everywhere=1", headers: bearer)
            #expect(everywhere.error == "confirmation_required")
            // Nothing changed: one passkey, the same key, server-protected, the session still there.
            #expect(try await harness.store.credentials(ofUser: userID).map(\.id) == owners.map(\.id))
            #expect(try await client.signer("get_public_key", token: token)["result"] as? String == before)
            #expect(try await harness.store.nostrKey(ofUser: userID)?.passkeySealed == false)
            #expect(try await client.call(.get, "/session", headers: bearer).status == .ok)
        }
    }

    /// What a confirmation is good for: one action, one target, one session, once, 2 minutes,
    /// and only from a passkey older than the session.
    @Test func aConfirmationConfirmsOneActionOnOneTargetForOneSessionOnce() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var (token, owner) = try await client.newAccount("alice")
            let bearer = Client.bearer(token)
            // The owner adds a second passkey (confirmed), still in this session.
            var second = SoftwareAuthenticator()
            let confirmed = try await client.confirmation("passkey.add", by: &owner, token: token)
            #expect(try await client.signUp(&second, username: "alice", headers: bearer, confirmation: confirmed).status == .ok)
            let secondID = Base64URL.encode(second.credentialID)
            func remove(_ confirmation: Any) async throws -> Reply {
                try await client.call(.delete, "/account/credentials/\(secondID)", json: ["confirmation": confirmation], headers: bearer)
            }
            // A confirmation of another action, or of the same action on another target.
            #expect(try await remove(client.confirmation("key.export", by: &owner, token: token)).error == "challenge_not_found")
            #expect(
                try await remove(client.confirmation("passkey.remove", target: "AAAA", by: &owner, token: token)).error
                    == "challenge_not_found")
            // Made in another session of the same account.
            let other = try await client.signIn(&owner)["token"] as! String
            #expect(
                try await remove(client.confirmation("passkey.remove", target: secondID, by: &owner, token: other)).error
                    == "challenge_not_found")
            // Expired after 2 minutes.
            let stale = try await client.confirmation("passkey.remove", target: secondID, by: &owner, token: token)
            harness.clock.advance(121)
            #expect(try await remove(stale).error == "challenge_expired")
            // The passkey added in this session cannot confirm for it (nor is it offered).
            let offered = try await client.call(
                .post, "/api/confirmations", json: ["action": "passkey.remove", "target": secondID],
                headers: bearer)
            let allowed = (offered["options"] as? [String: Any])?["allowCredentials"] as? [[String: Any]]
            #expect(allowed?.compactMap { $0["id"] as? String } == [Base64URL.encode(owner.credentialID)])
            #expect(
                try await remove(client.confirmation("passkey.remove", target: secondID, by: &second, token: token)).error
                    == "permission_denied")
            // A confirmation's challenge does not sign anyone in.
            let reply = try await client.call(.post, "/api/confirmations", json: ["action": "key.export"], headers: bearer)
            let options = try #require(reply["options"] as? [String: Any])
            let fields = owner.authenticationFields(
                challenge: Base64URL.decode(options["challenge"] as! String)!,
                rpID: "localhost", origin: Harness.origin)
            #expect(try await client.verifyAuthentication(owner.authenticate(fields)).error == "challenge_not_found")
            // The right one works once.
            let good = try await client.confirmation("passkey.remove", target: secondID, by: &owner, token: token)
            #expect(try await remove(good).status == .ok)
            #expect(try await remove(good).status != .ok)
            #expect(
                try await client.call(.post, "/api/confirmations", json: ["action": "nothing"], headers: bearer).error
                    == "invalid_request")
        }
    }

    @Test func theTokenIsInTheJSONOnlyForAClientThatAsksAndIsNotABrowser() async throws {
        try await Harness().run { client in
            var owner = SoftwareAuthenticator()
            let options = try await client.registrationOptions(username: "alice")
            owner.userHandle = Base64URL.decode((options["user"] as! [String: Any])["id"] as! String)
            let fields = owner.registrationFields(
                challenge: Base64URL.decode(options["challenge"] as! String)!,
                rpID: "localhost", origin: Harness.origin)
            let body: [String: Any] = ["cred": try jsonObject(owner.register(fields)), "challengeKey": options["challengeKey"]!]
            let reply = try await client.call(.post, "/verify-registration", json: body)
            #expect(reply.status == .ok && reply["token"] == nil)
            #expect(reply.headers[.setCookie]?.contains("keyfob_session=") == true)
            var browser = Client.wantsToken
            browser[HTTPField.Name("Sec-Fetch-Site")!] = "same-origin"
            for (headers, expected) in [(Client.wantsToken, true), (browser, false)] {
                let options = try await client.authenticationOptions()
                let fields = owner.authenticationFields(
                    challenge: Base64URL.decode(options["challenge"] as! String)!,
                    rpID: "localhost", origin: Harness.origin)
                owner.signCount += 1
                let signIn = try await client.call(
                    .post, "/verify-authentication", json: ["cred": try jsonObject(owner.authenticate(fields))],
                    headers: headers)
                #expect(signIn.status == .ok && (signIn["token"] is String) == expected, "\(signIn)")
            }
        }
    }

    @Test func anAnonymousAccountAddsASecondPasskey() async throws {
        try await Harness().run { client in
            var owner = SoftwareAuthenticator()
            let created = try await client.signUp(&owner)
            let token = try #require(created["token"] as? String)
            let name = try #require(created["username"] as? String)
            #expect(name.hasPrefix("anon-"))
            // The passkey picker shows a name a person reads, not the anon- handle (#27).
            let options = try await client.registrationOptions(
                username: name, headers: Client.bearer(token),
                confirmation: try await client.confirmation("passkey.add", by: &owner, token: token))
            let shown = (options["user"] as? [String: Any])?["name"] as? String
            #expect(shown == "Keyfob account " + name.dropFirst(5).prefix(4), "\(options.json)")
            var second = SoftwareAuthenticator()
            let confirmation = try await client.confirmation("passkey.add", by: &owner, token: token)
            let added = try await client.signUp(&second, username: name, headers: Client.bearer(token), confirmation: confirmation)
            #expect(added.status == .ok, "\(added)")
            // Another account's anon- name is still reserved (and not the caller's).
            #expect(try await client.registrationOptions(username: "anon-000000000000").error == "invalid_request")
        }
    }

    @Test func aSessionBornFromAddingAPasskeyStartsLocked() async throws {
        try await Harness().run { client in
            var (token, owner) = try await client.newAccount("alice")
            var second = SoftwareAuthenticator()
            let added = try await client.signUp(
                &second, username: "alice", headers: Client.bearer(token),
                confirmation: try await client.confirmation("passkey.add", by: &owner, token: token))
            let newToken = try #require(added["token"] as? String)
            let session = try await client.call(.get, "/session", headers: Client.bearer(newToken))
            #expect(session.status == .ok && session["signerLocked"] as? Bool == true)
            #expect(try await client.signer("sign_event", ["event": ["kind": 1, "content": "x"]], token: newToken).error == "signer_locked")
            // Signing in with the new passkey is what unlocks.
            let signIn = try await client.signIn(&second)
            #expect(try await client.signer("get_public_key", token: signIn["token"] as? String).status == .ok)
        }
    }

    @Test func removingAPasskeyEndsTheSessionsItStarted() async throws {
        try await Harness().run { client in
            var (first, owner) = try await client.newAccount("alice")
            var second = SoftwareAuthenticator()
            let bornLocked =
                try await client.signUp(
                    &second, username: "alice", headers: Client.bearer(first),
                    confirmation: try await client.confirmation("passkey.add", by: &owner, token: first))["token"] as! String
            let viaSecond = try await client.signIn(&second)["token"] as! String
            let id = Base64URL.encode(second.credentialID)
            let removed = try await client.call(
                .delete, "/account/credentials/\(id)",
                json: ["confirmation": try await client.confirmation("passkey.remove", target: id, by: &owner, token: first)],
                headers: Client.bearer(first))
            #expect(removed.status == .ok)
            for token in [bornLocked, viaSecond] {
                #expect(try await client.call(.get, "/session", headers: Client.bearer(token)).status == .unauthorized)
            }
            #expect(try await client.call(.get, "/session", headers: Client.bearer(first)).status == .ok)
            // Both changes are in the history the account page shows at the top.
            let history = try await client.call(.get, "/api/signer/history", headers: Client.bearer(first))["entries"] as? [[String: Any]]
            #expect(history?.prefix(2).compactMap { $0["method"] as? String } == ["remove_passkey", "add_passkey"])
        }
    }

    @Test func logoutEverywhereEndsEverySession() async throws {
        try await Harness().run { client in
            var (first, authenticator) = try await client.newAccount("alice")
            let second = try await client.signIn(&authenticator)["token"] as! String
            let (bob, _) = try await client.newAccount("bob")
            let confirmation = try await client.confirmation("sessions.revoke", by: &authenticator, token: first)
            _ = try await client.call(.post, "/logout?everywhere=1", json: ["confirmation": confirmation], headers: Client.bearer(first))
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
            func confirmed(_ action: String) async throws -> Any {
                try await client.confirmation(action, by: &authenticator, token: token)
            }
            _ = try await client.signer("key", ["nsec": nsec, "confirmation": confirmed("key.import")], token: token)
            _ = try await client.signer("key", ["secret": hex, "confirmation": confirmed("key.import")], token: token)
            let ncryptsec = try NIP49.encrypt(key, password: "import-password-1", logN: 1)
            note(ncryptsec, "import-password-1")
            _ = try await client.signer(
                "key",
                [
                    "ncryptsec": ncryptsec, "password": "import-password-1",
                    "confirmation": confirmed("key.import"),
                ], token: token)
            _ = try await client.signer(
                "key",
                [
                    "ncryptsec": ncryptsec, "password": "wrong-password-2",
                    "confirmation": confirmed("key.import"),
                ], token: token)
            note("wrong-password-2")
            let export = try await client.call(
                .post, "/api/signer/key/export",
                json: ["password": "export-password-3", "confirmation": confirmed("key.export")],
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
