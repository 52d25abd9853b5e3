import Foundation
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import Logging
import NIOConcurrencyHelpers
import Nostr
import ServiceLifecycle
import WebAuthn

/// The NIP-46 remote signer behind the built-in relay: it reads every kind-24133 event p-tagged to
/// a signer key Keyfob holds, opens it with that key, answers the request, and publishes the
/// answer through the relay. Each user has one signer key (not their nostr key: clients learn that
/// with `get_public_key`). A client is connected once it sends `connect` with the user's current
/// secret (single use, 10 minutes); requests from any other key get no answer.
///
/// A `Service`: requests are handled in child tasks of `run()`, so graceful shutdown stops taking
/// new ones and waits for those in flight.
final class Bunker: Sendable, Service {
    let store: any ApprovalStore & BunkerStore & SessionStore & UserStore
    let vault: KeyVault
    let custody: KeyCustody
    let hub: RelayHub
    let dispatcher: SignerDispatcher
    let grants: Grants
    let pending: PendingRequests
    /// Where the approval page is (`https://<host>`), for `auth_url`.
    let origin: String
    /// The relays `switch_relays` names (nil: only the built-in one, so stay put).
    let switchRelays: [String]?
    /// The links to external relays (nil in tests that run the router alone).
    let external: ExternalRelays?
    /// Which relays a pasted `nostrconnect://` URL may name.
    let relayPolicy: RelayAddressPolicy
    /// The `--relay` ones: linked anyway, so they count against no user's caps.
    let configuredRelays: [String]
    /// Clients connected through relays of their own, per user; and distinct such relays per user.
    static let maxNostrConnectClients = 16
    static let maxRelaysPerUser = 8
    /// Pasted nostrconnect URLs per user: 10 in a burst, then 30 an hour (each may open links).
    let nostrConnectLimiter = RateLimiter(rate: 30, per: 3600, burst: 10)
    /// Requests handled at once at most; past it new ones are dropped (a flood of validly signed
    /// events from a public relay must not grow tasks without bound; clients retry).
    let maxInFlight: Int
    private let inFlight = NIOLockedValueBox(0)
    /// Admitted requests on their way to `run()`.
    private let admittedEvents: (stream: AsyncStream<Event>, continuation: AsyncStream<Event>.Continuation)
    /// Wrong `connect` secrets answered per signer: 5 a minute. Past it a wrong guess costs no
    /// signed reply (silence), and none costs a database write (the hash is compared first).
    private let refusedConnects = RateLimiter(rate: 5, per: 60)
    /// Refused connects since the last summary line: logged once a minute in aggregate, so a flood
    /// of guesses is one line, not one per guess.
    private let refusedCount = NIOLockedValueBox((count: 0, since: Date.distantPast))
    /// Requests for shut sealed signers from keys never connected to them, likewise.
    private let refusedStrangers = NIOLockedValueBox((count: 0, since: Date.distantPast))
    /// Signer records seen lately, by public key: only to answer `store_unavailable` while the store
    /// is down (never to sign). At most `knownSignersKept`; when full, forgotten all at once.
    private let knownSigners = NIOLockedValueBox<[String: BunkerSignerRecord]>([:])
    /// Signer and client keys (concatenated) of clients seen connected lately, for the same purpose.
    private let knownClients = NIOLockedValueBox(Set<String>())
    static let knownSignersKept = 4096
    let logger: Logger
    let now: @Sendable () -> Date
    static let secretLifetime: TimeInterval = 600
    /// How often sealed signers' keys past their unlock window are dropped from memory.
    static let closeInterval: TimeInterval = 5
    /// How long a queued reply waits for the instance holding its client's connection.
    static let replyLifetime = Retention.bunkerReplies

