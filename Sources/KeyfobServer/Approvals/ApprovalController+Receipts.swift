import Foundation
import HTTPTypes
import Hummingbird
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import Nostr
import WebAuthn

/// Approvals confirmed with a passkey (the challenge bound to what is signed, the receipt kept) and
/// the grants an approval leaves.
extension ApprovalController {
    // MARK: - Passkey-confirmed approvals and receipts

    /// The bytes a confirmation commits to: the request, the client, the method, what is signed
    /// (the event id) or handled (SHA-256 of the payload), and a fresh nonce.
    func committedBytes(_ record: PendingRequestRecord, _ incoming: IncomingRequest, pubkey: PublicKey, nonce: [UInt8]) -> String {
        let subject: String =
            switch incoming.call {
            case .signEvent(let unsigned): "event:" + Hex.encode(unsigned.id(pubkey: pubkey))
            default: "payload-sha256:" + Hex.encode(sha256(Array(incoming.payload.utf8)))
            }
        return "keyfob approval v1\nrequest:\(record.id)\nclient:\(record.client)\nmethod:\(record.method)\n\(subject)\nnonce:\(Hex.encode(nonce))"
    }

    @Sendable func challenge(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        let (record, incoming) = try await load(context.parameters.get("id") ?? "", auth: auth)
        let nonce = randomBytes(16)
        guard try await store.setConfirmationNonce(.signer, id: record.id, userID: auth.user.id, nonce: nonce, now: now()) else {
            throw KeyfobError(.requestNotFound, "this request was decided already, has expired, or is not yours", status: .notFound)
        }
        let pubkey = try await custody.publicKey(of: auth.user.id)
        let committed = committedBytes(record, incoming, pubkey: pubkey, nonce: nonce)
        return jsonResponse(
            try await passkeys.approvalOptions(
                committed: committed, userID: auth.user.id,
                opensSealedKey: try await !custody.canOpen(auth.user.id, unlock: auth.unlock)))
    }

    /// What a passkey confirmation proved: the receipt, which passkey, its PRF outputs if it gave
    /// any, and the challenge it signed.
    struct Confirmation {
        let receipt: String
        let credentialID: [UInt8]
        let prf: PRFOutputs
        let challenge: [UInt8]
    }

    /// Verifies the assertion against this user's passkey and the committed bytes.
    func confirm(
        _ assertion: AuthenticationCredential?, record: PendingRequestRecord, incoming: IncomingRequest, user: UserRecord
    ) async throws -> Confirmation {
        guard let assertion, let nonce = record.confirmationNonce else {
            throw KeyfobError(
                .userVerificationRequired, "approving this request needs your passkey: ask for a challenge first",
                status: .forbidden)
        }
        let pubkey = try await custody.publicKey(of: user.id)
        let committed = committedBytes(record, incoming, pubkey: pubkey, nonce: nonce)
        let (receipt, credential, challenge) = try await passkeys.receipt(for: assertion, committed: committed, user: user)
        return Confirmation(
            receipt: receipt, credentialID: credential.id,
            prf: PRFOutputs(
                first: SharedSecret(assertion.clientExtensionResults?.prfFirst),
                second: SharedSecret(assertion.clientExtensionResults?.prfSecond)),
            challenge: challenge)
    }

    @Sendable func receipt(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        guard let id = context.parameters.get("entry").flatMap({ Int64($0) }),
            let entry = try await store.auditEntry(id: id, ofUser: auth.user.id), let receipt = entry.receipt
        else {
            throw KeyfobError(
                .requestNotFound, "no receipt: this entry is not yours or was not confirmed with a passkey",
                status: .notFound)
        }
        return Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: receipt)))
    }

    // MARK: - Grants

    @Sendable func listGrants(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        let formatter = ISO8601DateFormatter()
        let list = try await store.grants(ofUser: auth.user.id, now: now()).map(GrantsReply.Item.init)
        return jsonResponse(GrantsReply(grants: list))
    }

    /// Changing grants needs an unlocked signer (DESIGN.md §3). One exception: the browser
    /// extension's session (never unlocked) may revoke what a web site was allowed, from its popup:
    /// that takes power away; a refusal, an app's or a bunker app's grant it cannot touch.
    @Sendable func deleteGrant(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        var auth = try await sessions.require(request)
        let fromExtension = auth.isExtension
        if !fromExtension { auth = try await sessions.requireUnlocked(request) }
        let id = context.parameters.get("id") ?? ""
        var mayDelete = true
        if fromExtension {
            mayDelete = try await store.grants(ofUser: auth.user.id, now: now()).contains { $0.id == id && $0.isWebSiteAllowance }
        }
        guard mayDelete, try await store.deleteGrant(id: id, ofUser: auth.user.id) else {
            throw KeyfobError(.requestNotFound, "you have no grant with this id", status: .notFound)
        }
        // A dapp's permission revoked: its open account streams check and end.
        streams?.changed(auth.user.id)
        return jsonResponse(["deleted": true])
    }
}
