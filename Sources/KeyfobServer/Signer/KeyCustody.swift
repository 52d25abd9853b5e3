import Foundation
import KeyfobCrypto
import KeyfobStore
import Logging
import Nostr

/// Nostr keys in custody (DESIGN.md §4.1): made, sealed, opened for one operation and wiped.
/// Nothing here checks the lock; callers do (the dispatcher, the key endpoints).
struct KeyCustody: Sendable {
    let store: any BunkerStore & MetaStore & NostrKeyStore & KeyWrapStore & SessionStore
    let vault: KeyVault
    let now: @Sendable () -> Date
    /// Where a refused rollback is reported to the operator.
    var logger = Logger(label: "keyfob.custody")
    /// NIP-46 signer keys of sealed accounts, opened for an unlock window (memory only).
    var unlockedSigners = UnlockedSigners()

    /// A fresh sealed key for a new account (stored with the account, in its transaction).
    func newKey(for userID: String) throws -> NostrKeyRecord {
        try seal(SecretKey.generate(), userID: userID, version: 1)
    }

    func seal(_ key: SecretKey, userID: String, version: Int) throws -> NostrKeyRecord {
        let (nonce, sealed) = try key.withUnsafeSecretBytes { try vault.seal($0, userID: userID, version: version) }
        return NostrKeyRecord(
            userID: userID, pubkey: key.publicKey.hex, version: version, nonce: nonce, sealed: sealed,
            updatedAt: now())
    }

    /// The user's stored key; accounts made before the signer existed get one on first use.
    func record(for userID: String) async throws -> NostrKeyRecord {
        if let record = try await store.nostrKey(ofUser: userID) { return record }
        // Two first uses at once: the store keeps one and both get that one.
        let fresh = try newKey(for: userID)
        return try await store.insertNostrKeyIfAbsent(fresh)
    }

    func publicKey(of userID: String) async throws -> PublicKey {
        let stored = try await record(for: userID)
        return try Self.publicKey(stored)
    }

    /// Synchronous on purpose: a typed-throws initializer inside the async function's expression
    /// crashed Swift 6.3.1's coroutine splitting in release builds.
    @inline(never)
    static func publicKey(_ record: NostrKeyRecord) throws -> PublicKey {
        try PublicKey(hex: record.pubkey)
    }

    /// Opens the user's key for `body` alone; the decrypted bytes are wiped before this returns
    /// and the `SecretKey` wipes its own copy when released. A passkey-sealed key opens only with
    /// an unlocked session that holds the data key (`unlock`).
    func withSecretKey<R>(of userID: String, unlock: SessionUnlock?, _ body: (SecretKey) throws -> R) async throws -> R {
        let record = try await record(for: userID)
        let key = try open(record, unlock: unlock)
        return try body(key)
    }

    func open(_ record: NostrKeyRecord, unlock: SessionUnlock?) throws -> SecretKey {
        guard record.passkeySealed else { return try open(record) }
        guard let dataKey = unlock?.dataKey(at: now()) else { throw KeyfobError.signerSealed }
        return try open(record, dataKey: dataKey)
    }

    /// A server-protected record's key (a sealed one: `signer_locked`).
    func open(_ record: NostrKeyRecord) throws -> SecretKey {
        guard !record.passkeySealed else { throw KeyfobError.signerSealed }
        return try Self.secretKey(in: masterKeyLayer(record), pubkey: record.pubkey)
    }

    /// A passkey-sealed record's key, with the data key its inner layer is encrypted under.
    func open(_ record: NostrKeyRecord, dataKey: borrowing SecretBytes) throws -> SecretKey {
        guard record.passkeySealed else { return try open(record) }
        return try Self.secretKey(
            in: masterKeyLayer(record), under: dataKey,
            aad: PasskeySeal.keyContext(userID: record.userID, version: record.version), pubkey: record.pubkey)
    }

    /// The key in `layer` (what the master key opened). The buffer becomes the `SecretKey`'s own
    /// (it wipes it when released); if the bytes are no key, they are wiped here.
    private static func secretKey(in layer: consuming [UInt8], pubkey: String) throws -> SecretKey {
        defer { wipe(&layer) }
        return try matching(SecretKey(bytes: copy layer), pubkey)
    }

