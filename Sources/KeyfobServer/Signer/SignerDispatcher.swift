import Foundation
import HTTPTypes
import KeyfobStore
import Logging
import Nostr

/// Who asks the signer, through what: the key of limits and the name in the audit log.
struct SignerCaller: Sendable {
    let userID: String
    let username: String
    /// `api` for the user's own signed-in app; a callback's host or scheme for redirect flows.
    let client: String
    /// `rest`, `redirect`, `nip07`, `nip46`.
    let transport: String
    /// What the rate limit counts against (the session).
    let limitKey: String
    /// The client's address, for the operator's stream.
    var ip: String? = nil
    /// The session behind the call: what opens a passkey-sealed key.
    var unlock: SessionUnlock? = nil
}

/// What a signer operation produced.
struct SignerResult: Sendable {
    /// The method's result: a signature, a ciphertext, a plaintext, a pubkey, or the zap note's JSON.
    let result: String
    /// The signed event (sign_event) or the decrypted zap note (decrypt_zap_event).
    let event: Event?
    let pubkey: PublicKey
}

/// The one path every transport's signer operations take: limit, open the key, run, audit.
/// The caller has already checked the session and the lock.
struct SignerDispatcher: Sendable {
    let custody: KeyCustody
    let store: any AuditStore
    let limiter: RateLimiter
    let logger: Logger
    let now: @Sendable () -> Date
    var metrics: KeyfobMetrics? = nil
    var feed: ActivityFeed? = nil

    /// `receipt`: for passkey-confirmed approvals, stored with the audit entry.
    func run(_ call: SignerCall, for caller: SignerCaller, receipt: String? = nil) async throws -> SignerResult {
        if let retry = limiter.take(caller.limitKey, now: now()) {
            logger.notice("signer.rate_limited", metadata: ["user": "\(caller.username)", "client": "\(caller.client)"])
            throw KeyfobError.rateLimited(retryAfter: retry)
        }
        do {
            let result = try await perform(call, caller: caller)
            try await audit(
                caller, method: call.method.rawValue, kind: call.kind,
                eventID: call.method == .signEvent ? result.event.map { Hex.encode($0.id) } : nil, outcome: .approved,
                receipt: receipt)
            return result
        } catch {
            let apiError: KeyfobError
            switch error {
            case let error as KeyfobError: apiError = error
            case StoreError.unavailable: throw error  // nothing to audit into; the error middleware answers 503
            default: apiError = KeyfobError(.internalError, "the signer failed", status: .internalServerError)
            }
            try await audit(caller, method: call.method.rawValue, kind: call.kind, outcome: .failed, code: apiError.code)
            throw apiError
        }
    }

    private func perform(_ call: SignerCall, caller: SignerCaller) async throws -> SignerResult {
        let userID = caller.userID
        switch call {
        case .getPublicKey:
            let pubkey = try await custody.publicKey(of: userID)
            return SignerResult(result: pubkey.hex, event: nil, pubkey: pubkey)
        case .signEvent(let unsigned):
            guard !SignerCall.neverSignedKinds.contains(unsigned.kind) else {
                throw KeyfobError(
                    .permissionDenied, "kind \(unsigned.kind) is a direct-message rumor and must stay unsigned",
                    status: .forbidden)
            }
            let event = try await custody.withSecretKey(of: userID, unlock: caller.unlock) { unsigned.sign(with: $0) }
            return SignerResult(result: Hex.encode(event.sig), event: event, pubkey: event.pubkey)
        case .encrypt(let cipher, let plaintext, let peer):
            return try await custody.withSecretKey(of: userID, unlock: caller.unlock) { key in
                let ciphertext = try KeyfobError.from { () throws(NostrError) -> String in
                    switch cipher {
                    case .nip04: try NIP04.encrypt(plaintext, from: key, to: peer)
                    case .nip44: try NIP44.encrypt(plaintext, from: key, to: peer)
                    }
                }
                return SignerResult(result: ciphertext, event: nil, pubkey: key.publicKey)
            }
        case .decrypt(let cipher, let ciphertext, let peer):
            return try await custody.withSecretKey(of: userID, unlock: caller.unlock) { key in
                let plaintext = try KeyfobError.from { () throws(NostrError) -> String in
                    switch cipher {
                    case .nip04: try NIP04.decrypt(ciphertext, with: key, from: peer)
                    case .nip44: try NIP44.decrypt(ciphertext, with: key, from: peer)
                    }
                }
                return SignerResult(result: plaintext, event: nil, pubkey: key.publicKey)
            }
        case .decryptZap(let request):
            return try await custody.withSecretKey(of: userID, unlock: caller.unlock) { key in
                let note = try KeyfobError.from { () throws(NostrError) in try PrivateZap.decrypt(zapRequest: request, with: key) }
                return SignerResult(result: note.json, event: note, pubkey: key.publicKey)
            }
        }
    }

