import Foundation
import Hummingbird
import KeyfobStore
import Logging
import ServiceLifecycle

/// Deletes expired challenges and sessions on a timer, in bounded batches, so no request ever
/// pays for a flood of abandoned ceremonies and the database stays small.
struct ExpirySweeper: Service {
    let store: any KeyfobStore
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
    var configuration = ServiceGroupConfiguration(
        services: [app], gracefulShutdownSignals: [.sigterm, .sigint], cancellationSignals: [], logger: logger)
    configuration.maximumGracefulShutdownDuration = .seconds(drainSeconds)
    configuration.maximumCancellationDuration = .seconds(5)
    try await ServiceGroup(configuration: configuration).run()
}

/// The most connections to hold at once: below the process's descriptor limit (raised to its
/// hard limit first), so that a flood of held connections cannot starve the listener of
/// descriptors (new clients wait in the accept backlog instead of failing).
public func connectionCap() -> Int {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 900 }
    if limit.rlim_cur < limit.rlim_max {
        var raised = limit
        raised.rlim_cur = limit.rlim_max
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
    }
    let available = Int(clamping: limit.rlim_cur)
    return max(16, min(50_000, available - 128))
}
