import COpenSSL
import Foundation
import HTTPTypes
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import Logging
import Nostr
import Testing
import WebAuthn
import WebAuthnTestSupport

@testable import KeyfobServer

@Suite struct KeyCustodyTests {
    @Test func importAndExportEveryForm() async throws {
        try await Harness().run { client in
            let (token, firstPasskey) = try await client.newAccount("alice")
            var owner = firstPasskey
            let key = SecretKey.generate()
            for body in [
                ["nsec": NIP19.nsec(key)], ["secret": key.withUnsafeSecretBytes { Hex.encode($0) }],
                ["ncryptsec": try NIP49.encrypt(key, password: "pässword", logN: 16), "password": "pässword"],
            ] {
                _ = try await client.importKey(["secret": Hex.encode(SecretKey.generate().withUnsafeSecretBytes { $0 })], token: token, by: &owner)
                let reply = try await client.importKey(body, token: token, by: &owner)
                #expect(reply.status == .ok && reply["pubkey"] as? String == key.publicKey.hex, "\(reply.json)")
                #expect(reply["npub"] as? String == NIP19.npub(key.publicKey))
            }
            let export = try await client.call(
                .post, "/api/signer/key/export", json: client.confirmed(["password": "correct horse"], "key.export", by: &owner, token: token),
                headers: Client.bearer(token))
            let ncryptsec = try #require(export["ncryptsec"] as? String)
            #expect(export["nsec"] == nil && !export.json.description.contains("nsec1"))
            let (_, data) = try #require(Bech32.decode(ncryptsec))
            #expect(data[1] >= 16)  // log_n
            let back = try NIP49.decrypt(ncryptsec, password: "correct horse")
            #expect(back.publicKey == key.publicKey)

            let short = try await client.call(
                .post, "/api/signer/key/export", json: client.confirmed(["password": "short"], "key.export", by: &owner, token: token),
                headers: Client.bearer(token))
            #expect(short.status == .badRequest)
            for bad: [String: Any] in [
                [:], ["nsec": "nsec1xyz"], ["secret": "00"], ["secret": String(repeating: "0", count: 64)],
                ["secret": String(repeating: "f", count: 64)], ["nsec": NIP19.npub(key.publicKey)],
                ["ncryptsec": ncryptsec], ["ncryptsec": ncryptsec, "password": "wrong"],
                ["nsec": NIP19.nsec(key), "secret": "00"],
            ] {
                let reply = try await client.importKey(bad, token: token, by: &owner)
                #expect(reply.status.code / 100 == 4 && reply.error != nil, "\(bad): \(reply.json)")
            }
        }
    }

    /// P4 (#55): an ncryptsec check costs an scrypt run with no passkey: an account may start 10 at
    /// once and 30 an hour, whatever its sessions, on a pool of its own; the next is `rate_limited`.
    @Test func scryptRunsAreRatedPerAccount() async throws {
        try await Harness { $0.signRate = 1000 }.run { client in
            let (token, passkey) = try await client.newAccount("stretch")
            var owner = passkey
            let second = try #require(try await client.signIn(&owner)["token"] as? String)
            let key = SecretKey.generate()
            let body: [String: Any] = ["ncryptsec": try NIP49.encrypt(key, password: "pässword", logN: 4), "password": "pässword"]
            var statuses: [UInt] = []
            for n in 0..<11 {
                let reply = try await client.call(.post, "/api/signer/key/check", json: body, headers: Client.bearer(n % 2 == 0 ? token : second))
                statuses.append(UInt(reply.status.code))
            }
            #expect(statuses.prefix(10).allSatisfy { $0 == 200 } && statuses.last == 429, "\(statuses)")
        }
    }

