import Foundation

@testable import KeyfobStore

/// The writes most tests make without a session to check: what an account already has, set up
/// before what is tested. Only here: the server always names the session that asks.
extension BunkerStore {
    func putBunkerClient(_ record: BunkerClientRecord) async throws { try await putBunkerClient(record, session: nil) }

    func setBunkerSecret(userID: String, secretHash: [UInt8]?, expiresAt: Date?) async throws -> Bool {
        try await setBunkerSecret(userID: userID, secretHash: secretHash, expiresAt: expiresAt, session: nil)
    }
}

extension SessionStore {
    func addSession(_ session: SessionRecord) async throws { try await addSession(session, parent: nil) }
}

extension ApprovalStore {
    func claimPendingRequest(id: String, userID: String, now: Date) async throws -> PendingRequestRecord? {
        try await claimPendingRequest(id: id, userID: userID, session: nil, now: now)
    }
}

extension PolkadotStore {
    func putPolkadotMetadata(_ metadata: PolkadotMetadataRecord, runtime: [UInt8]?) async throws {
        try await putPolkadotMetadata(metadata, runtime: runtime, session: nil)
    }
}
