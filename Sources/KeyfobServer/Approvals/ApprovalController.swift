import Foundation
import HTTPTypes
import Hummingbird
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import Nostr
import WebAuthn

/// Redirect flows and the approval page's API (DESIGN.md §4.4–§4.6):
///
///     client app ── GET /nostrsigner/…, /app/sign ─▶ keyfob
///        bad callback ──────────────▶ 400 page, nothing stored
///        other bad request ─────────▶ 400 page + "Back to <client>" link (spec's error form)
///        remembered + unlocked ─────▶ 303 to the callback with the result
///        otherwise ─────────────────▶ pending request (sealed, 5 min) ─▶ 303 /approve/<id>
///     /approve/<id> ── GET /api/requests/<id>, POST …/approve | …/reject ─▶ {redirect}
struct ApprovalController: Sendable {
    let store: any ApprovalStore & AuditStore & BunkerStore & CredentialStore & KeyWrapStore & CeremonyStore
    let configuration: ServerConfiguration
    let sessions: Sessions
    let dispatcher: SignerDispatcher
    let custody: KeyCustody
    let grants: Grants
    let passkeys: PasskeyCheck
    let limits: ClientLimits
    let confirmations: ActionConfirmations
    let pending: PendingRequests
    /// Answers NIP-46 requests decided here (nil when the built-in relay and external relays are off).
    let bunker: Bunker?
    /// Polkadot account streams, told when a dapp's permission is revoked (they end).
    var streams: SubstrateAccountEvents? = nil
    let now: @Sendable () -> Date

    func addRoutes(to router: Router<KeyfobRequestContext>) {
        router.get("/app/sign", use: entry)
        router.get("/app/pubkey", use: entry)
        router.get("/nostrsigner", use: entry)
        router.get("/nostrsigner/**", use: entry)
        router.get("/approve/:id") { _, _ in try staticPage("approve.html") }
        router.get("/callback.html") { request, _ in HTMLPage.nip07Callback(query: request.uri.query ?? "") }
        router.get("/api/requests", use: list)
        router.get("/api/requests/:id", use: show)
        router.post("/api/requests/:id/approve", use: approve)
        router.post("/api/requests/:id/reject", use: reject)
        router.post("/api/requests/:id/challenge", use: challenge)
        router.get("/api/signer/grants", use: listGrants)
        router.delete("/api/signer/grants/:id", use: deleteGrant)
        router.get("/api/signer/history/:entry/receipt", use: receipt)
    }

    func staticPage(_ name: String) throws -> Response { try htmlPage(name, in: configuration.publicDirectory) }

    // MARK: - Entry points

    @Sendable func entry(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        // Each entry may store a request: the per-IP budget of the ceremony endpoints applies (a
        // stranger could otherwise fill the table by varying the callback, i.e. the client).
        if let retry = limits.options.take(limits.clientIP(request, context), now: now()) {
            var page = HTMLPage.problem(
                title: "Too many requests", message: "Too many requests from this address; try again in \(retry) s.",
                status: .tooManyRequests)
            page.headers[.retryAfter] = String(retry)
            return page
        }
        let target = request.head.path ?? request.uri.description
        let incoming: IncomingRequest
        do {
            incoming = try IncomingRequest.decode(target, now: now(), ownOrigins: configuration.effectiveOrigins)
        } catch .badCallback(let message) {
            return HTMLPage.problem(
                title: "This request cannot be handled",
                message: "The app's return address is missing or not allowed: \(message).")
        } catch .badRequest(let code, let message, let back, let client) {
            return HTMLPage.problem(
                title: "This request cannot be handled", message: "\(message) (\(code)).",
                back: back, client: client)
        }
        let auth = try? await sessions.authenticate(request)
        let method = incoming.call.method.rawValue
        // A remembered choice needs a signer that can open the key now; a sealed key the session
        // cannot open goes to the approval page, which asks for a sealing passkey.
        if let auth, auth.session.isUnlocked(at: now()), try await custody.canOpen(auth.user.id, unlock: auth.unlock) {
            let decision = try await grants.decision(userID: auth.user.id, client: incoming.client, method: method, kind: incoming.call.kind)
            if decision != .ask {
                let caller = caller(
                    auth, client: incoming.client, transport: incoming.transport,
                    ip: limits.clientIP(request, context))
                let location = try await finish(incoming, caller: caller, approved: decision == .allow)
                guard let location else {
                    return HTMLPage.problem(
                        title: "Rejected", message: "You chose to reject this app's \(method) requests.",
                        status: .ok)
                }
                return Response(status: .seeOther, headers: [.location: location, .cacheControl: "no-store"])
            }
        }
        let id: String
        do {
            let requester = "ip:" + limits.clientIP(request, context)
            do {
                id = try await pending.create(
                    incoming, userID: auth?.user.id, requester: requester, source: auth.map { .session(tokenHash: $0.session.tokenHash) })
            } catch StoreError.notFound {
                // The browser's session ended meanwhile (signed out everywhere): the request waits as
                // a signed-out browser's does, for whoever signs in to open it, not for the account.
                id = try await pending.create(incoming, userID: nil, requester: requester, source: nil)
            }
        } catch StoreError.limitReached {
            var back: String?
            if case .callback(let request) = incoming.reply {
                back = SignerCodec.callback(
                    for: request,
                    outcome: .failure(
                        code: ErrorCode.rateLimited.rawValue,
                        message: "too many requests are waiting for approval"))
            }
            return HTMLPage.problem(
                title: "Too many waiting requests",
                message: "\(incoming.client) has \(PendingRequests.maxPerClient) requests waiting for your decision already.",
                back: back, client: incoming.client, status: .tooManyRequests)
        }
        return Response(status: .seeOther, headers: [.location: "/approve/\(id)", .cacheControl: "no-store"])
    }