    /// The account page checks a key before asking to replace: the check names the key's npub, says
    /// when it is the key already held, refuses what the import would refuse, and changes nothing.
    @Test func aKeyIsCheckedBeforeItReplacesAnything() async throws {
        try await Harness().run { client in
            let (token, firstPasskey) = try await client.newAccount("alice")
            var owner = firstPasskey
            let auth = Client.bearer(token)
            let before = try await client.call(.get, "/session", headers: auth)["npub"] as? String
            let key = SecretKey.generate()
            for body in [
                ["nsec": NIP19.nsec(key)], ["secret": key.withUnsafeSecretBytes { Hex.encode($0) }],
                ["ncryptsec": try NIP49.encrypt(key, password: "pässword", logN: 16), "password": "pässword"],
            ] {
                let checked = try await client.call(.post, "/api/signer/key/check", json: body, headers: auth)
                #expect(checked.status == .ok && checked["npub"] as? String == NIP19.npub(key.publicKey), "\(checked.json)")
                #expect(checked["sameAsCurrent"] as? Bool == false)
                #expect(!checked.json.description.contains("nsec1"))
            }
            #expect(try await client.call(.get, "/session", headers: auth)["npub"] as? String == before)
            for bad: [String: Any] in [[:], ["nsec": "nsec1xyz"], ["secret": "00"], ["nsec": NIP19.npub(key.publicKey)]] {
                let reply = try await client.call(.post, "/api/signer/key/check", json: bad, headers: auth)
                #expect(reply.status == .badRequest && reply.error != nil, "\(bad): \(reply.json)")
            }
            let wrong = try await client.call(
                .post, "/api/signer/key/check",
                json: ["ncryptsec": try NIP49.encrypt(key, password: "right", logN: 16), "password": "wrong"], headers: auth)
            #expect(wrong.status.code / 100 == 4 && wrong.error != nil)
            #expect(try await client.call(.post, "/api/signer/key/check", json: ["nsec": NIP19.nsec(key)]).status == .unauthorized)
            // Once imported, the same key is recognised as the one held.
            #expect(try await client.importKey(["nsec": NIP19.nsec(key)], token: token, by: &owner).status == .ok)
            let same = try await client.call(.post, "/api/signer/key/check", json: ["nsec": NIP19.nsec(key)], headers: auth)
            #expect(same["sameAsCurrent"] as? Bool == true)
        }
    }

    /// scrypt at log_n 20 takes 1 GiB: the import path refuses it before deriving anything.
    @Test func anExpensiveNcryptsecIsRefusedBeforeScrypt() async throws {
        try await Harness().run { client in
            let (token, firstPasskey) = try await client.newAccount("alice")
            var owner = firstPasskey
            let cheap = try NIP49.encrypt(SecretKey.generate(), password: "pw", logN: 1)
            var (_, data) = Bech32.decode(cheap)!
            data[1] = 20
            let reply = try await client.importKey(
                ["ncryptsec": Bech32.encode(hrp: "ncryptsec", data: data), "password": "pw"], token: token, by: &owner)
            #expect(reply.status == .badRequest && reply.error == "invalid_content")
            #expect((reply["message"] as? String)?.contains("log_n") == true)
        }
    }

    @Test func importAndExportNeedAnUnlockedSigner() async throws {
        let harness = try Harness()
        try await harness.run { client in
            let (token, firstPasskey) = try await client.newAccount("alice")
            var owner = firstPasskey
            harness.clock.advance(601)
            let imported = try await client.importKey(["nsec": NIP19.nsec(SecretKey.generate())], token: token, by: &owner)
            #expect(imported.error == "signer_locked")
            let exported = try await client.call(
                .post, "/api/signer/key/export", json: client.confirmed(["password": "long enough"], "key.export", by: &owner, token: token),
                headers: Client.bearer(token))
            #expect(exported.error == "signer_locked")
        }
    }

    @Test func accountsFromBeforeTheSignerGetAKeyOnFirstUse() async throws {
        let harness = try Harness()
        let t0 = harness.clock.now
        let user = UserRecord(id: "old-user", username: "oldtimer", isAnonymous: false, createdAt: t0)
        let token = randomBytes(32)
        try await harness.store.completeRegistration(
            user: user, createUser: true, nostrKey: nil,
            credential: CredentialRecord(
                id: [9, 9], userID: user.id, publicKey: [1], algorithm: -7, signCount: 0, transports: [],
                aaguid: [UInt8](repeating: 0, count: 16), attestationFormat: "none",
                backupEligible: false, backupState: false, createdAt: t0),
            session: SessionRecord(
                tokenHash: sha256(token), userID: user.id, createdAt: t0, expiresAt: t0 + 3600,
                unlockedUntil: t0 + 600))
        #expect(try await harness.store.nostrKey(ofUser: user.id) == nil)
        try await harness.run { client in
            let first = try await client.signer("get_public_key", token: Base64URL.encode(token))
            #expect(first.status == .ok)
            let stored = try await harness.store.nostrKey(ofUser: user.id)
            #expect(stored?.pubkey == first["result"] as? String)
            let again = try await client.signer("get_public_key", token: Base64URL.encode(token))
            #expect(again["result"] as? String == first["result"] as? String)
        }
    }

