import Dispatch
import Logging
import PostgresNIO
import Synchronization

/// Noticing a long outage from the calls that fail, and watching for the database's return.
///
/// postgres-nio's pool backs off between connection attempts up to a minute (its
/// `calculateBackoff`, not configurable), so after a long outage it could wait many seconds more
/// once PostgreSQL is back. While calls keep failing, one watcher task asks the pool in use, and
/// failing that a fresh pool, every half second; a fresh pool that answers replaces the old one.
final class PoolRecovery: Sendable {
    /// Calls must have failed this long, with none answered between, before anything is replaced:
    /// a busy database that answers some calls is not an outage, and a stall behind a lock that
    /// long is rare. (The pool's own waits grow past a second only after ~10 s of failures.)
    static let suspectAfter: Duration = .seconds(10)
    static let probeEvery: Duration = .milliseconds(500)

    /// Since when calls have failed with none answered between (uptime nanoseconds; 0: not failing).
    private let failingSince = Atomic<UInt64>(0)
    private let state = Mutex<(watcher: Task<Void, Never>?, cancelled: Bool, lastReplaced: UInt64)>((nil, false, 0))

    private static var now: UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// A call was answered: no outage (one load on the hot path).
    func answered() {
        if failingSince.load(ordering: .relaxed) != 0 { failingSince.store(0, ordering: .relaxed) }
    }

    /// A call found the database away.
    func failed() {
        _ = failingSince.compareExchange(expected: 0, desired: Self.now, ordering: .relaxed)
    }

    /// How long calls have been failing; nil when they are not.
    var failingFor: Duration? {
        let since = failingSince.load(ordering: .relaxed)
        return since == 0 ? nil : .nanoseconds(Int64(Self.now &- since))
    }

    /// Starts `watch` unless a watcher runs already (or the store was shut down).
    func watchIfIdle(_ watch: @escaping @Sendable () async -> Void) {
        state.withLock { state in
            guard state.watcher == nil, !state.cancelled else { return }
            state.watcher = Task {
                await watch()
                self.state.withLock { $0.watcher = nil }
            }
        }
    }

    /// Whether a replacement may happen now (and if so, counts it): once while calls keep failing.
    /// Should the database be stalled rather than away (every connection waiting on a lock), one
    /// fresh pool's connections are added, not one every few seconds.
    func mayReplace() -> Bool {
        let since = failingSince.load(ordering: .relaxed)
        return state.withLock { state in
            guard since != 0, state.lastReplaced < since else { return false }
            state.lastReplaced = Self.now
            return true
        }
    }

    func cancel() {
        let watcher = state.withLock { state in
            state.cancelled = true
            return state.watcher
        }
        watcher?.cancel()
    }
}

extension PostgresStore {
    /// Records a failed call, and starts watching for the database's return.
    func noteUnavailable() {
        recovery.failed()
        recovery.watchIfIdle { [weak self] in await self?.watchForReturn() }
    }

    /// While calls keep failing: once they have for `suspectAfter`, asks the pool in use for
    /// `SELECT 1`; when it cannot answer, a fresh pool is asked, and if it answers, it takes over.
    func watchForReturn() async {
        while !Task.isCancelled, let failing = recovery.failingFor {
            if failing >= PoolRecovery.suspectAfter {
                let current = client
                if (try? await bounded(.milliseconds(300), { [logger] in try await current.query("SELECT 1", logger: logger).collect().count }))
                    != nil
                {
                    recovery.answered()
                    return
                }
                // The probe opens one connection (not the `pool_min` a pool keeps): it may run every
                // half second while the database struggles. Only a pool that takes over opens them all.
                var probing = settings.clientConfiguration
                probing.options.minimumConnections = 0
                let candidate = PostgresClient(configuration: probing)
                let runner = Task { await candidate.run() }
                let answers =
                    (try? await bounded(.seconds(1), { [logger] in try await candidate.query("SELECT 1", logger: logger).collect().count }))
                    != nil
                runner.cancel()
                if answers, recovery.mayReplace() {
                    let fresh = PostgresClient(configuration: settings.clientConfiguration)
                    let freshRunner = Task { await fresh.run() }
                    if replacePool(with: fresh, runner: freshRunner) {
                        logger.notice(
                            "database back: a fresh connection pool took over from the one waiting to retry",
                            metadata: ["pool": "\(poolGeneration)", "failingFor": "\(failing)"])
                        recovery.answered()
                        return
                    }
                    freshRunner.cancel()
                }
            }
            try? await Task.sleep(for: PoolRecovery.probeEvery)
        }
    }

    /// Makes `client` the pool queries use and ends the old one (its waiting calls fail as
    /// unavailable); false when the store is shutting down.
    func replacePool(with client: PostgresClient, runner: Task<Void, Never>) -> Bool {
        let old: Task<Void, Never>?? = pool.withLock { generation in
            guard !generation.stopped else { return nil }
            let previous = generation.runner
            generation = PoolGeneration(client: client, runner: runner, number: generation.number + 1)
            return .some(previous)
        }
        guard let old else { return false }
        old?.cancel()
        return true
    }
}
