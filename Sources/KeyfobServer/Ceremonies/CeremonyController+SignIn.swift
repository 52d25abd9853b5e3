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
        _ = try await requestedUsername(request)
        let challenge = challenges.generate()
        // 11 bytes: 15 characters, which Swift keeps inline (no allocation here or in the
        // challenge table); it only pairs a reply with its options (the signature binds the challenge).
        let key = Base64URL.encode(randomBytes(11))
        var record = ChallengeRecord(
            challenge: challenge, ceremony: .authentication, key: key,
            expiresAt: now().addingTimeInterval(TimeInterval(configuration.challengeTimeout)), clientIP: ip)
        record.mayUseReserve = try await mayUseReserve(request)
        try await limits.insert(record, into: store, now: now())
        if let signInOptions { return jsonResponse(body: signInOptions.body(challenge: challenge, key: key)) }
        return jsonResponse(Self.signInAnswer(relyingParty, configuration, challenge: challenge, key: key))
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
        /// True when the account's key is sealed by passkeys: a sign-in never opens it; the
        /// session unlocks it with `signer.unlock` (a sealing passkey's PRF) when it must sign.
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
        // The challenge consumed and the passkey, its account and the account's key read in one
        // store call (one round trip on PostgreSQL); the challenge is checked first, as it is
        // consumed whether or not the rest holds.
        let credentialID = Base64URL.decode(body.cred.rawId).flatMap { $0.isEmpty ? nil : $0 }
        let (pending, owner) = try await passkeys.consumeChallenge(
            clientData, ceremony: .authentication, key: body.challengeKey, credentialID: credentialID)
        // A confirmation's challenge confirms one action; it starts no session.
        guard !pending.key.hasPrefix(ActionConfirmations.keyPrefix) else {
            throw KeyfobError(.challengeNotFound, "this challenge was issued to confirm an action, not to sign in; request sign-in options")
        }
        guard credentialID != nil else {
            throw KeyfobError.invalid("rawId is not valid base64url")
        }
        guard let owner, pending.userID == nil || pending.userID == owner.user.id
        else {
            events.record(.signInFailed, ip: ip, username: nil, code: .credentialNotFound)
            throw KeyfobError(.credentialNotFound, "this passkey is not registered here", status: .notFound)
        }
        let (record, user) = (owner.credential, owner.user)

        let verified: VerifiedAuthentication
        do {
            verified = try relyingParty.verifyAuthentication(
                body.cred, challenge: pending.challenge, stored: try keys.stored(record, userID: user.id),
                requireUserVerification: configuration.requireUserVerification, clientData: clientData)
        } catch {
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
        let (token, session) = (new.token, new.record)
        do {
            try await metrics.store("complete_authentication") {
                try await store.completeAuthentication(
                    credentialID: record.id, expectedSignCount: record.signCount, newSignCount: verified.newSignCount,
                    backupState: verified.backupState, usedAt: now(), session: session)
            }
        } catch StoreError.conflict {
            events.record(.signInFailed, ip: ip, username: user.username, code: .counterRegression)
            throw KeyfobError(.counterRegression, "another sign-in with this passkey used the same counter", status: .conflict)
        }
        if verified.backupState != record.backupState {
            context.logger.info(
                "backup state changed",
                metadata: [
                    "credential": "\(Base64URL.encode(record.id))",
                    "backedUp": "\(verified.backupState)",
                ])
        }
        // Signing in again (e.g. to unlock the signer) replaces the session the request carried.
        if let previous = try? await sessions.authenticate(request), previous.user.id == user.id {
            try await store.deleteSession(tokenHash: previous.session.tokenHash)
        }
        events.record(
            .signedIn, ip: ip, username: user.username,
            detail: "count=\(verified.newSignCount)\(signerSealed ? " signer=sealed" : "")")
        let response = VerifyAuthenticationResponse(
            verified: true, username: user.username, isAnonymous: user.isAnonymous,
            token: Self.returnsToken(request) ? token : nil,
            expiresAt: session.expiresAt, signerSealed: signerSealed)
        return jsonResponse(
            body: ByteBuffer(bytes: response.json), headers: ceremonyCookies(request, context, token: token, expires: session.expiresAt))
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
