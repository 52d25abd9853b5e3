import Foundation
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import NIOConcurrencyHelpers
import WebAuthn

/// Checking a passkey: the one place that holds the relying party (built once), the decoded
/// credential keys, the challenge table's consumption and the sign counter's compare-and-swap.
/// Sign-in and registration, action confirmations, sealing and both approval flows (nostr and
/// Polkadot) hold this instead of reaching through each other.
struct PasskeyCheck: Sendable {
    let store: any SignInStore & CeremonyStore & KeyWrapStore
    let relyingParty: RelyingParty
    let keys: CredentialKeyCache
    /// The PRF inputs of passkeys that seal (or are to seal) a key.
    let seal: PasskeySeal
    let rpID: String
    /// How long a browser is given for a prompt (`--challenge-timeout`).
    let timeoutSeconds: Int
    let metrics: KeyfobMetrics
    let now: @Sendable () -> Date

    init(
        store: any SignInStore & CeremonyStore & KeyWrapStore, configuration: ServerConfiguration,
        keys: CredentialKeyCache = CredentialKeyCache(), metrics: KeyfobMetrics, now: @escaping @Sendable () -> Date
    ) {
        (self.store, self.keys, self.metrics, self.now) = (store, keys, metrics, now)
        relyingParty = configuration.relyingParty
        seal = PasskeySeal(rpID: configuration.rpID)
        rpID = configuration.rpID
        timeoutSeconds = configuration.challengeTimeout
    }

    // MARK: Challenges

    func consumeChallenge(clientDataJSON: String, ceremony: ChallengeRecord.Ceremony, key: String?) async throws -> ChallengeRecord {
        let clientData: ClientDataJSON
        do { clientData = try ClientDataJSON(clientDataJSON) } catch { throw KeyfobError(error) }
        return try await consumeChallenge(clientData, ceremony: ceremony, key: key)
    }

    func consumeChallenge(_ clientData: ClientDataJSON, ceremony: ChallengeRecord.Ceremony, key: String?) async throws -> ChallengeRecord {
        try await consumeChallenge(clientData, ceremony: ceremony, key: key, credentialID: nil).challenge
    }

    /// The pending challenge the client data names, taken from the table (once, whatever follows)
    /// and checked: this ceremony's, unexpired, and — when `key` is given — issued under it. With
    /// `credentialID`, the passkey of that id with its owner, read in the same store call (nil when
    /// no passkey has it).
    func consumeChallenge(
        _ clientData: ClientDataJSON, ceremony: ChallengeRecord.Ceremony, key: String?, credentialID: [UInt8]?
    ) async throws -> (challenge: ChallengeRecord, owner: CredentialOwner?) {
        let value: [UInt8]
        do { value = try clientData.challenge() } catch { throw KeyfobError(error) }
        let found: (ChallengeRecord, CredentialOwner?)? =
            if let credentialID {
                try await metrics.store("consume_challenge") { try await store.consumeChallenge(value, credentialID: credentialID) }
            } else {
                try await metrics.store("consume_challenge") { try await store.consumeChallenge(value) }.map { ($0, nil) }
            }
        guard let found, found.0.ceremony == ceremony else {
            throw KeyfobError(.challengeNotFound, "no pending \(ceremony.rawValue) has this challenge; request new options")
        }
        let (pending, owner) = found
        guard pending.expiresAt > now() else {
            throw KeyfobError(.challengeExpired, "the challenge expired; request new options and try again")
        }
        if let key, !key.isEmpty, key != pending.key {
            throw KeyfobError(.challengeNotFound, "challengeKey does not belong to this challenge")
        }
        return (pending, owner)
    }

    // MARK: Assertions outside a sign-in

    /// Options asking one of `allow` for an assertion over `challenge`, with user verification.
    func requestOptions(
        challenge: [UInt8], allow: [CredentialDescriptor], timeoutSeconds: Int? = nil, prf: PRFInputs? = nil
    ) -> RequestOptions {
        relyingParty.requestOptions(
            challenge: challenge, allowCredentials: allow, userVerification: .required,
            timeoutSeconds: timeoutSeconds ?? self.timeoutSeconds, prf: prf)
    }

    /// An assertion from `record` (a passkey of the account) over `challenge`, with user
    /// verification: every §7.2 check, then the counter's compare-and-swap. For assertions that
    /// start no session (an action's confirmation, an approval's); returns what was verified.
    @discardableResult
    func verify(_ assertion: AuthenticationCredential, by record: CredentialRecord, challenge: [UInt8]) async throws
        -> VerifiedAuthentication
    {
        let verified: VerifiedAuthentication
        do {
            verified = try relyingParty.verifyAuthentication(
                assertion, challenge: challenge, stored: try keys.stored(record, userID: record.userID),
                requireUserVerification: true)
        } catch { throw KeyfobError(error) }
        try await advanceSignCount(of: record, after: verified)
        return verified
    }

