import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import KeyfobCrypto
import KeyfobPostgres
import KeyfobStore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import ServiceLifecycle
import WebAuthn

/// Assembles the Keyfob application: storage chosen once, routes, static pages.
///
/// - Parameters:
///   - configuration: validated settings.
///   - store: storage to use; nil opens the one `configuration.database` names.
///   - clock: the time source (tests move it).
///   - challenges: where challenges come from (tests fix them).
public func buildApplication(
    configuration: ServerConfiguration,
    store: (any KeyfobStore)? = nil,
    clock: @escaping @Sendable () -> Date = { Date() },
    challenges: ChallengeGenerator = .live,
    logger: Logger = Logger(label: "keyfob")
) async throws -> some ApplicationProtocol {
    try configuration.validate()
    var configuration = configuration
    if let directory = configuration.attestationRootsDirectory {
        configuration.trustAnchors = try AttestationRoots.load(from: directory)
    }
    try configuration.prepareDataDirectory()
    var services: [any Service] = []
    let store: any KeyfobStore = try store ?? openStore(configuration, logger: logger, runsPool: false)
    if let postgres = store as? PostgresStore, !postgres.runsOwnPool {
        // First in the list: services stop in reverse order, so the pool outlives every user of it.
        services.append(DatabasePoolService(store: postgres))
    }
    var (masterKey, created) = try MasterKeyFile.load(configuration)
    // The vault keeps only keys derived from it: the master key leaves this function's memory here
    // (wiped) and the configuration the controllers hold does not carry it.
    configuration.masterKey = nil
    defer { wipe(&masterKey) }
    if created {
        logger.notice(
            "created a new master key; back it up: without it no stored nostr key can be opened",
            metadata: ["file": "\(configuration.effectiveMasterKeyFile)"])
    }
    let vault = try KeyVault(masterKey: masterKey)
    let admins = Admins(namedSince: [:], store: store)
    // What start-up reads and writes in the database: the master key's check value, when the
    // operators were named, the first admin token.
    let settings = configuration
    @Sendable func startUp() async throws {
        try await KeyCustody.checkMasterKey(vault, store: store)
        // Polkadot keys kept under a key derived from the nostr key (before #55) move to their own.
        let moved = try await SubstrateCustody.migrate(
            custody: KeyCustody(store: store, vault: vault, now: clock, logger: logger), store: store, now: clock)
        if moved > 0 { logger.notice("moved Polkadot keys under their own master-key purpose key", metadata: ["accounts": "\(moved)"]) }
        try await admins.load(settings.admins, now: clock())
        for line in await admins.describe() { logger.notice("admin \(line)") }
        if let path = try await AdminToken.ensure(store: store, configuration: settings) {
            logger.notice(
                "created the dashboard's admin token; read it once from the file, then delete the file",
                metadata: ["file": "\(path)"])
        }
    }
    let gate: ReadinessGate
    if let postgres = store as? PostgresStore {
        // Listen first: /healthz answers 503 (and every other route too) until the database is
        // reachable and start-up has run; a wrong master key still stops the server then.
        gate = ReadinessGate(open: false)
        services.append(
            StartUpService(logger: logger) {
                try await postgres.start()
                try await startUp()
                gate.openNow()
            })
    } else {
        try await startUp()
        gate = ReadinessGate(open: true)
    }
    let hub = RelayHub()
    // External relays: the --relay ones and those nostrconnect:// clients name (one instance holds them).
    let external = ExternalRelays(
        configured: configuration.relays, store: store, hub: hub, logger: logger, now: clock,
        policy: configuration.relayAddressPolicy)
    services.append(external)
    services.append(BunkerReplyQueue(store: store, hub: hub, interval: 0.5, now: clock, logger: logger))
    // One descriptor budget for both listeners, with room kept for what Keyfob opens itself.
    let outgoing = (try? configuration.postgresSettings())?.map(\.maxConnections).map { $0 + 2 } ?? 8
    let budget = ConnectionBudget.make(
        total: configuration.maxConnections, relayEnabled: configuration.effectiveNIP46Port != nil,
        outgoing: outgoing + ExternalRelays.maxLinks)
    if let relayPort = configuration.effectiveNIP46Port {
        services.append(buildRelayApplication(configuration: configuration, hub: hub, logger: logger, maxConnections: budget.relay))
        logger.info("NIP-46 relay listening", metadata: ["address": "ws://\(configuration.host):\(relayPort)/nip46"])
    }
    let connections = ConnectionCounter()
    let routerServices = RouterServices()
    let router = buildRouter(
        configuration: configuration, store: store, vault: vault, clock: clock,
        challenges: challenges, logger: logger, admins: admins, connections: connections, gate: gate,
        hub: hub, external: external, services: routerServices)
    services += routerServices.all
    let headerTimeout = TimeAmount.seconds(Int64(configuration.headerTimeout))
    let bodyTimeout = TimeAmount.seconds(Int64(configuration.bodyTimeout))
    let maxConnections = budget.http
    let addresses = AddressConnections(
        limit: configuration.maxConnectionsPerAddress ?? AddressConnections.defaultLimit(budget: maxConnections),
        ipv6Prefix: configuration.ipv6Prefix, trustedProxies: configuration.trustedProxies,
        cappedShare: AddressConnections.cappedShare(budget: maxConnections))
    logger.info(
        "connection limits",
        metadata: [
            "maxConnections": "\(maxConnections)", "perAddress": "\(addresses.limit)", "reserve": "\(maxConnections - addresses.cappedShare)",
            "nip46Connections": "\(budget.relay)",
            "descriptorReserve": "\(budget.reserve)", "descriptorLimit": "\(budget.descriptorLimit)",
            "headerTimeout": "\(configuration.headerTimeout)s",
            "bodyTimeout": "\(configuration.bodyTimeout)s",
        ])
    let guarded = !configuration.benchWithout.contains("guard")
    return Application(
        router: router,
        server: .http1(
            configuration: .init(
                additionalChannelHandlers: guarded
                    ? [
                        ConnectionGuard(
                            headerTimeout: headerTimeout, bodyTimeout: bodyTimeout, connections: connections, addresses: addresses)
                    ] : [],
                idleTimeout: nil,
                httpDecoderConfiguration: .init(maxHeaderFieldSize: 16 * 1024, maxHeaderListSize: 32 * 1024, maxHeaderFieldCount: 100))),
        configuration: .init(
            address: .hostname(configuration.host, port: configuration.port), serverName: "keyfob",
            backlog: 1024, availableConnectionsDelegate: MaximumAvailableConnections(maxConnections)),
        services: services + [ExpirySweeper(store: store, interval: configuration.sweepInterval, now: clock, logger: logger)],
        logger: logger)
}

