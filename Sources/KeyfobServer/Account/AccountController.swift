import Foundation
import HTTPTypes
import Hummingbird
import KeyfobCodecs
import KeyfobStore
import Nostr
import WebAuthn

/// Who is signed in, signing out, and the account's passkeys.
struct AccountController: Sendable {
    let store: any CredentialStore & KeyWrapStore & SessionStore & AuditStore & ApprovalStore
    let sessions: Sessions
    let events: EventLog
    let custody: KeyCustody
    let names: PasskeyNames
    let confirmations: ActionConfirmations
    /// The Polkadot account streams (sign out everywhere ends them).
    let streams: SubstrateAccountEvents
    /// Lock now is audited like the signer's own operations.
    let dispatcher: SignerDispatcher
    let now: @Sendable () -> Date

    func addRoutes(to router: Router<KeyfobRequestContext>) {
        router.get("/session", use: session)
        router.post("/logout", use: logout)
        router.post("/api/signer/lock", use: lock)
        router.post("/api/extension/session", use: connectExtension)
        router.get("/account/credentials", use: credentials)
        router.delete("/account/credentials/:id", use: deleteCredential)
        router.patch("/account/credentials/:id", use: renameCredential)
    }

    struct SessionResponse: Encodable {
        let username: String
        let isAnonymous: Bool
        let expiresAt: Date
        let signerLocked: Bool
        let signerUnlockedUntil: Date?
        /// The user's nostr public key (hex) and npub: public, shown even while the signer is locked.
        let pubkey: String
        let npub: String
        /// The WebAuthn user handle (base64url), for the browser's Signal API.
        let userId: String
        /// How the key is protected: by the master key alone, or sealed by passkeys (and whether
        /// this session can open it).
        let protection: KeyProtection
        /// NIP-46 requests waiting, unread, for this user's sealed signer to open (this instance's).
        let waitingForUnlock: Int
        /// For the browser extension's session only: the sites (grant clients) that may read the
        /// public key without asking. The extension forgets the key it gave any other site.
        var sites: [String]? = nil
        /// For the extension's session only: the web sites' allowances (`GrantRecord.isWebSiteAllowance`),
        /// so its popup says what the current site may do without asking and can revoke it.
        var siteGrants: [GrantsReply.Item]? = nil
    }

    @Sendable func session(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        let pubkey = try await custody.publicKey(of: auth.user.id)
        let protection = try await custody.protection(of: auth.user.id, unlock: auth.unlock)
        // A sealed key this session cannot open is a locked signer, whatever the window says (the
        // window is still reported: account changes need it, signing needs the seal opened too).
        let window = auth.session.isUnlocked(at: now())
        var reply = SessionResponse(
            username: auth.user.username, isAnonymous: auth.user.isAnonymous, expiresAt: auth.session.expiresAt,
            signerLocked: !window || protection.signerSealed == true, signerUnlockedUntil: window ? auth.session.unlockedUntil : nil,
            pubkey: pubkey.hex, npub: NIP19.npub(pubkey), userId: auth.user.id, protection: protection,
            waitingForUnlock: custody.unlockedSigners.waitingCount(userID: auth.user.id, now: now()))
        if auth.isExtension {
            // Web sites' allowances only: the token learns nothing of the apps and bunker clients.
            let allowances = try await store.grants(ofUser: auth.user.id, now: now()).filter(\.isWebSiteAllowance)
            reply.sites = Set(allowances.filter { $0.method == SignerMethod.getPublicKey.rawValue }.map(\.client)).sorted()
            reply.siteGrants = allowances.map(GrantsReply.Item.init)
        }
        return jsonResponse(reply)
    }

