import Foundation
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import Nostr
import Polkadot
import WebAuthn

/// How a Substrate secret is kept (`SubstrateAccountRecord.protection`).
enum SubstrateProtection: Int, Sendable {
    /// Before #55: under a key derived from the owner's nostr key. Moved on start (server-protected
    /// owners) or on first use (owners whose key is sealed by passkeys: only they can open it).
    case nostrDerived = 0
    /// Under the master key's own Substrate purpose key (HKDF), bound to the account.
    case masterKey = 1
    /// Under the data key of an account sealed by passkeys, then that purpose key: it opens only
    /// in a session the owner unlocked, like their nostr key.
    case dataKey = 2
}

/// Substrate secrets in custody: each under its own purpose key of the master key
/// (`KeyVault.Purpose.substrateKeys`, AES-256-GCM bound to the user, account, key type and public
/// key) and, while the owner's nostr key is sealed by passkeys, under that seal's data key first.
/// Sealing and unsealing move them with the nostr key; master-key rotation re-seals them.
struct SubstrateCustody: Sendable {
    let custody: KeyCustody
    let store: any PolkadotStore
    let now: @Sendable () -> Date
    static let maxAccounts = 20

    /// Where a sealed owner's data key comes from, when it is needed (nil: not at hand).
    typealias DataKeySource = () -> SecretBytes?

    private static func boundTo(_ r: SubstrateAccountRecord) -> String {
        "\(r.userID):\(r.id):\(r.keyType):\(Hex.encode(r.publicKey))"
    }
    static func context(_ r: SubstrateAccountRecord) -> String { "substrate-key:" + boundTo(r) }
    static func sealedContext(_ r: SubstrateAccountRecord) -> String { "substrate-key-sealed:" + boundTo(r) }
    static func innerContext(_ r: SubstrateAccountRecord) -> String { "keyfob:substrate-key-under-data-key:v1:" + boundTo(r) }
    /// The associated data of a secret kept before #55 (`nostrDerived`).
    static func legacyAssociatedData(_ r: SubstrateAccountRecord) -> [UInt8] { Array("keyfob:substrate-key:\(boundTo(r))".utf8) }

    /// Seals and stores `key` as a new account of `userID`.
    func add(_ key: SubstrateKey, name: String, network: UInt16, userID: String, unlock: SessionUnlock?) async throws
        -> SubstrateAccountRecord
    {
        let owner = try await custody.record(for: userID)
        var record = SubstrateAccountRecord(
            id: Base64URL.encode(randomBytes(12)), userID: userID, keyType: key.type.rawValue, publicKey: key.publicKey,
            name: name, network: Int(network), nonce: [], sealed: [], createdAt: now())
        var secret = key.exposedSecret()
        defer { wipe(&secret) }
        try seal(
            secret, into: &record, to: owner.passkeySealed ? .dataKey : .masterKey, dataKey: { unlock?.dataKey(at: now()) }, owner: owner)
        do {
            try await store.insertSubstrateAccount(record, maxPerUser: Self.maxAccounts, ownerKeyVersion: owner.version)
        } catch StoreError.limitReached {
            throw KeyfobError(
                .permissionDenied, "an account holds at most \(Self.maxAccounts) Polkadot accounts; remove one first", status: .conflict)
        } catch StoreError.conflict {
            throw SealController.conflict
        }
        return record
    }

    /// Opens an account's key for one operation (a sealed owner's needs the unlocked session). A
    /// secret not kept as its owner's key is now (from before #55, or a seal an outage cut short)
    /// is moved there on the way, when this session can.
    func open(_ record: SubstrateAccountRecord, unlock: SessionUnlock?) async throws -> SubstrateKey {
        guard let type = KeyType(rawValue: record.keyType) else {
            throw KeyfobError(.internalError, "unknown key type", status: .internalServerError)
        }
        let owner = try await custody.record(for: record.userID)
        let dataKey: DataKeySource = { unlock?.dataKey(at: now()) }
        var secret = try openSecret(record, owner: owner, dataKey: dataKey)
        defer { wipe(&secret) }
        guard let key = try? SubstrateKey(type: type, storedSecret: secret), key.publicKey == record.publicKey else {
            throw Self.doesNotOpen
        }
        let wanted: SubstrateProtection = owner.passkeySealed ? .dataKey : .masterKey
        if record.protection != wanted.rawValue {
            var moved = record
            if (try? seal(secret, into: &moved, to: wanted, dataKey: dataKey, owner: owner)) != nil {
                _ = try? await store.replaceSubstrateSecret(moved, expectedSealed: record.sealed, ownerKeyVersion: owner.version)
            }
        }
        return key
    }

