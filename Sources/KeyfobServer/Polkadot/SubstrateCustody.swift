import Foundation
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import Polkadot
import WebAuthn

/// Substrate secrets in custody. Each is sealed with AES-256-GCM under a key derived from the
/// user's nostr key (HKDF, bound to the user), so it is exactly as protected as that key: under
/// the master key, and under the user's passkeys too once the nostr key is sealed by them. Master
/// key rotation and sealing change how the nostr key is stored, never the key itself, so they need
/// no step here; replacing the nostr key is refused while Substrate accounts exist.
struct SubstrateCustody: Sendable {
    let custody: KeyCustody
    let store: any PolkadotStore
    let now: @Sendable () -> Date
    static let maxAccounts = 20

    static func associatedData(_ record: SubstrateAccountRecord) -> [UInt8] {
        Array("keyfob:substrate-key:\(record.userID):\(record.id):\(record.keyType):\(Hex.encode(record.publicKey))".utf8)
    }

    /// Seals and stores `key` as a new account of `userID`.
    func add(_ key: SubstrateKey, name: String, network: UInt16, userID: String, unlock: SessionUnlock?) async throws
        -> SubstrateAccountRecord
    {
        var record = SubstrateAccountRecord(
            id: Base64URL.encode(randomBytes(12)), userID: userID, keyType: key.type.rawValue, publicKey: key.publicKey,
            name: name, network: Int(network), nonce: [], sealed: [], createdAt: now())
        let aad = Self.associatedData(record)
        var secret = key.exposedSecret()
        defer { wipe(&secret) }
        let nonce = randomBytes(12)
        let sealed = try await withWrappingKey(userID, unlock: unlock) { wrapping in
            Cipher.aes256GCM(encrypt: true, key: wrapping, nonce: nonce, aad: aad, input: secret)
        }
        guard let sealed else { throw KeyfobError(.internalError, "sealing the key failed", status: .internalServerError) }
        record.nonce = nonce
        record.sealed = sealed
        do {
            try await store.insertSubstrateAccount(record, maxPerUser: Self.maxAccounts)
        } catch StoreError.limitReached {
            throw KeyfobError(
                .permissionDenied, "an account holds at most \(Self.maxAccounts) Polkadot accounts; remove one first", status: .conflict)
        }
        return record
    }

    /// Opens an account's key for one operation (a sealed nostr key needs the unlocked session).
    func open(_ record: SubstrateAccountRecord, unlock: SessionUnlock?) async throws -> SubstrateKey {
        guard let type = KeyType(rawValue: record.keyType) else {
            throw KeyfobError(.internalError, "unknown key type", status: .internalServerError)
        }
        let aad = Self.associatedData(record)
        var secret = try await withWrappingKey(record.userID, unlock: unlock) { wrapping in
            Cipher.aes256GCM(encrypt: false, key: wrapping, nonce: record.nonce, aad: aad, input: record.sealed)
        }
        defer { if secret != nil { wipe(&secret!) } }
        guard let opened = secret, let key = try? SubstrateKey(type: type, storedSecret: opened), key.publicKey == record.publicKey else {
            throw KeyfobError(
                .internalError, "this Polkadot account's key does not open with your nostr key; was the nostr key replaced?",
                status: .internalServerError)
        }
        return key
    }

    private func withWrappingKey<R>(_ userID: String, unlock: SessionUnlock?, _ body: ([UInt8]) throws -> R) async throws -> R {
        try await custody.withSecretKey(of: userID, unlock: unlock) { key in
            var wrapping = key.withUnsafeSecretBytes { secret in
                HKDF.derive(key: secret, salt: Array("keyfob".utf8), info: Array("keyfob substrate-key v1:\(userID)".utf8)) ?? []
            }
            defer { wipe(&wrapping) }
            guard wrapping.count == 32 else { throw KeyfobError(.internalError, "deriving the key failed", status: .internalServerError) }
            return try body(wrapping)
        }
    }
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