    /// The sign counter's compare-and-swap after an assertion that starts no session (a fresh
    /// passkey check, an approval's confirmation); `409 counter_regression` when another use of
    /// the passkey moved it first.
    func advanceSignCount(of record: CredentialRecord, after verified: VerifiedAuthentication) async throws {
        do {
            try await store.updateSignCount(
                credentialID: record.id, expectedSignCount: record.signCount,
                newSignCount: verified.newSignCount, backupState: verified.backupState, usedAt: now())
        } catch StoreError.conflict {
            throw KeyfobError(.counterRegression, "this passkey was used at the same moment elsewhere; try again", status: .conflict)
        }
    }

    // MARK: Approvals (nostr and Polkadot)

    /// Options for confirming one approval: the challenge is SHA-256 of the text it commits to,
    /// which goes with the options (`committed`) so the page can show and anyone can check it.
    /// For a sealed key this session cannot open, each sealing passkey's PRF salt, so the one
    /// confirmation also opens the key (one prompt, not two).
    func approvalOptions(committed: String, userID: String, opensSealedKey: Bool) async throws -> WithField<RequestOptions> {
        let challenge = sha256(Array(committed.utf8))
        let allow = try await store.credentials(ofUser: userID).map { CredentialDescriptor(id: $0.id, transports: $0.transports) }
        var prf: PRFInputs?
        if opensSealedKey {
            prf = seal.inputs(for: allow, wraps: try await store.keyWraps(ofUser: userID), challenge: challenge, newWraps: false)
        }
        return WithField(options: requestOptions(challenge: challenge, allow: allow, prf: prf), name: .committed, value: committed)
    }

    /// Verifies `assertion` from one of `user`'s passkeys over SHA-256 of `committed`; returns the
    /// receipt (no PRF output in it: that is a secret), the passkey and the challenge it signed.
    func receipt(for assertion: AuthenticationCredential, committed: String, user: UserRecord) async throws
        -> (receipt: String, credential: CredentialRecord, challenge: [UInt8])
    {
        guard let credentialID = Base64URL.decode(assertion.rawId),
            let credential = try await store.credential(id: credentialID), credential.userID == user.id
        else {
            throw KeyfobError(.signatureInvalid, "the assertion is not from one of your passkeys", status: .unauthorized)
        }
        let challenge = sha256(Array(committed.utf8))
        try await verify(assertion, by: credential, challenge: challenge)
        var signed = assertion
        signed.clientExtensionResults = nil
        let receipt = Receipt(
            version: 1, committed: committed, challenge: Base64URL.encode(challenge), credentialId: Base64URL.encode(credential.id),
            publicKey: Base64URL.encode(credential.publicKey), algorithm: credential.algorithm, rpId: rpID, assertion: signed)
        return (String(decoding: jsonBytes(receipt), as: UTF8.self), credential, challenge)
    }
}

/// Decoded credential keys, by credential id. Building the OpenSSL key is most of
/// an assertion's cost besides the signature itself, and a key never changes.
final class CredentialKeyCache: Sendable {
    private let keys = NIOLockedValueBox<[[UInt8]: CredentialPublicKey]>([:])
    /// Passkeys that signed in here, by id, with the counter stored then: what the next sign-in
    /// with one checks its assertion against without reading it again. Only what never changes is
    /// trusted (id, account, key, backup eligibility); the store checks the rest when it writes
    /// (`CeremonyStore.completeSignIn`).
    private let passkeys = NIOLockedValueBox<[[UInt8]: CredentialRecord]>([:])
    private let limit: Int

    init(limit: Int = 10_000) { self.limit = limit }

    func known(_ id: [UInt8]) -> CredentialRecord? { passkeys.withLockedValue { $0[id] } }

    /// Keeps `record` as read, with the counter a sign-in just stored (so that the assertion sent
    /// again is refused before the store is asked).
    func remember(_ record: CredentialRecord, signCount: UInt32) {
        var record = record
        record.signCount = signCount
        passkeys.withLockedValue { cache in
            if cache.count >= limit, cache[record.id] == nil { cache.removeAll(keepingCapacity: true) }
            cache[record.id] = record
        }
    }

    func forget(_ id: [UInt8]) { _ = passkeys.withLockedValue { $0.removeValue(forKey: id) } }

    func key(for record: CredentialRecord) throws(WebAuthnError) -> CredentialPublicKey {
        if let key = keys.withLockedValue({ $0[record.id] }), key.cose == record.publicKey { return key }
        let key = try CredentialPublicKey(cose: record.publicKey)
        keys.withLockedValue { cache in
            if cache.count >= limit { cache.removeAll(keepingCapacity: true) }
            cache[record.id] = key
        }
        return key
    }

    /// What an assertion is checked against: the stored passkey, its key decoded (once, cached).
    func stored(_ record: CredentialRecord, userID: String) throws(WebAuthnError) -> StoredCredential {
        StoredCredential(
            id: record.id, publicKey: try key(for: record), signCount: record.signCount,
            userHandle: Base64URL.decode(userID), backupEligible: record.backupEligible)
    }
}