    /// What signing a protected kind does, said for that kind (the page shows the event itself).
    static func dangerWarning(kind: Int) -> String? {
        guard SignerCall.dangerousKinds.contains(kind) else { return nil }
        let what: String
        switch kind {
        case 0: what = "This replaces your whole profile with exactly the fields shown: any field not listed is gone."
        case 3: what = "This replaces your whole follow list: everyone not in it is unfollowed."
        case 5: what = "This asks relays to delete the events it names; deleted notes do not come back."
        case 10002: what = "This replaces the list of relays your posts go to and your messages come from."
        case 22242: what = "This logs you in to a relay as you."
        case 27235: what = "This logs you in to a website or service as you (HTTP auth)."
        case 24133: what = "This answers a remote-signer (NIP-46) message as you."
        case 30078: what = "This writes an app's private data under your name, which that app trusts."
        default: what = "Kind \(kind) (\(KindNames.name(kind))) changes what your account is or may do."
        }
        return what + " Approve only if you started this."
    }

    func caller(_ auth: Sessions.Authenticated, client: String, transport: String, ip: String? = nil) -> SignerCaller {
        SignerCaller(
            userID: auth.user.id, username: auth.user.username, client: client, transport: transport,
            limitKey: Hex.encode(auth.session.tokenHash), ip: ip, unlock: auth.unlock)
    }

    /// Runs (or rejects) a request and returns the callback URL with the outcome, in the spec's
    /// form; a NIP-46 request's outcome is published to its client instead (no URL).
    func finish(_ incoming: IncomingRequest, caller: SignerCaller, approved: Bool, receipt: String? = nil) async throws -> String? {
        let call = incoming.call
        let outcome: SignerOutcome
        if approved {
            do {
                let done = try await dispatcher.run(call, for: caller, receipt: receipt)
                outcome = .success(result: done.result, event: done.event?.json)
            } catch let error as KeyfobError {
                outcome = .failure(code: error.code.rawValue, message: error.message)
            }
        } else {
            try await dispatcher.rejection(call.method.rawValue, kind: call.kind, for: caller)
            outcome = .rejected
        }
        switch incoming.reply {
        case .callback(let request):
            return SignerCodec.callback(for: request, outcome: outcome)
        case .nip46(let address):
            try await bunker?.deliver(outcome, to: address, unlock: caller.unlock)
            return nil
        }
    }

    // MARK: - The approval page's API

