import Foundation
import Hummingbird
import KeyfobStore
import Logging
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
    let store: any KeyfobStore = try store ?? {
        try configuration.prepareDataDirectory()
        return try SQLiteStore(path: configuration.sqlitePath)
    }()
    let router = buildRouter(configuration: configuration, store: store, clock: clock, challenges: challenges, logger: logger)
    return Application(
        router: router,
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "keyfob"),
        logger: logger)
}

/// The routes alone, for tests that talk to the router directly.
public func buildRouter(
    configuration: ServerConfiguration,
    store: any KeyfobStore,
    clock: @escaping @Sendable () -> Date = { Date() },
    challenges: ChallengeGenerator = .live,
    logger: Logger = Logger(label: "keyfob")
) -> Router<BasicRequestContext> {
    let router = Router(context: BasicRequestContext.self)
    router.add(middleware: ErrorMiddleware())
    router.add(middleware: FileMiddleware(configuration.publicDirectory, searchForIndexHtml: true, logger: logger))
    let events = EventLog(logger: logger)
    let sessions = Sessions(store: store, configuration: configuration, now: clock)
    CeremonyController(store: store, configuration: configuration, sessions: sessions, keys: CredentialKeyCache(),
                       events: events, challenges: challenges, now: clock).addRoutes(to: router)
    AccountController(store: store, sessions: sessions, events: events, now: clock).addRoutes(to: router)
    router.get("/healthz") { _, _ -> Response in
        do {
            try await store.healthCheck()
            return jsonResponse(["status": "ok"])
        } catch {
            return jsonResponse(["status": "unavailable"], status: .serviceUnavailable)
        }
    }
    return router
}
