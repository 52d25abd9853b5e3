import Foundation

/// Accounts.
public protocol UserStore: Sendable {
    /// The user with this username (case-insensitive), if any.
    func user(named username: String) async throws -> UserRecord?
    /// The user with this handle, if any.
    func user(id: String) async throws -> UserRecord?
    /// Users whose name contains `query` (all when nil), by name, after `afterName`, at most `limit`.
    func users(matching query: String?, after afterName: String?, limit: Int) async throws -> [UserRecord]
    /// Removes the account and everything of it (passkeys, sessions, key, grants, requests). False when unknown.
    func deleteUser(id: String) async throws -> Bool
}

/// Passkeys.
public protocol CredentialStore: Sendable {
    func credential(id: [UInt8]) async throws -> CredentialRecord?
    /// The passkey, its account and the account's nostr key, in one read (a sign-in's lookups).
    func credentialWithOwner(id: [UInt8]) async throws -> CredentialOwner?
    func credentials(ofUser userID: String) async throws -> [CredentialRecord]
    /// Removes one of the user's passkeys, never the last one, and ends the sessions its
    /// ceremonies started, in one transaction. Returns false when not found.
    /// Refuses (`lastSealingPasskey`) to remove the last passkey that can open a sealed key; its
    /// key wrap goes with it.
    func deleteCredential(id: [UInt8], ofUser userID: String) async throws -> Bool
    func countUsersAndCredentials() async throws -> (users: Int, credentials: Int)
    /// Sets (or, with nil, clears) the name the user gave a passkey. False when not theirs.
    func renameCredential(id: [UInt8], ofUser userID: String, name: String?) async throws -> Bool
}

/// Pending ceremonies.
public protocol ChallengeStore: Sendable {
    /// Saves a challenge; `limitReached` when its client already has `maxPerClient` live ones,
    /// `capacityReached` when the store holds as many as it may (SQLite's table in memory).
    func insertChallenge(_ challenge: ChallengeRecord, now: Date, maxPerClient: Int) async throws
    /// Deletes up to `limit` expired challenges and up to `limit` expired sessions; returns how many.
    /// Bounded, so a timer can call it without holding the store for long.
    func sweepExpired(now: Date, limit: Int) async throws -> Int
    /// Removes and returns the challenge with this value, whether or not it has expired:
    /// a challenge is single use, also when the verification that follows fails.
    func consumeChallenge(_ value: [UInt8]) async throws -> ChallengeRecord?
    /// Whether a sign-in recorded this challenge (`UsedChallenge.hash`) and the record is still
    /// kept: a refused assertion's reason, told apart from a cloned authenticator's.
    func isChallengeUsed(hash: [UInt8]) async throws -> Bool
}

/// A sign-in's two reads, made one round trip where the store is another process (PostgreSQL):
/// the challenge consumed and the passkey it is answered with, its account and key.
public protocol SignInStore: ChallengeStore, CredentialStore {
    /// `consumeChallenge(value)` and, only when that found a challenge, `credentialWithOwner(id:)`.
    /// Nil when no challenge has this value (then nothing was read or removed).
    func consumeChallenge(_ value: [UInt8], credentialID: [UInt8]) async throws -> (ChallengeRecord, CredentialOwner?)?
}

extension SignInStore {
    /// Two calls: right where a call costs no round trip (SQLite in process).
    public func consumeChallenge(_ value: [UInt8], credentialID: [UInt8]) async throws -> (ChallengeRecord, CredentialOwner?)? {
        guard let challenge = try await consumeChallenge(value) else { return nil }
        return (challenge, try await credentialWithOwner(id: credentialID))
    }
}

