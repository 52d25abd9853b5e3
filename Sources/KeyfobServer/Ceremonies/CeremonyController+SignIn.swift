import Foundation
import HTTPTypes
import Hummingbird
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import Logging
import WebAuthn

/// Sign-in (authentication options and verification), keys sealed by passkeys, and the one way a
/// ceremony's challenge is consumed.
extension CeremonyController {
    // MARK: - Authentication

    @Sendable func authenticationOptions(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let ip = limits.clientIP(request, context)
        try limits.check(limits.options, ip, now: now())
        // A username is accepted (the iOS guide's apps send one) but changes nothing: every
        // passkey Keyfob registers is discoverable, so the options are always the discoverable
        // kind and cannot tell a known username from an unknown one.
        let asked = try await optionsRequest(request)
        if asked.anyAccount != true, let userID = sealedAccount.userID(request),
            let answer = try await sealedSignIn(userID, request, ip: ip)
        {
            return answer
        }
        // Sealed, not stored: no database round trip, and any instance finishes the sign-in. The
        // per-address rate limit above bounds what is issued; the store records only the
        // challenges that are answered (`SealedChallenges`).
        let challenge = signInChallenges.issue(expiresAt: now().addingTimeInterval(TimeInterval(configuration.challengeTimeout)))
        let key = SealedChallenges.key(of: challenge)
        if let signInOptions { return jsonResponse(body: signInOptions.body(challenge: challenge, key: key)) }
        return jsonResponse(Self.signInAnswer(relyingParty, configuration, challenge: challenge, key: key))
    }

    /// The sign-in of a browser that signed in to a sealed account before: that account's passkeys,
    /// each sealing one with its own wrap's PRF salt, so the prompt that signs in also opens the key.
    /// The challenge is bound to the account. Nil (the usual options) when the account is gone,
    /// no longer sealed, or has no wraps.
    private func sealedSignIn(_ userID: String, _ request: Request, ip: String) async throws -> Response? {
        guard let user = try await store.user(id: userID), try await custody.record(for: userID).passkeySealed else { return nil }
        let wraps = try await store.keyWraps(ofUser: userID)
        let allow = try await store.credentials(ofUser: userID).map { CredentialDescriptor(id: $0.id, transports: $0.transports) }
        let challenge = challenges.generate()
        guard let prf = seal.inputs(for: allow, wraps: wraps, challenge: challenge, newWraps: false) else { return nil }
        let key = Base64URL.encode(randomBytes(11))
        var record = ChallengeRecord(
            challenge: challenge, ceremony: .authentication, key: key, userID: userID,
            expiresAt: now().addingTimeInterval(TimeInterval(configuration.challengeTimeout)), clientIP: ip)
        record.mayUseReserve = try await mayUseReserve(request)
        try await limits.insert(record, into: store, now: now())
        let options = relyingParty.requestOptions(
            challenge: challenge, allowCredentials: allow,
            userVerification: configuration.requireUserVerification ? .required : .preferred,
            timeoutSeconds: configuration.challengeTimeout, prf: prf)
        // The account's name beside the options, so the page says whom the prompt signs in.
        let keyed = WithField(options: options, name: .challengeKey, value: key)
        return jsonResponse(WithField(options: keyed, name: .account, value: Usernames.shown(user)))
    }

    /// `GET /sealed-account`: the account this browser's `SealedAccountHint` names while its key is
    /// sealed, so the sign-in page says whom it signs in before any prompt: `{"account": "alice"}`,
    /// or `{}`. Only this browser's own pages read it (the cookie is SameSite=Strict; no CORS).
    @Sendable func sealedAccountName(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        try limits.check(limits.options, limits.clientIP(request, context), now: now())
        var account: String?
        if let userID = sealedAccount.userID(request), let user = try await store.user(id: userID),
            try await custody.record(for: userID).passkeySealed
        {
            account = Usernames.shown(user)
        }
        return jsonResponse(SealedAccountName(account: account), headers: [.cacheControl: "no-store"])
    }

    struct SealedAccountName: Encodable {
        let account: String?
    }

    struct VerifyAuthenticationRequest: PlainDecodable {
        var challengeKey: String?
        var cred: AuthenticationCredential