    /// The key in `layer` under `dataKey`: the layer is wiped here, and what it opens to becomes the
    /// `SecretKey`'s own (or is wiped here when it is no key).
    private static func secretKey(in layer: consuming [UInt8], under dataKey: borrowing SecretBytes, aad: String, pubkey: String) throws -> SecretKey
    {
        defer { wipe(&layer) }
        guard var inner = KeyVault.decrypt(layer, key: dataKey, aad: aad) else { throw KeyfobError.signerSealed }
        defer { wipe(&inner) }
        return try matching(SecretKey(bytes: inner), pubkey)
    }

    /// What the master key opens of a record; the caller wipes it.
    private func masterKeyLayer(_ record: NostrKeyRecord) throws -> [UInt8] {
        // Wraps exist only while a key is sealed (unsealing removes them in the same transaction):
        // a server-protected row next to them was put back from before the seal.
        if !record.passkeySealed, record.hasWraps {
            logger.error(
                "key.rollback_refused",
                metadata: [
                    "user": "\(record.userID)", "version": "\(record.version)",
                    "why":
                        "a server-protected key row while the user's key is sealed by passkeys: restored from an older copy? Restore the sealed row",
                ])
            throw KeyfobError.keyRolledBack
        }
        guard
            let outer = vault.open(
                nonce: record.nonce, sealed: record.sealed, userID: record.userID,
                version: record.version, passkeySealed: record.passkeySealed)
        else {
            throw KeyfobError(
                .internalError, "the stored key cannot be opened with this server's master key; the operator must restore the right master key",
                status: .internalServerError)
        }
        return outer
    }

    /// `key`, when its public key is the one stored beside it.
    static func matching(_ key: SecretKey, _ pubkey: String) throws -> SecretKey {
        guard key.publicKey.hex == pubkey else {
            throw KeyfobError(.internalError, "the stored key does not match its public key", status: .internalServerError)
        }
        return key
    }

    // MARK: NIP-46 signer keys

    /// The master-key layer's context of a signer key: a sealed one cannot pass for a plain one.
    static func signerContext(_ userID: String, passkeySealed: Bool) -> String {
        passkeySealed ? "bunker-signer-sealed:\(userID)" : "bunker-signer:\(userID)"
    }

    private static func signerInnerContext(_ userID: String) -> String { "keyfob:bunker-key-under-data-key:v1:\(userID)" }

    /// A signer key record for `key` under the master key alone.
    func sealSigner(_ key: SecretKey, userID: String, createdAt: Date) throws -> BunkerSignerRecord {
        let (nonce, sealed) = try key.withUnsafeSecretBytes { bytes in
            try vault.seal(bytes, for: .bunkerKeys, context: Self.signerContext(userID, passkeySealed: false))
        }
        return BunkerSignerRecord(
            userID: userID, pubkey: key.publicKey.hex, nonce: nonce, sealed: sealed, secretHash: nil,
            secretExpiresAt: nil, createdAt: createdAt, passkeySealed: false)
    }

    /// A signer key record for `key` under `dataKey` first, then the master key (a sealed
    /// account's, like its nostr key).
    func sealSigner(_ key: SecretKey, userID: String, dataKey: borrowing SecretBytes, createdAt: Date) throws -> BunkerSignerRecord {
        var inner = try key.withUnsafeSecretBytes { bytes in try KeyVault.encrypt(bytes, key: dataKey, aad: Self.signerInnerContext(userID)) }
        defer { wipe(&inner) }
        let (nonce, sealed) = try vault.seal(inner, for: .bunkerKeys, context: Self.signerContext(userID, passkeySealed: true))
        return BunkerSignerRecord(
            userID: userID, pubkey: key.publicKey.hex, nonce: nonce, sealed: sealed, secretHash: nil,
            secretExpiresAt: nil, createdAt: createdAt, passkeySealed: true)
    }

