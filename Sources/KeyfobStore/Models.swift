import Foundation

/// An account. `id` is the WebAuthn user handle (random bytes, base64url here).
public struct UserRecord: Sendable, Equatable {
    public var id: String
    public var username: String
    public var isAnonymous: Bool
    public var createdAt: Date

    public init(id: String, username: String, isAnonymous: Bool, createdAt: Date) {
        self.id = id
        self.username = username
        self.isAnonymous = isAnonymous
        self.createdAt = createdAt
    }
}

/// A passkey with its account and the account's nostr key (nil until it has one): what a
/// sign-in reads, in one statement.
public struct CredentialOwner: Sendable, Equatable {
    public var credential: CredentialRecord
    public var user: UserRecord
    public var nostrKey: NostrKeyRecord?

    public init(credential: CredentialRecord, user: UserRecord, nostrKey: NostrKeyRecord?) {
        (self.credential, self.user, self.nostrKey) = (credential, user, nostrKey)
    }
}

/// A registered passkey.
public struct CredentialRecord: Sendable, Equatable {
    public var id: [UInt8]
    public var userID: String
    /// COSE_Key bytes as registered.
    public var publicKey: [UInt8]
    public var algorithm: Int
    public var signCount: UInt32
    public var transports: [String]
    public var aaguid: [UInt8]
    public var attestationFormat: String
    public var backupEligible: Bool
    public var backupState: Bool
    public var createdAt: Date
    public var lastUsedAt: Date?
    /// Whether the attestation chain reached a configured trust anchor. When false, the format
    /// and AAGUID are only what the client claimed.
    public var attestationTrusted: Bool
    /// What the user calls it ("work laptop"), if they named it.
    public var name: String?
    /// The browser and system it was made on ("Chrome on Android"), from the User-Agent.
    public var createdOn: String?
    /// Whether its authenticator can derive PRF secrets (seal a key), as the browser reported at
    /// creation; nil when it did not say (apps, older records).
    public var prfCapable: Bool?

    public init(
        id: [UInt8], userID: String, publicKey: [UInt8], algorithm: Int, signCount: UInt32,
        transports: [String], aaguid: [UInt8], attestationFormat: String, backupEligible: Bool,
        backupState: Bool, createdAt: Date, lastUsedAt: Date? = nil, attestationTrusted: Bool = false,
        name: String? = nil, createdOn: String? = nil, prfCapable: Bool? = nil
    ) {
        self.id = id
        self.userID = userID
        self.publicKey = publicKey
        self.algorithm = algorithm
        self.signCount = signCount
        self.transports = transports
        self.aaguid = aaguid
        self.attestationFormat = attestationFormat
        self.backupEligible = backupEligible
        self.backupState = backupState
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
        self.attestationTrusted = attestationTrusted
        self.name = name
        self.createdOn = createdOn
        self.prfCapable = prfCapable
    }
}

/// A ceremony that has begun: its challenge, single use, expiring.
public struct ChallengeRecord: Sendable, Equatable {
    public enum Ceremony: String, Sendable { case registration, authentication }

    public var challenge: [UInt8]
    public var ceremony: Ceremony
    /// What the client may echo back as `challengeKey`.
    public var key: String
    /// The user the ceremony is for (registration: the new or existing account).
    public var userID: String?
    public var username: String?
    public var isAnonymous: Bool
    /// Registration only: adding a passkey to an account that exists already.
    public var existingUser: Bool
    /// Registration only: the COSE algorithms that were offered.
    public var algorithms: [Int]
    public var expiresAt: Date
    /// Who asked for it, so live challenges per client can be capped.
    public var clientIP: String?
    /// The client presented a session or a returning-device cookie: it may use the reserve of
    /// the server-wide cap on live challenges, which strangers cannot fill. Not stored.
    public var mayUseReserve = false

