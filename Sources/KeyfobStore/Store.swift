import Foundation

/// Accounts.
public protocol UserStore: Sendable {
    /// The user with this username (case-insensitive), if any.
    func user(named username: String) async throws -> UserRecord?
    /// The user with this handle, if any.
    func user(id: String) async throws -> UserRecord?
}

/// Passkeys.
public protocol CredentialStore: Sendable {
    func credential(id: [UInt8]) async throws -> CredentialRecord?
    func credentials(ofUser userID: String) async throws -> [CredentialRecord]
    /// Removes one of the user's passkeys, never the last one. Returns false when not found.
    func deleteCredential(id: [UInt8], ofUser userID: String) async throws -> Bool
    func countUsersAndCredentials() async throws -> (users: Int, credentials: Int)
}

/// Pending ceremonies.
public protocol ChallengeStore: Sendable {
    /// Saves a challenge (and sweeps expired ones).
    func insertChallenge(_ challenge: ChallengeRecord, now: Date) async throws
    /// Removes and returns the challenge with this value, whether or not it has expired:
    /// a challenge is single use, also when the verification that follows fails.
    func consumeChallenge(_ value: [UInt8]) async throws -> ChallengeRecord?
}

/// Sessions.
public protocol SessionStore: Sendable {
    func session(tokenHash: [UInt8], now: Date) async throws -> SessionRecord?
    func deleteSession(tokenHash: [UInt8]) async throws
}

/// Everything the server needs, plus the two multi-row writes that must be atomic.
public protocol KeyfobStore: UserStore, CredentialStore, ChallengeStore, SessionStore {
    /// Creates the user (when `createUser`), the credential and the session in one transaction.
    /// Throws `usernameTaken` or `credentialExists` and writes nothing in that case.
    func completeRegistration(user: UserRecord, createUser: Bool, credential: CredentialRecord,
                              session: SessionRecord) async throws

    /// Compare-and-swap of the sign counter (`expectedSignCount` → `newSignCount`), the backup
    /// state and last use, plus the new session, in one transaction. Throws `conflict` when the
    /// stored counter is no longer `expectedSignCount` (a concurrent assertion won).
    func completeAuthentication(credentialID: [UInt8], expectedSignCount: UInt32, newSignCount: UInt32,
                                backupState: Bool, usedAt: Date, session: SessionRecord) async throws

    /// Is the database reachable?
    func healthCheck() async throws
}
