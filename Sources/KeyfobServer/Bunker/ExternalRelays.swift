import Foundation
import HummingbirdWSClient
import KeyfobStore
import Logging
import NIOConcurrencyHelpers
import Nostr
import ServiceLifecycle

/// The bunker on relays it does not run: the `--relay` ones, and those `nostrconnect://` clients
/// named. One link per relay, kept open (reconnects with backoff and jitter, subscribes again);
/// what arrives goes into the hub (which drops events it handed on already, so one seen on several
/// relays is answered once); the bunker's replies go out to the configured relays and to the
/// relays of the client they answer. With several instances on one PostgreSQL database, one holds
/// the links at a time (`holdingRole`), so a request is never answered twice.
public final class ExternalRelays: Service, Sendable {
    let configured: [String]
    let store: any BunkerStore
    let hub: RelayHub
    let logger: Logger
    let now: @Sendable () -> Date
    /// How often the signer keys and the nostrconnect clients' relays are read again.
    let refreshInterval: TimeInterval

    private struct State {
        var links: [String: RelayLink] = [:]
        /// (signer key, client key) → the relays that client named: a reply goes where the client
        /// that user connected listens. Keyed by both, as two accounts may connect the same client key.
        var clientRelays: [String: [String]] = [:]
        /// Every active signer key: what the configured relays are asked for.
        var signers: [String] = []
        /// A client-named relay → the signer keys of the users whose clients named it: all it is asked for.
        var namedBy: [String: Set<String>] = [:]
        /// User id → signer key (a user's signer key does not change).
        var signerOfUser: [String: String] = [:]
        /// Starts links; set while this instance holds the role (nil: another holds it).
        var starter: AsyncStream<RelayLink>.Continuation?
        /// Replies to clients whose relays this instance has not read yet, waiting for that read:
        /// one reader works through them, and at most `pendingLookups` wait (the newest are kept).
        var lookups: AsyncStream<Lookup>.Continuation?
        /// The cap on links was logged (once a run).
        var warnedAtCap = false

        /// What the relay at `url` is asked for: every signer on a configured relay, else only
        /// the signers of the users whose clients named it.
        func keys(for url: String, configured: [String]) -> [String] {
            configured.contains(url) ? signers : (namedBy[url] ?? []).sorted()
        }
    }
    private let state = NIOLockedValueBox(State())
    /// Keys per REQ: relays cap the values of a filter.
    static let keysPerSubscription = 200
    static let maxSigners = 20_000
    /// Links held at most (configured relays and nostrconnect clients' relays together): each is
    /// a descriptor, kept out of the listeners' budget (`ConnectionBudget`).
    static let maxLinks = 64
    /// Which client-named relays may be dialled; checked again before every connection.
    let policy: RelayAddressPolicy

    init(
        configured: [String], store: any BunkerStore, hub: RelayHub, logger: Logger, now: @escaping @Sendable () -> Date,
        policy: RelayAddressPolicy = RelayAddressPolicy(allowsLocal: true), refreshInterval: TimeInterval = 2
    ) {
        self.configured = configured
        self.store = store
        self.hub = hub
        self.logger = logger
        self.now = now
        self.policy = policy
        self.refreshInterval = refreshInterval
    }

    static func clientKey(signer: String, client: String) -> String { signer + ":" + client }

    /// A reply to a client whose relays are not known here yet.
    struct Lookup: Sendable {
        let signer: String
        let client: String
        let frame: String
    }

    /// Replies that may wait for their client's relays to be read: beyond this the oldest are
    /// dropped (they went to the configured relays already).
    static let pendingLookups = 256

