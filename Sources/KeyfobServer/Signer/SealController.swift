import Foundation
import Hummingbird
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import Logging
import Nostr
import WebAuthn

/// Sealing the nostr key with the user's passkeys (PRF), undoing it, and opening it for a
/// session. Each needs a session and an assertion made for the action (`/api/confirmations`,
/// `key.seal` / `key.unseal` / `signer.unlock`, whose options carry the PRF inputs) from a passkey
/// the account had before the session signed in. A usual sign-in asks for no PRF: a sealed key
/// opens through `unlock`, a passkey-confirmed approval, or the sign-in of a browser that names the
/// sealed account (`SealedAccountHint`).
///
///     POST /api/signer/seal   {cred, prfOutput?}  not sealed: seal under a new data key, wrapped
///                                                  for this passkey; sealed: wrap it for this passkey too
///     POST /api/signer/unseal {cred, prfOutput?}  back to server-protected; every wrap removed
///     POST /api/signer/unlock {cred, prfOutput?}  the signer unlocked for this session (a sealed key's
///                                                  data key opened by this passkey's wrap)
struct SealController: Sendable {
    let sessions: Sessions
    let confirmations: ActionConfirmations
    let custody: KeyCustody
    let dispatcher: SignerDispatcher
    let store: any BunkerStore & KeyWrapStore & SessionStore & PolkadotStore
    let configuration: ServerConfiguration
    /// A browser that sealed the key signs in next with one prompt that also opens it.
    let sealedAccount: SealedAccountHint
    let logger: Logger
    let now: @Sendable () -> Date

    func addRoutes(to router: Router<KeyfobRequestContext>) {
        router.post("/api/signer/seal", use: seal)
        router.post("/api/signer/unseal", use: unseal)
        router.post("/api/signer/unlock", use: unlock)
    }

    struct Body: Decodable {
        var cred: AuthenticationCredential
        /// The first PRF output, base64url, for apps that do not send `clientExtensionResults`.
        var prfOutput: String?
    }

    /// What one confirmed assertion proved: the session, the passkey, its PRF outputs and the
    /// challenge it signed (the fresh salt of a new wrap derives from it).
    struct Proof {
        let auth: Sessions.Authenticated
        let credential: CredentialRecord
        let prf: PRFOutputs
        let challenge: [UInt8]
        let caller: SignerCaller
    }

    private func proven(_ request: Request, context: KeyfobRequestContext, _ action: ActionConfirmations.Action) async throws -> Proof {
        let auth = try await sessions.require(request)
        let body = try await request.decodeJSON(Body.self, limit: configuration.maxBodySize)
        let first = try CeremonyController.prfOutput(body.prfOutput, body.cred.clientExtensionResults)
        let (credential, challenge) = try await confirmations.verify(body.cred, action, target: "", for: auth)
        let caller = SignerCaller(
            userID: auth.user.id, username: auth.user.username, client: "api", transport: "rest",
            limitKey: Hex.encode(auth.session.tokenHash),
            ip: sessions.client.resolve(request, context: context), unlock: auth.unlock)
        return Proof(
            auth: auth, credential: credential,
            prf: PRFOutputs(first: first, second: SharedSecret(body.cred.clientExtensionResults?.prfSecond)), challenge: challenge,
            caller: caller)
    }

    /// The cookie naming the sealed account in this browser (`SealedAccountHint`), or its removal.
    private func hint(_ request: Request, _ context: KeyfobRequestContext, userID: String?) -> HTTPFields {
        let secure = sessions.secureCookie(for: request, context: context)
        if let userID, let cookie = sealedAccount.cookie(userID: userID, secure: secure) {
            return [.setCookie: cookie]
        }
        return userID == nil && SealedAccountHint.carried(request) ? [.setCookie: SealedAccountHint.removal(secure: secure)] : [:]
    }

    static let noPRF = KeyfobError(
        .invalidRequest,
        "This passkey can't protect your key: its device doesn't offer what sealing needs (PRF). Use a passkey on a phone, your computer's built-in passkeys or a recent security key."
    )

    static let conflict = KeyfobError(.invalidRequest, "the key changed at the same time; reload and try again", status: .conflict)

