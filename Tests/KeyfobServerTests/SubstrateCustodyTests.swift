import Foundation
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import Logging
import Nostr
import Polkadot
import Testing
import WebAuthnTestSupport

@testable import KeyfobServer

/// #55 (P5): Polkadot keys are kept under their own purpose key of the master key, and under the
/// data key too while the nostr key is sealed by passkeys; never under a key derived from the nostr
/// key. Those kept that way before move on start (server-protected owners) or on first use.
@Suite struct SubstrateCustodyTests {
    static func protections(_ harness: Harness, _ username: String) async throws -> [Int] {
        let user = try #require(try await harness.store.user(named: username))
        return try await harness.store.substrateAccounts(ofUser: user.id).map(\.protection)
    }

    /// Signs "hi" with the account at `address` through a dapp request and the passkey; true when
    /// the signature verifies.
    static func signs(_ client: Client, token: String, address: String, _ authenticator: inout SoftwareAuthenticator) async throws -> Bool {
        let asked = try await client.call(
            .post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(bytes.sign)", ["address": address, "data": "0x6869"]),
            headers: Client.bearer(token))
        let id = try #require((asked["pending"] as? [String: Any])?["id"] as? String, "\(asked.json)")
        let approved = try await PolkadotBridgeTests.approve(id, client, token: token, &authenticator)
        guard let signature = PolkadotHex.decode((approved["result"] as? [String: Any])?["signature"] as? String ?? "") else { return false }
        let publicKey = try #require(SS58.decode(address)).accountId
        return Sr25519.verify(signature: signature, message: Array("<Bytes>hi</Bytes>".utf8), publicKey: publicKey)
    }