    /// What the master key opens of a signer record; the caller wipes it.
    private func masterKeyLayer(_ record: BunkerSignerRecord) throws -> [UInt8] {
        guard
            let outer = vault.open(
                nonce: record.nonce, sealed: record.sealed, for: .bunkerKeys,
                context: Self.signerContext(record.userID, passkeySealed: record.passkeySealed))
        else {
            throw KeyfobError(.internalError, "the bunker key cannot be opened with this server's master key", status: .internalServerError)
        }
        return outer
    }

    /// A plain signer record's key (a sealed one: `signer_locked`).
    func openSigner(_ record: BunkerSignerRecord) throws -> SecretKey {
        guard !record.passkeySealed else { throw KeyfobError.signerSealed }
        return try Self.secretKey(in: masterKeyLayer(record), pubkey: record.pubkey)
    }

    /// A sealed signer record's key, with the data key.
    func openSigner(_ record: BunkerSignerRecord, dataKey: borrowing SecretBytes) throws -> SecretKey {
        guard record.passkeySealed else { return try openSigner(record) }
        return try Self.secretKey(
            in: masterKeyLayer(record), under: dataKey, aad: Self.signerInnerContext(record.userID),
            pubkey: record.pubkey)
    }

    /// The signer key of `record` for this request: a plain one opens with the master key; a
    /// sealed one is open already (its owner unlocked), or opens with `unlock`'s data key (and
    /// stays open for that session's unlock window).
    func signerKey(_ record: BunkerSignerRecord, unlock: SessionUnlock?) throws -> SecretKey {
        guard record.passkeySealed else { return try openSigner(record) }
        if let open = unlockedSigners.key(userID: record.userID, pubkey: record.pubkey, now: now()) { return open }
        guard let unlock, let dataKey = unlock.dataKey(at: now()) else { throw KeyfobError.signerSealed }
        let key = try openSigner(record, dataKey: dataKey)
        unlockedSigners.open(key, userID: record.userID, until: unlock.session.unlockedUntil ?? now())
        return key
    }

    /// A session of the user just got the data key: their sealed signer (if any) opens until `until`.
    func openSigner(ofUser userID: String, dataKey: borrowing SecretBytes, until: Date) async throws {
        guard let record = try await store.bunkerSigner(ofUser: userID), record.passkeySealed else { return }
        unlockedSigners.open(try openSigner(record, dataKey: dataKey), userID: userID, until: until)
    }

    /// `key` as a passkey-sealed record of `version`: under `dataKey`, then the master key.
    func seal(_ key: SecretKey, userID: String, version: Int, dataKey: borrowing SecretBytes) throws -> NostrKeyRecord {
        var inner = try key.withUnsafeSecretBytes { try PasskeySeal.encryptKey($0, dataKey: dataKey, userID: userID, version: version) }
        defer { wipe(&inner) }
        let (nonce, sealed) = try vault.seal(inner, userID: userID, version: version, passkeySealed: true)
        return NostrKeyRecord(
            userID: userID, pubkey: key.publicKey.hex, version: version, nonce: nonce, sealed: sealed,
            updatedAt: now(), passkeySealed: true)
    }

    /// Replaces the user's key (import). The version goes up, so an old sealed copy cannot be put back.
    /// A passkey-sealed account stays sealed: the new key goes under the same data key, which
    /// the session must hold.
    func replace(userID: String, with key: SecretKey, unlock: SessionUnlock?) async throws -> NostrKeyRecord {
        let current = try await record(for: userID)
        let next: NostrKeyRecord
        if current.passkeySealed {
            guard let dataKey = unlock?.dataKey(at: now()) else { throw KeyfobError.signerSealed }
            // The session's data key must be the seal's now, not one from before an unseal and a
            // new seal: a key sealed under a stale one would open with none of the passkeys. (The
            // version check below then refuses a seal that changed after this read.)
            _ = try open(current, dataKey: dataKey)
            next = try seal(key, userID: userID, version: current.version + 1, dataKey: dataKey)
        } else {
            next = try seal(key, userID: userID, version: current.version + 1)
        }
        do {
            try await store.replaceNostrKey(next, expectedVersion: current.version)
        } catch StoreError.conflict {
            throw KeyfobError(.invalidRequest, "the key changed at the same time; reload and try again", status: .conflict)
        }
        return next
    }