    public init(
        challenge: [UInt8], ceremony: Ceremony, key: String, userID: String? = nil, username: String? = nil,
        isAnonymous: Bool = false, existingUser: Bool = false, algorithms: [Int] = [], expiresAt: Date,
        clientIP: String? = nil
    ) {
        self.challenge = challenge
        self.ceremony = ceremony
        self.key = key
        self.userID = userID
        self.username = username
        self.isAnonymous = isAnonymous
        self.existingUser = existingUser
        self.algorithms = algorithms
        self.expiresAt = expiresAt
        self.clientIP = clientIP
    }
}

/// A sign-in challenge that was never stored (`SealedChallenges`: it carries its own expiry, sealed
/// by the server), recorded once it is answered so it cannot be answered again. Kept until
/// `expiresAt` (the server sets it past the challenge's own), when the challenge's expiry refuses it.
public struct UsedChallenge: Sendable, Equatable {
    /// SHA-256 of the challenge.
    public var hash: [UInt8]
    public var expiresAt: Date

    public init(hash: [UInt8], expiresAt: Date) { (self.hash, self.expiresAt) = (hash, expiresAt) }
}

/// A sign-in checked against a passkey known from an earlier read (`CeremonyStore.completeSignIn`):
/// its id, account and public key never change while it exists; its counter and backup state may
/// have moved since, so the store checks the counter against what it holds now.
public struct SignInWrite: Sendable, Equatable {
    public var credentialID: [UInt8]
    public var userID: String
    /// COSE_Key bytes the assertion was verified with: the passkey must still have them.
    public var publicKey: [UInt8]
    public var newSignCount: UInt32
    public var backupState: Bool
    public var usedAt: Date
    public var session: SessionRecord
    public var usedChallenge: UsedChallenge

    public init(
        credentialID: [UInt8], userID: String, publicKey: [UInt8], newSignCount: UInt32, backupState: Bool, usedAt: Date,
        session: SessionRecord, usedChallenge: UsedChallenge
    ) {
        (self.credentialID, self.userID, self.publicKey) = (credentialID, userID, publicKey)
        (self.newSignCount, self.backupState, self.usedAt) = (newSignCount, backupState, usedAt)
        (self.session, self.usedChallenge) = (session, usedChallenge)
    }

    /// WebAuthn's counter rule (§7.2 step 22): when either side uses a counter, the new one is ahead.
    public func counterMoves(from stored: UInt32) -> Bool {
        newSignCount > stored || (newSignCount == 0 && stored == 0)
    }
}

/// How `CeremonyStore.completeSignIn` ended.
public enum SignInOutcome: Sendable, Equatable {
    /// Written: counter, used challenge and session. The account as it is now, whether its key is
    /// sealed by passkeys (nil: no key yet), and the passkey's backup state before this sign-in.
    case signedIn(UserRecord, keySealed: Bool?, backupStateBefore: Bool)
    /// No passkey has this id, account and key any more: nothing written (but the challenge, when
    /// the removal committed while this sign-in waited for the passkey).
    case passkeyGone
    /// The stored counter is not behind the assertion's: nothing written.
    case counterBehind(stored: UInt32)
    /// The challenge was recorded already (a replay, or another instance first): nothing written.
    case challengeUsed(UserRecord)
    /// A concurrent sign-in with this passkey moved the counter first: only the challenge is recorded.
    case lostRace(UserRecord)
}

/// A signed-in session. Only the SHA-256 of its token is ever stored.
public struct SessionRecord: Sendable, Equatable {
    public var tokenHash: [UInt8]
    public var userID: String
    public var createdAt: Date
    public var expiresAt: Date
    /// Until when the signer is unlocked (set by a passkey assertion with UV).
    public var unlockedUntil: Date?
    /// The passkey whose ceremony started this session: removing it ends the session.
    public var credentialID: [UInt8]?
    /// For a passkey-sealed key: the data key, encrypted under a key derived from this session's
    /// token (which is stored only as a hash), for the unlock window only. Nil otherwise.
    public var dataKey: [UInt8]?
    /// What holds it: nil for a browser or an app that signed in; `extension` for the Keyfob
    /// browser extension, which a signed-in Keyfob page gave it to (ended by "Sign out everywhere" too).
    public var kind: String?