    @Sendable func logout(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let cleared: HTTPFields = [.setCookie: sessions.clearingCookie(secure: sessions.secureCookie(for: request, context: context))]
        // A value that is not "1" is refused, never read as "this session only": a client that
        // meant everywhere must not be left believing it.
        let everywhere = request.queryValue("everywhere")
        if let everywhere, !["1", "true"].contains(everywhere) {
            throw KeyfobError.invalid("everywhere must be 1 (or true); leave it out to sign out of this session only")
        }
        if everywhere == nil {
            // A body, when sent, is a JSON object like every other (nothing in it is read).
            _ = try await request.decodeJSON(NoFields.self, limit: 16 * 1024, emptyIsObject: true)
        }
        let auth = try await sessions.authenticate(request)
        // Everywhere is for someone: without a session there is nobody to sign out everywhere.
        if everywhere != nil, auth == nil { throw KeyfobError.unauthorized }
        if let auth {
            if everywhere != nil {
                // Signing every device out is an account change: confirmed with a passkey.
                _ = try await confirmations.verify(
                    try await ActionConfirmations.assertion(in: request), .revokeSessions, target: "", for: auth)
                // Everywhere means everywhere (the break-in remedy): every session, every NIP-46
                // client and the connect secret, every grant and dapp permission, in one
                // transaction; then every opened sealed signer and open stream here. Other
                // instances shut theirs on the next request or refresh, finding no session.
                var ended = try await store.signOutEverywhere(userID: auth.user.id, now: now())
                custody.unlockedSigners.close(userID: auth.user.id)
                ended.requests += custody.unlockedSigners.dropWaiting(userID: auth.user.id, now: now())
                streams.end(auth.user.id)
                await store.auditAccountChange(userID: auth.user.id, method: "revoke_sessions", at: now())
                events.record(
                    .signedOut, username: auth.user.username,
                    detail: "everywhere sessions=\(ended.sessions) clients=\(ended.clients) grants=\(ended.grants) requests=\(ended.requests)")
                let passkeys = try await store.credentials(ofUser: auth.user.id)
                let dayAgo = now().addingTimeInterval(-86400)
                // This browser forgets the sealed account too: its next sign-in names no one.
                var headers = cleared
                if SealedAccountHint.carried(request) {
                    let secure = sessions.secureCookie(for: request, context: context)
                    headers.append(HTTPField(name: .setCookie, value: SealedAccountHint.removal(secure: secure)))
                }
                return jsonResponse(
                    SignedOutReply(
                        signedOut: true, sessions: ended.sessions, apps: ended.clients, grants: ended.grants, requests: ended.requests,
                        ended: .init(
                            extensionSession: ended.extensionSessions > 0, apps: Array(ended.clientNames.prefix(20)),
                            sites: Array(ended.grantClients.prefix(20))),
                        passkeys: passkeys.count, passkeysAddedToday: passkeys.filter { $0.createdAt > dayAgo }.count),
                    headers: headers)
            } else {
                try await store.deleteSession(tokenHash: auth.session.tokenHash)
                // A sealed NIP-46 signer the user opened stays open only while they are here.
                custody.unlockedSigners.close(userID: auth.user.id)
                // Account streams check their session now: this one's end.
                streams.changed(auth.user.id)
                events.record(.signedOut, username: auth.user.username)
            }
        }
        return jsonResponse(["signedOut": true], headers: cleared)
    }

    /// A body whose fields are not read: it must still be a JSON object (a struct with no fields
    /// would decode from any JSON value, so the object is asked for).
    struct NoFields: Decodable {
        private enum Key: CodingKey {}
        init(from decoder: any Decoder) throws { _ = try decoder.container(keyedBy: Key.self) }
    }

    /// What signing out everywhere ended, for the page to say so.
    struct SignedOutReply: Encodable {
        let signedOut: Bool
        let sessions: Int
        /// NIP-46 clients disconnected (they connect again only with a new bunker URL).
        let apps: Int
        /// Remembered choices and dapp permissions revoked.
        let grants: Int
        /// Waiting requests cancelled (nostr apps', NIP-46 clients', Polkadot sites').
        let requests: Int
        /// What ended, by name: whether the browser extension's session was among them, the
        /// disconnected NIP-46 apps, the apps and sites whose permissions went.
        let ended: Ended
        /// The passkeys that can still sign in (an intruder may have added one): how many, how
        /// many were added in the last day.
        let passkeys: Int
        let passkeysAddedToday: Int

        struct Ended: Encodable {
            let extensionSession: Bool
            let apps: [String]
            let sites: [String]
        }
    }

    /// "Lock now": every session of the account locked at once (they stay signed in; signing
    /// needs a passkey again), an opened sealed signer shut. Needs only the session: locking can
    /// only take power away. On every instance: the lock is in the shared store, and a sealed
    /// signer elsewhere shuts on its next request when it finds no unlocked session.
    @Sendable func lock(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        let caller = SignerCaller(
            userID: auth.user.id, username: auth.user.username, client: "account", transport: "rest",
            limitKey: SignerController.limitKey(auth), ip: context.clientAddress)
        // The extension's token counts against the signer's rate (a stolen one cannot lock the
        // account over and over); the person's own Lock now never waits.
        let locked = try await dispatcher.perform("lock", for: caller, limit: auth.isExtension ? .counted : .uncounted) { _ in
            let locked = try await store.lockSessions(ofUser: auth.user.id)
            custody.unlockedSigners.close(userID: auth.user.id)
            return locked
        }
        return jsonResponse(LockReply(locked: true, sessions: locked))
    }

    struct LockReply: Encodable {
        let locked: Bool
        /// Sessions that were unlocked and are locked now.
        let sessions: Int
    }