/// Sessions.
public protocol SessionStore: Sendable {
    func session(tokenHash: [UInt8], now: Date) async throws -> SessionRecord?
    /// Whether the session is still there and unexpired, as a check after writes must read it: a
    /// removal in progress (a sign-out everywhere) is waited for, not read past.
    func sessionRemains(tokenHash: [UInt8], now: Date) async throws -> Bool
    func deleteSession(tokenHash: [UInt8]) async throws
    /// Stores a session that no ceremony made (the browser extension's, given by a signed-in page
    /// with a passkey confirmation); the user's oldest sessions past the cap end first. Stored only
    /// while `parent` (the session that gives it, nil: none) is still the user's and the passkey the
    /// new session names is still theirs, checked as it is stored; `notFound` otherwise.
    func addSession(_ session: SessionRecord, parent: [UInt8]?) async throws
    /// Ends every session of the user (sign out everywhere).
    func deleteSessions(ofUser userID: String) async throws
    /// The kill switch: every unlocked signer is locked now; each user unlocks again with a passkey.
    /// Returns how many sessions were unlocked.
    func lockAllSessions() async throws -> Int
    /// A fresh passkey assertion on a signed-in session: its signer is unlocked until `until`,
    /// with `dataKey` (a sealed key's data key, under the token) when given. False when the
    /// session is gone.
    func unlockSession(tokenHash: [UInt8], until: Date, dataKey: [UInt8]?) async throws -> Bool
    /// Whether one of the user's sessions has an unlocked signer at `now` (a NIP-46 grant needs
    /// one: a grant skips the approval page, never the lock).
    func hasUnlockedSession(ofUser userID: String, now: Date) async throws -> Bool
    /// "Lock now": every session of the user locked (its unlock window and data key gone); they
    /// stay signed in. Returns how many were unlocked.
    func lockSessions(ofUser userID: String) async throws -> Int
    /// "Sign out everywhere", in one transaction: every session, every NIP-46 client and the
    /// signer's connect secret, every grant (nostr apps and Polkadot dapp permissions alike).
    func signOutEverywhere(userID: String, now: Date) async throws -> SignedOutEverywhere
}

extension SessionStore {
    /// A store whose reads see only committed writes, and whose writes are one at a time (SQLite),
    /// has nothing in progress to wait for.
    public func sessionRemains(tokenHash: [UInt8], now: Date) async throws -> Bool {
        try await session(tokenHash: tokenHash, now: now) != nil
    }
}

/// What "Sign out everywhere" ended.
public struct SignedOutEverywhere: Sendable, Equatable {
    public var sessions: Int
    /// NIP-46 clients disconnected.
    public var clients: Int
    /// Grants revoked: remembered choices of nostr apps and Polkadot dapp permissions.
    public var grants: Int
    /// Waiting requests cancelled (nostr redirect-flow and NIP-46 requests, Polkadot requests): their
    /// pages say so, and nothing answers them.
    public var requests: Int
    /// Of `sessions`, the browser extension's.
    public var extensionSessions: Int
    /// The disconnected NIP-46 clients by the name they gave (their public key without one).
    public var clientNames: [String]
    /// The apps and sites whose remembered choices or dapp permissions went (grant clients).
    public var grantClients: [String]

    public init(
        sessions: Int, clients: Int, grants: Int, requests: Int = 0, extensionSessions: Int = 0, clientNames: [String] = [],
        grantClients: [String] = []
    ) {
        self.sessions = sessions
        self.clients = clients
        self.grants = grants
        self.requests = requests
        self.extensionSessions = extensionSessions
        self.clientNames = clientNames
        self.grantClients = grantClients
    }
}

/// Keys sealed by passkeys (PRF): one wrap of the data key per sealing passkey.
public protocol KeyWrapStore: Sendable {
    func keyWraps(ofUser userID: String) async throws -> [KeyWrapRecord]
    /// Adds (or replaces) the wrap for one passkey, if the user's key is passkey-sealed and
    /// the passkey is the user's; false otherwise.
    func putKeyWrap(_ wrap: KeyWrapRecord) async throws -> Bool
    /// Seals or unseals: replaces the user's key when the stored version is `expectedVersion`,
    /// replaces all of the user's wraps with `wraps`, and drops every session's data-key copy
    /// but `keepingSession`'s; `conflict` (nothing written) when the version moved. With
    /// `bunkerSigner`, the user's NIP-46 signer is replaced by it too, but for its connect secret:
    /// the same key keeps the secret the row holds now (what the caller read may be stale: a sign-out
    /// everywhere may have cleared it since), a new key starts with none, and the clients connected
    /// to the old one, their grants and the user's undecided requests go. With
    /// `substrateAccounts`, they are every one of the user's Substrate accounts, sealed again
    /// (`conflict` when the user has another number of them).
    func changeKeyProtection(
        _ record: NostrKeyRecord, expectedVersion: Int, wraps: [KeyWrapRecord],
        keepingSession: [UInt8]?, sessionDataKey: [UInt8]?, bunkerSigner: BunkerSignerRecord?,
        substrateAccounts: [SubstrateAccountRecord]?) async throws
}