    public init(
        tokenHash: [UInt8], userID: String, createdAt: Date, expiresAt: Date, unlockedUntil: Date?,
        credentialID: [UInt8]? = nil, dataKey: [UInt8]? = nil, kind: String? = nil
    ) {
        self.tokenHash = tokenHash
        self.userID = userID
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.unlockedUntil = unlockedUntil
        self.credentialID = credentialID
        self.dataKey = dataKey
        self.kind = kind
    }

    /// Whether the signer is unlocked at `now`.
    public func isUnlocked(at now: Date) -> Bool { unlockedUntil.map { $0 > now } ?? false }
}

/// A user's nostr secret key as stored: AES-256-GCM-sealed under a key derived from the
/// master key, with the user id and `version` as additional data. Never the key itself.
public struct NostrKeyRecord: Sendable, Equatable {
    public var userID: String
    /// The x-only public key, hex (public; kept so `get_public_key` needs no decryption).
    public var pubkey: String
    /// Goes up by one each time the key is replaced (import); bound into the ciphertext.
    public var version: Int
    public var nonce: [UInt8]
    /// Ciphertext followed by the 16-byte GCM tag.
    public var sealed: [UInt8]
    public var updatedAt: Date
    /// Sealed by the user's passkeys (PRF): what the master key opens is itself encrypted under a
    /// data key that only a passkey's wrap (`KeyWrapRecord`) or an unlocked session can give.
    public var passkeySealed: Bool
    /// Read with the key, not stored in its row: whether the user has data-key wraps. A
    /// server-protected key while wraps exist is a row put back from before sealing (refused).
    public var hasWraps: Bool = false

    public init(
        userID: String, pubkey: String, version: Int, nonce: [UInt8], sealed: [UInt8], updatedAt: Date,
        passkeySealed: Bool = false
    ) {
        self.userID = userID
        self.pubkey = pubkey
        self.version = version
        self.nonce = nonce
        self.sealed = sealed
        self.updatedAt = updatedAt
        self.passkeySealed = passkeySealed
    }
}

/// A passkey-sealed key's data key, wrapped for one passkey under a key derived from that
/// passkey's PRF output. The PRF output itself is never stored.
public struct KeyWrapRecord: Sendable, Equatable {
    public var userID: String
    public var credentialID: [UInt8]
    /// Nonce, ciphertext and GCM tag.
    public var wrapped: [UInt8]
    public var createdAt: Date
    /// The PRF input this wrap was made with (random per wrap); empty for wraps made before
    /// salts were per wrap, which used the deployment's one salt.
    public var salt: [UInt8]

    public init(userID: String, credentialID: [UInt8], wrapped: [UInt8], createdAt: Date, salt: [UInt8] = []) {
        self.userID = userID
        self.credentialID = credentialID
        self.wrapped = wrapped
        self.createdAt = createdAt
        self.salt = salt
    }
}

/// One signer operation in the audit log: who, through what, what, and how it ended.
/// Never plaintext, ciphertext, keys or tokens.
/// How an audited operation ended, as the audit log stores it (its raw value).
public enum AuditOutcome: String, Sendable, Codable, CaseIterable {
    case approved, rejected, failed
}

public struct AuditRecord: Sendable, Equatable {
    /// Assigned by the store; increases with time, so it doubles as the paging cursor.
    public var id: Int64
    public var userID: String
    public var at: Date
    public var client: String
    public var transport: String
    public var method: String
    public var kind: Int?
    public var eventID: String?
    public var outcome: AuditOutcome
    public var code: String?
    /// For passkey-confirmed approvals: the assertion and the bytes its challenge commits to (JSON).
    public var receipt: String?

