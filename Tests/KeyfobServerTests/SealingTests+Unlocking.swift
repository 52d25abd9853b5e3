import Foundation
import HTTPTypes
import KeyfobCodecs
import KeyfobCrypto
import NIOConcurrencyHelpers
import Nostr
import Testing
import WebAuthn
import WebAuthnTestSupport

@testable import KeyfobServer
@testable import KeyfobStore

/// The rest of SealingTests: unlocking, the seal's life cycle and what a sealed key refuses.
extension SealingTests {
    @Test func addingAndRemovingPasskeysKeepsTheRightWraps() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var first = SoftwareAuthenticator.withPRF()
            let token = try #require(try await client.signUp(&first, username: "alice")["token"] as? String)
            #expect(try await client.seal(&first, token: token).status == .ok)
            let userID = try await harness.store.user(named: "alice")!.id

            // A second PRF passkey added during the unlocked, unsealed session joins the seal at once.
            var second = SoftwareAuthenticator.withPRF()
            let added = try await client.addPasskey(&second, username: "alice", token: token, by: &first)
            #expect(added.status == .ok && added["sealsKey"] as? Bool == true, "\(added.json)")
            // A third without PRF is added but cannot open the key.
            var third = SoftwareAuthenticator()
            let plain = try await client.addPasskey(&third, username: "alice", token: token, by: &first)
            #expect(plain.status == .ok && plain["sealsKey"] as? Bool == false)
            #expect(Set(try await harness.store.keyWraps(ofUser: userID).map(\.credentialID)) == [first.credentialID, second.credentialID])
            let listed = try await client.call(.get, "/account/credentials", headers: Client.bearer(token))["credentials"] as! [[String: Any]]
            #expect(listed.map { $0["sealsKey"] as? Bool } == [true, true, false])

