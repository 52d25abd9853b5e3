import Foundation
import HTTPTypes
import KeyfobCrypto
@testable import KeyfobServer
@testable import KeyfobStore
import NIOConcurrencyHelpers
import Nostr
import Testing
import WebAuthn
import WebAuthnTestSupport

extension PasskeySeal {
    /// `unwrap`, as an array the test can compare and print.
    static func unwrapBytes(_ wrapped: [UInt8], prfOutput: [UInt8], userID: String, credentialID: [UInt8]) -> [UInt8]? {
        guard let key = unwrap(wrapped, prfOutput: prfOutput, userID: userID, credentialID: credentialID) else { return nil }
        return key.exposedCopy()
    }
}

extension SecretBytes {
    /// A secret from bytes the test keeps.
    init(copying bytes: [UInt8]) {
        var copy = Array(bytes)
        self.init(taking: &copy)
    }
}

extension SoftwareAuthenticator {
    /// An authenticator with PRF (hmac-secret): a random per-credential secret.
    static func withPRF() -> SoftwareAuthenticator {
        var authenticator = SoftwareAuthenticator()
        authenticator.prfSecret = randomBytes(32)
        return authenticator
    }
}

extension Client {
    /// A fresh assertion from `authenticator` on new authentication options, as `/api/signer/seal`
    /// and `/api/signer/unseal` take it.
    func freshAssertion(_ authenticator: inout SoftwareAuthenticator) async throws -> [String: Any] {
        let options = try await authenticationOptions()
        let challenge = Base64URL.decode(options["challenge"] as! String)!
        var fields = authenticator.authenticationFields(challenge: challenge, rpID: "localhost", origin: Harness.origin)
        if authenticator.prfSecret != nil { fields.prfSalt = prfSalt(options) }
        authenticator.signCount = fields.signCount
        return ["cred": try jsonObject(authenticator.authenticate(fields))]
    }

    /// Seals (or unseals, by `path`) with an assertion made for it by `authenticator`.
    func seal(_ authenticator: inout SoftwareAuthenticator, token: String, path: String = "/api/signer/seal") async throws -> Reply {
        let cred = try await confirmation(path.hasSuffix("unseal") ? "key.unseal" : "key.seal", by: &authenticator, token: token)
        return try await call(.post, path, json: ["cred": cred], headers: Client.bearer(token))
    }

    /// Unlocks the session's signer with an assertion made for it (`signer.unlock`): for a sealed
    /// key, `authenticator`'s PRF output opens its wrap.
    func unlock(_ authenticator: inout SoftwareAuthenticator, token: String) async throws -> Reply {
        let cred = try await confirmation("signer.unlock", by: &authenticator, token: token)
        return try await call(.post, "/api/signer/unlock", json: ["cred": cred], headers: Client.bearer(token))
    }

    /// Signs in with `authenticator` and unlocks the signer with it: the token.
    func signInAndUnlock(_ authenticator: inout SoftwareAuthenticator) async throws -> String {
        let token = try #require(try await signIn(&authenticator)["token"] as? String)
        let unlocked = try await unlock(&authenticator, token: token)
        #expect(unlocked.status == .ok, "\(unlocked.json)")
        return token
    }

    func session(_ token: String) async throws -> Reply {
        try await call(.get, "/session", headers: Client.bearer(token))
    }

    func signNote(_ token: String, _ content: String = "sealed") async throws -> Reply {
        try await signer("sign_event", ["event": ["kind": 1, "content": content]], token: token)
    }
}