    /// The pending request `id` for this user, decoded again from its sealed form.
    /// One sealed for a passkey-sealed owner opens with their signer key: open already (unlocked),
    /// or with this session's data key; otherwise `signer_locked` (unlock, then load it again).
    func load(_ id: String, auth: Sessions.Authenticated) async throws -> (PendingRequestRecord, IncomingRequest) {
        let gone = KeyfobError(.requestNotFound, "this request was decided already, has expired, or is not yours", status: .notFound)
        guard id.utf8.count <= 64 else { throw gone }
        // Claimed only while this session exists: one a sign-out everywhere ends as this runs gets
        // a 401, as any signed-out caller does, and claims nothing.
        let claimed: PendingRequestRecord?
        do {
            claimed = try await store.claimPendingRequest(id: id, userID: auth.user.id, session: auth.session.tokenHash, now: now())
        } catch StoreError.notFound { throw KeyfobError.unauthorized }
        guard let record = claimed else { throw gone }
        var signerKey: SecretKey?
        if PendingRequests.isSealedForOwner(record) {
            guard let signer = try await store.bunkerSigner(ofUser: auth.user.id) else { throw gone }
            do { signerKey = try custody.signerKey(signer, unlock: auth.unlock) } catch let error as KeyfobError where error.code == .signerLocked {
                throw KeyfobError(
                    .signerLocked, "this request is sealed with your passkeys like your key: unlock your signer to see it",
                    status: .forbidden)
            }
        }
        guard let target = pending.open(record, signerKey: signerKey),
            let incoming = try? IncomingRequest.decode(target, now: record.createdAt, ownOrigins: configuration.effectiveOrigins)
        else {
            throw gone
        }
        // A NIP-46 request whose client is gone (disconnected, or every app signed out) has nobody
        // to answer: cancelled, never approved into the void.
        if case .nip46(let address) = incoming.reply, try await store.bunkerClient(userID: auth.user.id, clientPubkey: address.client) == nil {
            _ = try await store.decidePendingRequest(id: record.id, userID: auth.user.id, state: "cancelled", now: now())
            throw gone
        }
        return (record, incoming)
    }

    func needsPasskey(_ record: PendingRequestRecord) -> Bool {
        configuration.confirmWithPasskey || Grants.isDangerous(record.method, kind: record.kind)
    }

    /// The user's requests waiting for a decision: a NIP-46 client that does not open `auth_url`
    /// still gets its answer once the user approves from the account page.
    @Sendable func list(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        let formatter = ISO8601DateFormatter()
        let names = Dictionary(
            try await store.bunkerClients(ofUser: auth.user.id).compactMap { client in
                client.name.map { (BunkerAddress.clientIdentifier(client.clientPubkey), $0) }
            }, uniquingKeysWith: { first, _ in first })
        let list = try await store.pendingRequests(ofUser: auth.user.id, now: now(), limit: 50).map { r in
            PendingRequestsReply.Item(
                id: r.id, client: r.client, transport: r.transport, method: r.method,
                createdAt: formatter.string(from: r.createdAt), expiresAt: formatter.string(from: r.expiresAt),
                kind: r.kind, kindName: r.kind.map(KindNames.name), clientName: names[r.client])
        }
        return jsonResponse(PendingRequestsReply(requests: list))
    }

    @Sendable func show(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        let id = context.parameters.get("id") ?? ""
        let record: PendingRequestRecord
        let incoming: IncomingRequest
        do {
            (record, incoming) = try await load(id, auth: auth)
        } catch let error as KeyfobError where error.code == .requestNotFound {
            return try await gone(id, auth: auth)
        }
        let pubkey = try await custody.publicKey(of: auth.user.id)
        let canSign = try await custody.canOpen(auth.user.id, unlock: auth.unlock)
        var view = ApprovalView(
            id: record.id, transport: incoming.specName, client: record.client,
            method: record.method, expiresAt: ISO8601DateFormatter().string(from: record.expiresAt),
            account: .init(username: auth.user.username, npub: NIP19.npub(pubkey), pubkey: pubkey.hex),
            signerLocked: !auth.session.isUnlocked(at: now()) || !canSign,
            needsPasskey: needsPasskey(record),
            remember: Grants.isDangerous(record.method, kind: record.kind) ? ["once"] : ["once", "hour", "day", "forever"],
            firstFromClient: try await store.grants(ofUser: auth.user.id, now: now()).allSatisfy { $0.client != record.client })
        // A self-declared name that is just the verified client (NIP-07 sends the page's origin) adds nothing.
        let claimed = incoming.clientName.flatMap { name -> String? in
            let sameAsClient = name == record.client || (try? CallbackURL.clientIdentifier(ofOrigin: name)) == record.client
            return sameAsClient ? nil : name
        }
        view.clientName = claimed
        if case .nip46(let address) = incoming.reply {
            view.requestedPerms = try await requestedPerms(address, userID: auth.user.id).map(\.string)
        }
        view.kind = record.kind
        view.kindName = record.kind.map(KindNames.name)
        // A bunker client is its key: shown as an npub, as people know keys.
        if case .nip46(let address) = incoming.reply, let key = try? PublicKey(hex: address.client) { view.clientNpub = NIP19.npub(key) }
        var warnings: [String] = []
        switch incoming.call {
        case .signEvent(let unsigned):
            let id = unsigned.id(pubkey: pubkey)
            view.event = EventObject(
                id: Hex.encode(id), pubkey: pubkey.hex, createdAt: unsigned.createdAt, kind: unsigned.kind,
                tags: unsigned.tags, content: unsigned.content, sig: nil)
            if let warning = Self.dangerWarning(kind: unsigned.kind) { warnings.append(warning) }
        case .encrypt(_, let plaintext, let peer):
            view.plaintext = plaintext
            (view.peer, view.peerNpub) = (peer.hex, NIP19.npub(peer))
        case .decrypt(_, let ciphertext, let peer):
            view.ciphertext = ciphertext
            (view.peer, view.peerNpub) = (peer.hex, NIP19.npub(peer))
        case .decryptZap(let zap):
            view.event = EventObject(zap)
        case .getPublicKey:
            break
        }
        if let current = incoming.currentUser, current.lowercased() != pubkey.hex, current != NIP19.npub(pubkey) {
            warnings.append("The app thinks it is talking to another account (\(current.prefix(16))…); you are signed in as \(auth.user.username).")
        }
        if let name = claimed {
            if case .nip46(let address) = incoming.reply {
                let key = (try? PublicKey(hex: address.client)).map { String(NIP19.npub($0).prefix(16)) } ?? String(address.client.prefix(16))
                warnings.append(
                    "The client calls itself \"\(name)\"; that name is not verified. It is the bunker client you connected with key \(key)….")
            } else {
                warnings.append("The app calls itself \"\(name)\"; that name is not verified. The result goes to \(record.client).")
            }
        }
        view.warnings = warnings
        return jsonResponse(view)
    }