    struct CredentialInfo: Encodable {
        let id: String
        /// The name the user gave it, if any.
        let name: String?
        /// The provider its AAGUID names ("iCloud Keychain", "YubiKey 5 Series"), else "Passkey".
        let authenticatorName: String
        /// `icons/<icon>.svg` in the public directory.
        let icon: String
        /// "Chrome on Android": where it was created.
        let createdOn: String?
        let algorithm: Int
        let attestationFormat: String
        let aaguid: String
        let transports: [String]
        let backedUp: Bool
        /// False: no configured trust anchor vouched for the attestation, so `attestationFormat`
        /// and `aaguid` are only what the client claimed.
        let attestationTrusted: Bool
        let createdAt: Date
        let lastUsedAt: Date?
        /// Whether this passkey can open the account's passkey-sealed key.
        let sealsKey: Bool
        /// Whether its authenticator can seal a key at all (PRF): false only when its browser said
        /// so at creation; nil when unknown. The page offers "Add to seal" unless it is false.
        let canSeal: Bool?
        /// The passkey the asking session signed in with (removing it signs that session out).
        let current: Bool
    }

    /// A name for a passkey no catalog names: a security key when it only travels by USB, NFC or
    /// Bluetooth, else "Passkey".
    static func fallbackName(_ provider: PasskeyNames.Provider, transports: [String]) -> PasskeyNames.Provider {
        guard provider == PasskeyNames.unknown, !transports.isEmpty,
            transports.allSatisfy({ ["usb", "nfc", "ble"].contains($0) })
        else { return provider }
        return PasskeyNames.Provider(name: "Security key", icon: provider.icon)
    }

    @Sendable func credentials(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        let sealing = Set(try await store.keyWraps(ofUser: auth.user.id).map(\.credentialID))
        let list = try await store.credentials(ofUser: auth.user.id).map {
            let provider = Self.fallbackName(names.provider(aaguid: $0.aaguid), transports: $0.transports)
            return CredentialInfo(
                id: Base64URL.encode($0.id), name: $0.name, authenticatorName: provider.name,
                icon: provider.icon, createdOn: $0.createdOn,
                algorithm: $0.algorithm, attestationFormat: $0.attestationFormat,
                aaguid: Hex.encode($0.aaguid), transports: $0.transports,
                backedUp: $0.backupState, attestationTrusted: $0.attestationTrusted,
                createdAt: $0.createdAt, lastUsedAt: $0.lastUsedAt, sealsKey: sealing.contains($0.id),
                canSeal: sealing.contains($0.id) ? true : $0.prfCapable, current: $0.id == auth.session.credentialID)
        }
        return jsonResponse(["credentials": list])
    }

    /// Naming a passkey needs only a session: it changes nothing about who can sign in.
    @Sendable func renameCredential(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        guard let id = context.parameters.get("id").flatMap(Base64URL.decode) else {
            throw KeyfobError.invalid("credential id is not base64url")
        }
        struct Body: Decodable { var name: String? }
        let body = try await request.decodeJSON(Body.self, limit: 4096)
        let name = try PasskeyNames.validated(body.name)
        guard try await store.renameCredential(id: id, ofUser: auth.user.id, name: name) else {
            throw KeyfobError(.credentialNotFound, "you have no passkey with this id", status: .notFound)
        }
        return jsonResponse(["renamed": true])
    }

    /// Removing a passkey needs an assertion made for it (`passkey.remove`, target: its id) by an
    /// older passkey (a stolen session must not lock the owner out), ends every session that
    /// passkey started, and locks the signer of the others.
    @Sendable func deleteCredential(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        guard let text = context.parameters.get("id"), let id = Base64URL.decode(text) else {
            throw KeyfobError.invalid("credential id is not base64url")
        }
        _ = try await confirmations.verify(
            try await ActionConfirmations.assertion(in: request), .removePasskey, target: Base64URL.encode(id), for: auth)
        do {
            guard try await store.deleteCredential(id: id, ofUser: auth.user.id) else {
                throw KeyfobError(.credentialNotFound, "you have no passkey with this id", status: .notFound)
            }
        } catch StoreError.conflict {
            throw KeyfobError(.invalidRequest, "this is your only passkey; add another before removing it", status: .conflict)
        } catch StoreError.lastSealingPasskey {
            throw KeyfobError(
                .invalidRequest,
                "this is the only passkey that can open your sealed nostr key; add another passkey to the seal, or unseal the key, before removing it",
                status: .conflict)
        }
        // Whatever the removed passkey opened is shut: which session's window or which sealed
        // signer it unlocked is not recorded, so every one is (Lock now); a passkey the owner
        // keeps unlocks again with one prompt.
        _ = try await store.lockSessions(ofUser: auth.user.id)
        custody.unlockedSigners.close(userID: auth.user.id)
        events.record(.credentialRemoved, username: auth.user.username)
        await store.auditAccountChange(userID: auth.user.id, method: "remove_passkey", at: now())
        return jsonResponse(["deleted": true, "locked": true])
    }
}