/// Keys sealed by passkeys (PRF): the database and the master key together cannot sign.
@Suite struct SealingTests {
    /// PRF only when a key must open, and a random salt per wrap (#24): sign-in options never ask
    /// for it; registration and sealing ask with a salt derived from their own random challenge,
    /// stored with the wrap; unlocking asks each sealing passkey for its own wrap's salt; sealing
    /// again gives a new data key and new salts.
    @Test func prfIsAskedOnlyWhenAKeyMustOpenWithASaltPerWrap() async throws {
        let harness = try Harness()
        try await harness.run { client in
            let signIn = try await client.authenticationOptions()
            #expect(signIn["extensions"] == nil, "sign-in options ask for an extension: \(signIn.json)")
            let signUp = try await client.registrationOptions()
            let challenge = try #require((signUp["challenge"] as? String).flatMap(Base64URL.decode))
            #expect(prfSalt(signUp) == PasskeySeal.salt(forChallenge: challenge))
            #expect(try await prfSalt(client.registrationOptions()) != prfSalt(signUp))

            var passkey = SoftwareAuthenticator.withPRF()
            let token = try #require(try await client.signUp(&passkey, username: "alice")["token"] as? String)
            #expect(try await client.seal(&passkey, token: token).status == .ok)
            let userID = try await harness.store.user(named: "alice")!.id
            let wrap = try #require(try await harness.store.keyWraps(ofUser: userID).first)
            #expect(wrap.salt.count == 32 && wrap.salt != PasskeySeal(rpID: "localhost").legacySalt)

            // Unlock options: the wrap's own salt for the sealing passkey, and nothing else.
            let options = try await client.call(.post, "/api/confirmations", json: ["action": "signer.unlock"], headers: Client.bearer(token))
            let salts = try #require(prfSalts(options["options"] as! [String: Any], for: passkey.credentialID))
            #expect(salts.first == wrap.salt && salts.second == nil)

            // Sealing again: a new data key under a new salt; the old PRF output opens nothing.
            let oldOutput = try #require(passkey.prf(wrap.salt))
            #expect(try await client.seal(&passkey, token: token, path: "/api/signer/unseal").status == .ok)
            #expect(try await client.seal(&passkey, token: token).status == .ok)
            let next = try #require(try await harness.store.keyWraps(ofUser: userID).first)
            #expect(next.salt != wrap.salt && next.wrapped != wrap.wrapped)
            #expect(PasskeySeal.unwrapBytes(next.wrapped, prfOutput: oldOutput, userID: userID, credentialID: passkey.credentialID) == nil)
        }
    }

