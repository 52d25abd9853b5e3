import Foundation
import Hummingbird
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import WebAuthn

/// What could hand an account to someone else needs a passkey assertion made for that action, not
/// a session (a session token taken inside the unlock window must not take the account):
///
///     POST /api/confirmations {"action": "passkey.remove", "target": "<credential id>"}
///       → request options whose challenge is bound to (action, target, session); 2 minutes, once
///     then the action's own endpoint with {"confirmation": <the assertion>, …}
///
/// The assertion must come from a passkey the account had *before* this session signed in: one
/// the same session just added cannot confirm anything.
struct ActionConfirmations: Sendable {
    enum Action: String, CaseIterable, Sendable {
        case addPasskey = "passkey.add"
        case removePasskey = "passkey.remove"
        case seal = "key.seal"
        case unseal = "key.unseal"
        case exportKey = "key.export"
        case importKey = "key.import"
        case exportPolkadot = "polkadot.export"
        case removePolkadot = "polkadot.remove"
        /// Bringing a key someone else may know (a phrase, a backup file): a stolen session must
        /// not plant an account whose key its thief holds.
        case importPolkadot = "polkadot.import"
        /// Letting a Polkadot account sign transactions Keyfob cannot check (or stop): a stolen
        /// session must not switch blind signing on.
        case polkadotUnverified = "polkadot.accept_unverified"
        /// Giving the browser extension a session of this account.
        case connectExtension = "extension.connect"
        case trustClient = "grant.trusted"
        case revokeSessions = "sessions.revoke"
        case adminRevokeSessions = "admin.revoke_sessions"
        case adminRemoveUser = "admin.remove_user"
        /// Not an account change: opening a sealed key for this session's unlock window (the one
        /// confirmation that asks for PRF outside sealing; a usual sign-in does not).
        case unlock = "signer.unlock"

        /// Sealing, unsealing and unlocking need the PRF output of the same assertion.
        var needsPRF: Bool { self == .seal || self == .unseal || self == .unlock }
    }

    static let lifetime: TimeInterval = 120
    /// Marks a confirmation's challenge in the table: a sign-in does not accept it.
    static let keyPrefix = "confirm:"

    /// Its challenges are ceremonies' challenges: issued, capped and consumed the same way.
    let passkeys: PasskeyCheck
    let store: any CredentialStore & KeyWrapStore & ChallengeStore & CeremonyStore
    let custody: KeyCustody
    let limits: ClientLimits
    let now: @Sendable () -> Date

    static let required = KeyfobError(
        .confirmationRequired,
        "confirm this with one of your passkeys: POST /api/confirmations with this action first",
        status: .forbidden)

    /// The value stored with the challenge: what it may confirm, for which session.
    static func binding(_ action: Action, target: String, session: SessionRecord) -> String {
        let text = "keyfob-confirmation-v1\u{0}\(action.rawValue)\u{0}\(target)\u{0}\(session.userID)\u{0}\(Hex.encode(session.tokenHash))"
        return keyPrefix + Base64URL.encode(sha256(Array(text.utf8)))
    }

    /// The passkeys that may confirm `action` for this session: the one it signed in with, and those
    /// the account had before; not one added since — but any of the account's passkeys may join the
    /// seal (`key.seal`): adding it took an older passkey's confirmation already, and it gains only a
    /// way to open the key, which this unlocked session holds anyway.
    func eligible(_ auth: Sessions.Authenticated, for action: Action) async throws -> [CredentialRecord] {
        try await store.credentials(ofUser: auth.user.id).filter { Self.mayConfirm($0, action, for: auth.session) }
    }

    static func mayConfirm(_ credential: CredentialRecord, _ action: Action, for session: SessionRecord) -> Bool {
        action == .seal || credential.createdAt < session.createdAt || credential.id == session.credentialID
    }