    @Sendable func seal(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let proof = try await proven(request, context: context, .seal)
        try await dispatcher.perform("seal_key", for: proof.caller) { _ in try await seal(proof) }
        return jsonResponse(
            try await custody.protection(of: proof.auth.user.id, unlock: nil),
            headers: hint(request, context, userID: proof.auth.user.id))
    }

    /// Seals the key under this passkey, or adds it to the passkeys that seal it.
    private func seal(_ proof: Proof) async throws {
        let userID = proof.auth.user.id
        let credentialID = proof.credential.id
        let current = try await custody.record(for: userID)
        if !current.passkeySealed {
            guard let output = proof.prf.first else {
                throw Self.noPRF
            }
            let key = try custody.open(current)
            let dataKey = PasskeySeal.newDataKey()
            let next = try custody.seal(key, userID: userID, version: current.version + 1, dataKey: dataKey)
            let wrap = try PasskeySeal.newWrap(
                dataKey, prfOutput: output, userID: userID, credentialID: credentialID,
                challenge: proof.challenge, at: now())
            let copy = try PasskeySeal.sessionCopy(of: dataKey, token: proof.auth.token, tokenHash: proof.auth.session.tokenHash)
            // The NIP-46 signer key is made anew under the data key: the old one (which the master
            // key opened, with every reply it ever sealed) is gone with its row. Its clients reconnect.
            var signer: (record: BunkerSignerRecord, key: SecretKey)?
            if try await store.bunkerSigner(ofUser: userID) != nil {
                let fresh = SecretKey.generate()
                signer = (try custody.sealSigner(fresh, userID: userID, dataKey: dataKey, createdAt: now()), fresh)
            }
            // The Polkadot keys go under the data key too, in the same transaction.
            let substrate = try await SubstrateCustody(custody: custody, store: store, now: now).resealed(
                accountsOf: current, to: .dataKey, dataKey: dataKey)
            do {
                try await store.changeKeyProtection(
                    next, expectedVersion: current.version, wraps: [wrap],
                    keepingSession: proof.auth.session.tokenHash, sessionDataKey: copy,
                    bunkerSigner: signer?.record, substrateAccounts: substrate)
            } catch StoreError.conflict {
                throw Self.conflict
            }
            if let signer {
                custody.unlockedSigners.open(signer.key, userID: userID, until: proof.auth.session.unlockedUntil ?? now())
            }
        } else if let opened = try await custody.openWrap(
            userID: userID, credentialID: credentialID, prf: proof.prf,
            challenge: proof.challenge)
        {
            // One of the sealing passkeys already: nothing to add; the session holds the data key now
            // (for the unlock window it already has).
            _ = try await custody.unlock(proof.auth, until: proof.auth.session.unlockedUntil ?? now(), dataKey: opened)
        } else if try await store.keyWraps(ofUser: userID).contains(where: { $0.credentialID == credentialID }) {
            // This passkey seals the key already, but its PRF output did not open its wrap (a wrong
            // or forged output): nothing is replaced — a new wrap from that output would no longer
            // open the key, and its owner would be locked out in two clicks.
            throw KeyfobError(
                .decryptFailed,
                "this passkey already protects your key, but its answer did not open the seal; nothing was changed. Try again with the same passkey",
                status: .conflict)
        } else {
            // Sealed: this passkey joins the seal, with the data key the session holds.
            guard let output = proof.prf.first else {
                throw Self.noPRF
            }
            guard let dataKey = proof.auth.unlock.dataKey(at: now()) else {
                throw KeyfobError.signerSealed
            }
            // The session's data key must be the seal's now (not one from before an unseal and a
            // new seal): a wrap of a stale one would open nothing.
            _ = try custody.open(current, dataKey: dataKey)
            _ = try await store.putKeyWrap(
                PasskeySeal.newWrap(
                    dataKey, prfOutput: output, userID: userID, credentialID: credentialID,
                    challenge: proof.challenge, at: now()))
        }
    }

    @Sendable func unseal(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let proof = try await proven(request, context: context, .unseal)
        let userID = proof.auth.user.id
        let current = try await custody.record(for: userID)
        if current.passkeySealed {
            try await dispatcher.perform("unseal_key", for: proof.caller) { _ in try await unseal(current, proof) }
        }
        return jsonResponse(try await custody.protection(of: userID, unlock: nil), headers: hint(request, context, userID: nil))
    }