    public init(
        id: Int64 = 0, userID: String, at: Date, client: String, transport: String, method: String,
        kind: Int? = nil, eventID: String? = nil, outcome: AuditOutcome, code: String? = nil, receipt: String? = nil
    ) {
        self.id = id
        self.userID = userID
        self.at = at
        self.client = client
        self.transport = transport
        self.method = method
        self.kind = kind
        self.eventID = eventID
        self.outcome = outcome
        self.code = code
        self.receipt = receipt
    }
}

/// Failures a store reports in terms the server can map to error codes.
public enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    case usernameTaken
    case credentialExists
    /// A compare-and-swap lost (e.g. two assertions with the same counter).
    case conflict
    case notFound
    /// A per-client cap was reached (e.g. live challenges per IP).
    case limitReached
    /// A cap on everyone together was reached (e.g. live challenges in memory).
    case capacityReached
    /// Removing this passkey would leave a passkey-sealed key with no passkey that can open it.
    case lastSealingPasskey
    /// A sign-in challenge was answered already (`UsedChallenge`).
    case challengeUsed
    /// The database itself failed; the message is for logs, not for clients.
    case database(String)
    /// The database cannot be reached (down, starting, too slow): worth retrying shortly.
    /// The message is for logs, not for clients.
    case unavailable(String)

    public var description: String {
        switch self {
        case .usernameTaken: "the username is taken"
        case .credentialExists: "the passkey is registered already"
        case .conflict: "the record changed meanwhile (conflict)"
        case .notFound: "not found"
        case .limitReached: "a limit was reached"
        case .capacityReached: "a capacity was reached"
        case .lastSealingPasskey: "the last passkey that can open a sealed key"
        case .challengeUsed: "the challenge was used already"
        case .database(let message): "database error: \(message)"
        case .unavailable(let reason): "the database is not reachable: \(reason)"
        }
    }
}

/// What a waiting request came through, which must still exist when it is stored: signing out
/// everywhere removes sessions and NIP-46 clients before it cancels what waits, so a request
/// stored while it runs is either cancelled by it or not stored at all (`StoreError.notFound`).
public enum PendingRequestSource: Sendable, Equatable {
    /// The session it came through (its token's hash), the request's owner's.
    case session(tokenHash: [UInt8])
    /// A connected NIP-46 client of the account.
    case bunkerClient(userID: String, clientPubkey: String)
}

/// A signer request waiting for its user's decision (redirect flows, NIP-07): in the database so
/// any instance can finish it. What it asks is sealed (`payload`), since it may carry a plaintext.
public struct PendingRequestRecord: Sendable, Equatable {
    /// Random 128-bit id, base64url: the `/approve/<id>` path.
    public var id: String
    /// The signed-in user it belongs to: set at creation when the browser had a session, else by
    /// the first signed-in user who opens it. To anyone else it does not exist.
    public var userID: String?
    /// Who asked for it when no user was known yet (`ip:<address>`), for the pending cap.
    public var requester: String
    public var client: String
    public var transport: String
    public var method: String
    public var kind: Int?
    /// The request, sealed under the master key with the id as additional data. An empty nonce:
    /// sealed instead under a key from its owner's NIP-46 signer key (a passkey-sealed account's;
    /// `payload` is then nonce ‖ ciphertext ‖ tag).
    public var nonce: [UInt8]
    public var payload: [UInt8]
    /// Fresh per confirmation challenge: what a passkey-confirmed approval commits to.
    public var confirmationNonce: [UInt8]?
    public var createdAt: Date
    public var expiresAt: Date
    /// `pending`, then `approved` or `rejected` (once).
    public var state: String

    public init(
        id: String, userID: String?, requester: String, client: String, transport: String, method: String,
        kind: Int?, nonce: [UInt8], payload: [UInt8], confirmationNonce: [UInt8]? = nil, createdAt: Date,
        expiresAt: Date, state: String = "pending"
    ) {
        self.id = id
        self.userID = userID
        self.requester = requester
        self.client = client
        self.transport = transport
        self.method = method
        self.kind = kind
        self.nonce = nonce
        self.payload = payload
        self.confirmationNonce = confirmationNonce
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.state = state
    }
}