    public func run() async throws {
        hub.addOutlet { [self] event in self.send(event) }
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            do {
                // Holding waits on its links for good, and taking the role may wait on the database:
                // shutting down ends either at once.
                let held = try await cancelWhenGracefulShutdown { [self] in
                    try await store.holdingRole("nip46-relays") { try await self.hold() }
                }
                if !held { logger.debug("another instance holds the external relays") }
            } catch is CancellationError {
                break
            } catch  where !Task.isShuttingDownGracefully {
                logger.warning("external relays: \(error)")
            } catch {
                break  // shutting down: what failed was cut short on purpose
            }
            state.withLockedValue { state in
                for link in state.links.values { link.stop() }
                state.links = [:]
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(5)) }
        }
    }

    /// While this instance holds the role: keeps the links and their subscriptions current.
    private func hold() async throws {
        let (starts, starter) = AsyncStream.makeStream(of: RelayLink.self)
        let (lookups, lookup) = AsyncStream.makeStream(of: Lookup.self, bufferingPolicy: .bufferingNewest(Self.pendingLookups))
        state.withLockedValue { ($0.starter, $0.lookups) = (starter, lookup) }
        defer {
            state.withLockedValue { ($0.starter, $0.lookups) = (nil, nil) }
            lookup.finish()
        }
        logger.info("holding the external NIP-46 relays", metadata: ["relays": "\(configured.joined(separator: " "))"])
        try await withThrowingTaskGroup(of: Void.self) { group in
            defer { group.cancelAll() }
            group.addTask { [self] in
                while !Task.isCancelled {
                    try await refresh()
                    try await Task.sleep(for: .seconds(refreshInterval))
                }
                starter.finish()
            }
            group.addTask { [self] in
                for await waiting in lookups { await deliver(waiting) }
            }
            for await link in starts { group.addTask { await link.run() } }
            try await group.next()
        }
    }

    /// The signer key of `userID`, read once.
    private func signer(ofUser userID: String) async throws -> String? {
        if let known = state.withLockedValue({ $0.signerOfUser[userID] }) { return known }
        guard let record = try await store.bunkerSigner(ofUser: userID) else { return nil }
        state.withLockedValue { $0.signerOfUser[userID] = record.pubkey }
        return record.pubkey
    }

    /// Reads the signer keys and the nostrconnect clients' relays again; links follow.
    func refresh() async throws {
        let signers = try await store.activeBunkerSigners(now: now(), limit: Self.maxSigners)
        let clients = try await store.nostrConnectClients()
        var wanted = Set(configured)
        var clientRelays: [String: [String]] = [:]
        var namedBy: [String: Set<String>] = [:]
        for client in clients {
            guard let signer = try await signer(ofUser: client.userID) else { continue }
            clientRelays[Self.clientKey(signer: signer, client: client.clientPubkey)] = client.relays
            for relay in client.relays { namedBy[relay, default: []].insert(signer) }
            wanted.formUnion(client.relays)
        }
        let links: [(RelayLink, [String])] = state.withLockedValue { state in
            state.clientRelays = clientRelays
            state.signers = signers
            state.namedBy = namedBy
            for (url, link) in state.links where !wanted.contains(url) {
                link.stop()
                state.links[url] = nil
            }
            return wanted.sorted { configured.contains($0) && !configured.contains($1) }.compactMap { url in
                link(to: url, in: &state).map { ($0, state.keys(for: url, configured: configured)) }
            }
        }
        for (link, keys) in links { link.subscribe(keys) }
    }

    /// The link to `url`, started when new (only while holding); nil past `maxLinks`.
    private func link(to url: String, in state: inout State) -> RelayLink? {
        if let link = state.links[url] { return link }
        guard state.links.count < Self.maxLinks else {
            if !state.warnedAtCap {
                state.warnedAtCap = true
                logger.warning("external relays: at the cap of \(Self.maxLinks) links; relays past it are not linked")
            }
            return nil
        }
        let link = RelayLink(url: url, hub: hub, logger: logger, now: now, policy: configured.contains(url) ? nil : policy)
        link.subscribe(state.keys(for: url, configured: configured))
        state.links[url] = link
        state.starter?.yield(link)
        return link
    }

    /// A reply of the bunker: to the configured relays, and to the relays of the client it answers
    /// (read from the database when the client is new to this instance).
    func send(_ event: Event) {
        let signer = event.pubkey.hex
        let client = event.tags.first { $0.count >= 2 && $0[0] == "p" }?[1]
        let frame = "[\"EVENT\",\(event.json)]"
        let (links, known): ([RelayLink], Bool) = state.withLockedValue { state in
            guard state.starter != nil else { return ([], true) }
            var urls = Set(configured)
            let relays = client.flatMap { state.clientRelays[Self.clientKey(signer: signer, client: $0)] }
            urls.formUnion(relays ?? [])
            return (urls.compactMap { link(to: $0, in: &state) }, relays != nil)
        }
        for link in links { link.send(frame) }
        guard !known, let client else { return }
        _ = state.withLockedValue { $0.lookups }?.yield(Lookup(signer: signer, client: client, frame: frame))
    }

    /// A reply to a client new to this instance, once its relays are read (once per client: the
    /// next replies find them known).
    private func deliver(_ waiting: Lookup) async {
        let key = Self.clientKey(signer: waiting.signer, client: waiting.client)
        var relays = state.withLockedValue { $0.clientRelays[key] }
        if relays == nil {
            guard let owner = try? await store.bunkerSigner(pubkey: waiting.signer),
                let record = try? await store.bunkerClient(userID: owner.userID, clientPubkey: waiting.client), !record.relays.isEmpty
            else { return }
            relays = record.relays
        }
        let links: [RelayLink] = state.withLockedValue { state in
            state.clientRelays[key] = relays
            return (relays ?? []).filter { !configured.contains($0) }.compactMap { link(to: $0, in: &state) }
        }
        for link in links { link.send(waiting.frame) }
    }

    /// Links to a client's relays at once (it just connected through them) and the client's
    /// replies routed there; returns when each is connected or `timeout` has passed.
    func ensure(_ relays: [String], clientPubkey: String, signer: String, timeout: TimeInterval = 5) async {
        let links: [(RelayLink, [String])] = state.withLockedValue { state in
            guard state.starter != nil else { return [] }
            state.clientRelays[Self.clientKey(signer: signer, client: clientPubkey)] = relays
            for relay in relays { state.namedBy[relay, default: []].insert(signer) }
            return relays.compactMap { url in link(to: url, in: &state).map { ($0, state.keys(for: url, configured: configured)) } }
        }
        for (link, keys) in links { link.subscribe(keys) }
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline, !links.allSatisfy(\.0.isConnected) {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }
}