            // The second one signs in, unlocks and signs.
            let viaSecond = try await client.signInAndUnlock(&second)
            #expect(try await client.signNote(viaSecond).status == .ok)
            // Removing the first removes its wrap; the second cannot be removed then (last sealing passkey).
            let fresh = try #require(try await client.signIn(&second)["token"] as? String)
            let firstID = Base64URL.encode(first.credentialID), secondID = Base64URL.encode(second.credentialID)
            #expect(
                try await client.call(
                    .delete, "/account/credentials/\(firstID)",
                    json: client.confirmed([:], "passkey.remove", target: firstID, by: &second, token: fresh),
                    headers: Client.bearer(fresh)
                ).status == .ok)
            #expect(try await harness.store.keyWraps(ofUser: userID).map(\.credentialID) == [second.credentialID])
            let refused = try await client.call(
                .delete, "/account/credentials/\(secondID)",
                json: client.confirmed([:], "passkey.remove", target: secondID, by: &second, token: fresh),
                headers: Client.bearer(fresh))
            #expect(refused.status == .conflict && (refused["message"] as? String)?.contains("only passkey that can open") == true)
            #expect(try await client.session(fresh)["protection"].flatMap { ($0 as? [String: Any])?["sealedBy"] as? Int } == 1)
        }
    }

    @Test func aPasskeyWithoutPRFSignsInButCannotUnseal() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var sealing = SoftwareAuthenticator.withPRF()
            let token = try #require(try await client.signUp(&sealing, username: "alice")["token"] as? String)
            var plain = SoftwareAuthenticator()
            #expect(try await client.addPasskey(&plain, username: "alice", token: token, by: &sealing).status == .ok)
            #expect(try await client.seal(&sealing, token: token).status == .ok)

            harness.clock.advance(1)
            let signIn = try await client.signIn(&plain)
            #expect(signIn.status == .ok && signIn["signerSealed"] as? Bool == true)
            let viaPlain = try #require(signIn["token"] as? String)
            let session = try await client.session(viaPlain)
            #expect(session["signerLocked"] as? Bool == true)
            #expect((session["protection"] as? [String: Any])?["signerSealed"] as? Bool == true)
            let refused = try await client.signNote(viaPlain)
            #expect(refused.status == .forbidden && refused.error == "signer_locked")
            #expect((refused["message"] as? String)?.contains("sealed by your passkeys") == true)
            // Unlocking offers only the passkeys that can open it (no loop on this one); this one
            // cannot, and is told why.
            let unlockOptions = try await client.call(
                .post, "/api/confirmations", json: ["action": "signer.unlock"],
                headers: Client.bearer(viaPlain))
            let offered = ((unlockOptions["options"] as? [String: Any])?["allowCredentials"] as? [[String: Any]])?.compactMap { $0["id"] as? String }
            #expect(offered == [Base64URL.encode(sealing.credentialID)])
            let notThisOne = try await client.unlock(&plain, token: viaPlain)
            #expect(notThisOne.status == .badRequest && (notThisOne["message"] as? String)?.contains("can't protect your key") == true)
            // The public key needs no secret: it still answers.
            #expect(try await client.signer("get_public_key", token: viaPlain).status == .ok)
            // Sealing with it says why not.
            let noPRF = try await client.seal(&plain, token: viaPlain)
            #expect(noPRF.status == .badRequest && (noPRF["message"] as? String)?.contains("can't protect your key") == true)
            // Export needs the key: refused too.
            #expect(
                try await client.signer(
                    "key/export", client.confirmed(["password": "correct horse"], "key.export", by: &plain, token: viaPlain),
                    token: viaPlain
                ).error == "signer_locked")
        }
    }

    @Test func aPRFOutputFromTheWrongCredentialFailsCleanly() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var sealing = SoftwareAuthenticator.withPRF()
            let token = try #require(try await client.signUp(&sealing, username: "alice")["token"] as? String)
            #expect(try await client.seal(&sealing, token: token).status == .ok)
            // Same credential, another authenticator's PRF secret (what a wrong credential's output is).
            let signIn = try #require(try await client.signIn(&sealing)["token"] as? String)
            var confused = sealing
            confused.prfSecret = randomBytes(32)
            let wrong = try await client.unlock(&confused, token: signIn)
            #expect(wrong.status == .forbidden && wrong.error == "signer_locked")
            sealing.signCount = confused.signCount
            #expect(try await client.signNote(signIn).error == "signer_locked")
            #expect(harness.logs.lines.contains { $0.contains("did not open") })
            // A malformed prfOutput is a clear 400.
            let cred = try await client.confirmation("signer.unlock", by: &sealing, token: signIn)
            let bad = try await client.call(.post, "/api/signer/unlock", json: ["cred": cred, "prfOutput": "short"], headers: Client.bearer(signIn))
            #expect(bad.status == .badRequest && bad.error == "invalid_request")
            // An app's prfOutput field works like the browser's clientExtensionResults.
            let reply = try await client.call(.post, "/api/confirmations", json: ["action": "signer.unlock"], headers: Client.bearer(signIn))
            let options = try #require(reply["options"] as? [String: Any])
            let salt = try #require(prfSalts(options, for: sealing.credentialID)?.first)
            let fields = sealing.authenticationFields(
                challenge: Base64URL.decode(options["challenge"] as! String)!,
                rpID: "localhost", origin: Harness.origin)
            sealing.signCount = fields.signCount
            let viaApp = try await client.call(
                .post, "/api/signer/unlock",
                json: [
                    "cred": try jsonObject(sealing.authenticate(fields)),
                    "prfOutput": Base64URL.encode(sealing.prf(salt)!),
                ],
                headers: Client.bearer(signIn))
            #expect(viaApp.status == .ok, "\(viaApp.json)")
            #expect(try await client.signNote(signIn).status == .ok)
        }
    }

    @Test func logoutKillSwitchAndUnsealDropTheDataKey() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var passkey = SoftwareAuthenticator.withPRF()
            let token = try #require(try await client.signUp(&passkey, username: "alice")["token"] as? String)
            #expect(try await client.seal(&passkey, token: token).status == .ok)
            let a = try await client.signInAndUnlock(&passkey)
            let b = try await client.signInAndUnlock(&passkey)
            #expect(try await harness.store.lockAllSessions() > 0)
            for t in [token, a, b] {
                #expect(try await harness.store.session(tokenHash: sha256(Base64URL.decode(t)!), now: harness.clock.now)?.dataKey == nil)
                #expect(try await client.signNote(t).error == "signer_locked")
            }
            // Unsealing: back to server-protected, every wrap gone, and a plain sign-in signs again.
            let c = try #require(try await client.signIn(&passkey)["token"] as? String)
            let unsealed = try await client.seal(&passkey, token: c, path: "/api/signer/unseal")
            #expect(unsealed.status == .ok && unsealed["summary"] as? String == "server-protected", "\(unsealed.json)")
            let userID = try await harness.store.user(named: "alice")!.id
            #expect(try await harness.store.keyWraps(ofUser: userID).isEmpty)
            var plainSignIn = passkey
            plainSignIn.prfSecret = nil
            let d = try #require(try await client.signIn(&plainSignIn)["token"] as? String)
            #expect(try await client.signNote(d).status == .ok)
            // History records both changes.
            let history = try await client.call(.get, "/api/signer/history", headers: Client.bearer(d))["entries"] as! [[String: Any]]
            #expect(Set(history.compactMap { $0["method"] as? String }).isSuperset(of: ["seal_key", "unseal_key"]))
        }
    }

    @Test func rotationImportAndExportKeepASealedKeySealed() async throws {
        let harness = try Harness()
        let imported = SecretKey.generate()
        let prfSecret = randomBytes(32)
        try await harness.run { client in
            var passkey = SoftwareAuthenticator()
            passkey.prfSecret = prfSecret
            let token = try #require(try await client.signUp(&passkey, username: "alice")["token"] as? String)
            #expect(try await client.seal(&passkey, token: token).status == .ok)
            #expect(
                try await client.signer(
                    "key", client.confirmed(["nsec": NIP19.nsec(imported)], "key.import", by: &passkey, token: token), token: token
                ).status == .ok)
            let export = try await client.signer(
                "key/export", client.confirmed(["password": "correct horse"], "key.export", by: &passkey, token: token),
                token: token)
            let ncryptsec = try #require(export["ncryptsec"] as? String)
            #expect(try NIP49.decrypt(ncryptsec, password: "correct horse").publicKey == imported.publicKey)
        }
        let userID = try await harness.store.user(named: "alice")!.id
        #expect(try await harness.store.nostrKey(ofUser: userID)!.passkeySealed)
        let next = try KeyVault(masterKey: randomBytes(32))
        #expect(try await MasterKeyRotation.rotate(store: harness.store, from: harness.vault, to: next) == 1)
        let rotated = try await harness.store.nostrKey(ofUser: userID)!
        #expect(rotated.passkeySealed && rotated.pubkey == imported.publicKey.hex)
        // Rotated: the new master key opens its layer; the data key layer is untouched, so the
        // passkey's wrap (not under the master key) still opens it.
        let wrap = try #require(try await harness.store.keyWraps(ofUser: userID).first)
        var sameSecret = SoftwareAuthenticator()
        sameSecret.prfSecret = prfSecret
        let output = try #require(sameSecret.prf(wrap.salt))
        let dataKey = try #require(PasskeySeal.unwrapBytes(wrap.wrapped, prfOutput: output, userID: userID, credentialID: wrap.credentialID))
        let custody = KeyCustody(store: harness.store, vault: next, now: { harness.clock.now })
        #expect(try custody.open(rotated, dataKey: SecretBytes(copying: dataKey)).publicKey == imported.publicKey)
        await #expect(throws: KeyfobError.self) { try await custody.withSecretKey(of: userID, unlock: nil) { $0.publicKey } }
    }

    /// Redirect flows for a sealed account: a session that cannot open the key is sent to the
    /// approval page (never a failed callback), and a passkey confirmation from a sealing passkey
    /// opens it there; the receipt holds no PRF output.
    @Test func approvalsOfASealedAccountWaitForASealingPasskey() async throws {
        try await Harness().run { client in
            var sealing = SoftwareAuthenticator.withPRF()
            let first = try #require(try await client.signUp(&sealing, username: "alice")["token"] as? String)
            var plain = SoftwareAuthenticator()
            #expect(try await client.addPasskey(&plain, username: "alice", token: first, by: &sealing).status == .ok)
            #expect(try await client.seal(&sealing, token: first).status == .ok)
            let viaPlain = try #require(try await client.signIn(&plain)["token"] as? String)

            // A kind-1 note: the page says the signer is locked, and approving says why.
            let note = try keyfobRequest(.signEvent, content: #"{"kind":1,"content":"hi","created_at":1700000000}"#, transport: .keyfobLink)
            let (_, location, _) = try await client.open(serverTarget(SignerCodec.buildURL(note)), token: viaPlain)
            let id = String(try #require(location).dropFirst("/approve/".count))
            #expect(try await client.call(.get, "/api/requests/\(id)", headers: Client.bearer(viaPlain))["signerLocked"] as? Bool == true)
            let refused = try await client.call(.post, "/api/requests/\(id)/approve", json: ["remember": "once"], headers: Client.bearer(viaPlain))
            #expect(refused.error == "signer_locked")
            // Still pending: after signing in with the sealing passkey, the same request is approved.
            let viaSealing = try await client.signInAndUnlock(&sealing)
            let approved = try await client.call(.post, "/api/requests/\(id)/approve", json: ["remember": "once"], headers: Client.bearer(viaSealing))
            #expect((approved["redirect"] as? String)?.contains("ok=1") == true, "\(approved.json)")

            // A kind-0 profile (passkey confirmation): the confirming sealing passkey's PRF opens the key.
            let profile = try keyfobRequest(.signEvent, content: #"{"kind":0,"content":"{}","created_at":1700000000}"#, transport: .keyfobLink)
            let (_, location0, _) = try await client.open(serverTarget(SignerCodec.buildURL(profile)), token: viaPlain)
            let id0 = String(try #require(location0).dropFirst("/approve/".count))
            let options = try await client.call(.post, "/api/requests/\(id0)/challenge", json: [:], headers: Client.bearer(viaPlain))
            let byCredential = ((options["extensions"] as? [String: Any])?["prf"] as? [String: Any])?["evalByCredential"] as? [String: Any]
            #expect(byCredential?[Base64URL.encode(sealing.credentialID)] != nil)
            var fields = sealing.authenticationFields(
                challenge: Base64URL.decode(options["challenge"] as! String)!, rpID: "localhost",
                origin: Harness.origin)
            fields.prfSalt = prfSalts(options.json, for: sealing.credentialID)?.first
            #expect(fields.prfSalt?.count == 32)
            sealing.signCount = fields.signCount
            let confirmed = try await client.call(
                .post, "/api/requests/\(id0)/approve",
                json: ["assertion": try jsonObject(sealing.authenticate(fields))], headers: Client.bearer(viaPlain))
            #expect((confirmed["redirect"] as? String)?.contains("ok=1") == true, "\(confirmed.json)")
            let history = try await client.call(.get, "/api/signer/history", headers: Client.bearer(viaPlain))["entries"] as! [[String: Any]]
            let entry = try #require(history.first { $0["kind"] as? Int == 0 && $0["outcome"] as? String == "approved" })
            let receipt = try await client.call(.get, "/api/signer/history/\(entry["id"] as! String)/receipt", headers: Client.bearer(viaPlain))
            let output = Base64URL.encode(sealing.prf(fields.prfSalt!)!)
            let receiptText = String(decoding: try JSONSerialization.data(withJSONObject: receipt.json), as: UTF8.self)
            #expect(receipt.status == .ok && !receiptText.contains(output) && !receiptText.contains("clientExtensionResults"))
        }
    }

    @Test func noPRFOutputOrDataKeyInAnyLogLineOrResponse() async throws {
        let harness = try Harness()
        let seen = NIOLockedBox()
        try await harness.run { client in
            var passkey = SoftwareAuthenticator.withPRF()
            let token = try #require(try await client.signUp(&passkey, username: "alice")["token"] as? String)
            let sealed = try await client.seal(&passkey, token: token)
            seen.add(sealed.json)
            let signIn = try await client.signIn(&passkey)
            seen.add(signIn.json)
            let t = signIn["token"] as! String
            seen.add(try await client.unlock(&passkey, token: t).json)
            for reply in [
                try await client.session(t), try await client.signNote(t),
                try await client.call(.get, "/account/credentials", headers: Client.bearer(t)),
                try await client.call(.get, "/api/signer/history", headers: Client.bearer(t)),
            ] {
                seen.add(reply.json)
            }
            // What the test knows: the PRF output, and the data key its wrap opens to.
            let userID = try await harness.store.user(named: "alice")!.id
            let wrap = try #require(try await harness.store.keyWraps(ofUser: userID).first)
            let output = passkey.prf(wrap.salt)!
            let dataKey = try #require(PasskeySeal.unwrapBytes(wrap.wrapped, prfOutput: output, userID: userID, credentialID: passkey.credentialID))
            let secrets = [output, dataKey].flatMap { [Base64URL.encode($0), Hex.encode($0), Data($0).base64EncodedString()] }
            let text = harness.logs.lines.joined(separator: "\n") + seen.text
            #expect(!harness.logs.lines.isEmpty)
            for secret in secrets { #expect(!text.contains(secret), "a PRF output or data key reached a log line or response") }
        }
    }
}