        init?(plain body: PlainJSON) {
            guard let challengeKey = body.optionalString("challengeKey"), let cred = body.object("cred"),
                let cred = AuthenticationCredential(plain: cred)
            else { return nil }
            (self.challengeKey, self.cred) = (challengeKey, cred)
        }
    }

    struct VerifyAuthenticationResponse: Encodable {
        let verified: Bool
        let username: String
        let isAnonymous: Bool
        /// Only for a client that asks for it (`returnsToken`).
        let token: String?
        let expiresAt: Date
        /// True when the account's key is sealed by passkeys. The sign-in opened it when the passkey
        /// gave its PRF output (`/session`'s `signerLocked` says); else `signer.unlock` opens it.
        let signerSealed: Bool

        /// The answer's bytes: `jsonBytes(self)`, written without JSONEncoder when it can be.
        var json: [UInt8] {
            var out = PlainJSONOutput(capacity: 160)
            out.raw(#"{"expiresAt":"#)
            out.date(expiresAt)
            out.raw(#","isAnonymous":"#)
            out.bool(isAnonymous)
            out.raw(#","signerSealed":"#)
            out.bool(signerSealed)
            if let token {
                out.raw(#","token":"#)
                out.string(token)
            }
            out.raw(#","username":"#)
            out.string(username)
            out.raw(#","verified":"#)
            out.bool(verified)
            out.raw("}")
            return out.isPlain ? out.bytes : jsonBytes(self)
        }
    }

    @Sendable func verifyAuthentication(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let ip = limits.clientIP(request, context)
        try limits.check(limits.verify, ip, now: now())
        let body = try await request.decodeJSON(VerifyAuthenticationRequest.self, limit: configuration.maxBodySize)
        let clientData: ClientDataJSON
        do { clientData = try ClientDataJSON(body.cred.response.clientDataJSON) } catch { throw KeyfobError(error) }
        let credentialID = Base64URL.decode(body.cred.rawId).flatMap { $0.isEmpty ? nil : $0 }
        let value: [UInt8]
        do { value = try clientData.challenge() } catch { throw KeyfobError(error) }
        guard SealedChallenges.isSealed(value) else {
            // A stored challenge (a sealed account's sign-in): consumed, and the passkey, its
            // account and the account's key read, in one store call (one round trip on
            // PostgreSQL); the challenge is checked first, as it is consumed whatever follows.
            let (pending, owner) = try await passkeys.consumeChallenge(
                clientData, ceremony: .authentication, key: body.challengeKey, credentialID: credentialID)
            return try await signIn(
                request, context, body, clientData, credentialID: credentialID, pending: pending, owner: owner, used: nil, ip: ip)
        }
        guard let expiresAt = signInChallenges.open(value) else {
            throw KeyfobError(.challengeNotFound, "this challenge was not issued here; request new options")
        }
        guard expiresAt > now() else {
            throw KeyfobError(.challengeExpired, "the challenge expired; request new options and try again")
        }
        let key = SealedChallenges.key(of: value)
        if let asked = body.challengeKey, !asked.isEmpty, asked != key {
            throw KeyfobError(.challengeNotFound, "challengeKey does not belong to this challenge")
        }
        let used = SealedChallenges.used(value, expiresAt: expiresAt)
        if let credentialID, let known = keys.known(credentialID),
            let answer = try await signIn(request, context, body, clientData, known: known, challenge: value, used: used, ip: ip)
        {
            return answer
        }
        // Nothing is stored for a refusal: an assertion refused here is refused the same way when
        // sent again (its checks depend on nothing that could let it through later), so only a
        // sign-in — or, on SQLite, one whose counter swap lost — records the challenge, in its own
        // transaction. Whoever has no registered passkey makes the store write nothing.
        let owner: CredentialOwner? =
            if let credentialID {
                try await metrics.store("credential_with_owner") { try await store.credentialWithOwner(id: credentialID) }
            } else { nil }
        let pending = ChallengeRecord(challenge: value, ceremony: .authentication, key: key, expiresAt: expiresAt)
        return try await signIn(
            request, context, body, clientData, credentialID: credentialID, pending: pending, owner: owner, used: used, ip: ip)
    }

    /// A sign-in with a sealed challenge by a passkey that signed in on this instance before: the
    /// assertion is verified against what that sign-in read (a passkey's id, account and key never
    /// change), and one store call checks the counter against what is stored now, records the
    /// challenge and adds the session (`completeSignIn`: one round trip on PostgreSQL, no read
    /// first). Nil, with nothing written, when that cannot decide — the assertion fails against
    /// the read, the passkey is gone, its stored counter is not behind — so that the usual path
    /// reads the passkey again and answers as it always did.
    private func signIn(
        _ request: Request, _ context: KeyfobRequestContext, _ body: VerifyAuthenticationRequest, _ clientData: ClientDataJSON,
        known: CredentialRecord, challenge: [UInt8], used: UsedChallenge, ip: String
    ) async throws -> Response? {
        guard
            let verified = try? relyingParty.verifyAuthentication(
                body.cred, challenge: challenge, stored: try keys.stored(known, userID: known.userID),
                requireUserVerification: configuration.requireUserVerification, clientData: clientData)
        else { return nil }
        let new = sessions.create(userID: known.userID, unlocked: verified.userVerified, credentialID: known.id)
        let write = SignInWrite(
            credentialID: known.id, userID: known.userID, publicKey: known.publicKey, newSignCount: verified.newSignCount,
            backupState: verified.backupState, usedAt: now(), session: new.record, usedChallenge: used)
        switch try await completeSignIn(write) {
        case .passkeyGone, .counterBehind:
            keys.forget(known.id)
            return nil
        case .challengeUsed(let user):
            throw refusal(.challengeUsed, username: user.username, ip: ip)
        case .lostRace(let user):
            throw refusal(.counterTaken, username: user.username, ip: ip)
        case .signedIn(let user, let keySealed, let backupStateBefore):
            keys.remember(known, signCount: verified.newSignCount)
            let signerSealed = if let keySealed { keySealed } else { try await custody.record(for: user.id).passkeySealed }
            return try await signedIn(
                request, context, user: user, new: new, session: new.record, signerSealed: signerSealed,
                verified: verified, backupStateBefore: backupStateBefore, credentialID: known.id, ip: ip)
        }
    }

    /// The sign-in once its challenge is found: the passkey's assertion verified, the counter
    /// swapped and the session written (with `used` recorded, for a sealed challenge) in one
    /// store transaction, the key opened when the prompt sealed one.
    private func signIn(
        _ request: Request, _ context: KeyfobRequestContext, _ body: VerifyAuthenticationRequest, _ clientData: ClientDataJSON,
        credentialID: [UInt8]?, pending: ChallengeRecord, owner: CredentialOwner?, used: UsedChallenge?, ip: String
    ) async throws -> Response {
        // A confirmation's challenge confirms one action; it starts no session.
        guard !pending.key.hasPrefix(ActionConfirmations.keyPrefix) else {
            throw KeyfobError(.challengeNotFound, "this challenge was issued to confirm an action, not to sign in; request sign-in options")
        }
        guard credentialID != nil else {
            throw KeyfobError.invalid("rawId is not valid base64url")
        }
        guard let owner, pending.userID == nil || pending.userID == owner.user.id
        else { throw refusal(.passkeyNotRegistered, username: nil, ip: ip) }
        let (record, user) = (owner.credential, owner.user)

        let verified: VerifiedAuthentication
        do {
            verified = try relyingParty.verifyAuthentication(
                body.cred, challenge: pending.challenge, stored: try keys.stored(record, userID: user.id),
                requireUserVerification: configuration.requireUserVerification, clientData: clientData)
        } catch {
            // An assertion sent again after it signed in: its counter is no longer ahead, but what
            // happened is a replay of a used challenge, not a clone.
            if error.code == .counterRegression, let used, try await store.isChallengeUsed(hash: used.hash) {
                events.record(.signInFailed, ip: ip, username: user.username, code: .challengeNotFound)
                throw KeyfobError(.challengeNotFound, "this challenge was used already; request new options")
            }
            if error.code == .counterRegression {
                context.logger.warning(
                    "sign counter regression: possible cloned authenticator",
                    metadata: ["user": "\(user.username)", "credential": "\(Base64URL.encode(record.id))"])
            }
            events.record(.signInFailed, ip: ip, username: user.username, code: KeyfobError(error).code)
            throw KeyfobError(error)
        }

        let new = sessions.create(userID: user.id, unlocked: verified.userVerified, credentialID: record.id)
        // A sealed key stays shut: the session opens it with `signer.unlock` when it must sign.
        // (An account without a key yet gets one here, as on any first use.)
        let key = if let key = owner.nostrKey { key } else { try await custody.record(for: user.id) }
        let signerSealed = key.passkeySealed
        var session = new.record
        // A sealing passkey's PRF output, asked by `sealedSignIn` (a challenge bound to this
        // account; the usual options never open a key), opens the key in this same prompt: the new session keeps its copy of the data key, as an unlock's does. A PRF
        // output that opens nothing signs in all the same, with the key shut.
        if signerSealed, verified.userVerified, pending.userID == user.id, let first = SharedSecret(body.cred.clientExtensionResults?.prfFirst),
            let dataKey = try await custody.openWrap(
                userID: user.id, credentialID: record.id,
                prf: PRFOutputs(first: first, second: SharedSecret(body.cred.clientExtensionResults?.prfSecond)),
                challenge: pending.challenge)
        {
            session.dataKey = try PasskeySeal.sessionCopy(of: dataKey, token: new.rawToken, tokenHash: session.tokenHash)
        }
        if let used {
            // A sealed challenge: the same one-call write as a known passkey's, whose counter rule
            // and passkey are checked again inside it (a sign-in or removal may have come between).
            let write = SignInWrite(
                credentialID: record.id, userID: user.id, publicKey: record.publicKey, newSignCount: verified.newSignCount,
                backupState: verified.backupState, usedAt: now(), session: session, usedChallenge: used)
            switch try await completeSignIn(write) {
            case .signedIn: keys.remember(record, signCount: verified.newSignCount)
            case .passkeyGone: throw refusal(.passkeyNotRegistered, username: user.username, ip: ip)
            case .counterBehind, .lostRace: throw refusal(.counterTaken, username: user.username, ip: ip)
            case .challengeUsed: throw refusal(.challengeUsed, username: user.username, ip: ip)
            }
        } else {
            do {
                try await metrics.store("complete_authentication") {
                    try await store.completeAuthentication(
                        credentialID: record.id, expectedSignCount: record.signCount, newSignCount: verified.newSignCount,
                        backupState: verified.backupState, usedAt: now(), session: session)
                }
            } catch StoreError.conflict {
                throw refusal(.counterTaken, username: user.username, ip: ip)
            }
        }
        return try await signedIn(
            request, context, user: user, new: new, session: session, signerSealed: signerSealed,
            verified: verified, backupStateBefore: record.backupState, credentialID: record.id, ip: ip)
    }

    /// `store.completeSignIn`, measured; a constraint the write broke (none is known to be
    /// reachable) answered as a sign-in that lost to another (not recorded: no account is known).
    private func completeSignIn(_ write: SignInWrite) async throws -> SignInOutcome {
        do {
            return try await metrics.store("complete_sign_in") { try await store.completeSignIn(write) }
        } catch StoreError.conflict {
            throw SignInRefusal.counterTaken.error
        }
    }

    /// The ways a sign-in is refused once its passkey was looked for; each answers one error code,
    /// and the event recorded carries the same code the client is answered.
    enum SignInRefusal {
        /// No passkey with this id is registered (`credential_not_found`).
        case passkeyNotRegistered
        /// The challenge signed in once already (`challenge_not_found`).
        case challengeUsed
        /// A concurrent sign-in with the same passkey moved the counter first (`counter_regression`).
        case counterTaken

        var error: KeyfobError {
            switch self {
            case .passkeyNotRegistered: KeyfobError(.credentialNotFound, "this passkey is not registered here", status: .notFound)
            case .challengeUsed: KeyfobError(.challengeNotFound, "this challenge was used already; request new options")
            case .counterTaken: KeyfobError(.counterRegression, "another sign-in with this passkey used the same counter", status: .conflict)
            }
        }
    }

    /// `reason`'s error, with the sign-in's failure recorded under the same code.
    private func refusal(_ reason: SignInRefusal, username: String?, ip: String) -> KeyfobError {
        let error = reason.error
        events.record(.signInFailed, ip: ip, username: username, code: error.code)
        return error
    }

    /// What follows a sign-in's write, whichever path made it: the session the request carried
    /// replaced, the signer opened when the session holds the data key, the event, the answer.
    private func signedIn(
        _ request: Request, _ context: KeyfobRequestContext, user: UserRecord, new: Sessions.NewSession, session: SessionRecord,
        signerSealed: Bool, verified: VerifiedAuthentication, backupStateBefore: Bool, credentialID: [UInt8], ip: String
    ) async throws -> Response {
        let token = new.token
        if verified.backupState != backupStateBefore {
            context.logger.info(
                "backup state changed",
                metadata: [
                    "credential": "\(Base64URL.encode(credentialID))",
                    "backedUp": "\(verified.backupState)",
                ])
        }
        // Signing in again (e.g. to unlock the signer) replaces the session the request carried.
        if let previous = try? await sessions.authenticate(request), previous.user.id == user.id {
            try await store.deleteSession(tokenHash: previous.session.tokenHash)
        }
        if let until = session.unlockedUntil, let dataKey = SessionUnlock(token: new.rawToken, session: session).dataKey(at: now()) {
            try await custody.openSigner(ofUser: user.id, dataKey: dataKey, until: until)
        }
        let opened = session.dataKey != nil
        events.record(
            .signedIn, ip: ip, username: user.username,
            detail: "count=\(verified.newSignCount)\(signerSealed ? (opened ? " signer=sealed,opened" : " signer=sealed") : "")")
        let response = VerifyAuthenticationResponse(
            verified: true, username: user.username, isAnonymous: user.isAnonymous,
            token: Self.returnsToken(request) ? token : nil,
            expiresAt: session.expiresAt, signerSealed: signerSealed)
        var cookies = ceremonyCookies(request, context, token: token, expires: session.expiresAt)
        rememberSealedAccount(signerSealed ? user.id : nil, request, context, in: &cookies)
        return jsonResponse(body: ByteBuffer(bytes: response.json), headers: cookies)
    }

    /// Names the sealed account `userID` in this browser for its next sign-in (`SealedAccountHint`),
    /// or forgets one it named (nil: the account signed in to is not sealed).
    func rememberSealedAccount(_ userID: String?, _ request: Request, _ context: KeyfobRequestContext, in fields: inout HTTPFields) {
        let secure = sessions.secureCookie(for: request, context: context)
        if let userID, let cookie = sealedAccount.cookie(userID: userID, secure: secure) {
            fields.append(HTTPField(name: .setCookie, value: cookie))
        } else if userID == nil, SealedAccountHint.carried(request) {
            fields.append(HTTPField(name: .setCookie, value: SealedAccountHint.removal(secure: secure)))
        }
    }

    // MARK: - Keys sealed by passkeys

    /// Whether a new passkey can seal a key: yes when it gave a PRF output or its browser said PRF is
    /// enabled, no when the browser said it is not, unknown when nothing was said (most apps).
    static func prfCapable(output: SharedSecret?, reported: ClientExtensionResults.PRF?) -> Bool? {
        if output != nil || reported?.enabled == true { return true }
        return reported?.enabled == false ? false : nil
    }

    /// The PRF output of a ceremony: `prfOutput` (apps) or the browser's `clientExtensionResults`.
    static func prfOutput(_ field: String?, _ results: ClientExtensionResults?) throws -> SharedSecret? {
        if let field {
            guard field.utf8.count <= 64, var bytes = Base64URL.decode(field), bytes.count == 32 else {
                throw KeyfobError.invalid("prfOutput must be the 32-byte PRF result, base64url")
            }
            return SharedSecret(taking: &bytes)
        }
        return SharedSecret(results?.prfFirst)
    }

    /// Wraps the data key the session holds for one more passkey. False when it cannot (no PRF
    /// output, or the session holds no data key).
    func addWrap(for credentialID: [UInt8], userID: String, prfOutput: SharedSecret?, challenge: [UInt8], unlock: SessionUnlock) async throws -> Bool
    {
        guard let prfOutput, let dataKey = unlock.dataKey(at: now()) else { return false }
        return try await store.putKeyWrap(
            PasskeySeal.newWrap(
                dataKey, prfOutput: prfOutput, userID: userID, credentialID: credentialID,
                challenge: challenge, at: now()))
    }

    // MARK: - Challenges
}
