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

extension PasskeySeal {
    /// `unwrap`, as an array the test can compare and print.
    static func unwrapBytes(_ wrapped: [UInt8], prfOutput: [UInt8], userID: String, credentialID: [UInt8]) -> [UInt8]? {
        guard let key = unwrap(wrapped, prfOutput: SharedSecret(prfOutput)!, userID: userID, credentialID: credentialID) else { return nil }
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
            let dataKey = try #require(
                PasskeySeal.unwrapBytes(
                    current.wrapped, prfOutput: passkey.prf(current.salt)!, userID: userID,
                    credentialID: passkey.credentialID))
            let legacy = KeyWrapRecord(
                userID: userID, credentialID: passkey.credentialID,
                wrapped: try PasskeySeal.wrap(
                    SecretBytes(copying: dataKey), prfOutput: SharedSecret(passkey.prf(seal.legacySalt))!, userID: userID,
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
            #expect(
                PasskeySeal.unwrapBytes(
                    moved.wrapped, prfOutput: passkey.prf(moved.salt)!, userID: userID,
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
            var fields = passkey.registrationFields(
                challenge: Base64URL.decode(options["challenge"] as! String)!, rpID: "localhost",
                origin: Harness.origin)
            fields.prfSalt = prfSalt(options)
            let made = try await client.call(
                .post, "/verify-registration",
                json: [
                    "username": "alice", "challengeKey": options["challengeKey"] as! String,
                    "cred": try jsonObject(passkey.register(fields)), "seal": true,
                ],
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
            let plainMade = try await client.call(
                .post, "/verify-registration",
                json: [
                    "username": "bob", "challengeKey": plainOptions["challengeKey"] as! String,
                    "cred": try jsonObject(
                        plain.register(
                            plain.registrationFields(
                                challenge: Base64URL.decode(plainOptions["challenge"] as! String)!,
                                rpID: "localhost", origin: Harness.origin))), "seal": true,
                ])
            #expect(plainMade.status == .ok && plainMade["sealsKey"] as? Bool == false)
            #expect(try await harness.store.nostrKey(ofUser: harness.store.user(named: "bob")!.id)?.passkeySealed == false)
        }
    }

    /// Whether a passkey can seal is kept from its creation: yes with a PRF output, no when the browser
    /// said PRF is not enabled, unknown when nothing was said; the account page reads `canSeal`.
    @Test func passkeysRememberWhetherTheyCanSeal() async throws {
        try await Harness().run { client in
            var withPRF = SoftwareAuthenticator.withPRF()
            let made = try await client.signUp(&withPRF, username: "prf")
            #expect(made["canSeal"] as? Bool == true, "\(made.json)")
            var without = SoftwareAuthenticator()
            // Asked for PRF, the browser answers `prf: {enabled: false}`.
            let refused = try await client.signUp(&without, username: "noprf") { $0.prfSalt = [UInt8](repeating: 1, count: 32) }
            #expect(refused.status == .ok && refused["canSeal"] as? Bool == false, "\(refused.json)")
            var silent = SoftwareAuthenticator()
            let unknown = try await client.signUp(&silent, username: "silent")
            #expect(unknown.status == .ok && unknown["canSeal"] == nil)
            for (reply, expected) in [(made, true as Bool?), (refused, false), (unknown, nil)] {
                let listed = try await client.call(.get, "/account/credentials", headers: Client.bearer(reply["token"] as! String))
                let first = try #require((listed["credentials"] as? [[String: Any]])?.first)
                #expect(first["canSeal"] as? Bool == expected)
            }
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
            #expect(
                try await client.signer("get_public_key", token: again)["result"] as? String
                    == first["event"].flatMap { ($0 as? [String: Any])?["pubkey"] as? String })

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
            #expect(
                try await client.signer("key", client.confirmed(["nsec": NIP19.nsec(key)], "key.import", by: &passkey, token: token), token: token)
                    .status == .ok)
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
}
