import Foundation
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import Logging
import NIOConcurrencyHelpers
import Nostr
import ServiceLifecycle
import WebAuthn

/// What the signer does with a request it read: signs it through the dispatcher (or queues it for
/// the owner's approval) and sends the answer back to the client.
extension Bunker {
    // MARK: Signing

    /// A signer request from a connected client, through the same dispatcher, grants, limits and
    /// audit log as REST (transport `nip46`). It runs at once only when the user allowed it before
    /// AND one of their sessions is unlocked (a grant skips the page, never the lock) AND the key
    /// opens without a passkey; otherwise it waits on the approval page (`auth_url`).
    /// `sealingWith`: a sealed account's signer key, under which a waiting request is stored.
    /// Nil (silence, as for any client not connected) when the client was disconnected meanwhile.
    func sign(_ address: BunkerAddress, userID: String, sealingWith signerKey: SecretKey? = nil) async throws -> NIP46.Response? {
        guard let user = try await store.user(id: userID) else { return NIP46.Response(id: address.requestID, result: nil, error: "no such account") }
        let caller = SignerCaller(
            userID: userID, username: user.username, client: address.clientIdentifier, transport: "nip46",
            limitKey: address.clientIdentifier)
        let call: SignerCall
        do { call = try address.call(now: now()) } catch {
            return Self.errorResponse(address.requestID, try await dispatcher.refusal(error, method: address.method, for: caller))
        }
        let decision = try await grants.decision(userID: userID, client: caller.client, method: call.method.rawValue, kind: call.kind)
        if decision == .deny {
            try await dispatcher.rejection(call.method.rawValue, kind: call.kind, for: caller)
            return NIP46.Response(id: address.requestID, result: nil, error: "user_rejected: you chose to reject these requests")
        }
        if decision == .allow, try await store.hasUnlockedSession(ofUser: userID, now: now()),
            try await custody.canOpen(userID, unlock: nil)
        {
            do {
                let result = try await dispatcher.run(call, for: caller)
                return NIP46.Response(id: address.requestID, result: address.result(result.result, event: result.event?.json))
            } catch let error as KeyfobError {
                return Self.errorResponse(address.requestID, error)
            }
        }
        do {
            // Stored only while the client is still connected: a sign-out everywhere in between
            // would otherwise leave it waiting for approval after it cancelled the rest.
            let id = try await pending.create(
                .nip46(address, call: call), userID: userID, requester: caller.client,
                source: .bunkerClient(userID: userID, clientPubkey: address.client), sealingWith: signerKey)
            logger.info("nip46.auth_url", metadata: ["client": "\(address.client.prefix(12))", "method": "\(address.method)"])
            return NIP46.Response.authURL(id: address.requestID, url: "\(origin)/approve/\(id)")
        } catch StoreError.notFound {
            logger.notice("nip46.request_dropped", metadata: ["client": "\(address.client.prefix(12))", "reason": "disconnected"])
            return nil
        } catch StoreError.limitReached {
            return NIP46.Response(
                id: address.requestID, result: nil,
                error: "rate_limited: \(PendingRequests.maxPerClient) requests are waiting for approval already")
        }
    }

    static func errorResponse(_ id: String, _ error: KeyfobError) -> NIP46.Response {
        NIP46.Response(id: id, result: nil, error: "\(error.code): \(error.message)")
    }

    /// Answers a request the user decided on the approval page: published here at once and queued
    /// in the database for the instance that holds the client's connection, if another does.
    func deliver(_ outcome: SignerOutcome, to address: BunkerAddress, unlock: SessionUnlock?) async throws {
        guard let record = try await store.bunkerSigner(pubkey: address.signer),
            try await store.bunkerClient(userID: record.userID, clientPubkey: address.client) != nil
        else {
            logger.notice("nip46.reply_dropped", metadata: ["client": "\(address.client.prefix(12))"])
            return  // the client was disconnected meanwhile: it gets no answer
        }
        let response: NIP46.Response =
            switch outcome {
            case .success(let result, let event): NIP46.Response(id: address.requestID, result: address.result(result, event: event))
            case .rejected: NIP46.Response(id: address.requestID, result: nil, error: "user_rejected: the user rejected this request")
            case .failure(let code, let message): NIP46.Response(id: address.requestID, result: nil, error: "\(code): \(message)")
            }
        try await send(
            response, with: try secretKey(of: record, unlock: unlock), to: try PublicKey(hex: address.client),
            encryption: address.cipher)
    }

    /// Seals `response` for `client` and publishes it here (and to the external relays this
    /// instance holds); with `queue`, also in the database for the instance that holds the
    /// client's connection when that is another one.
    func send(
        _ response: NIP46.Response, with key: SecretKey, to client: PublicKey, encryption: NIP46.Encryption,
        queue: Bool = true
    ) async throws {
        let at = now()
        let reply = try NIP46.wrap(response.json, from: key, to: client, createdAt: Int64(at.timeIntervalSince1970), encryption: encryption)
        hub.publishOutgoing(reply)
        if queue { try await store.appendBunkerReply(reply.json, at: at, dropBefore: at.addingTimeInterval(-Self.replyLifetime)) }
    }
}