/// One relay connection: subscribe, read, write; reconnects with backoff and jitter.
final class RelayLink: Sendable {
    let url: String
    let hub: RelayHub
    let logger: Logger
    let now: @Sendable () -> Date

    private struct State {
        var queue: AsyncStream<String>.Continuation?
        /// Frames sent while disconnected, sent on the next connection (newest kept).
        var pending: [String] = []
        var keys: [String] = []
        var stopped = false
        var connected = false
        /// When the last event arrived: a new subscription asks from shortly before it.
        var lastSeen: Int64?
    }
    private let state = NIOLockedValueBox(State())
    static let maxPending = 256
    static let maxMessageBytes = 256 * 1024

    /// Checked before every connection (nil: a relay the operator configured).
    let policy: RelayAddressPolicy?

    init(url: String, hub: RelayHub, logger: Logger, now: @escaping @Sendable () -> Date, policy: RelayAddressPolicy? = nil) {
        self.url = url
        self.hub = hub
        self.logger = logger
        self.now = now
        self.policy = policy
    }

    var isConnected: Bool { state.withLockedValue { $0.connected } }

    func stop() {
        state.withLockedValue { state in
            state.stopped = true
            state.queue?.finish()
        }
    }

    func send(_ frame: String) {
        state.withLockedValue { state in
            if let queue = state.queue {
                queue.yield(frame)
            } else {
                state.pending.append(frame)
                if state.pending.count > Self.maxPending { state.pending.removeFirst(state.pending.count - Self.maxPending) }
            }
        }
    }

    /// Subscribes for `keys` (sorted) when they changed; on every (re)connection as well.
    func subscribe(_ keys: [String]) {
        let frames: [String]? = state.withLockedValue { state in
            guard state.keys != keys else { return nil }
            state.keys = keys
            return state.queue == nil ? nil : Self.requests(keys, since: since(state))
        }
        for frame in frames ?? [] { send(frame) }
    }