/// The store `configuration.database` names: SQLite (a file, or memory) or PostgreSQL (not
/// connected yet: `PostgresStore.start()` connects and migrates, retrying while it is down).
/// `runsPool: false`: PostgreSQL's pool is left for the caller to run (`DatabasePoolService`).
public func openStore(_ configuration: ServerConfiguration, logger: Logger, runsPool: Bool = true) throws -> any KeyfobStore {
    if let postgres = try configuration.postgresSettings() {
        var databaseLogger = logger
        databaseLogger[metadataKey: "database"] = "\(postgres.redacted)"
        return PostgresStore(settings: postgres, logger: databaseLogger, runsPool: runsPool)
    }
    return try SQLiteStore(path: configuration.sqlitePath, maxLiveChallenges: configuration.maxLiveChallenges)
}

/// The store for an operator command: opened and migrated once, or an error that says why.
public func openStoreForCommand(_ configuration: ServerConfiguration) async throws -> any KeyfobStore {
    let store = try openStore(configuration, logger: Logger(label: "keyfob"))
    if let postgres = store as? PostgresStore {
        do { try await postgres.migrate() } catch StoreError.unavailable(let reason) {
            throw ServerConfiguration.Invalid(description: "cannot reach \(configuration.databaseDescription): \(reason)")
        }
    }
    return store
}

/// PostgreSQL's connection pool as a service of the server's group: it stops when the group does,
/// after every service that uses it (it is first in the list), and never outlives the process's
/// shutdown in a task of its own.
struct DatabasePoolService: Service {
    let store: PostgresStore

    func run() async throws {
        // The pool ends when its task is cancelled: at graceful shutdown, once the others are done.
        await cancelWhenGracefulShutdown { await store.runPool() }
    }
}

/// Runs start-up once the server listens; when it fails (a wrong master key) the server stops.
struct StartUpService: Service {
    let logger: Logger
    let body: @Sendable () async throws -> Void

    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown { try await body() }
        } catch is CancellationError {
            return
        } catch {
            logger.critical("start-up failed; stopping: \(error)")
            throw error
        }
        // A service that returns ends the group: stay until shutdown.
        try? await gracefulShutdown()
    }
}

/// Services the routes need running beside them (the NIP-46 bunker): collected while the router is
/// built, then run by the application's service group.
public final class RouterServices: @unchecked Sendable {
    public private(set) var all: [any Service] = []
    public init() {}
    func append(_ service: any Service) { all.append(service) }
}