    @Sendable func approve(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        let body = try await request.decodeJSON(Decision.self, limit: configuration.maxBodySize, emptyIsObject: true)
        let remember = body.remember ?? .once
        let (record, incoming) = try await load(context.parameters.get("id") ?? "", auth: auth)
        // A locked session approves only with the passkey confirmation this request asks for
        // (which unlocks it: one prompt, not an unlock and then a confirmation).
        guard auth.session.isUnlocked(at: now()) || needsPasskey(record) else { throw KeyfobError.signerLocked }
        var caller = caller(
            auth, client: record.client, transport: record.transport,
            ip: limits.clientIP(request, context))
        if remember != .once, Grants.isDangerous(record.method, kind: record.kind) {
            throw KeyfobError(.permissionDenied, "this kind is asked every time: only a rejection can be remembered", status: .forbidden)
        }
        // A sealed key this session cannot open: a passkey confirmation from a sealing passkey opens
        // it (its PRF output); otherwise say so before anything is decided.
        var sealedShut = false
        if record.method != SignerMethod.getPublicKey.rawValue {
            sealedShut = try await !custody.canOpen(auth.user.id, unlock: auth.unlock)
        }
        if sealedShut, !needsPasskey(record) { throw KeyfobError.signerSealed }
        // "Trusted" lets this client sign most kinds unattended from now on: confirmed with a
        // passkey for this client, before anything is decided.
        if body.preset == .requested, case .callback = incoming.reply {
            throw KeyfobError.invalid("the requested preset is for NIP-46 clients, which ask for permissions when they connect")
        }
        if body.preset == .trusted {
            _ = try await confirmations.verify(body.confirmation, .trustClient, target: record.client, for: auth)
        }
        var receipt: String?
        if needsPasskey(record) {
            let confirmation = try await confirm(body.assertion, record: record, incoming: incoming, user: auth.user)
            receipt = confirmation.receipt
            // Presence proven for this request: the session unlocks; a sealed key opens with the
            // confirming sealing passkey's PRF output.
            caller.unlock = try await custody.unlock(
                auth, until: now().addingTimeInterval(TimeInterval(configuration.signerUnlockTTL)), sealedShut: sealedShut,
                credentialID: confirmation.credentialID, prf: confirmation.prf, challenge: confirmation.challenge)
        }
        // Decided once: a second approve finds nothing pending.
        guard try await store.decidePendingRequest(id: record.id, userID: auth.user.id, state: "approved", now: now()) else {
            throw KeyfobError(.requestNotFound, "this request was decided already, has expired, or is not yours", status: .notFound)
        }
        try await grants.remember(remember, allow: true, userID: auth.user.id, client: record.client, method: record.method, kind: record.kind)
        if let preset = body.preset {
            if preset == .requested, case .nip46(let address) = incoming.reply {
                try await grants.apply(
                    requested: try await requestedPerms(address, userID: auth.user.id), userID: auth.user.id,
                    client: record.client)
            } else {
                try await grants.apply(preset: preset, userID: auth.user.id, client: record.client)
            }
        }
        try await SessionBound.recheck(auth, client: record.client, sessions: sessions.store, store: store, now: now())
        let location = try await finish(incoming, caller: caller, approved: true, receipt: receipt)
        return jsonResponse(RedirectReply(redirect: location))
    }