/// A remembered decision: this user lets (or never lets) this client run this method (on this
/// kind, for sign_event; nil kind: every kind that is not dangerous) until `expiresAt` (nil: until revoked).
public struct GrantRecord: Sendable, Equatable {
    public var id: String
    public var userID: String
    public var client: String
    public var method: String
    public var kind: Int?
    public var allow: Bool
    public var createdAt: Date
    public var expiresAt: Date?

    public init(
        id: String, userID: String, client: String, method: String, kind: Int?, allow: Bool, createdAt: Date,
        expiresAt: Date?
    ) {
        self.id = id
        self.userID = userID
        self.client = client
        self.method = method
        self.kind = kind
        self.allow = allow
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// A user's NIP-46 signer key (separate from their nostr key: clients learn the user's key with
/// `get_public_key`), sealed under the master key like nostr keys, and the current single-use
/// connection secret (only its SHA-256).
public struct BunkerSignerRecord: Sendable, Equatable {
    public var userID: String
    public var pubkey: String
    public var nonce: [UInt8]
    public var sealed: [UInt8]
    public var secretHash: [UInt8]?
    public var secretExpiresAt: Date?
    public var createdAt: Date
    /// Sealed by the user's passkeys along with their nostr key: what the master key opens is
    /// itself encrypted under the data key (the key is made anew when sealing starts).
    public var passkeySealed: Bool

    public init(
        userID: String, pubkey: String, nonce: [UInt8], sealed: [UInt8], secretHash: [UInt8]?, secretExpiresAt: Date?,
        createdAt: Date, passkeySealed: Bool = false
    ) {
        self.userID = userID
        self.pubkey = pubkey
        self.nonce = nonce
        self.sealed = sealed
        self.secretHash = secretHash
        self.secretExpiresAt = secretExpiresAt
        self.createdAt = createdAt
        self.passkeySealed = passkeySealed
    }

    /// The record with no connect secret: a signer key stored anew starts without one.
    public var withoutSecret: BunkerSignerRecord {
        var record = self
        (record.secretHash, record.secretExpiresAt) = (nil, nil)
        return record
    }
}

/// A NIP-46 reply waiting for the instance that holds its client's connection: an approval can
/// land on any instance. `event` is the wrapped kind-24133 event (already encrypted to the client).
public struct BunkerReplyRecord: Sendable, Equatable {
    public var id: Int64
    public var event: String

    public init(id: Int64, event: String) {
        self.id = id
        self.event = event
    }
}

/// How long rows that exist only to be handed on are kept.
public enum Retention {
    /// A queued NIP-46 reply: every instance reads the last 30 s of them (`BunkerReplyQueue.window`),
    /// so past twice that it has been handed on wherever it will be; then it goes (the next append
    /// drops it, the sweeper removes what is left).
    public static let bunkerReplies: TimeInterval = 60
}

/// A NIP-46 client a user connected: its key, what it says it is (unverified), what it asked for.
public struct BunkerClientRecord: Sendable, Equatable {
    public var userID: String
    public var clientPubkey: String
    public var name: String?
    public var url: String?
    public var perms: String
    public var createdAt: Date
    public var lastUsedAt: Date?
    /// The relays a `nostrconnect://` client named (empty for a bunker-URL client): Keyfob listens
    /// and answers there for it.
    public var relays: [String]

    public init(
        userID: String, clientPubkey: String, name: String?, url: String?, perms: String, createdAt: Date,
        lastUsedAt: Date? = nil, relays: [String] = []
    ) {
        self.userID = userID
        self.clientPubkey = clientPubkey
        self.name = name
        self.url = url
        self.perms = perms
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
        self.relays = relays
    }
}