    init(
        store: any ApprovalStore & BunkerStore & SessionStore & UserStore, vault: KeyVault, custody: KeyCustody, hub: RelayHub,
        dispatcher: SignerDispatcher,
        grants: Grants, pending: PendingRequests, origin: String, switchRelays: [String]? = nil, external: ExternalRelays? = nil,
        relayPolicy: RelayAddressPolicy = RelayAddressPolicy(allowsLocal: true), configuredRelays: [String] = [],
        maxInFlight: Int = 256, logger: Logger, now: @escaping @Sendable () -> Date
    ) {
        self.store = store
        self.vault = vault
        self.custody = custody
        self.hub = hub
        self.dispatcher = dispatcher
        self.grants = grants
        self.pending = pending
        self.origin = origin
        self.switchRelays = switchRelays
        self.external = external
        self.relayPolicy = relayPolicy
        self.configuredRelays = configuredRelays
        self.maxInFlight = maxInFlight
        self.logger = logger
        self.now = now
        admittedEvents = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(max(1, maxInFlight)))
    }

    /// Starts reading the relay (and answering, when a sealed signer opens, what waited for it).
    func attach() {
        custody.unlockedSigners.onOpen { [self] userID in
            let waiting = custody.unlockedSigners.takeWaiting(userID: userID, now: now())
            guard !waiting.isEmpty else { return }
            logger.info("nip46.answering_waited", metadata: ["count": "\(waiting.count)"])
            for event in waiting { admit(event) }
        }
        hub.listen { [self] event in
            guard event.kind == NIP46.kind else { return }
            admit(event)
        }
    }

    /// Hands `event` to `run()` unless `maxInFlight` are being handled already.
    private func admit(_ event: Event) {
        let admitted = inFlight.withLockedValue { count in
            guard count < maxInFlight else { return false }
            count += 1
            return true
        }
        guard admitted else {
            logger.notice("nip46.dropped", metadata: ["reason": "too many requests in flight"])
            return
        }
        admittedEvents.continuation.yield(event)
    }

    /// Handles admitted requests, each in a child task, until graceful shutdown; then waits for
    /// those in flight.
    func run() async throws {
        await withTaskGroup(of: Void.self) { housekeeping in
            // Sealed signers' keys leave memory when their unlock window ends.
            housekeeping.addTask { [self] in
                while !Task.isCancelled {
                    custody.unlockedSigners.closeExpired(now: now())
                    try? await Task.sleep(for: .seconds(Self.closeInterval))
                }
            }
            await withDiscardingTaskGroup { group in
                for await event in admittedEvents.stream.cancelOnGracefulShutdown() {
                    group.addTask {
                        await self.handle(event)
                        self.inFlight.withLockedValue { $0 -= 1 }
                    }
                }
            }
            // Every request handled: the housekeeping stops too.
            housekeeping.cancelAll()
        }
    }

    // MARK: Signer keys and secrets

    /// The user's signer, made on first use: sealed by their passkeys when their nostr key is
    /// (which needs `unlock`'s data key, and opens it for that session's unlock window).
    func signer(of userID: String, unlock: SessionUnlock?) async throws -> BunkerSignerRecord {
        if let existing = try await store.bunkerSigner(ofUser: userID) { return existing }
        let key = SecretKey.generate()
        let record: BunkerSignerRecord
        if try await custody.record(for: userID).passkeySealed {
            guard let dataKey = unlock?.dataKey(at: now()) else { throw KeyfobError.signerSealed }
            record = try custody.sealSigner(key, userID: userID, dataKey: dataKey, createdAt: now())
        } else {
            record = try custody.sealSigner(key, userID: userID, createdAt: now())
        }
        let stored = try await store.insertBunkerSignerIfAbsent(record)
        if stored.passkeySealed, stored.pubkey == key.publicKey.hex, let unlock {
            custody.unlockedSigners.open(key, userID: userID, until: unlock.session.unlockedUntil ?? now())
        }
        return stored
    }

    /// The key of `record` for this request (`KeyCustody.signerKey`).
    func secretKey(of record: BunkerSignerRecord, unlock: SessionUnlock? = nil) throws -> SecretKey {
        try custody.signerKey(record, unlock: unlock)
    }

    /// A new connect secret for a bunker URL: 256 random bits, stored only as its SHA-256, good for
    /// one `connect` within `secretLifetime`. Every URL shown gets a new one, which replaces any
    /// unused one: a secret is never derived from anything, never shown twice, and a used or
    /// replaced one never comes back. Stored only while `session` (the one that asked) is: a
    /// secret shown to a session that a sign-out everywhere ended meanwhile would connect an app
    /// after it (`KeyfobError.unauthorized`).
    func newSecret(of record: BunkerSignerRecord, session: [UInt8]) async throws -> (secret: String, expiresAt: Date) {
        let value = Base64URL.encode(randomBytes(32))
        let expiry = now().addingTimeInterval(Self.secretLifetime)
        do {
            _ = try await store.setBunkerSecret(
                userID: record.userID, secretHash: sha256(Array(value.utf8)), expiresAt: expiry, session: session)
        } catch StoreError.notFound {
            throw KeyfobError.unauthorized
        }
        return (value, expiry)
    }

    // MARK: Requests

    func handle(_ event: Event) async {
        let addressed = event.tags.filter { $0.count >= 2 && $0[0] == "p" }.map { $0[1] }.prefix(4)
        for pubkey in addressed {
            let record: BunkerSignerRecord
            do {
                guard let found = try await store.bunkerSigner(pubkey: pubkey) else { continue }
                record = found
                knownSigners.withLockedValue { known in
                    if known.count >= Self.knownSignersKept, known[pubkey] == nil { known.removeAll() }
                    known[pubkey] = found
                }
            } catch {
                // The store is down: a client of a signer seen here gets `store_unavailable` (and
                // retries), as every other transport's client does, rather than silence.
                await answerUnavailable(event, signer: knownSigners.withLockedValue { $0[pubkey] })
                return
            }
            // A sealed signer answers only while one of its owner's sessions is unlocked: the kill
            // switch or a sign-out on any instance shuts it here too.
            if record.passkeySealed, (try? await store.hasUnlockedSession(ofUser: record.userID, now: now())) != true {
                custody.unlockedSigners.close(userID: record.userID)
            }
            guard let key = try? secretKey(of: record) else {
                // A sealed signer while its owner is away: the request cannot even be read. A
                // client connected to it waits for the owner's next unlock (then it is answered);
                // anyone else is dropped at once (counted once a minute), so strangers cannot fill
                // the queue and push the real client's request out. (The sender is the event's
                // author, readable without the key; no reply is possible without it.)
                if record.passkeySealed {
                    guard (try? await store.bunkerClient(userID: record.userID, clientPubkey: event.pubkey.hex)) != nil else {
                        noteRefusedStranger(at: now())
                        return
                    }
                    let kept = custody.unlockedSigners.wait(event, userID: record.userID, now: now())
                    logger.notice("nip46.sealed_signer_shut", metadata: ["signer": "\(pubkey.prefix(12))", "kept": "\(kept)"])
                }
                return
            }
            guard let (sender, message, encryption) = try? NIP46.unwrap(event, with: key) else { return }
            guard let request = try? NIP46.Request.parse(message) else {
                logger.notice("nip46.unreadable", metadata: ["signer": "\(pubkey.prefix(12))"])
                return
            }
            guard let response = await answer(request, from: sender, signer: record, key: key, encryption: encryption) else { return }
            do {
                // The client sent this through a relay this instance reads: no other instance needs it.
                try await send(response, with: key, to: sender, encryption: encryption, queue: false)
            } catch {
                logger.error("nip46.reply_failed", metadata: ["code": "\((error as? NostrError)?.code.rawValue ?? ErrorCode.internalError.rawValue)"])
            }
            return
        }
    }

    /// Notes `client` as connected to `record`'s signer (for `answerUnavailable` only).
    private func remember(_ client: String, of record: BunkerSignerRecord) {
        knownClients.withLockedValue { known in
            if known.count >= Self.knownSignersKept { known.removeAll() }
            known.insert(record.pubkey + client)
        }
    }

    /// A request that came while the store was down: answered `store_unavailable` when its signer
    /// was seen here before (its key, under the master key, is what encrypts the reply); nothing was
    /// done, so the client may send it again. A sealed signer shut now cannot read it: silence.
    private func answerUnavailable(_ event: Event, signer record: BunkerSignerRecord?) async {
        logger.warning("nip46.store_unavailable", metadata: ["method": "lookup"])
        // Only a client seen connected here is answered: to anyone else the signer stays silent.
        guard let record, knownClients.withLockedValue({ $0.contains(record.pubkey + event.pubkey.hex) }),
            let key = try? secretKey(of: record), let (sender, message, encryption) = try? NIP46.unwrap(event, with: key),
            let request = try? NIP46.Request.parse(message)
        else { return }
        try? await send(Self.errorResponse(request.id, KeyfobError.databaseUnavailable), with: key, to: sender, encryption: encryption, queue: false)
    }

    /// The answer to `request` from `sender`, or nil for none (a key that never connected).
    /// `key` is the signer's own (it seals a sealed account's waiting requests).
    func answer(
        _ request: NIP46.Request, from sender: PublicKey, signer record: BunkerSignerRecord, key: SecretKey,
        encryption: NIP46.Encryption = .nip44
    ) async -> NIP46.Response? {
        let userID = record.userID
        let client = sender.hex
        let at = now()
        do {
            if request.method == "connect" {
                guard request.params.first?.lowercased() == record.pubkey else {
                    return NIP46.Response(id: request.id, result: nil, error: "connect names another signer")
                }
                if try await store.bunkerClient(userID: userID, clientPubkey: client) != nil {
                    try await store.touchBunkerClient(userID: userID, clientPubkey: client, at: at)
                    remember(client, of: record)
                    return NIP46.Response(id: request.id, result: "ack")
                }
                let offered = request.params.count >= 2 && !request.params[1].isEmpty ? sha256(Array(request.params[1].utf8)) : []
                let perms = request.params.count >= 3 ? (try? NIP46Permission.parseList(request.params[2]))?.map(\.string) ?? [] : []
                let metadata: (name: String?, url: String?) = request.params.count >= 4 ? Self.metadata(request.params[3]) : (nil, nil)
                let connecting = BunkerClientRecord(
                    userID: userID, clientPubkey: client, name: metadata.name, url: metadata.url, perms: perms.joined(separator: ","),
                    createdAt: at, lastUsedAt: at)
                // Compared with the record in hand first: a wrong guess touches no table. The
                // secret is used and the client connected in one transaction, so a sign-out
                // everywhere in between cannot leave the client connected.
                guard !offered.isEmpty, record.secretHash == offered, (record.secretExpiresAt ?? .distantPast) > at,
                    try await store.connectBunkerClient(connecting, secretHash: offered, now: at)
                else {
                    noteRefusedConnect(at: at)
                    guard refusedConnects.take(record.pubkey, now: at) == nil else { return nil }
                    return NIP46.Response(id: request.id, result: nil, error: "unauthorized: the secret is wrong, used or expired")
                }
                logger.info("nip46.connected", metadata: ["client": "\(client.prefix(12))"])
                remember(client, of: record)
                return NIP46.Response(id: request.id, result: "ack")
            }
            // Anyone else gets silence: the signer does not exist for them.
            guard let connected = try await store.bunkerClient(userID: userID, clientPubkey: client) else { return nil }
            remember(client, of: record)
            try await store.touchBunkerClient(userID: userID, clientPubkey: client, at: at)
            switch request.method {
            case "ping":
                return NIP46.Response(id: request.id, result: "pong")
            case "get_public_key":
                return NIP46.Response(id: request.id, result: try await custody.publicKey(of: userID).hex)
            case "switch_relays":
                // Without --relay there is only the built-in relay: stay where you are (null).
                guard let relays = switchRelays else { return NIP46.Response(id: request.id, result: nil) }
                let list = try JSONText.data(relays)
                return NIP46.Response(id: request.id, result: String(decoding: list, as: UTF8.self))
            case "logout":
                try await disconnect(userID: userID, clientPubkey: client)
                return NIP46.Response(id: request.id, result: "ack")
            case "sign_event", "nip04_encrypt", "nip04_decrypt", "nip44_encrypt", "nip44_decrypt":
                let address = BunkerAddress(
                    signer: record.pubkey, client: client, encryption: encryption, request: request,
                    name: connected.name)
                return try await sign(address, userID: userID, sealingWith: record.passkeySealed ? key : nil)
            default:
                return NIP46.Response(id: request.id, result: nil, error: "unknown method \(request.method.prefix(32))")
            }
        } catch StoreError.unavailable, StoreError.database {
            // Nothing was done (a signature is never answered without its audit entry): the
            // client may send it again, as an HTTP client retries a 503.
            logger.warning("nip46.store_unavailable", metadata: ["method": "\(request.method.prefix(32))"])
            return Self.errorResponse(request.id, KeyfobError.databaseUnavailable)
        } catch {
            logger.warning("nip46.failed", metadata: ["method": "\(request.method.prefix(32))"])
            return NIP46.Response(id: request.id, result: nil, error: "the signer failed; try again")
        }
    }

    /// Counts a refused `connect`; one `nip46.connect_refused` line a minute says how many.
    private func noteRefusedConnect(at: Date) {
        if let summary = Self.countOncePerMinute(refusedCount, at: at) {
            logger.notice("nip46.connect_refused", metadata: ["count": "\(summary)", "per": "minute"])
        }
    }

    /// A request for a shut sealed signer from a key that never connected to it: dropped, counted.
    private func noteRefusedStranger(at: Date) {
        if let summary = Self.countOncePerMinute(refusedStrangers, at: at) {
            logger.notice("nip46.stranger_refused", metadata: ["count": "\(summary)", "per": "minute"])
        }
    }

    /// Counts one; once a minute, the count since the last summary (to log), else nil.
    private static func countOncePerMinute(_ counter: NIOLockedValueBox<(count: Int, since: Date)>, at: Date) -> Int? {
        counter.withLockedValue { state in
            state.count += 1
            guard at.timeIntervalSince(state.since) >= 60 else { return nil }
            defer { state = (0, at) }
            return state.count
        }
    }

    /// Ends a client's connection, forgets what the user allowed it and cancels what it left waiting.
    @discardableResult
    func disconnect(userID: String, clientPubkey: String) async throws -> Bool {
        try await store.deleteBunkerClient(
            userID: userID, clientPubkey: clientPubkey, client: BunkerAddress.clientIdentifier(clientPubkey))
    }

}