extension KeyWrapStore {
    /// A protection change that leaves the NIP-46 signer and the Substrate accounts alone.
    public func changeKeyProtection(
        _ record: NostrKeyRecord, expectedVersion: Int, wraps: [KeyWrapRecord],
        keepingSession: [UInt8]?, sessionDataKey: [UInt8]?
    ) async throws {
        try await changeKeyProtection(
            record, expectedVersion: expectedVersion, wraps: wraps, keepingSession: keepingSession,
            sessionDataKey: sessionDataKey, bunkerSigner: nil, substrateAccounts: nil)
    }
}

/// Nostr keys in custody (sealed; the store never sees a key in the clear).
public protocol NostrKeyStore: Sendable {
    func nostrKey(ofUser userID: String) async throws -> NostrKeyRecord?
    /// Stores `record` unless the user has a key already; returns the key now stored.
    func insertNostrKeyIfAbsent(_ record: NostrKeyRecord) async throws -> NostrKeyRecord
    /// Replaces the user's key when the stored version is `expectedVersion`; `conflict` otherwise.
    func replaceNostrKey(_ record: NostrKeyRecord, expectedVersion: Int) async throws
    func allNostrKeys() async throws -> [NostrKeyRecord]
    /// Master-key rotation: writes every re-sealed nostr key, every re-sealed NIP-46 signer key,
    /// every re-sealed Substrate secret under the master key (protection 1 and 2) and the new check
    /// value in one transaction. `conflict` (and nothing written) when a key changed or appeared
    /// since they were read.
    func rewrapNostrKeys(
        _ records: [NostrKeyRecord], bunkerSigners: [BunkerSignerRecord], substrateAccounts: [SubstrateAccountRecord],
        masterKeyCheck: [UInt8]) async throws
}

extension NostrKeyStore {
    /// Rotation of a database without NIP-46 signers or Substrate accounts.
    public func rewrapNostrKeys(_ records: [NostrKeyRecord], masterKeyCheck: [UInt8]) async throws {
        try await rewrapNostrKeys(records, bunkerSigners: [], substrateAccounts: [], masterKeyCheck: masterKeyCheck)
    }
}

extension KeyfobStore {
    /// A registration without a key sealed at sign-up.
    public func completeRegistration(
        user: UserRecord, createUser: Bool, nostrKey: NostrKeyRecord?,
        credential: CredentialRecord, session: SessionRecord
    ) async throws {
        try await completeRegistration(
            user: user, createUser: createUser, nostrKey: nostrKey, credential: credential,
            session: session, wrap: nil)
    }
}

/// Small named values the server keeps (the master-key check value, when admins were named).
public protocol MetaStore: Sendable {
    func metaValue(_ name: String) async throws -> [UInt8]?
    /// Sets `name` unless it has a value; returns the value now stored.
    func setMetaValueIfAbsent(_ name: String, _ value: [UInt8]) async throws -> [UInt8]
    /// Sets `name`, replacing any value.
    func setMetaValue(_ name: String, _ value: [UInt8]) async throws
}

extension MetaStore {
    /// The name under which the master key's check value is kept (`rewrapNostrKeys` writes it too).
    public static var masterKeyCheckName: String { "master_key_check" }
}

/// Pending signer requests and grants (redirect flows, NIP-07, later NIP-46).
/// The two kinds of request a user approves with a passkey, each in its own table: a nostr
/// signer request (REST redirect flows, NIP-07, NIP-46) and a Polkadot dapp's.
public enum PendingApproval: String, Sendable, CaseIterable {
    case signer = "signer_requests"
    case polkadot = "polkadot_requests"

    /// The table's name (a fixed identifier, never input).
    public var table: String { rawValue }
}

/// What both approval flows share in the store: the nonce a passkey confirmation commits to.
public protocol ConfirmationNonceStore: Sendable {
    /// A fresh confirmation nonce on a live pending request of `userID`; false when it is not one
    /// (decided, expired, or another user's).
    func setConfirmationNonce(_ approval: PendingApproval, id: String, userID: String, nonce: [UInt8], now: Date) async throws -> Bool
}