    /// The account's secret as every one was kept before #55: under HKDF of the nostr key.
    static func legacy(_ record: SubstrateAccountRecord, secret: [UInt8], nostr: SecretKey) throws -> SubstrateAccountRecord {
        let wrapping = nostr.withUnsafeSecretBytes { key in
            HKDF.derive(key: key, salt: Array("keyfob".utf8), info: Array("keyfob substrate-key v1:\(record.userID)".utf8)) ?? []
        }
        var old = record
        old.nonce = randomBytes(12)
        old.sealed = try #require(
            Cipher.aes256GCM(
                encrypt: true, key: wrapping, nonce: old.nonce, aad: SubstrateCustody.legacyAssociatedData(record), input: secret))
        old.protection = SubstrateProtection.nostrDerived.rawValue
        return old
    }

    @Test func polkadotKeysMoveWithTheSealAndBack() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var authenticator = SoftwareAuthenticator.withPRF()
            let token = try #require(try await client.signUp(&authenticator, username: "moves")["token"] as? String)
            let auth = Client.bearer(token)
            let address = try #require(try await client.call(.post, "/api/polkadot/accounts", json: [:], headers: auth)["address"] as? String)
            _ = try await client.call(.post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(authorize.tab)", nil), headers: auth)
            #expect(try await Self.protections(harness, "moves") == [1])
            #expect(try await Self.signs(client, token: token, address: address, &authenticator))
            #expect(try await client.seal(&authenticator, token: token).status == .ok)
            #expect(try await Self.protections(harness, "moves") == [2])
            #expect(try await Self.signs(client, token: token, address: address, &authenticator))
            let unsealed = try await client.seal(&authenticator, token: token, path: "/api/signer/unseal")
            #expect(unsealed.status == .ok, "\(unsealed.json)")
            #expect(try await Self.protections(harness, "moves") == [1])
            #expect(try await Self.signs(client, token: token, address: address, &authenticator))

            // Rotating the master key re-seals them with everything else.
            let next = try KeyVault(masterKey: randomBytes(32))
            #expect(try await MasterKeyRotation.rotate(store: harness.store, from: harness.vault, to: next) == 1)
            let user = try #require(try await harness.store.user(named: "moves"))
            let rotated = try #require(try await harness.store.substrateAccounts(ofUser: user.id).first)
            let custody = KeyCustody(store: harness.store, vault: next, now: { Date() }, logger: Logger(label: "test"))
            let key = try await SubstrateCustody(custody: custody, store: harness.store, now: { Date() }).open(rotated, unlock: nil)
            #expect(SS58.encode(accountId: key.publicKey, prefix: 42) == address)
        }
    }

    @Test func keysKeptUnderTheNostrKeyMoveOnStartOrFirstUse() async throws {
        let harness = try Harness()
        try await harness.run { client in
            let custody = KeyCustody(store: harness.store, vault: harness.vault, now: { Date() }, logger: Logger(label: "test"))
            let substrate = SubstrateCustody(custody: custody, store: harness.store, now: { Date() })
            // A server-protected owner's key, as kept before: moved by the start-up step.
            var (plainToken, plainPasskey) = try await client.newAccount("plain")
            let plainAddress = try #require(
                try await client.call(.post, "/api/polkadot/accounts", json: [:], headers: Client.bearer(plainToken))["address"] as? String)
            let plain = try #require(try await harness.store.user(named: "plain"))
            let stored = try #require(try await harness.store.substrateAccounts(ofUser: plain.id).first)
            var secret = try await substrate.open(stored, unlock: nil).exposedSecret()
            defer { wipe(&secret) }
            let nostr = try custody.open(try await custody.record(for: plain.id))
            let old = try Self.legacy(stored, secret: secret, nostr: nostr)
            #expect(
                try await harness.store.replaceSubstrateSecret(
                    old, expectedSealed: stored.sealed, ownerKeyVersion: try await custody.record(for: plain.id).version))
            #expect(try await SubstrateCustody.migrate(custody: custody, store: harness.store, now: { Date() }) == 1)
            #expect(try await Self.protections(harness, "plain") == [1])
            #expect(try await SubstrateCustody.migrate(custody: custody, store: harness.store, now: { Date() }) == 0)
            _ = try await client.call(
                .post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(authorize.tab)", nil), headers: Client.bearer(plainToken))
            #expect(try await Self.signs(client, token: plainToken, address: plainAddress, &plainPasskey))

            // A sealed owner's: the start-up step cannot open it and leaves it; the owner's next use
            // in an unlocked session moves it under the data key.
            var passkey = SoftwareAuthenticator.withPRF()
            let token = try #require(try await client.signUp(&passkey, username: "sealed")["token"] as? String)
            let address = try #require(
                try await client.call(.post, "/api/polkadot/accounts", json: [:], headers: Client.bearer(token))["address"] as? String)
            #expect(try await client.seal(&passkey, token: token).status == .ok)
            let owner = try #require(try await harness.store.user(named: "sealed"))
            let sealedRow = try #require(try await harness.store.substrateAccounts(ofUser: owner.id).first)
            let raw = try #require(Base64URL.decode(token))
            let session = try #require(try await harness.store.session(tokenHash: sha256(raw), now: Date()))
            let unlock = SessionUnlock(token: raw, session: session)
            var sealedSecret = try await substrate.open(sealedRow, unlock: unlock).exposedSecret()
            defer { wipe(&sealedSecret) }
            let sealedNostr = try custody.open(try await custody.record(for: owner.id), unlock: unlock)
            let sealedOld = try Self.legacy(sealedRow, secret: sealedSecret, nostr: sealedNostr)
            #expect(
                try await harness.store.replaceSubstrateSecret(
                    sealedOld, expectedSealed: sealedRow.sealed, ownerKeyVersion: try await custody.record(for: owner.id).version))
            #expect(try await SubstrateCustody.migrate(custody: custody, store: harness.store, now: { Date() }) == 0)
            #expect(try await Self.protections(harness, "sealed") == [0])
            await #expect(throws: KeyfobError.self) { _ = try await substrate.open(sealedOld, unlock: nil) }
            _ = try await client.call(
                .post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(authorize.tab)", nil), headers: Client.bearer(token))
            #expect(try await Self.signs(client, token: token, address: address, &passkey))
            #expect(try await Self.protections(harness, "sealed") == [2])
        }
    }

    /// A request that read its session before an unseal and a new seal holds the old data key: a
    /// key it adds would be sealed under a data key no passkey wraps any more. Refused instead.
    @Test func aDataKeyFromBeforeANewSealSealsNothing() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var passkey = SoftwareAuthenticator.withPRF()
            let token = try #require(try await client.signUp(&passkey, username: "stale")["token"] as? String)
            #expect(try await client.seal(&passkey, token: token).status == .ok)
            let raw = try #require(Base64URL.decode(token))
            let stale = SessionUnlock(token: raw, session: try #require(try await harness.store.session(tokenHash: sha256(raw), now: Date())))
            #expect(try await client.seal(&passkey, token: token, path: "/api/signer/unseal").status == .ok)
            #expect(try await client.seal(&passkey, token: token).status == .ok)
            let custody = KeyCustody(store: harness.store, vault: harness.vault, now: { Date() }, logger: Logger(label: "test"))
            let substrate = SubstrateCustody(custody: custody, store: harness.store, now: { Date() })
            let user = try #require(try await harness.store.user(named: "stale"))
            let key = try SubstrateKey(type: .sr25519, seed: randomBytes(32))
            await #expect(throws: KeyfobError.self) {
                _ = try await substrate.add(key, name: "Late", network: 0, userID: user.id, unlock: stale)
            }
            #expect(try await harness.store.substrateAccounts(ofUser: user.id).isEmpty)
            // Nor does a nostr key it imports replace the sealed one: that key would open with no passkey.
            let before = try await custody.record(for: user.id)
            await #expect {
                _ = try await custody.replace(userID: user.id, with: SecretKey.generate(), unlock: stale)
            } throws: { ($0 as? KeyfobError)?.code == .signerLocked }
            #expect(try await custody.record(for: user.id) == before)
            // The session that sealed again holds the seal's data key: its import goes through.
            let current = SessionUnlock(token: raw, session: try #require(try await harness.store.session(tokenHash: sha256(raw), now: Date())))
            let imported = SecretKey.generate()
            let replaced = try await custody.replace(userID: user.id, with: imported, unlock: current)
            #expect(replaced.passkeySealed && replaced.pubkey == imported.publicKey.hex)
            guard let dataKey = current.dataKey(at: Date()) else {
                Issue.record("the session that sealed again holds no data key")
                return
            }
            #expect(try custody.open(replaced, dataKey: dataKey).publicKey == imported.publicKey)
        }
    }
}