    /// Back to the master key alone: the data key from the session or this passkey's wrap.
    private func unseal(_ current: NostrKeyRecord, _ proof: Proof) async throws {
        let userID = proof.auth.user.id
        let dataKey: SecretBytes
        if let held = proof.auth.unlock.dataKey(at: now()) {
            dataKey = held
        } else if let opened = try await custody.openWrap(
            userID: userID, credentialID: proof.credential.id, prf: proof.prf,
            challenge: proof.challenge)
        {
            dataKey = opened
        } else {
            throw KeyfobError.signerSealed
        }
        let key = try custody.open(current, dataKey: dataKey)
        let next = try custody.seal(key, userID: userID, version: current.version + 1)
        // The Polkadot keys back under the master key alone, in the same transaction: after it,
        // nothing opens what the data key sealed.
        let substrate = try await SubstrateCustody(custody: custody, store: store, now: now).resealed(
            accountsOf: current, to: .masterKey, dataKey: dataKey)
        // The NIP-46 signer key stays (its clients stay connected), under the master key alone again.
        var signer: BunkerSignerRecord?
        if let sealed = try await store.bunkerSigner(ofUser: userID), sealed.passkeySealed {
            // Its connect secret stays as the store holds it then (`changeKeyProtection`).
            signer = try custody.sealSigner(custody.openSigner(sealed, dataKey: dataKey), userID: userID, createdAt: sealed.createdAt)
        }
        do {
            try await store.changeKeyProtection(
                next, expectedVersion: current.version, wraps: [], keepingSession: nil,
                sessionDataKey: nil, bunkerSigner: signer, substrateAccounts: substrate)
        } catch StoreError.conflict {
            throw Self.conflict
        }
        custody.unlockedSigners.close(userID: userID)
    }

    struct Unlocked: Encodable {
        let signerLocked: Bool
        let signerUnlockedUntil: Date
    }

    /// A fresh passkey assertion unlocks this session's signer for the unlock window; for a
    /// sealed key, the passkey's PRF output opens its wrap and the session keeps the data key.
    @Sendable func unlock(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let proof = try await proven(request, context: context, .unlock)
        let userID = proof.auth.user.id
        let until = now().addingTimeInterval(TimeInterval(configuration.signerUnlockTTL))
        if try await custody.record(for: userID).passkeySealed {
            guard
                let dataKey = try await custody.openWrap(
                    userID: userID, credentialID: proof.credential.id, prf: proof.prf,
                    challenge: proof.challenge)
            else {
                logger.notice(
                    "an unlock did not open the sealed key (no PRF output, or another one)",
                    metadata: ["credential": "\(Base64URL.encode(proof.credential.id))"])
                throw proof.prf.first == nil ? Self.noPRF : KeyfobError.signerSealed
            }
            _ = try await custody.unlock(proof.auth, until: until, dataKey: dataKey)
        } else {
            _ = try await custody.unlock(proof.auth, until: until)
        }
        return jsonResponse(Unlocked(signerLocked: false, signerUnlockedUntil: until))
    }
}

/// The PRF outputs of one assertion: `first` for the input the wrap was made with, `second` for
/// the fresh salt a legacy wrap moves to.
struct PRFOutputs: Sendable {
    var first: SharedSecret?
    var second: SharedSecret?
}

/// How a user's key is protected, for `/session`, the account page and the seal endpoints.
struct KeyProtection: Encodable, Sendable {
    /// `passkeys` (sealed by the user's passkeys) or `server` (the master key alone).
    let level: String
    /// How many passkeys can open the sealed key (0 when server-protected).
    let sealedBy: Int
    /// "sealed by 2 passkeys" or "server-protected".
    let summary: String
    /// Base64url ids of the passkeys that can open it.
    let sealingCredentials: [String]
    /// Sealed, and the asking session cannot open it now (nil when no session was asked about).
    let signerSealed: Bool?
}