    /// Records one operation, as part of it: when the entry cannot be written the operation's
    /// answer must not go out, so this throws (`StoreError.unavailable`: 503 `store_unavailable`).
    /// Never plaintext, ciphertext, keys or tokens: only what is named here.
    func audit(
        _ caller: SignerCaller, method: String, kind: Int? = nil, eventID: String? = nil,
        outcome: AuditOutcome, code errorCode: ErrorCode? = nil, receipt: String? = nil
    ) async throws {
        let entry = entry(caller, method: method, kind: kind, eventID: eventID, outcome: outcome, code: errorCode, receipt: receipt)
        do {
            if let metrics {
                _ = try await metrics.store("append_audit") { try await store.appendAudit(entry) }
            } else {
                try await store.appendAudit(entry)
            }
        } catch {
            throw Self.writeFailed(error, method: method, logger: logger)
        }
        announce(entry, caller: caller)
    }

    /// The entry for one operation, for a store call that writes it with the operation's own
    /// change (then `announce` it once that call succeeded).
    func entry(
        _ caller: SignerCaller, method: String, kind: Int? = nil, eventID: String? = nil,
        outcome: AuditOutcome, code errorCode: ErrorCode? = nil, receipt: String? = nil
    ) -> AuditRecord {
        AuditRecord(
            userID: caller.userID, at: now(), client: caller.client, transport: caller.transport,
            method: method, kind: kind, eventID: eventID, outcome: outcome, code: errorCode?.rawValue, receipt: receipt)
    }

    /// A written entry in the log, the metrics and the operator's live stream.
    func announce(_ entry: AuditRecord, caller: SignerCaller) {
        let (method, outcome, code) = (entry.method, entry.outcome.rawValue, entry.code)
        var metadata: Logger.Metadata = [
            "event": "signer.\(outcome)", "user": "\(caller.username)", "client": "\(caller.client)",
            "transport": "\(caller.transport)", "method": "\(method)",
        ]
        if let kind = entry.kind { metadata["kind"] = "\(kind)" }
        if let eventID = entry.eventID { metadata["eventId"] = "\(eventID)" }
        if let code { metadata["code"] = "\(code)" }
        logger.log(level: code == nil ? .info : .notice, "signer.\(outcome)", metadata: metadata)
        metrics?.signer(method: method, outcome: outcome, code: code)
        feed?.publish(
            Activity(
                time: now(), category: "signer", event: "signer.\(outcome)", user: caller.username,
                client: caller.client, method: method, kind: entry.kind, outcome: outcome, code: code, ip: caller.ip))
    }

    /// A failed audit write as the error that answers the request: 503, nothing else said.
    static func writeFailed(_ error: any Error, method: String, logger: Logger) -> any Error {
        logger.error("audit write failed; the operation is not answered", metadata: ["method": "\(method)"])
        if case StoreError.unavailable = error { return error }
        return StoreError.unavailable("the audit entry could not be written")
    }
}

extension KeyfobError {
    static let signerLocked = KeyfobError(
        .signerLocked, "the signer is locked; sign in with your passkey again to unlock it", status: .forbidden)
}