/// The routes, for the server and for tests that talk to the router directly; what must run beside
/// them goes into `services`.
public func buildRouter(
    configuration: ServerConfiguration,
    store: any KeyfobStore,
    vault: KeyVault,
    clock: @escaping @Sendable () -> Date = { Date() },
    challenges: ChallengeGenerator = .live,
    logger: Logger = Logger(label: "keyfob"),
    admins: Admins? = nil,
    connections: ConnectionCounter = ConnectionCounter(),
    gate: ReadinessGate = ReadinessGate(open: true),
    hub: RelayHub = RelayHub(),
    external: ExternalRelays? = nil,
    services: RouterServices = RouterServices()
) -> Router<KeyfobRequestContext> {
    let router = Router(context: KeyfobRequestContext.self)
    let metrics = KeyfobMetrics()
    let without = configuration.benchWithout
    let log =
        without.contains("log")
        ? nil
        : RequestLog(
            addresses: ClientAddress(trustedProxies: Set(configuration.trustedProxies)), logger: logger,
            metrics: without.contains("metrics") ? nil : metrics)
    let files =
        without.contains("files")
        ? nil
        : FileMiddleware<KeyfobRequestContext, LocalFileSystem>(configuration.publicDirectory, searchForIndexHtml: true, logger: logger)
    let routeMethods = RouteMethods()
    router.add(
        middleware: FrontDoorMiddleware(
            log: log, rpID: configuration.rpID, files: files, headers: !without.contains("headers"), routes: routeMethods))
    // With SQLite the gate is open before the server listens: no layer for it then.
    if !gate.open { router.add(middleware: ReadinessMiddleware(gate: gate)) }
    let feed = ActivityFeed()
    let events = EventLog(logger: logger, metrics: metrics, feed: feed, now: clock)
    let sessions = Sessions(store: store, configuration: configuration, now: clock)
    let custody = KeyCustody(store: store, vault: vault, now: clock, logger: logger)
    let dispatcher = SignerDispatcher(
        custody: custody, store: store,
        limiter: RateLimiter(rate: configuration.signRate, per: 60), logger: logger, now: clock,
        metrics: metrics, feed: feed)
    let passkeys = PasskeyCheck(store: store, configuration: configuration, metrics: metrics, now: clock)
    let limits = ClientLimits(configuration: configuration)
    let device = ReturningDevice(vault: vault)
    let sealedAccount = SealedAccountHint(vault: vault)
    let ceremonies = CeremonyController(
        store: store, configuration: configuration, sessions: sessions, passkeys: passkeys,
        events: events, challenges: challenges, custody: custody,
        limits: limits, now: clock, metrics: metrics, device: device, sealedAccount: sealedAccount,
        signInChallenges: SealedChallenges(vault: vault, rpID: configuration.rpID))
    ceremonies.addRoutes(to: router)
    let confirmations = ceremonies.confirmations
    ConfirmationController(confirmations: confirmations, sessions: sessions).addRoutes(to: router)
    let grants = Grants(store: store, now: clock)
    let pending = PendingRequests(store: store, vault: vault, now: clock)
    let bunker = Bunker(
        store: store, vault: vault, custody: custody, hub: hub, dispatcher: dispatcher, grants: grants,
        pending: pending, origin: configuration.effectiveOrigins.first ?? "",
        switchRelays: configuration.relays.isEmpty ? nil : configuration.bunkerRelays, external: external,
        relayPolicy: configuration.relayAddressPolicy, configuredRelays: configuration.relays,
        logger: logger, now: clock)
    bunker.attach()
    services.append(bunker)
    let accountStreams = SubstrateAccountEvents()
    ApprovalController(
        store: store, configuration: configuration, sessions: sessions, dispatcher: dispatcher, custody: custody,
        grants: grants, passkeys: passkeys, limits: limits, confirmations: confirmations, pending: pending,
        bunker: bunker, streams: accountStreams, now: clock
    ).addRoutes(to: router)
    let names = PasskeyNames(publicDirectory: configuration.publicDirectory)
    AccountController(
        store: store, sessions: sessions, events: events, custody: custody,
        names: names, confirmations: confirmations, streams: accountStreams, dispatcher: dispatcher, now: clock
    ).addRoutes(to: router)
    // Live streams a session, an account and an address hold open (dashboard and account streams).
    let streamSlots = StreamSlots()
    AdminController(
        store: store, configuration: configuration, sessions: sessions,
        admins: admins ?? Admins(namedSince: [:], store: store), feed: feed, connections: connections,
        names: names, confirmations: confirmations, streamSlots: streamSlots, logger: logger, now: clock
    ).addRoutes(to: router)
    BunkerController(bunker: bunker, sessions: sessions, configuration: configuration).addRoutes(to: router)
    // Before SignerController: its `/api/signer/:method` would otherwise take `seal` and `unseal`.
    SealController(
        sessions: sessions, confirmations: confirmations, custody: custody, dispatcher: dispatcher, store: store,
        configuration: configuration, sealedAccount: sealedAccount, logger: logger, now: clock
    ).addRoutes(to: router)
    SignerController(
        sessions: sessions, dispatcher: dispatcher, custody: custody, store: store,
        configuration: configuration, confirmations: confirmations, now: clock
    ).addRoutes(to: router)
    PolkadotController(
        store: store, sessions: sessions, substrate: SubstrateCustody(custody: custody, store: store, now: clock),
        dispatcher: dispatcher, confirmations: confirmations, configuration: configuration, passkeys: passkeys,
        events: accountStreams, streamSlots: streamSlots, now: clock
    ).addRoutes(to: router)
    WellKnownController(configuration: configuration).addRoutes(to: router)
    // Metrics are for the operator's scraper: loopback peers and --metrics-from addresses only,
    // and never through a proxy (behind one every request comes from 127.0.0.1): a request with
    // forwarding headers is refused whatever its peer.
    let scrapers = Set(["127.0.0.1", "::1"] + configuration.metricsFrom)
    let forwarding = ["X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Real-IP", "Forwarded"].compactMap { HTTPField.Name($0) }
    router.get("/metrics") { request, context -> Response in
        guard let peer = context.remoteAddress?.ipAddress, scrapers.contains(peer),
            !forwarding.contains(where: { request.headers[$0] != nil })
        else {
            throw KeyfobError(.unauthorized, "metrics are served to the operator's scraper only (--metrics-from)", status: .forbidden)
        }
        return metrics.exposition()
    }
    // The store's answer is kept a second: /healthz is public, and its check writes (SQLite).
    let lastHealth = NIOLockedValueBox<(at: ContinuousClock.Instant, healthy: Bool)?>(nil)
    router.get("/healthz") { _, _ -> Response in
        // Not ready until start-up (migrations, the master-key check) has run: a load balancer
        // must not send sign-ins to an instance that would answer them 503.
        guard gate.open else { return jsonResponse(["status": "starting"], status: .serviceUnavailable) }
        // One check a second: the first request past it stamps the time before checking, so the
        // ones arriving meanwhile take the last answer instead of queuing writes of their own.
        let (cached, mustCheck) = lastHealth.withLockedValue { last -> (Bool, Bool) in
            if let last, ContinuousClock.now - last.at < .seconds(1) { return (last.healthy, false) }
            let previous = last?.healthy ?? true
            last = (ContinuousClock.now, previous)
            return (previous, true)
        }
        var healthy = cached
        if mustCheck {
            healthy = true
            do { try await store.healthCheck() } catch { healthy = false }
            lastHealth.withLockedValue { $0 = (ContinuousClock.now, healthy) }
        }
        // 503 with a reason when the store cannot read or write (a full disk, a read-only file,
        // PostgreSQL away): the instance cannot keep what it acknowledges, so it takes no traffic.
        return healthy
            ? jsonResponse(["status": "ok"])
            : jsonResponse(["status": "unavailable", "reason": "the store cannot read or write"], status: .serviceUnavailable)
    }
    if configuration.benchEcho { addBenchEchoRoutes(to: router, maxBodySize: configuration.maxBodySize) }
    routeMethods.set(router.routes.map { ($0.path.description, $0.method) })
    return router
}

/// The ceiling the load harness compares against (`--bench-echo`, hidden): the same stack and
/// middleware answering a POST of a login's size, and a GET, with no work behind them — the same
/// bytes as the bare Hummingbird floor (Benchmarks/floor) answers, so the two differ only by
/// what Keyfob adds to every request.
func addBenchEchoRoutes(to router: Router<KeyfobRequestContext>, maxBodySize: Int) {
    router.post("/bench/echo") { request, _ -> Response in
        let body = try await request.bodyBytes(limit: maxBodySize)
        return jsonResponse(body: ByteBuffer(string: #"{"bytes":\#(body.count),"verified":true}"#))
    }
    router.get("/bench/echo") { _, _ -> Response in jsonResponse(body: ByteBuffer(string: #"{"status":"ok"}"#)) }
}
