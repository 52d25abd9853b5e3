import Foundation
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import Nostr
import WebAuthn

/// Requests waiting for the user on the approval page: sealed (they may carry a plaintext), in the
/// database so any instance can finish them, five minutes each, at most 20 per user and client.
struct PendingRequests: Sendable {
    let store: any ApprovalStore
    let vault: KeyVault
    let now: @Sendable () -> Date

    static let lifetime: TimeInterval = 300
    static let maxPerClient = 20

    /// Stores `incoming` and returns its id; throws `StoreError.limitReached` over the limit, and
    /// `StoreError.notFound` (nothing stored) when `source` (the session or NIP-46 client it came
    /// through) is gone by then.
    /// `userID`: the owner when already known (a bunker request), else the first to open it.
    /// `sealingWith`: a passkey-sealed account's NIP-46 signer key, under which (not the master
    /// key) the request is sealed: only the owner's unlock opens it again.
    func create(
        _ incoming: IncomingRequest, userID: String?, requester: String, source: PendingRequestSource?, sealingWith signerKey: SecretKey? = nil
    ) async throws -> String {
        let id = Base64URL.encode(randomBytes(16))
        let target = Array(incoming.target.utf8)
        let nonce: [UInt8], payload: [UInt8]
        if let signerKey {
            // No nonce column value: the payload carries its own (and says it is not under the master key).
            let key = try Self.payloadKey(signerKey)
            (nonce, payload) = ([], try KeyVault.encrypt(target, key: key, aad: Self.context(id)))
        } else {
            (nonce, payload) = try vault.seal(target, for: .pendingRequests, context: Self.context(id))
        }
        let created = now()
        let record = PendingRequestRecord(
            id: id, userID: userID, requester: requester, client: incoming.client, transport: incoming.transport,
            method: incoming.call.method.rawValue, kind: incoming.call.kind, nonce: nonce, payload: payload,
            createdAt: created, expiresAt: created.addingTimeInterval(Self.lifetime))
        try await store.insertPendingRequest(record, now: created, maxPending: Self.maxPerClient, source: source)
        return id
    }

    static func context(_ id: String) -> String { "pending-request:\(id)" }

    /// The key a sealed account's waiting requests are under: one per signer key, for this purpose alone.
    static func payloadKey(_ signerKey: SecretKey) throws -> SecretBytes {
        var bytes = signerKey.withUnsafeSecretBytes { Array($0) }
        defer { wipe(&bytes) }
        return try KeyVault.hkdfSecret(key: bytes, salt: Array("keyfob".utf8), info: Array("keyfob pending-request v1".utf8))
    }

    /// Whether the request is sealed under its owner's signer key (see `create`).
    static func isSealedForOwner(_ record: PendingRequestRecord) -> Bool { record.nonce.isEmpty }

    /// Opens a stored request's sealed form; one sealed for its owner needs their signer key.
    func open(_ record: PendingRequestRecord, signerKey: SecretKey? = nil) -> String? {
        let bytes: [UInt8]?
        if Self.isSealedForOwner(record) {
            guard let signerKey, let key = try? Self.payloadKey(signerKey) else { return nil }
            bytes = KeyVault.decrypt(record.payload, key: key, aad: Self.context(record.id))
        } else {
            bytes = vault.open(nonce: record.nonce, sealed: record.payload, for: .pendingRequests, context: Self.context(record.id))
        }
        return bytes.map { String(decoding: $0, as: UTF8.self) }
    }
}