public protocol ApprovalStore: ConfirmationNonceStore {
    /// Stores a request; `limitReached` when its owner (or requester) already has `maxPending`
    /// undecided, unexpired requests from the same client; `notFound` (nothing stored) when its
    /// `source` is gone, checked as it is stored: a sign-out everywhere that removed the source
    /// first makes it wait, then refuse.
    func insertPendingRequest(_ request: PendingRequestRecord, now: Date, maxPending: Int, source: PendingRequestSource?) async throws
    /// The request if it is pending, unexpired and `userID`'s — claiming it for `userID` when it has
    /// no owner yet. Nil otherwise (decided, expired, someone else's, unknown). `notFound` (nothing
    /// claimed) when `session`, the one asking, is no longer `userID`'s, checked as it claims: a
    /// sign-out everywhere either cancels what this claimed or makes it refuse.
    func claimPendingRequest(id: String, userID: String, session: [UInt8]?, now: Date) async throws -> PendingRequestRecord?
    /// The request `id` in whatever state, expired too, when it is `userID`'s or nobody's yet (what
    /// the approval page says of one that is gone, with the way back to its app). Nil otherwise.
    func signerRequest(id: String, visibleTo userID: String) async throws -> PendingRequestRecord?
    /// Marks the request decided (`approved`/`rejected`) once; false when it was not pending,
    /// expired or not `userID`'s.
    func decidePendingRequest(id: String, userID: String, state: String, now: Date) async throws -> Bool

    /// Undecided, unexpired requests (all users): for operators and tests.
    func pendingRequestCount(now: Date) async throws -> Int
    /// The user's requests still waiting for a decision, oldest first (at most `limit`).
    func pendingRequests(ofUser userID: String, now: Date, limit: Int) async throws -> [PendingRequestRecord]

    func insertGrant(_ grant: GrantRecord) async throws
    /// The user's unexpired grants, newest first.
    func grants(ofUser userID: String, now: Date) async throws -> [GrantRecord]
    func deleteGrant(id: String, ofUser userID: String) async throws -> Bool
}

extension ApprovalStore {
    /// A request stored with nothing it came through to check (one made without a session).
    public func insertPendingRequest(_ request: PendingRequestRecord, now: Date, maxPending: Int) async throws {
        try await insertPendingRequest(request, now: now, maxPending: maxPending, source: nil)
    }
}

/// The signer's audit log.
public protocol AuditStore: Sendable {
    /// Appends an entry; returns its id.
    @discardableResult
    func appendAudit(_ entry: AuditRecord) async throws -> Int64
    /// The user's entries with id below `before` (all when nil), newest first.
    func auditEntries(ofUser userID: String, before: Int64?, limit: Int) async throws -> [AuditRecord]
    /// One of the user's entries (with its receipt), if it exists.
    func auditEntry(id: Int64, ofUser userID: String) async throws -> AuditRecord?
}

