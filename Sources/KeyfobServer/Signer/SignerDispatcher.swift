import Foundation
import HTTPTypes
import KeyfobCodecs
import KeyfobStore
import Logging
import Nostr
import Polkadot

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

    /// A nostr signer method: `perform` around the key's own work.
    /// `receipt`: for passkey-confirmed approvals, stored with the audit entry.
    func run(_ call: SignerCall, for caller: SignerCaller, receipt: String? = nil) async throws -> SignerResult {
        try await run(call.method, for: caller, receipt: receipt) { call }
    }

    /// A nostr signer method whose request is read inside the operation, so a malformed one is
    /// limited and audited like any other failure.
    func run(
        _ method: SignerMethod, for caller: SignerCaller, receipt: String? = nil, parse: () throws -> SignerCall
    ) async throws -> SignerResult {
        try await perform(method.rawValue, for: caller, receipt: receipt) { operation in
            let call = try parse()
            operation.kind = call.kind
            let result = try await execute(call, caller: caller)
            if call.method == .signEvent { operation.eventID = result.event.map { Hex.encode($0.id) } }
            return result
        }
    }

    /// A key operation refused before it ran (a locked signer, a request that cannot be read):
    /// audited like a failure inside `perform`, without spending the caller's limit. Returns the
    /// error to throw or to answer with; throws only when the entry cannot be written.
    func refusal(_ error: KeyfobError, method: String, kind: Int? = nil, for caller: SignerCaller) async throws -> KeyfobError {
        do {
            try await perform(method, kind: kind, for: caller, limit: .uncounted) { _ -> Void in throw error }
        } catch let refused as KeyfobError {
            return refused
        }
        return error
    }

    /// The user said no to a key operation: audited as rejected, without spending the limit.
    func rejection(_ method: String, kind: Int? = nil, for caller: SignerCaller) async throws {
        try await perform(method, kind: kind, for: caller, limit: .uncounted) { $0.rejected() }
    }

    /// The one entry for every key operation — nostr methods, Polkadot signatures, sealing,
    /// imports and exports, locks and rejections: takes the caller's limit (unless `limit` is
    /// `.uncounted`), runs `body`, and writes the audit entry of what happened. The entry is
    /// part of the operation: when it cannot be written nothing is answered (503). Errors come
    /// out as `KeyfobError`s, each audited with its code; a store outage is not audited (there
    /// is nowhere to write it) and answers 503.
    func perform<T>(
        _ method: String, kind: Int? = nil, for caller: SignerCaller, receipt: String? = nil,
        limit: OperationLimit = .counted, _ body: (inout KeyOperation) async throws -> T
    ) async throws -> T {
        var operation = KeyOperation(method: method, kind: kind, caller: caller, receipt: receipt)
        if limit == .counted, let refusal = limiter.refusal(caller.limitKey, now: now()) {
            logger.notice("signer.rate_limited", metadata: ["user": "\(caller.username)", "client": "\(caller.client)"])
            // One entry for the first refusal of a burst: a flood of refused calls writes one row.
            if refusal.isFirst {
                try await audit(caller, method: method, kind: kind, outcome: .failed, code: .rateLimited)
            } else {
                metrics?.signer(method: method, outcome: AuditOutcome.failed.rawValue, code: ErrorCode.rateLimited.rawValue)
            }
            throw KeyfobError.rateLimited(retryAfter: refusal.retryAfter)
        }
        let value: T
        do {
            value = try await body(&operation)
        } catch {
            let apiError: KeyfobError
            switch error {
            case let error as KeyfobError: apiError = error
            case let error as NostrError: apiError = KeyfobError(error)
            case let error as PolkadotError: apiError = KeyfobError(error)
            case StoreError.unavailable, StoreError.database: throw error  // nothing to audit into: 503
            default: apiError = KeyfobError(.internalError, "the signer failed", status: .internalServerError)
            }
            try await audit(caller, method: method, kind: operation.kind, outcome: .failed, code: apiError.code)
            throw apiError
        }
        if operation.isQueued {
            // Not done yet: its entry is written when it is decided.
        } else if let written = operation.written {
            announce(written, caller: caller)
        } else {
            try await audit(
                caller, method: method, kind: operation.kind, eventID: operation.eventID, outcome: operation.outcome,
                code: operation.code, receipt: operation.receipt)
        }
        return value
    }

    /// Whether a key operation spends one of the caller's tokens: every signature, import,
    /// export and seal does; a refusal, a lock or a sign-out (which only take power away) do not.
    enum OperationLimit: Sendable { case counted, uncounted }

    /// One key operation under way in `perform`: what its audit entry will say.
    struct KeyOperation {
        let method: String
        /// The event kind the entry names, once the request is read.
        var kind: Int?
        let caller: SignerCaller
        /// The passkey receipt of a confirmed approval, once verified.
        var receipt: String?
        /// The id the entry names: a signed event's, a Polkadot payload's hash.
        var eventID: String?
        /// `.approved` unless the body settles otherwise (`rejected()`).
        private(set) var outcome: AuditOutcome = .approved
        private(set) var code: ErrorCode?
        /// The entry the body wrote with its own change (`entryWrittenWithChange`).
        fileprivate private(set) var written: AuditRecord?

        /// Only queued for the user's decision: nothing is written now (the decision is audited).
        private(set) var isQueued = false

        /// The user said no: audited as rejected (`user_rejected`), not as a failure.
        mutating func rejected() { (outcome, code) = (.rejected, .userRejected) }

        /// The request waits for the user: limited and, if it fails, audited; done, it writes no entry.
        mutating func queued() { isQueued = true }

        /// The approved entry, for a store call that writes it in the same transaction as the
        /// operation's result (neither kept without the other); `perform` then only announces it.
        mutating func entryWrittenWithChange(by dispatcher: SignerDispatcher) -> AuditRecord {
            let entry = dispatcher.entry(caller, method: method, kind: kind, eventID: eventID, outcome: outcome, code: code, receipt: receipt)
            written = entry
            return entry
        }
    }

    private func execute(_ call: SignerCall, caller: SignerCaller) async throws -> SignerResult {
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
    /// Never plaintext, ciphertext, keys or tokens: only what is named here. Only `perform` calls it.
    private func audit(
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
    private func entry(
        _ caller: SignerCaller, method: String, kind: Int? = nil, eventID: String? = nil,
        outcome: AuditOutcome, code errorCode: ErrorCode? = nil, receipt: String? = nil
    ) -> AuditRecord {
        AuditRecord(
            userID: caller.userID, at: now(), client: caller.client, transport: caller.transport,
            method: method, kind: kind, eventID: eventID, outcome: outcome, code: errorCode?.rawValue, receipt: receipt)
    }

    /// A written entry in the log, the metrics and the operator's live stream.
    private func announce(_ entry: AuditRecord, caller: SignerCaller) {
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