    /// Checks that this master key is the one that sealed the stored keys (recording it on first start).
    static func checkMasterKey(_ vault: KeyVault, store: any BunkerStore & MetaStore & NostrKeyStore) async throws(ServerConfiguration.Invalid) {
        let stored: [UInt8]
        do { stored = try await store.setMetaValueIfAbsent(SQLiteStore.masterKeyCheckName, vault.checkValue) } catch {
            throw .init(description: "cannot read the database to check the master key: \(error)")
        }
        guard stored == vault.checkValue else {
            throw .init(
                description: """
                    this master key is not the one that sealed the nostr keys in this database; \
                    start with the original --master-key-file or KEYFOB_MASTER_KEY \
                    (after an interrupted rotate-master-key, the new key is in master.key.new)
                    """)
        }
    }
}

extension KeyfobError {
    /// The stored key is older than its seal (a row put back from a backup): refused, never signed with.
    static let keyRolledBack = KeyfobError(
        .keyRolledBack,
        "your key's stored copy is older than its seal (restored from an old backup?); nothing was signed. The operator must restore the sealed copy",
        status: .conflict)
}

/// `keyfob rotate-master-key`: every stored key opened with the old master key and sealed
/// again under the new one, written with the new check value in one transaction.
public enum MasterKeyRotation {
    /// Returns how many nostr keys were re-sealed (NIP-46 signer keys go along). Nothing is written
    /// unless every key opens.
    public static func rotate(
        store: any NostrKeyStore & BunkerStore & MetaStore & PolkadotStore, from old: KeyVault, to new: KeyVault
    ) async throws -> Int {
        try await KeyCustody.checkMasterKey(old, store: store)
        let records = try await store.allNostrKeys()
        var resealed: [NostrKeyRecord] = []
        resealed.reserveCapacity(records.count)
        for record in records {
            guard
                var secret = old.open(
                    nonce: record.nonce, sealed: record.sealed, userID: record.userID,
                    version: record.version, passkeySealed: record.passkeySealed)
            else {
                throw KeyVaultError("the key of user \(record.userID) does not open with the current master key; nothing was changed")
            }
            defer { wipe(&secret) }
            var next = record
            (next.nonce, next.sealed) = try new.seal(
                secret, userID: record.userID, version: record.version,
                passkeySealed: record.passkeySealed)
            resealed.append(next)
        }
        // NIP-46 signer keys, sealed under the same key-encryption key.
        var signers: [BunkerSignerRecord] = []
        for record in try await store.allBunkerSigners() {
            let context = KeyCustody.signerContext(record.userID, passkeySealed: record.passkeySealed)
            guard var secret = old.open(nonce: record.nonce, sealed: record.sealed, for: .bunkerKeys, context: context) else {
                throw KeyVaultError("the NIP-46 signer key of user \(record.userID) does not open with the current master key; nothing was changed")
            }
            defer { wipe(&secret) }
            var next = record
            (next.nonce, next.sealed) = try new.seal(secret, for: .bunkerKeys, context: context)
            signers.append(next)
        }
        // Substrate secrets under the master key (their data-key layer, if any, stays as it is).
        var substrate: [SubstrateAccountRecord] = []
        for protection in [SubstrateProtection.masterKey, .dataKey] {
            for record in try await store.substrateAccounts(atProtection: protection.rawValue) {
                let context =
                    protection == .masterKey ? SubstrateCustody.context(record) : SubstrateCustody.sealedContext(record)
                guard var secret = old.open(nonce: record.nonce, sealed: record.sealed, for: .substrateKeys, context: context) else {
                    throw KeyVaultError(
                        "the Polkadot key \(record.id) of user \(record.userID) does not open with the current master key; nothing was changed")
                }
                defer { wipe(&secret) }
                var next = record
                (next.nonce, next.sealed) = try new.seal(secret, for: .substrateKeys, context: context)
                substrate.append(next)
            }
        }
        do {
            try await store.rewrapNostrKeys(resealed, bunkerSigners: signers, substrateAccounts: substrate, masterKeyCheck: new.checkValue)
        } catch StoreError.conflict {
            throw KeyVaultError(
                "keys changed while rotating (is a server still running on this database?); nothing was changed, try again with the server stopped")
        }
        return resealed.count
    }
}