    @Test func theDatabaseHoldsNoKeyAndAnotherMasterKeyCannotSign() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keyfob-rest-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("keyfob.sqlite").path
        let harness = try Harness(databasePath: path)
        let key = SecretKey.generate()
        let secretHex = key.withUnsafeSecretBytes { Hex.encode($0) }
        let secretBytes = key.withUnsafeSecretBytes { $0 }
        try await harness.run { client in
            let (token, firstPasskey) = try await client.newAccount("alice")
            var owner = firstPasskey
            #expect(try await client.importKey(["nsec": NIP19.nsec(key)], token: token, by: &owner).status == .ok)
        }
        var bytes = [UInt8]()
        for file in [path, path + "-wal"] { bytes += (FileManager.default.contents(atPath: file).map { [UInt8]($0) } ?? []) }
        #expect(!bytes.isEmpty)
        for needle in [secretBytes, Array(secretHex.utf8), Array(secretHex.uppercased().utf8), Array(NIP19.nsec(key).utf8)] {
            let found = contains(bytes, needle)
            #expect(!found, "secret material found in the database file")
        }
        // The public key is there (so get_public_key needs no decryption); the secret is not.
        let publicFound = contains(bytes, Array(key.publicKey.hex.utf8))
        #expect(publicFound)

        // Same database, another master key: start-up refuses it, and a router given it anyway cannot sign.
        let stranger = try KeyVault(masterKey: randomBytes(32))
        try await KeyCustody.checkMasterKey(harness.vault, store: harness.store)  // what start-up records
        await #expect(throws: ServerConfiguration.Invalid.self) { try await KeyCustody.checkMasterKey(stranger, store: harness.store) }
        let custody = KeyCustody(store: harness.store, vault: stranger, now: { Date() })
        do {
            _ = try await custody.withSecretKey(of: harness.store.user(named: "alice")!.id, unlock: nil) { $0.publicKey }
            Issue.record("opened a key with the wrong master key")
        } catch let error as KeyfobError {
            #expect(error.code == .internalError && error.message.contains("master key"))
        }
    }

    @Test func rotationResealsEveryKeyInOneGo() async throws {
        let harness = try Harness()
        try await harness.run { client in
            for name in ["alice", "bob", "carol"] { _ = try await client.newAccount(name) }
        }
        var pubkeys: [String] = []
        for name in ["alice", "bob", "carol"] {
            pubkeys.append(try await harness.store.nostrKey(ofUser: harness.store.user(named: name)!.id)!.pubkey)
        }
        // Alice has a NIP-46 signer key too: it is re-sealed along with the nostr keys.
        let aliceID = try await harness.store.user(named: "alice")!.id
        let bunker = Bunker.standalone(store: harness.store, vault: harness.vault)
        let signerPubkey = try await bunker.signer(of: aliceID, unlock: nil).pubkey
        let next = try KeyVault(masterKey: randomBytes(32))
        #expect(try await MasterKeyRotation.rotate(store: harness.store, from: harness.vault, to: next) == 3)
        let rotated = Bunker.standalone(store: harness.store, vault: next)
        #expect(try rotated.secretKey(of: try await harness.store.bunkerSigner(ofUser: aliceID)!).publicKey.hex == signerPubkey)
        try await KeyCustody.checkMasterKey(next, store: harness.store)
        await #expect(throws: ServerConfiguration.Invalid.self) { try await KeyCustody.checkMasterKey(harness.vault, store: harness.store) }
        for (name, pubkey) in zip(["alice", "bob", "carol"], pubkeys) {
            let id = try await harness.store.user(named: name)!.id
            let opened = try await KeyCustody(store: harness.store, vault: next, now: { Date() }).withSecretKey(of: id, unlock: nil) {
                $0.publicKey.hex
            }
            #expect(opened == pubkey)
        }
        // Rotating with the wrong old key changes nothing.
        await #expect(throws: (any Error).self) {
            try await MasterKeyRotation.rotate(store: harness.store, from: harness.vault, to: KeyVault(masterKey: randomBytes(32)))
        }
        try await KeyCustody.checkMasterKey(next, store: harness.store)
    }

    @Test func aSealedKeyIsBoundToItsUserAndVersion() throws {
        let vault = try KeyVault(masterKey: randomBytes(32))
        let secret = randomBytes(32)
        let (nonce, sealed) = try vault.seal(secret, userID: "alice", version: 1)
        #expect(vault.open(nonce: nonce, sealed: sealed, userID: "alice", version: 1) == secret)
        #expect(vault.open(nonce: nonce, sealed: sealed, userID: "bob", version: 1) == nil)
        #expect(vault.open(nonce: nonce, sealed: sealed, userID: "alice", version: 2) == nil)
        var tampered = sealed
        tampered[0] ^= 1
        #expect(vault.open(nonce: nonce, sealed: tampered, userID: "alice", version: 1) == nil)
        let leaked = contains(sealed, secret)
        #expect(!leaked)
    }

    /// Key material is a `SecretBytes` (#24): non-copyable (the compiler refuses a second owner),
    /// in memory of its own, and the array it was made from is wiped at once.
    @Test func secretBytesTakeTheirSourceAndWipeIt() {
        var source = randomBytes(32)
        let expected = source.map { $0 }
        let secret = SecretBytes(taking: &source)
        #expect(source == [UInt8](repeating: 0, count: 32))
        #expect(secret.count == 32 && secret.exposedCopy() == expected)
        #expect(secret.withUnsafeBytes { Array($0) } == expected)
    }

    /// One key per purpose (#24): what is sealed for one purpose does not open as another, even
    /// with the same context; the only cross-over is a NIP-46 signer key sealed before keys were
    /// per purpose (under the nostr keys' key), which still opens as a signer key.
    @Test func eachPurposeHasItsOwnKey() throws {
        let master = randomBytes(32)
        let vault = try KeyVault(masterKey: master)
        let secret = randomBytes(32)
        let sealed = try vault.seal(secret, for: .pendingRequests, context: "x")
        #expect(vault.open(nonce: sealed.nonce, sealed: sealed.sealed, for: .pendingRequests, context: "x") == secret)
        for other in [KeyVault.Purpose.bunkerKeys, .nostrKeys, .derivedSecrets] {
            #expect(vault.open(nonce: sealed.nonce, sealed: sealed.sealed, for: other, context: "x") == nil)
        }
        // Keys derived independently (RFC 5869 through OpenSSL): distinct, and the legacy one is the nostr keys'.
        let derived = try KeyVault.Purpose.allCases.map { try KeyVault.hkdf(key: master, salt: Array("keyfob".utf8), info: Array($0.rawValue.utf8)) }
        #expect(Set(derived.map(Hex.encode)).count == KeyVault.Purpose.allCases.count)
        let legacy = try KeyVault.gcm(
            encrypt: true, key: derived[0], nonce: sealed.nonce, aad: Array("keyfob:bunker-signer:alice".utf8), input: secret)
        #expect(vault.open(nonce: sealed.nonce, sealed: legacy, for: .bunkerKeys, context: "bunker-signer:alice") == secret)
        #expect(vault.open(nonce: sealed.nonce, sealed: legacy, for: .pendingRequests, context: "bunker-signer:alice") == nil)
    }

    /// RFC 5869 test case 3 (empty salt and info) through the same OpenSSL call the vault uses.
    @Test func hkdfMatchesRFC5869() throws {
        let okm = try KeyVault.hkdf(key: [UInt8](repeating: 0x0b, count: 22), salt: [], info: [], length: 42)
        #expect(Hex.encode(okm) == "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8")
    }

    @Test func aMasterKeyFileOthersCanReadStopsStartUp() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keyfob-mk-\(UUID().uuidString)")
        var c = ServerConfiguration()
        c.dataDirectory = dir.path
        try c.prepareDataDirectory()
        let (key, created) = try MasterKeyFile.load(c)
        #expect(created && key.count == 32)
        var info = stat()
        stat(c.effectiveMasterKeyFile, &info)
        #expect(info.st_mode & 0o777 == 0o600)
        #expect(try MasterKeyFile.load(c) == (key, false))
        chmod(c.effectiveMasterKeyFile, 0o640)
        do {
            _ = try MasterKeyFile.load(c)
            Issue.record("a group-readable master key was accepted")
        } catch {
            #expect(error.description.contains("chmod 600"))
        }
        #expect(throws: ServerConfiguration.Invalid.self) { try MasterKeyFile.decode(base64: "c2hvcnQ=") }
        #expect(try MasterKeyFile.decode(base64: Data(key).base64EncodedString()) == key)
    }
}