extension KeyCustody {
    /// The data key, opened with one passkey's PRF output and its wrap; nil when that passkey
    /// has no wrap or the output does not open it. A wrap made under the deployment's old single
    /// salt is made again under the ceremony's fresh salt when the ceremony gave `second` for it
    /// (`challenge` is the ceremony's).
    func openWrap(userID: String, credentialID: [UInt8], prf: PRFOutputs, challenge: [UInt8]?) async throws -> SecretBytes? {
        guard let first = prf.first,
            let wrap = try await store.keyWraps(ofUser: userID).first(where: { $0.credentialID == credentialID }),
            let dataKey = PasskeySeal.unwrap(wrap.wrapped, prfOutput: first, userID: userID, credentialID: credentialID)
        else {
            return nil
        }
        if wrap.salt.isEmpty, let second = prf.second, let challenge {
            var moved = try PasskeySeal.newWrap(
                dataKey, prfOutput: second, userID: userID, credentialID: credentialID,
                challenge: challenge, at: now())
            moved.createdAt = wrap.createdAt
            _ = try await store.putKeyWrap(moved)
        }
        return dataKey
    }

    /// A fresh passkey assertion on this session (with user verification): its signer unlocks
    /// until `until` (a server-protected key; a sealed one stays shut without its data key).
    func unlock(_ auth: Sessions.Authenticated, until: Date) async throws -> SessionUnlock {
        try await unlock(auth, until: until, sessionCopy: nil)
    }

    /// The same, holding `dataKey` (a sealed key's, opened by that passkey): the session keeps a
    /// copy and the user's sealed NIP-46 signer opens for the window.
    func unlock(_ auth: Sessions.Authenticated, until: Date, dataKey: borrowing SecretBytes) async throws -> SessionUnlock {
        let copy = try PasskeySeal.sessionCopy(of: dataKey, token: auth.token, tokenHash: auth.session.tokenHash)
        let unlocked = try await unlock(auth, until: until, sessionCopy: copy)
        try await openSigner(ofUser: auth.user.id, dataKey: dataKey, until: until)
        return unlocked
    }

    private func unlock(_ auth: Sessions.Authenticated, until: Date, sessionCopy: [UInt8]?) async throws -> SessionUnlock {
        var session = auth.session
        session.unlockedUntil = until
        session.dataKey = sessionCopy
        guard try await store.unlockSession(tokenHash: session.tokenHash, until: until, dataKey: sessionCopy) else {
            throw KeyfobError(.unauthorized, "this session ended; sign in again", status: .unauthorized)
        }
        return SessionUnlock(token: auth.token, session: session)
    }

    /// Presence proven by a passkey confirmation (an approval's): the session unlocks until `until`; a
    /// key the session could not open (`sealedShut`) opens with the confirming sealing passkey's PRF
    /// output, else `signer_sealed`. One prompt, not an unlock and then a confirmation.
    func unlock(
        _ auth: Sessions.Authenticated, until: Date, sealedShut: Bool, credentialID: [UInt8], prf: PRFOutputs, challenge: [UInt8]
    ) async throws -> SessionUnlock {
        if sealedShut {
            guard let dataKey = try await openWrap(userID: auth.user.id, credentialID: credentialID, prf: prf, challenge: challenge)
            else { throw KeyfobError.signerSealed }
            return try await unlock(auth, until: until, dataKey: dataKey)
        }
        if let held = auth.unlock.dataKey(at: now()) { return try await unlock(auth, until: until, dataKey: held) }
        return try await unlock(auth, until: until)
    }

    /// Whether `unlock` can open the user's key now: always, unless it is passkey-sealed and the
    /// session holds no data key.
    func canOpen(_ userID: String, unlock: SessionUnlock?) async throws -> Bool {
        guard try await record(for: userID).passkeySealed else { return true }
        return unlock?.dataKey(at: now()) != nil
    }

    func protection(of userID: String, unlock: SessionUnlock?) async throws -> KeyProtection {
        let record = try await record(for: userID)
        guard record.passkeySealed else {
            return KeyProtection(
                level: "server", sealedBy: 0, summary: "server-protected", sealingCredentials: [],
                signerSealed: unlock.map { _ in false })
        }
        let wraps = try await store.keyWraps(ofUser: userID)
        let open: Bool? = unlock.map { $0.dataKey(at: now()) != nil }
        return KeyProtection(
            level: "passkeys", sealedBy: wraps.count,
            summary: "sealed by \(wraps.count) passkey\(wraps.count == 1 ? "" : "s")",
            sealingCredentials: wraps.map { Base64URL.encode($0.credentialID) },
            signerSealed: open.map { !$0 })
    }
}