    /// Options for confirming `action` on `target` (empty when the action has none).
    func options(_ action: Action, target: String, for auth: Sessions.Authenticated, ip: String?) async throws -> Response {
        var allowed = try await eligible(auth, for: action)
        guard !allowed.isEmpty else {
            throw KeyfobError(
                .permissionDenied, "none of your passkeys is older than this session; sign in again with one of them",
                status: .forbidden)
        }
        // PRF per passkey: the salt of its wrap (random per wrap), or a fresh one for a passkey that
        // joins the seal now. A sealed key unlocks only with a passkey that has a wrap.
        let wraps = action.needsPRF ? try await store.keyWraps(ofUser: auth.user.id) : []
        if action == .unlock, try await custody.record(for: auth.user.id).passkeySealed {
            allowed = allowed.filter { credential in wraps.contains { $0.credentialID == credential.id } }
            guard !allowed.isEmpty else {
                throw KeyfobError(
                    .signerLocked,
                    "none of the passkeys that may unlock this session can open your sealed key; "
                        + "sign in with one that seals it", status: .forbidden)
            }
        }
        let challenge = randomBytes(32)
        var record = ChallengeRecord(
            challenge: challenge, ceremony: .authentication,
            key: Self.binding(action, target: target, session: auth.session), userID: auth.user.id,
            expiresAt: now().addingTimeInterval(Self.lifetime), clientIP: ip)
        record.mayUseReserve = true
        try await limits.insert(record, into: store, now: now())
        let allow = allowed.map { CredentialDescriptor(id: $0.id, transports: $0.transports) }
        let prf =
            action.needsPRF
            ? passkeys.seal.inputs(for: allow, wraps: wraps, challenge: challenge, newWraps: action == .seal) : nil
        let options = passkeys.requestOptions(challenge: challenge, allow: allow, timeoutSeconds: Int(Self.lifetime), prf: prf)
        return jsonResponse(Confirmation(action: action.rawValue, target: target, expiresIn: Int(Self.lifetime), options: options))
    }

    struct Confirmation: Encodable {
        let action: String
        let target: String
        let expiresIn: Int
        let options: RequestOptions
    }

    /// Checks `assertion` confirms `action` on `target` for this session: the challenge is
    /// consumed (once, whatever follows), bound to exactly this, unexpired; the passkey is the
    /// account's and older than the session; every §7.2 check with user verification; the counter moves.
    /// Returns the passkey and the challenge it signed (a fresh PRF salt derives from it).
    @discardableResult
    func verify(
        _ assertion: AuthenticationCredential?, _ action: Action, target: String,
        for auth: Sessions.Authenticated
    ) async throws -> (credential: CredentialRecord, challenge: [UInt8]) {
        guard let assertion else { throw Self.required }
        // Consumed once whatever follows, and unexpired (2 minutes), like any ceremony's challenge.
        let pending = try await passkeys.consumeChallenge(
            clientDataJSON: assertion.response.clientDataJSON,
            ceremony: .authentication, key: nil)
        guard pending.key == Self.binding(action, target: target, session: auth.session) else {
            throw KeyfobError(
                .challengeNotFound,
                "this confirmation was not made for this action on this session, or was used already; "
                    + "request a new one")
        }
        guard let credentialID = Base64URL.decode(assertion.rawId), let record = try await store.credential(id: credentialID),
            record.userID == auth.user.id
        else {
            throw KeyfobError(.credentialNotFound, "this is not one of your passkeys", status: .notFound)
        }
        guard Self.mayConfirm(record, action, for: auth.session) else {
            throw KeyfobError(
                .permissionDenied, "this passkey was added after this session signed in; sign in with it first",
                status: .forbidden)
        }
        try await passkeys.verify(assertion, by: record, challenge: pending.challenge)
        return (record, pending.challenge)
    }

    /// A body whose one field is an action's passkey confirmation: `{"confirmation": <assertion>}`
    /// (empty or without it: nil, which `verify` answers with `confirmation_required`).
    struct Confirmed: Decodable {
        var confirmation: AuthenticationCredential?
    }

    /// The confirmation in a request's body, read with a throwing decoder: any other shape is a 400.
    static func assertion(in request: Request, limit: Int = 16 * 1024) async throws -> AuthenticationCredential? {
        try await request.decodeJSON(Confirmed.self, limit: limit, emptyIsObject: true).confirmation
    }
}

/// `POST /api/confirmations`.
struct ConfirmationController: Sendable {
    /// `POST /api/confirmations`: the action to confirm and what it acts on (a passkey's id, an
    /// account's); strings, or absent.
    struct Asked: Decodable {
        var action: String?
        var target: String?
    }

    let confirmations: ActionConfirmations
    let sessions: Sessions
    var limits: ClientLimits { confirmations.limits }

    func addRoutes(to router: Router<KeyfobRequestContext>) {
        router.post("/api/confirmations") { request, context in
            let auth = try await sessions.require(request)
            let ip = limits.clientIP(request, context)
            try limits.check(limits.options, ip, now: confirmations.now())
            let body = try await request.decodeJSON(Asked.self, limit: 4096)
            guard let action = body.action.flatMap(ActionConfirmations.Action.init(rawValue:)) else {
                throw KeyfobError.invalid("action must be one of \(ActionConfirmations.Action.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            let target = body.target ?? ""
            guard target.utf8.count <= 256 else { throw KeyfobError.invalid("target is at most 256 bytes") }
            return try await confirmations.options(action, target: target, for: auth, ip: ip)
        }
    }
}