    @Sendable func reject(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        let remember = try await request.decodeJSON(Decision.self, limit: configuration.maxBodySize, emptyIsObject: true).remember ?? .once
        let (record, incoming) = try await load(context.parameters.get("id") ?? "", auth: auth)
        guard try await store.decidePendingRequest(id: record.id, userID: auth.user.id, state: "rejected", now: now()) else {
            throw KeyfobError(.requestNotFound, "this request was decided already, has expired, or is not yours", status: .notFound)
        }
        try await grants.remember(remember, allow: false, userID: auth.user.id, client: record.client, method: record.method, kind: record.kind)
        let caller = caller(
            auth, client: record.client, transport: record.transport,
            ip: limits.clientIP(request, context))
        let location = try await finish(incoming, caller: caller, approved: false)
        return jsonResponse(RedirectReply(redirect: location))
    }

    /// `POST /api/requests/:id/approve` and `…/reject`: every field optional, each of one type.
    struct Decision: Decodable {
        var remember: Grants.Remember?
        /// A set of grants to apply with the approval (`trusted` needs `confirmation`).
        var preset: Grants.Preset?
        /// The passkey's assertion over the request's committed text (`…/challenge`).
        var assertion: AuthenticationCredential?
        /// The `grant.trusted` confirmation (`/api/confirmations`).
        var confirmation: AuthenticationCredential?
    }

    /// A request that is no longer waiting: what became of it, and — for a redirect-flow app whose
    /// request expired undecided — the link back that tells the app so in its own spec's form
    /// (nothing else would: a redirect-flow app hears only through the browser).
    func gone(_ id: String, auth: Sessions.Authenticated) async throws -> Response {
        guard id.utf8.count <= 64, let record = try await store.signerRequest(id: id, visibleTo: auth.user.id) else {
            return jsonResponse(GoneReply(state: "unknown", message: Self.goneMessage), status: .notFound)
        }
        guard record.state == "pending" else {
            let message =
                record.state == "cancelled"
                ? "This request was cancelled: its app was disconnected (you signed out everywhere, or removed it). Nothing was signed, and the app gets no answer."
                : "This request was \(record.state) already; the app has its answer."
            return jsonResponse(GoneReply(state: record.state, message: message), status: .notFound)
        }
        var back: String?
        if let target = pending.open(record, signerKey: nil),
            case .callback(let signerRequest)? =
                (try? IncomingRequest.decode(target, now: record.createdAt, ownOrigins: configuration.effectiveOrigins))?.reply
        {
            back = SignerCodec.callback(
                for: signerRequest, outcome: .failure(code: ErrorCode.userRejected.rawValue, message: "the request expired before it was approved"))
        }
        return jsonResponse(
            GoneReply(
                state: "expired", message: "This request expired before it was approved (requests last 5 minutes). Nothing was signed.",
                back: back),
            status: .notFound)
    }

    static let goneMessage = "No such request: it belongs to another account, or it was removed. Ask the app again."

    /// `GET /api/requests/:id` for a request no longer waiting (404, `request_not_found`).
    struct GoneReply: Encodable {
        var error = ErrorCode.requestNotFound
        let state: String
        let message: String
        /// Where "Back to the app" goes: the app's error callback, telling it the request expired.
        var back: String? = nil

        init(state: String, message: String, back: String? = nil) {
            self.state = state
            self.message = message
            self.back = back
        }
    }

    /// What a NIP-46 client asked for when it connected (`perms`), for the user to confirm.
    func requestedPerms(_ address: BunkerAddress, userID: String) async throws -> [NIP46Permission] {
        guard let client = try await store.bunkerClient(userID: userID, clientPubkey: address.client) else { return [] }
        return (try? NIP46Permission.parseList(client.perms)) ?? []
    }
}
