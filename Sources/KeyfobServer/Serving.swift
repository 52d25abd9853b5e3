import Foundation
import Hummingbird
import KeyfobStore
import Logging
import ServiceLifecycle

/// Deletes expired challenges and sessions on a timer, in bounded batches, so no request ever
/// pays for a flood of abandoned ceremonies and the database stays small.
struct ExpirySweeper: Service {
    let store: any ChallengeStore
    let interval: TimeInterval
    let now: @Sendable () -> Date
    let logger: Logger
    /// Rows of each kind a batch deletes; other requests run between batches.
    static let batch = 500
    /// Batches a round at most; the rest waits for the next round.
    static let maxBatches = 200

    func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(interval)) }
            guard !Task.isShuttingDownGracefully && !Task.isCancelled else { return }
            await sweepOnce()
        }
    }

    /// One round: batches until nothing is left (or the round's cap). Returns rows removed.
    @discardableResult
    func sweepOnce() async -> Int {
        var removed = 0
        for _ in 0..<Self.maxBatches {
            guard let count = try? await store.sweepExpired(now: now(), limit: Self.batch) else {
                logger.warning("sweep of expired challenges and sessions failed; will retry")
                break
            }
            removed += count
            if count == 0 { break }
            await Task.yield()
        }
        if removed > 0 { logger.debug("swept expired rows", metadata: ["rows": "\(removed)"]) }
        return removed
    }
}

/// Runs the application until SIGTERM or SIGINT, then drains: it stops accepting at once, gives
/// requests in flight `drainSeconds` to finish, then cancels what remains and returns.
public func serve(_ app: some ApplicationProtocol, drainSeconds: Int = 10, logger: Logger) async throws {
    // Services shut down in reverse order: the notice, last in the list, hears of it first.
    var configuration = ServiceGroupConfiguration(
        services: [app, ShutdownNotice(logger: logger, drainSeconds: drainSeconds)], gracefulShutdownSignals: [.sigterm, .sigint],
        cancellationSignals: [], logger: logger)
    configuration.maximumGracefulShutdownDuration = .seconds(drainSeconds)
    // No cancellation deadline in the group: ServiceLifecycle ends the process with a fatal error
    // (SIGILL) when one passes. ShutdownNotice's watchdog exits instead, with a line saying why.
    configuration.maximumCancellationDuration = nil
    try await ServiceGroup(configuration: configuration).run()
    logger.notice("stopped")
}

/// Says "stopping" when a signal asks the server to stop (then "stopped" once every service has),
/// and makes sure it does: were a service still running `drainSeconds` + 5 s later, the process
/// logs which deadline passed and exits with status 1, rather than hang or crash.
struct ShutdownNotice: Service {
    let logger: Logger
    var drainSeconds = 10

    func run() async throws {
        try? await gracefulShutdown()
        logger.notice("stopping: no new connections; requests in flight may finish")
        let logger = self.logger
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(drainSeconds + 5)) {
            logger.critical("still stopping \(drainSeconds + 5) s after the signal; exiting now")
            LogOutput.standardOutput.flush()
            exit(1)
        }
    }
}

/// How many connections each listener may hold, from one budget of file descriptors: the process's
/// open-file limit (the soft limit is raised to the hard one first), less a reserve for what
/// Keyfob opens itself (the database and its WAL, PostgreSQL's pool, links to external relays,
/// log and key files, and the runtime's own reads of `/proc`: libdispatch aborts the process when
/// it cannot open one). A listener at its share stops accepting; new clients wait in the kernel's
/// accept backlog instead of taking the last descriptors.
public struct ConnectionBudget: Sendable, CustomStringConvertible {
    /// Connections the HTTP port holds at most.
    public let http: Int
    /// Connections the NIP-46 relay port holds at most (0 when it is off).
    public let relay: Int
    /// Descriptors kept free for Keyfob's own files and outgoing connections.
    public let reserve: Int
    /// The open-file limit the budget was cut from.
    public let descriptorLimit: Int

    /// Descriptors kept free besides outgoing connections: files, the runtime, headroom.
    public static let baseReserve = 128

    /// - Parameters:
    ///   - total: both listeners together (`--max-connections`); nil: all the descriptors the
    ///     process may have, less the reserve.
    ///   - relayEnabled: whether the NIP-46 listener runs; it gets a quarter of the total.
    ///   - outgoing: descriptors Keyfob's own outgoing connections may take (database pool, relays).
    public static func make(total: Int?, relayEnabled: Bool, outgoing: Int) -> ConnectionBudget {
        let limit = raiseDescriptorLimit()
        let reserve = baseReserve + outgoing
        let available = max(16, min(50_000, limit - reserve))
        let all = total.map { min($0, available) } ?? available
        let relay = relayEnabled ? max(4, all / 4) : 0
        return ConnectionBudget(http: max(8, all - relay), relay: relay, reserve: reserve, descriptorLimit: limit)
    }

    public var description: String { "http \(http), nip46 \(relay), reserve \(reserve) of \(descriptorLimit) descriptors" }

    /// Raises the soft `RLIMIT_NOFILE` to the hard limit; returns the limit now in force.
    static func raiseDescriptorLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)
    }
}
