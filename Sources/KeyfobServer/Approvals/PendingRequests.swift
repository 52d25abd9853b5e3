import Foundation
import KeyfobStore
import Nostr
import WebAuthn

/// Requests waiting for the user on the approval page: sealed (they may carry a plaintext), in the
/// database so any instance can finish them, five minutes each, at most 20 per user and client.
struct PendingRequests: Sendable {
    let store: any KeyfobStore
    let vault: KeyVault
    let now: @Sendable () -> Date

    static let lifetime: TimeInterval = 300
    static let maxPerClient = 20

    /// Stores `incoming` and returns its id; throws `StoreError.limitReached` over the limit.
    /// `userID`: the owner when already known (a bunker request), else the first to open it.
    func create(_ incoming: IncomingRequest, userID: String?, requester: String) async throws -> String {
        let id = Base64URL.encode(secureRandomBytes(16))
        let (nonce, payload) = try vault.seal(Array(incoming.target.utf8), context: "pending-request:\(id)")
        let created = now()
        let record = PendingRequestRecord(
            id: id, userID: userID, requester: requester, client: incoming.client, transport: incoming.transport,
            method: incoming.call.method.rawValue, kind: incoming.call.kind, nonce: nonce, payload: payload,
            createdAt: created, expiresAt: created.addingTimeInterval(Self.lifetime))
        try await store.insertPendingRequest(record, now: created, maxPending: Self.maxPerClient)
        return id
    }

    /// Opens a stored request's sealed form.
    func open(_ record: PendingRequestRecord) -> String? {
        vault.open(nonce: record.nonce, sealed: record.payload, context: "pending-request:\(record.id)")
            .map { String(decoding: $0, as: UTF8.self) }
    }
}