    /// Every account of `owner`'s user sealed again for `target`, to be written with the key's
    /// new protection in its one transaction (`changeKeyProtection`): after sealing, under the new
    /// data key; when unsealing, under the master key alone. Throws when one does not open.
    func resealed(accountsOf owner: NostrKeyRecord, to target: SubstrateProtection, dataKey: DataKeySource) async throws
        -> [SubstrateAccountRecord]
    {
        var resealed: [SubstrateAccountRecord] = []
        for record in try await store.substrateAccounts(ofUser: owner.userID) {
            var secret: [UInt8]
            do {
                secret = try openSecret(record, owner: owner, dataKey: dataKey)
            } catch let error as KeyfobError where error.message == Self.doesNotOpen.message {
                throw KeyfobError(
                    .internalError,
                    "your Polkadot account “\(record.name)” does not open, so your key's protection cannot change with it: remove that account first",
                    status: .conflict)
            }
            defer { wipe(&secret) }
            var next = record
            try seal(secret, into: &next, to: target, dataKey: dataKey)
            resealed.append(next)
        }
        return resealed
    }

    /// `resealed(accountsOf:to:dataKey:)` with the seal's data key at hand.
    func resealed(accountsOf owner: NostrKeyRecord, to target: SubstrateProtection, dataKey key: borrowing SecretBytes) async throws
        -> [SubstrateAccountRecord]
    {
        var raw = key.exposedCopy()
        defer { wipe(&raw) }
        return try await resealed(
            accountsOf: owner, to: target,
            dataKey: {
                var copy = raw  // SecretBytes takes (and wipes) its own copy
                return SecretBytes(taking: &copy)
            })
    }

    /// On start: every secret kept under a key derived from a server-protected owner's nostr key
    /// moves to the Substrate purpose key. A sealed owner's waits for their first use (only their
    /// passkey opens it). Returns how many moved.
    static func migrate(custody: KeyCustody, store: any PolkadotStore, now: @escaping @Sendable () -> Date) async throws -> Int {
        let custody = SubstrateCustody(custody: custody, store: store, now: now)
        var moved = 0
        var owners: [String: NostrKeyRecord] = [:]
        for record in try await store.substrateAccounts(atProtection: SubstrateProtection.nostrDerived.rawValue) {
            let owner: NostrKeyRecord
            if let known = owners[record.userID] {
                owner = known
            } else {
                owner = try await custody.custody.record(for: record.userID)
                owners[record.userID] = owner
            }
            guard !owner.passkeySealed else { continue }
            do {
                var secret = try custody.openSecret(record, owner: owner, dataKey: { nil })
                defer { wipe(&secret) }
                var next = record
                try custody.seal(secret, into: &next, to: .masterKey, dataKey: { nil })
                if try await store.replaceSubstrateSecret(next, expectedSealed: record.sealed, ownerKeyVersion: owner.version) {
                    moved += 1
                }
            } catch let error as KeyfobError {
                // One that does not open (a database restored from elsewhere) stays as it is; the
                // server still starts, and says so.
                custody.custody.logger.error(
                    "a Polkadot key kept under the nostr key does not open; left as it is",
                    metadata: ["user": "\(record.userID)", "account": "\(record.id)", "reason": "\(error.message)"])
            }
        }
        return moved
    }

    /// `secret` sealed into `record` as `target` says. With `owner`, a data key must be that key
    /// version's (it opens the owner's nostr key): a session's copy from before an unseal and a new
    /// seal would seal the secret under a data key no passkey wraps any more.
    private func seal(
        _ secret: [UInt8], into record: inout SubstrateAccountRecord, to target: SubstrateProtection, dataKey: DataKeySource,
        owner: NostrKeyRecord? = nil
    ) throws {
        switch target {
        case .masterKey:
            (record.nonce, record.sealed) = try custody.vault.seal(secret, for: .substrateKeys, context: Self.context(record))
        case .dataKey:
            guard let key = dataKey() else { throw KeyfobError.signerSealed }
            if let owner { _ = try custody.open(owner, dataKey: key) }
            var inner = try KeyVault.encrypt(secret, key: key, aad: Self.innerContext(record))
            defer { wipe(&inner) }
            (record.nonce, record.sealed) = try custody.vault.seal(inner, for: .substrateKeys, context: Self.sealedContext(record))
        case .nostrDerived:
            throw KeyfobError(.internalError, "nothing is sealed under the nostr key any more", status: .internalServerError)
        }
        record.protection = target.rawValue
    }