    /// A wrap made when one salt served the whole deployment moves to a fresh salt the first time
    /// it opens: the unlock asks for both, and the wrap is made again under the second.
    @Test func aLegacyWrapMovesToItsOwnSaltOnItsFirstUnlock() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var passkey = SoftwareAuthenticator.withPRF()
            let token = try #require(try await client.signUp(&passkey, username: "alice")["token"] as? String)
            #expect(try await client.seal(&passkey, token: token).status == .ok)
            let userID = try await harness.store.user(named: "alice")!.id
            // Make the wrap what an older Keyfob stored: the deployment salt, no salt column.
            let seal = PasskeySeal(rpID: "localhost")
            let current = try #require(try await harness.store.keyWraps(ofUser: userID).first)
            let dataKey = try #require(PasskeySeal.unwrapBytes(current.wrapped, prfOutput: passkey.prf(current.salt)!, userID: userID,
                                                          credentialID: passkey.credentialID))
            let legacy = KeyWrapRecord(userID: userID, credentialID: passkey.credentialID,
                                       wrapped: try PasskeySeal.wrap(SecretBytes(copying: dataKey), prfOutput: passkey.prf(seal.legacySalt)!, userID: userID,
                                                                     credentialID: passkey.credentialID),
                                       createdAt: current.createdAt)
            #expect(try await harness.store.putKeyWrap(legacy))
            #expect(try await harness.store.keyWraps(ofUser: userID).first?.salt == [])

            let viaSignIn = try #require(try await client.signIn(&passkey)["token"] as? String)
            let options = try await client.call(.post, "/api/confirmations", json: ["action": "signer.unlock"], headers: Client.bearer(viaSignIn))
            let salts = try #require(prfSalts(options["options"] as! [String: Any], for: passkey.credentialID))
            #expect(salts.first == seal.legacySalt && salts.second?.count == 32)
            #expect(try await client.unlock(&passkey, token: viaSignIn).status == .ok)
            #expect(try await client.signNote(viaSignIn).status == .ok)
            let moved = try #require(try await harness.store.keyWraps(ofUser: userID).first)
            #expect(moved.salt.count == 32 && moved.salt != seal.legacySalt)
            #expect(PasskeySeal.unwrapBytes(moved.wrapped, prfOutput: passkey.prf(moved.salt)!, userID: userID,
                                            credentialID: passkey.credentialID) == dataKey)
        }
    }

    /// Sealed at sign-up: the key is sealed in the transaction that creates the account, so no
    /// server-protected copy of it ever exists; a passkey without PRF gets an ordinary account
    /// and is told so.
    @Test func aKeySealedAtSignUpIsNeverServerProtected() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var passkey = SoftwareAuthenticator.withPRF()
            let options = try await client.registrationOptions(username: "alice")
            passkey.userHandle = Base64URL.decode((options["user"] as! [String: Any])["id"] as! String)
            var fields = passkey.registrationFields(challenge: Base64URL.decode(options["challenge"] as! String)!, rpID: "localhost",
                                                    origin: Harness.origin)
            fields.prfSalt = prfSalt(options)
            let made = try await client.call(.post, "/verify-registration",
                                             json: ["username": "alice", "challengeKey": options["challengeKey"] as! String,
                                                    "cred": try jsonObject(passkey.register(fields)), "seal": true],
                                             headers: Client.wantsToken)
            #expect(made.status == .ok && made["sealsKey"] as? Bool == true, "\(made.json)")
            let token = try #require(made["token"] as? String)
            let userID = try await harness.store.user(named: "alice")!.id
            let record = try #require(try await harness.store.nostrKey(ofUser: userID))
            #expect(record.passkeySealed && record.version == 1)
            #expect(try await client.session(token)["protection"].flatMap { ($0 as? [String: Any])?["summary"] as? String } == "sealed by 1 passkey")
            // The new session holds the data key: it signs at once.
            let signed = try await client.signNote(token)
            #expect(try signed.status == .ok && verifySignedEvent(signed["event"] as! [String: Any]))
            // Without a session, nothing opens it.
            await #expect(throws: KeyfobError.self) {
                try await KeyCustody(store: harness.store, vault: harness.vault, now: { harness.clock.now })
                    .withSecretKey(of: userID, unlock: nil) { $0.publicKey }
            }

            var plain = SoftwareAuthenticator()
            let plainOptions = try await client.registrationOptions(username: "bob")
            plain.userHandle = Base64URL.decode((plainOptions["user"] as! [String: Any])["id"] as! String)
            let plainMade = try await client.call(.post, "/verify-registration",
                                                  json: ["username": "bob", "challengeKey": plainOptions["challengeKey"] as! String,
                                                         "cred": try jsonObject(plain.register(plain.registrationFields(
                                                             challenge: Base64URL.decode(plainOptions["challenge"] as! String)!,
                                                             rpID: "localhost", origin: Harness.origin))), "seal": true])
            #expect(plainMade.status == .ok && plainMade["sealsKey"] as? Bool == false)
            #expect(try await harness.store.nostrKey(ofUser: harness.store.user(named: "bob")!.id)?.passkeySealed == false)
        }
    }

    /// A server-protected key row put back while the user's wraps exist (a restore from before
    /// sealing) is refused with a clear error and an operator log line; nothing is signed with it.
    @Test func aKeyRowRestoredFromBeforeTheSealIsRefused() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var passkey = SoftwareAuthenticator.withPRF()
            let token = try #require(try await client.signUp(&passkey, username: "alice")["token"] as? String)
            let userID = try await harness.store.user(named: "alice")!.id
            let before = try #require(try await harness.store.nostrKey(ofUser: userID))
            #expect(try await client.seal(&passkey, token: token).status == .ok)
            // The attacker (a database writer) puts the old row back.
            let sealed = try #require(try await harness.store.nostrKey(ofUser: userID))
            var restored = before
            restored.version = sealed.version
            (restored.nonce, restored.sealed) = try harness.vault.seal(
                KeyCustody(store: harness.store, vault: harness.vault, now: { harness.clock.now }).open(before)
                    .withUnsafeSecretBytes { $0 }, userID: userID, version: sealed.version)
            try await harness.store.replaceNostrKey(restored, expectedVersion: sealed.version)
            let refused = try await client.signNote(token)
            #expect(refused.status == .conflict && refused.error == "key_rolled_back", "\(refused.json)")
            #expect(harness.logs.lines.contains { $0.contains("key.rollback_refused") })
            // A session without the data key is refused the same way (not signed unattended).
            let other = try #require(try await client.signIn(&passkey)["token"] as? String)
            #expect(try await client.signNote(other).error == "key_rolled_back")
        }
    }

    @Test func sealSignInSignLockCannotSign() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var passkey = SoftwareAuthenticator.withPRF()
            let token = try #require(try await client.signUp(&passkey, username: "alice")["token"] as? String)
            #expect(try await client.session(token)["protection"].flatMap { ($0 as? [String: Any])?["summary"] as? String } == "server-protected")
            let sealed = try await client.seal(&passkey, token: token)
            #expect(sealed.status == .ok, "\(sealed.json)")
            #expect(sealed["level"] as? String == "passkeys" && sealed["summary"] as? String == "sealed by 1 passkey")
            // The sealing session holds the data key: it signs at once.
            let first = try await client.signNote(token)
            #expect(try first.status == .ok && verifySignedEvent(first["event"] as! [String: Any]))

            // Sign out, sign in with the sealing passkey: the sign-in opens nothing (no PRF);
            // unlocking with it does.
            _ = try await client.call(.post, "/logout", headers: Client.bearer(token))
            let signIn = try await client.signIn(&passkey)
            #expect(signIn["signerSealed"] as? Bool == true)
            let again = try #require(signIn["token"] as? String)
            #expect(try await client.signNote(again).error == "signer_locked")
            let unlocked = try await client.unlock(&passkey, token: again)
            #expect(unlocked.status == .ok && unlocked["signerLocked"] as? Bool == false, "\(unlocked.json)")
            let session = try await client.session(again)
            #expect(session["signerLocked"] as? Bool == false)
            #expect((session["protection"] as? [String: Any])?["signerSealed"] as? Bool == false)
            let signed = try await client.signNote(again)
            #expect(try signed.status == .ok && verifySignedEvent(signed["event"] as! [String: Any]))
            #expect(try await client.signer("get_public_key", token: again)["result"] as? String == first["event"].flatMap { ($0 as? [String: Any])?["pubkey"] as? String })

            // The unlock window ends: locked, and the session's copy of the data key is swept.
            harness.clock.advance(TimeInterval(harness.configuration.signerUnlockTTL + 1))
            #expect(try await client.signNote(again).error == "signer_locked")
            _ = try await harness.store.sweepExpired(now: harness.clock.now, limit: 100)
            let hash = sha256(Base64URL.decode(again)!)
            #expect(try await harness.store.session(tokenHash: hash, now: harness.clock.now)?.dataKey == nil)
        }
    }

    @Test func theDatabaseAndTheMasterKeyTogetherCannotOpenASealedKey() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keyfob-seal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("keyfob.sqlite").path
        let harness = try Harness(databasePath: path)
        let key = SecretKey.generate()
        let secret = key.withUnsafeSecretBytes { $0 }
        let serverProtected = NIOLockedValueBox<[UInt8]>([])
        try await harness.run { client in
            var passkey = SoftwareAuthenticator.withPRF()
            let token = try #require(try await client.signUp(&passkey, username: "alice")["token"] as? String)
            #expect(try await client.signer("key", client.confirmed(["nsec": NIP19.nsec(key)], "key.import", by: &passkey, token: token), token: token).status == .ok)
            let before = try #require(try await harness.store.nostrKey(ofUser: harness.store.user(named: "alice")!.id))
            serverProtected.withLockedValue { $0 = before.sealed }
            #expect(try await client.seal(&passkey, token: token).status == .ok)
            // Still signed in (its session holds a copy of the data key) while the database is read.
            #expect(try await client.signNote(token).status == .ok)
        }
        let userID = try await harness.store.user(named: "alice")!.id
        let record = try #require(try await harness.store.nostrKey(ofUser: userID))
        #expect(record.passkeySealed)
        // The server-protected row sealing replaced is gone from the files at once, WAL included
        // (checkpointed after the change; secure_delete zeroes the freed page).
        var files = [UInt8]()
        for file in [path, path + "-wal"] { files += (FileManager.default.contents(atPath: file).map { [UInt8]($0) } ?? []) }
        let old = serverProtected.withLockedValue { $0 }
        #expect(old.count > 32 && !contains(files, Array(old.prefix(32))), "the pre-seal ciphertext is still in the database files")

        // Every blob in every table, tried with the master key alone in every way the vault opens
        // things: none is or opens to the secret key.
        let connection = try SQLiteConnection(path: path)
        var blobs: [[UInt8]] = []
        for table in try connection.query("SELECT name FROM sqlite_master WHERE type = 'table'").compactMap({ $0.first?.text }) {
            for row in try connection.query("SELECT * FROM \(table)") {
                for value in row { if let blob = value.blob { blobs.append(blob) } else if let text = value.text { blobs.append(Array(text.utf8)) } }
            }
        }
        #expect(blobs.count > 10)
        var opened = 0
        for blob in blobs {
            #expect(!contains(blob, secret))
            var attempts: [[UInt8]] = []
            if blob.count > 28 {
                let (nonce, rest) = (Array(blob.prefix(12)), Array(blob.dropFirst(12)))
                for sealed in [true, false] {
                    for version in 1...4 {
                        if let plain = harness.vault.open(nonce: nonce, sealed: rest, userID: userID, version: version, passkeySealed: sealed) {
                            attempts.append(plain)
                        }
                    }
                }
            }
            for version in 1...4 {
                for sealed in [true, false] {
                    if let plain = harness.vault.open(nonce: record.nonce, sealed: blob, userID: userID, version: version, passkeySealed: sealed) {
                        attempts.append(plain)
                    }
                }
            }
            for plain in attempts {
                opened += 1
                #expect(!contains(plain, secret), "the master key alone opened the secret key")
                #expect((try? SecretKey(bytes: plain)) == nil || plain != secret)
            }
        }
        // The master key does open its own layer (so the test really tried), and finds only the inner ciphertext.
        #expect(opened >= 1)
        // Custody with the database and the master key but no session cannot sign.
        let custody = KeyCustody(store: harness.store, vault: harness.vault, now: { harness.clock.now })
        do {
            _ = try await custody.withSecretKey(of: userID, unlock: nil) { $0.publicKey }
            Issue.record("a sealed key opened without a session")
        } catch let error as KeyfobError {
            #expect(error.code == .signerLocked)
        }
        // Not with a stored session either: the token that opens its copy is stored only as a hash.
        let sessions = try connection.query("SELECT token_hash, data_key FROM sessions WHERE data_key IS NOT NULL")
        #expect(sessions.count == 1)
        for row in sessions {
            let hash = row[0].blob!
            let stored = try #require(try await harness.store.session(tokenHash: hash, now: harness.clock.now))
            let guess = SessionUnlock(token: hash, session: stored)
            let opened = guess.dataKey(at: harness.clock.now) != nil
            #expect(!opened)
        }
    }

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
            #expect(try await client.call(.delete, "/account/credentials/\(firstID)",
                                          json: client.confirmed([:], "passkey.remove", target: firstID, by: &second, token: fresh),
                                          headers: Client.bearer(fresh)).status == .ok)
            #expect(try await harness.store.keyWraps(ofUser: userID).map(\.credentialID) == [second.credentialID])
            let refused = try await client.call(.delete, "/account/credentials/\(secondID)",
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
            let unlockOptions = try await client.call(.post, "/api/confirmations", json: ["action": "signer.unlock"],
                                                      headers: Client.bearer(viaPlain))
            let offered = ((unlockOptions["options"] as? [String: Any])?["allowCredentials"] as? [[String: Any]])?.compactMap { $0["id"] as? String }
            #expect(offered == [Base64URL.encode(sealing.credentialID)])
            let notThisOne = try await client.unlock(&plain, token: viaPlain)
            #expect(notThisOne.status == .badRequest && (notThisOne["message"] as? String)?.contains("no PRF output") == true)
            // The public key needs no secret: it still answers.
            #expect(try await client.signer("get_public_key", token: viaPlain).status == .ok)
            // Sealing with it says why not.
            let noPRF = try await client.seal(&plain, token: viaPlain)
            #expect(noPRF.status == .badRequest && (noPRF["message"] as? String)?.contains("no PRF output") == true)
            // Export needs the key: refused too.
            #expect(try await client.signer("key/export", client.confirmed(["password": "correct horse"], "key.export", by: &plain, token: viaPlain),
                                            token: viaPlain).error == "signer_locked")
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
            let fields = sealing.authenticationFields(challenge: Base64URL.decode(options["challenge"] as! String)!,
                                                      rpID: "localhost", origin: Harness.origin)
            sealing.signCount = fields.signCount
            let viaApp = try await client.call(.post, "/api/signer/unlock",
                                               json: ["cred": try jsonObject(sealing.authenticate(fields)),
                                                      "prfOutput": Base64URL.encode(sealing.prf(salt)!)],
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
            #expect(try await client.signer("key", client.confirmed(["nsec": NIP19.nsec(imported)], "key.import", by: &passkey, token: token), token: token).status == .ok)
            let export = try await client.signer("key/export", client.confirmed(["password": "correct horse"], "key.export", by: &passkey, token: token),
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
            var fields = sealing.authenticationFields(challenge: Base64URL.decode(options["challenge"] as! String)!, rpID: "localhost",
                                                      origin: Harness.origin)
            fields.prfSalt = prfSalts(options.json, for: sealing.credentialID)?.first
            #expect(fields.prfSalt?.count == 32)
            sealing.signCount = fields.signCount
            let confirmed = try await client.call(.post, "/api/requests/\(id0)/approve",
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
            for reply in [try await client.session(t), try await client.signNote(t),
                          try await client.call(.get, "/account/credentials", headers: Client.bearer(t)),
                          try await client.call(.get, "/api/signer/history", headers: Client.bearer(t))] {
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
            if let outer = harness.vault.open(nonce: signer.nonce, sealed: signer.sealed, for: .bunkerKeys,
                                              context: KeyCustody.signerContext(userID, passkeySealed: true)) {
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
        let event = try Event.parse(json: Array(#"{"id":"\#(String(repeating: "0", count: 64))","pubkey":"\#(a.publicKey.hex)","created_at":1,"kind":24133,"tags":[],"content":"","sig":"\#(String(repeating: "0", count: 128))"}"#.utf8))
        for _ in 0..<UnlockedSigners.maxWaitingPerUser { #expect(signers.wait(event, userID: "a", now: t0)) }
        #expect(!signers.wait(event, userID: "a", now: t0))
        #expect(signers.waitingCount(userID: "a", now: t0.addingTimeInterval(UnlockedSigners.waitingLifetime + 1)) == 0)
        #expect(signers.takeWaiting(userID: "a", now: t0).count == UnlockedSigners.maxWaitingPerUser)
    }
}