/// NIP-46: each user's signer key with its connection secret, and the clients they connected.
public protocol BunkerStore: Sendable {
    func bunkerSigner(ofUser userID: String) async throws -> BunkerSignerRecord?
    func bunkerSigner(pubkey: String) async throws -> BunkerSignerRecord?
    /// Every signer (master-key rotation re-seals them all).
    func allBunkerSigners() async throws -> [BunkerSignerRecord]
    /// Stores the user's signer unless they have one; returns the one now stored.
    func insertBunkerSignerIfAbsent(_ record: BunkerSignerRecord) async throws -> BunkerSignerRecord
    /// Replaces the connection secret (nil: none); false when the user has no signer. With
    /// `session` (its token's hash), only while that session of the user still exists, checked
    /// as it is written (`StoreError.notFound` when it is gone): a sign-out everywhere clears the
    /// secret after it removed the sessions, so a secret asked for while it runs never outlives it.
    func setBunkerSecret(userID: String, secretHash: [UInt8]?, expiresAt: Date?, session: [UInt8]?) async throws -> Bool
    /// A bunker URL's `connect`: uses the secret once and connects `client` in one transaction;
    /// false (nothing written) when the secret does not match, was used, replaced or has expired.
    /// A sign-out everywhere clears the secret before it removes the clients, so a connect that
    /// raced it is either removed by it or refused.
    func connectBunkerClient(_ client: BunkerClientRecord, secretHash: [UInt8], now: Date) async throws -> Bool
    func bunkerClients(ofUser userID: String) async throws -> [BunkerClientRecord]
    func bunkerClient(userID: String, clientPubkey: String) async throws -> BunkerClientRecord?
    /// Adds (or replaces) a connected client. With `session` (its token's hash: the user pasted a
    /// `nostrconnect://` URL), only while that session of the user still exists, checked as it is
    /// written (`StoreError.notFound` when it is gone), as for `setBunkerSecret`.
    func putBunkerClient(_ record: BunkerClientRecord, session: [UInt8]?) async throws
    func touchBunkerClient(userID: String, clientPubkey: String, at: Date) async throws
    /// Disconnects a client, in one transaction: the client, its grants (`client`, as grants and
    /// requests name it) and what it left waiting (cancelled: nobody is left to answer). False
    /// when it was not connected.
    func deleteBunkerClient(userID: String, clientPubkey: String, client: String) async throws -> Bool
    /// Signer keys someone may talk to now: with a connected client or a live secret (at most `limit`).
    func activeBunkerSigners(now: Date, limit: Int) async throws -> [String]
    /// Every client that named relays of its own (`nostrconnect://`), with them.
    func nostrConnectClients() async throws -> [BunkerClientRecord]
    /// Runs `body` while this process holds the role `name` (one holder across instances sharing
    /// the database); returns false at once when another holds it. SQLite: always this process.
    func holdingRole(_ name: String, _ body: @escaping @Sendable () async throws -> Void) async throws -> Bool
    /// Queues a reply for every instance's relay; replies older than `dropBefore` are deleted.
    func appendBunkerReply(_ event: String, at: Date, dropBefore: Date) async throws
    /// The replies queued at or after `since`, oldest first (at most `limit`).
    func bunkerReplies(since: Date, limit: Int) async throws -> [BunkerReplyRecord]
    /// A signal each time any instance queues a reply, when the store can notify (PostgreSQL's
    /// LISTEN/NOTIFY); nil when readers must poll (SQLite: one instance, which publishes its own).
    func bunkerReplySignals() -> AsyncStream<Void>?
}

/// The multi-row writes of the ceremonies, each atomic, and the health check.
public protocol CeremonyStore: Sendable {
    /// Creates the user (when `createUser`) with its nostr key (when given), the credential,
    /// the key's data-key wrap for that credential (a key sealed at sign-up) and the session in
    /// one transaction. Throws `usernameTaken` or `credentialExists` and writes nothing in that case.
    func completeRegistration(
        user: UserRecord, createUser: Bool, nostrKey: NostrKeyRecord?,
        credential: CredentialRecord, session: SessionRecord, wrap: KeyWrapRecord?) async throws

    /// Compare-and-swap of the sign counter (`expectedSignCount` → `newSignCount`), the backup
    /// state and last use, plus the new session, in one transaction. Throws `conflict` when the
    /// stored counter is no longer `expectedSignCount` (a concurrent assertion won). For a stored
    /// challenge (consumed already); a sealed one's sign-in is `completeSignIn`.
    func completeAuthentication(
        credentialID: [UInt8], expectedSignCount: UInt32, newSignCount: UInt32,
        backupState: Bool, usedAt: Date, session: SessionRecord) async throws

    /// A sign-in answered with a sealed challenge, checked against a passkey known from an earlier
    /// read: in one transaction, the passkey found with the same id, account and public key, its
    /// counter checked against the one stored now, the challenge recorded, the counter, backup
    /// state and last use updated, the session added (the oldest past the cap out). It reads no
    /// passkey first, so on PostgreSQL it is one round trip, answered after its commit.
    func completeSignIn(_ signIn: SignInWrite) async throws -> SignInOutcome

    /// Compare-and-swap of the sign counter alone (a passkey-confirmed approval: no new session).
    func updateSignCount(
        credentialID: [UInt8], expectedSignCount: UInt32, newSignCount: UInt32, backupState: Bool,
        usedAt: Date) async throws

    /// Is the database reachable?
    func healthCheck() async throws
}

/// Everything the server needs: every role together (the composition root holds this; each
/// controller takes only the roles it uses).
public protocol KeyfobStore: UserStore, CredentialStore, ChallengeStore, SignInStore, SessionStore, NostrKeyStore, AuditStore, MetaStore,
    ApprovalStore, KeyWrapStore, BunkerStore, CeremonyStore, PolkadotStore
{}