    private func since(_ state: State) -> Int64 {
        // NIP-46 events are ephemeral; a relay that keeps them anyway must not replay old requests.
        max((state.lastSeen ?? Int64(now().timeIntervalSince1970)) - 10, Int64(now().timeIntervalSince1970) - 60)
    }

    static func requests(_ keys: [String], since: Int64) -> [String] {
        guard !keys.isEmpty else { return [#"["CLOSE","keyfob-0"]"#] }
        return stride(from: 0, to: keys.count, by: ExternalRelays.keysPerSubscription).map { start in
            let chunk = keys[start..<min(start + ExternalRelays.keysPerSubscription, keys.count)]
            let list = chunk.map { "\"\($0)\"" }.joined(separator: ",")
            return ##"["REQ","keyfob-\##(start / ExternalRelays.keysPerSubscription)",{"kinds":[24133],"#p":[\##(list)],"since":\##(since)}]"##
        }
    }

    func run() async {
        var delay: TimeInterval = 0.5
        while !Task.isCancelled && !state.withLockedValue({ $0.stopped }) {
            let started = now()
            do {
                // Resolved again now: a name that pointed outside when pasted may point inside today.
                // (The connection resolves it once more; an egress firewall closes that last gap.)
                if let policy { try await policy.check(url, mustResolve: true) }
                try await WebSocketClient.connect(
                    url: url, configuration: .init(maxFrameSize: Self.maxMessageBytes, autoPing: .enabled(timePeriod: .seconds(30))),
                    logger: logger
                ) { inbound, outbound, _ in
                    let (frames, queue) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(Self.maxPending))
                    let opening: [String] = self.state.withLockedValue { state in
                        state.queue = queue
                        state.connected = true
                        defer { state.pending = [] }
                        return Self.requests(state.keys, since: self.since(state)) + state.pending
                    }
                    self.logger.info("nip46.relay_connected", metadata: ["relay": "\(self.url)"])
                    defer {
                        self.state.withLockedValue { state in
                            state.queue = nil
                            state.connected = false
                        }
                        queue.finish()
                    }
                    for frame in opening { queue.yield(frame) }
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask {
                            for await frame in frames { try await outbound.write(.text(frame)) }
                        }
                        for try await message in inbound.messages(maxSize: Self.maxMessageBytes) {
                            if case .text(let text) = message { self.receive(text) }
                        }
                        queue.finish()
                        group.cancelAll()
                    }
                }
            } catch let refusal as RelayAddressPolicy.Refusal {
                logger.warning("nip46.relay_address_refused", metadata: ["relay": "\(url)", "reason": "\(refusal.reason)"])
                delay = 60  // checked again a minute later: names change
            } catch {
                logger.notice("nip46.relay_unreachable", metadata: ["relay": "\(url)", "error": "\(String(describing: error).prefix(200))"])
            }
            guard !state.withLockedValue({ $0.stopped }) else { return }
            // A connection that lasted a while starts the backoff over.
            if now().timeIntervalSince(started) > 30 { delay = 0.5 }
            let wait = delay * Double.random(in: 0.5...1.5)
            delay = min(delay * 2, 60)
            try? await Task.sleep(for: .seconds(wait))
        }
    }

    /// A relay's message: events for the signer keys go into the hub; the rest is logged.
    func receive(_ text: String) {
        guard let array = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [Any], let type = array.first as? String else { return }
        switch type {
        case "EVENT":
            guard array.count == 3, let object = array[2] as? [String: Any], let event = try? Event.parse(object: object),
                event.kind == NIP46.kind, event.isValid
            else { return }
            state.withLockedValue { $0.lastSeen = max($0.lastSeen ?? 0, event.createdAt) }
            hub.publish(event)
        case "OK":
            if array.count >= 3, array[2] as? Bool == false {
                logger.notice("nip46.relay_refused", metadata: ["relay": "\(url)", "reason": "\(String(describing: array.last ?? "").prefix(120))"])
            }
        case "CLOSED", "NOTICE":
            logger.notice("nip46.relay_notice", metadata: ["relay": "\(url)", "message": "\(text.prefix(200))"])
        default:
            break
        }
    }
}
