import Foundation
import KeyfobCodecs
import KeyfobStore
import Logging
import NIOConcurrencyHelpers
import WebAuthn

/// Decoded credential keys, by credential id. Building the OpenSSL key is most of
/// an assertion's cost besides the signature itself, and a key never changes.
final class CredentialKeyCache: Sendable {
    private let keys = NIOLockedValueBox<[[UInt8]: CredentialPublicKey]>([:])
    private let limit: Int

    init(limit: Int = 10_000) { self.limit = limit }

    func key(for record: CredentialRecord) throws(WebAuthnError) -> CredentialPublicKey {
        if let key = keys.withLockedValue({ $0[record.id] }), key.cose == record.publicKey { return key }
        let key = try CredentialPublicKey(cose: record.publicKey)
        keys.withLockedValue { cache in
            if cache.count >= limit { cache.removeAll(keepingCapacity: true) }
            cache[record.id] = key
        }
        return key
    }
}

extension CredentialKeyCache {
    /// What an assertion is checked against: the stored passkey, its key decoded (once, cached).
    func stored(_ record: CredentialRecord, userID: String) throws(WebAuthnError) -> StoredCredential {
        StoredCredential(
            id: record.id, publicKey: try key(for: record), signCount: record.signCount,
            userHandle: Base64URL.decode(userID), backupEligible: record.backupEligible)
    }
}

extension CeremonyStore {
    /// The sign counter's compare-and-swap after an assertion that starts no session (a fresh
    /// passkey check, an approval's confirmation); `409 counter_regression` when another use of
    /// the passkey moved it first.
    func advanceSignCount(of record: CredentialRecord, after verified: VerifiedAuthentication, at date: Date) async throws {
        do {
            try await updateSignCount(
                credentialID: record.id, expectedSignCount: record.signCount,
                newSignCount: verified.newSignCount, backupState: verified.backupState, usedAt: date)
        } catch StoreError.conflict {
            throw KeyfobError(.counterRegression, "this passkey was used at the same moment elsewhere; try again", status: .conflict)
        }
    }
}

extension CeremonyStore {
    /// An assertion from `record` (a passkey of the account) over `challenge`, with user
    /// verification: every §7.2 check, then the counter's compare-and-swap. For assertions that
    /// start no session (an action's confirmation, an approval's); returns what was verified.
    @discardableResult
    func verifyAssertion(
        _ assertion: AuthenticationCredential, by record: CredentialRecord, challenge: [UInt8],
        relyingParty: RelyingParty, keys: CredentialKeyCache, at date: Date
    ) async throws -> VerifiedAuthentication {
        let verified: VerifiedAuthentication
        do {
            verified = try relyingParty.verifyAuthentication(
                assertion, challenge: challenge,
                stored: try keys.stored(record, userID: record.userID),
                requireUserVerification: true)
        } catch { throw KeyfobError(error) }
        try await advanceSignCount(of: record, after: verified, at: date)
        return verified
    }
}

extension AuditStore {
    /// An account change in the user's history (the account page shows recent ones at the top:
    /// "a passkey was added … not you?"). `method`: `add_passkey`, `remove_passkey`, `revoke_sessions`.
    func auditAccountChange(userID: String, method: String, at date: Date) async {
        _ = try? await appendAudit(
            AuditRecord(
                userID: userID, at: date, client: "account", transport: "rest", method: method,
                outcome: .approved))
    }
}

/// Ceremony outcomes as structured log lines (and, later, the dashboard's stream).
/// Never records secrets: usernames, codes and counts only.
struct EventLog: Sendable {
    enum Kind: String, Sendable {
        case registered = "registration.verified"
        case registrationFailed = "registration.failed"
        case signedIn = "authentication.verified"
        case signInFailed = "authentication.failed"
        case signedOut = "session.ended"
        case credentialRemoved = "credential.removed"
    }

    let logger: Logger
    var metrics: KeyfobMetrics? = nil
    var feed: ActivityFeed? = nil
    var now: @Sendable () -> Date = { Date() }
    /// The logger's line handler when lines can go straight into it, found once.
    private let lines: LineLogHandler?

    init(logger: Logger, metrics: KeyfobMetrics? = nil, feed: ActivityFeed? = nil, now: @escaping @Sendable () -> Date = { Date() }) {
        self.logger = logger
        self.metrics = metrics
        self.feed = feed
        self.now = now
        lines = LineLogHandler.direct(for: logger)
    }

    func record(_ kind: Kind, ip: String? = nil, username: String?, code errorCode: ErrorCode? = nil, detail: String? = nil) {
        let code = errorCode?.rawValue
        metrics?.event(kind.rawValue, code: code)
        let category = kind == .signedOut || kind == .credentialRemoved ? "session" : "ceremony"
        feed?.publish(
            Activity(
                time: now(), category: category, event: kind.rawValue, user: username, client: nil, method: nil,
                kind: nil, outcome: code == nil ? "ok" : "failed", code: code, ip: ip))
        logger.log(code == nil ? .info : .notice, kind.rawValue, direct: lines) { fields in
            if let code { fields.add("code", code) }
            if let detail { fields.add("detail", detail) }
            fields.add("event", kind.rawValue)
            if let ip { fields.add("ip", ip) }
            if let username { fields.add("user", username) }
        }
    }
}