    /// The secret bytes of `record` (the caller wipes them).
    private func openSecret(_ record: SubstrateAccountRecord, owner: NostrKeyRecord, dataKey: DataKeySource) throws -> [UInt8] {
        let opened: [UInt8]?
        switch SubstrateProtection(rawValue: record.protection) {
        case .masterKey:
            opened = custody.vault.open(nonce: record.nonce, sealed: record.sealed, for: .substrateKeys, context: Self.context(record))
        case .dataKey:
            guard let key = dataKey() else { throw KeyfobError.signerSealed }
            guard
                var outer = custody.vault.open(
                    nonce: record.nonce, sealed: record.sealed, for: .substrateKeys, context: Self.sealedContext(record))
            else { throw Self.doesNotOpen }
            defer { wipe(&outer) }
            opened = KeyVault.decrypt(outer, key: key, aad: Self.innerContext(record))
        case .nostrDerived:
            let nostr: SecretKey
            if owner.passkeySealed {
                guard let key = dataKey() else { throw KeyfobError.signerSealed }
                nostr = try custody.open(owner, dataKey: key)
            } else {
                nostr = try custody.open(owner)
            }
            var wrapping = nostr.withUnsafeSecretBytes { secret in
                HKDF.derive(key: secret, salt: Array("keyfob".utf8), info: Array("keyfob substrate-key v1:\(record.userID)".utf8)) ?? []
            }
            defer { wipe(&wrapping) }
            guard wrapping.count == 32 else { throw KeyfobError(.internalError, "deriving the key failed", status: .internalServerError) }
            opened = Cipher.aes256GCM(
                encrypt: false, key: wrapping, nonce: record.nonce, aad: Self.legacyAssociatedData(record), input: record.sealed)
        case nil:
            opened = nil
        }
        guard let opened else { throw Self.doesNotOpen }
        return opened
    }

    static let doesNotOpen = KeyfobError(
        .internalError, "this Polkadot account's key does not open (was the database restored from another server?)",
        status: .internalServerError)
}

/// Account lists changed, per user: what `pub(accounts.subscribe)` streams (this instance's
/// changes), and the user's streams ended when they sign out everywhere.
final class SubstrateAccountEvents: @unchecked Sendable {
    private let lock = NSLock()
    private var subscribers: [String: [UUID: AsyncStream<Void>.Continuation]] = [:]

    func subscribe(_ userID: String) -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        lock.withLock { subscribers[userID, default: [:]][id] = continuation }
        continuation.onTermination = { [weak self] _ in
            self?.lock.withLock { self?.subscribers[userID]?[id] = nil }
        }
        return stream
    }

    /// Wakes the user's streams: they send the list if it changed, and end if their session or
    /// their dapp's permission is gone (how a revocation on any path reaches them at once).
    func changed(_ userID: String) {
        let waiting = lock.withLock { subscribers[userID].map { Array($0.values) } ?? [] }
        for continuation in waiting { continuation.yield() }
    }

    /// Ends every stream of the user on this instance (sign out everywhere); streams on other
    /// instances end at their next refresh, when they find the session gone.
    func end(_ userID: String) {
        let ending = lock.withLock { subscribers.removeValue(forKey: userID).map { Array($0.values) } ?? [] }
        for continuation in ending { continuation.finish() }
    }
}

extension PolkadotError.Kind {
    /// The §7 code each refusal answers with.
    var errorCode: ErrorCode {
        switch self {
        case .invalidAddress: .invalidPubkey
        case .unknownExtension, .unsupported: .unsupportedType
        case .wrongPassword: .decryptFailed
        case .invalidMnemonic, .invalidDerivationPath, .invalidPayload, .invalidBackup: .invalidContent
        case .mistyped: .invalidRequest
        }
    }
}

extension KeyfobError {
    init(_ error: PolkadotError) {
        self.init(error.kind.errorCode, error.message, status: .badRequest)
    }
}
