import Foundation
import KeyfobStore
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import Synchronization

/// The store for several instances: every row in PostgreSQL, so any instance can finish a
/// ceremony, an approval or a session another one began. Same guarantees as `SQLiteStore`
/// (the contract tests run on both): challenges consumed atomically (`DELETE … RETURNING`), the
/// sign counter compare-and-swapped, registration all-or-nothing, expired rows swept in batches.
///
/// Every query binds its values (postgres-nio's extended protocol); nothing is spliced into SQL.
/// Every call is bounded by `settings.timeout`: a database that is down or unreachable makes
/// calls fail with `StoreError.unavailable` (HTTP 503) instead of hanging, and the pool
/// reconnects by itself when it returns.
public final class PostgresStore: KeyfobStore, Sendable {
    let settings: PostgresSettings
    let maxSessionsPerUser: Int
    let logger: Logger
    let readiness = Readiness()
    /// The connection pool in use and the task running it. Replaced after a long outage
    /// (`PoolRecovery`): postgres-nio's pool waits up to a minute between connection attempts
    /// once the database has been away a while, and nothing can hurry it.
    let pool: Mutex<PoolGeneration>
    let recovery: PoolRecovery
    /// Whether the pool runs until `shutdown()` (true) or as long as `runPool()` does.
    let ownsPool: Bool
    /// Sign-ins that arrive together, written in one call (`SignInBatches`).
    let signIns: SignInBatches

    struct PoolGeneration {
        var client: PostgresClient
        var runner: Task<Void, Never>?
        var number = 0
        var stopped = false
    }

    /// The pool every query takes its connection from (read once per call: a replacement takes
    /// effect from the next one).
    var client: PostgresClient { pool.withLock { $0.client } }

    /// Creates the pool (no connection is made yet). Call `start()` (or `migrate()`) before use.
    ///
    /// - Parameter runsPool: true: the pool runs in a task of its own until `shutdown()` (commands,
    ///   tests); false: the caller runs it with `runPool()` — the server does, as a service of its
    ///   group, so that it stops with the others, after them.
    public init(
        settings: PostgresSettings, maxSessionsPerUser: Int = 50, logger: Logger = Logger(label: "keyfob.postgres"),
        runsPool: Bool = true
    ) {
        self.settings = settings
        self.maxSessionsPerUser = maxSessionsPerUser
        self.logger = logger
        let client = PostgresClient(configuration: settings.clientConfiguration)
        pool = Mutex(PoolGeneration(client: client, runner: Task { await client.run() }))
        recovery = PoolRecovery()
        ownsPool = runsPool
        signIns = SignInBatches(runners: settings.maxConnections / 2)
    }

    deinit { stopPool() }

    /// Whether the pool runs in a task of the store's own (`runsPool: true`).
    public var runsOwnPool: Bool { ownsPool }

    /// Closes the pool (when it runs in its own task).
    public func shutdown() { stopPool() }

    /// Runs until the calling task is cancelled, then closes the pool and waits for it to end (for
    /// a store made with `runsPool: false`: the server's service group stops it after the others).
    public func runPool() async {
        while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
        let ending = stopPool()
        await ending?.value
    }

    /// Cancels the pool's task (and any recovery under way); the task, to wait for.
    @discardableResult
    func stopPool() -> Task<Void, Never>? {
        recovery.cancel()
        return pool.withLock { generation in
            generation.stopped = true
            generation.runner?.cancel()
            return generation.runner
        }
    }

    /// Which pool this is (0 the first; each replacement adds one): for tests and the log.
    public var poolGeneration: Int { pool.withLock { $0.number } }

    // MARK: Start-up

    /// Brings the schema up to date, retrying with backoff (and a log line per failure) while the
    /// database cannot be reached. Returns once the store is ready; calls before that fail as
    /// unavailable. A schema error (not an outage) is thrown.
    public func start(maxDelay: Duration = .seconds(30)) async throws {
        var delay = Duration.milliseconds(250)
        var attempt = 0
        while true {
            attempt += 1
            do {
                try await migrate()
                if attempt > 1 { logger.notice("database reachable; schema up to date") }
                return
            } catch let error as StoreError {
                guard case .unavailable(let reason) = error else { throw error }
                try Task.checkCancellation()
                // Jitter, so instances that lost the database together do not come back in step.
                let wait = delay * Double.random(in: 0.8...1.2)
                logger.warning(
                    "database not reachable; keyfob answers 503 until it is. Retrying",
                    metadata: [
                        "reason": "\(reason)", "attempt": "\(attempt)",
                        "retryIn": "\(wait.components.seconds).\(String(format: "%03d", Int(wait.components.attoseconds / 1_000_000_000_000_000)))s",
                    ])
                try await Task.sleep(for: wait)
                delay = min(delay * 2, maxDelay)
            }
        }
    }

    /// One attempt at bringing the schema up to date, under an advisory lock so that instances
    /// starting together migrate once: the first takes the lock and migrates, the others wait for
    /// it, then find nothing left to do.
    public func migrate() async throws {
        // Reachable at all? (Fails within the timeout; the migration itself may wait longer, for
        // another instance's.)
        _ = try await bounded(settings.timeout) { [self] in try await rows("SELECT 1").count }
        try await bounded(.seconds(60)) { [self] in
            try await client.withConnection { connection in
                let lockName = "keyfob.migrations.\(settings.schema ?? "default")"
                // Waits on another instance's migration for as long as it takes (within the 60 s),
                // not the calls' `lock_timeout`; the connection gets it back before it is reused.
                do {
                    _ = try await connection.query("SET lock_timeout = 0", logger: logger).collect()
                    _ = try await connection.query("SELECT pg_advisory_lock(hashtext(\(lockName)))", logger: logger).collect()
                    try await applyMigrations(on: connection)
                    _ = try await connection.query("SELECT pg_advisory_unlock(hashtext(\(lockName)))", logger: logger).collect()
                    _ = try await connection.query("RESET lock_timeout", logger: logger).collect()
                } catch {
                    _ = try? await connection.query("SELECT pg_advisory_unlock(hashtext(\(lockName)))", logger: logger).collect()
                    _ = try? await connection.query("RESET lock_timeout", logger: logger).collect()
                    throw error
                }
            }
        }
        readiness.set()
    }

    /// A role one instance holds at a time: a session-level advisory lock on a connection kept for
    /// as long as `body` runs. The connection is checked every few seconds; when it is lost (and
    /// with it the lock, so another instance may take over) `body` is cancelled.
    public func holdingRole(_ name: String, _ body: @escaping @Sendable () async throws -> Void) async throws -> Bool {
        guard readiness.isSet else { throw StoreError.unavailable("the schema is not ready yet") }
        let lockName = "keyfob.role.\(settings.schema ?? "default").\(name)"
        do {
            return try await client.withConnection { connection in
                let rows = try await connection.query("SELECT pg_try_advisory_lock(hashtext(\(lockName)))", logger: self.logger).collect()
                guard try rows.first?.makeRandomAccess()[0].decode(Bool.self) == true else { return false }
                var failure: (any Error)?
                do {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask { try await body() }
                        group.addTask {
                            while true {
                                try await Task.sleep(for: .seconds(3))
                                _ = try await self.bounded(self.settings.timeout) {
                                    try await connection.query("SELECT 1", logger: self.logger).collect().count
                                }
                            }
                        }
                        defer { group.cancelAll() }
                        try await group.next()
                    }
                } catch {
                    failure = error
                }
                // The lock belongs to the connection, which goes back to the pool: release it, also
                // when cancelled (in a task of its own, which the cancellation does not reach). Bounded:
                // on a connection the database no longer answers, the unlock would wait for ever and
                // hold up shutdown (the lock ends with the connection anyway).
                await Task {
                    _ = try? await self.bounded(.seconds(1)) {
                        try await connection.query("SELECT pg_advisory_unlock(hashtext(\(lockName)))", logger: self.logger).collect().count
                    }
                }.value
                if let failure { throw failure }
                return true
            }
        } catch let error as StoreError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw StoreError.unavailable("\(error)")
        }
    }

    func applyMigrations(on connection: PostgresConnection) async throws {
        if let schema = settings.schema {
            // The name was checked against [a-z0-9_] when the URL was read.
            try await connection.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA IF NOT EXISTS \(schema)"), logger: logger).collect()
        }
        try await connection.query(
            "CREATE TABLE IF NOT EXISTS keyfob_schema (version BIGINT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)",
            logger: logger
        ).collect()
        let rows = try await connection.query("SELECT coalesce(max(version), 0) FROM keyfob_schema", logger: logger).collect()
        let current = try rows.first?.makeRandomAccess()[0].decode(Int.self) ?? 0
        guard current <= PostgresSchema.migrations.count else {
            throw StoreError.database(
                "the database's schema (version \(current)) is newer than this keyfob (\(PostgresSchema.migrations.count)): upgrade keyfob")
        }
        for (index, statements) in PostgresSchema.migrations.enumerated().dropFirst(current) {
            let version = index + 1
            try await connection.withTransaction(logger: logger) { connection in
                for sql in statements { try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).collect() }
                try await connection.query(
                    "INSERT INTO keyfob_schema (version, applied_at) VALUES (\(version), \(Date().timeIntervalSince1970))",
                    logger: logger
                ).collect()
            }
            logger.notice("database schema migrated", metadata: ["version": "\(version)"])
        }
    }

    /// The versions applied, in order, one row each (tests: migrations ran once).
    func appliedVersions() async throws -> [Int] {
        try await call { [self] in try await rows("SELECT version FROM keyfob_schema ORDER BY version").map { try $0.int(0) } }
    }

    // MARK: Running queries

    /// Runs `body` within the timeout (or `limit`, when shorter), once the store is ready, with
    /// PostgreSQL's errors turned into `StoreError`s.
    func call<T: Sendable>(within limit: Duration? = nil, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        guard readiness.isSet else { throw StoreError.unavailable("the schema is not ready yet") }
        do {
            let result = try await bounded(limit.map { min($0, settings.timeout) } ?? settings.timeout, body)
            recovery.answered()
            return result
        } catch StoreError.unavailable(let reason) {
            noteUnavailable()
            throw StoreError.unavailable(reason)
        }
    }

    /// Runs `body`, but answers within `limit` whatever it does. Not a task group: a group waits for
    /// all its children, and a query stuck on a half-dead connection does not end when cancelled,
    /// so the caller would wait for it after all. Here the caller gets `unavailable` at the limit and
    /// the stuck work is cancelled and left to end on its own (its result is dropped).
    func bounded<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        // The answer arrives on the event loop of the pool connection that ran the query; the caller
        // resumes on its own (a request's connection's), or every request would end on the loop
        // the pool's connections live on and the other loop would idle.
        let outcome = Outcome<T>(home: MultiThreadedEventLoopGroup.currentEventLoop)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                outcome.start(continuation)
                let work = Task {
                    do { outcome.finish(.success(try await body())) } catch { outcome.finish(.failure(Self.translate(error))) }
                }
                outcome.expires(after: limit) { work.cancel() }
            }
        } onCancel: {
            outcome.finish(.failure(CancellationError()))
        }
    }

    /// PostgreSQL's errors as the store's: a unique or foreign-key violation is a `conflict`, a
    /// lost or refused connection is `unavailable`, anything else `database` (for the log).
    static func translate(_ error: any Error) -> any Error {
        switch error {
        case is StoreError, is CancellationError: return error
        case let error as PostgresTransactionError:
            // What failed inside the transaction decides (it was rolled back).
            return translate(error.closureError ?? error.beginError ?? error.commitError ?? StoreError.unavailable("transaction failed"))
        case let error as PSQLError:
            guard error.code == .server, let state = error.serverInfo?[.sqlState] else {
                return StoreError.unavailable("PostgreSQL connection: \(error.code)")
            }
            if state.hasPrefix("23") { return StoreError.conflict }
            // 08: connection exception, 53: insufficient resources, 57: shutting down / cancelled.
            if state.hasPrefix("08") || state.hasPrefix("53") || state.hasPrefix("57") {
                return StoreError.unavailable("PostgreSQL \(state)")
            }
            return StoreError.database("PostgreSQL \(state): \(error.serverInfo?[.message] ?? "")")
        case is PostgresDecodingError:
            return StoreError.database("a stored value has an unexpected type")
        default:
            // Pool errors (circuit breaker open, pool closed) and I/O errors: the database is away.
            return StoreError.unavailable("\(type(of: error))")
        }
    }

    /// The rows of one query on the pool.
    func rows(_ query: PostgresQuery) async throws -> [PostgresRandomAccessRow] {
        try await client.query(query, logger: logger).collect().map { $0.makeRandomAccess() }
    }

    /// The rows of one run of a named prepared statement (a write's only once it is committed:
    /// `StatementText.writes`).
    func run<Text: StatementText>(_ text: Text.Type, _ bind: (inout PostgresBindings) -> Void) async throws
        -> [PostgresRandomAccessRow]
    {
        var bindings = PostgresBindings(capacity: 16)
        bind(&bindings)
        let statement = Prepared<Text>(bindings: bindings)
        guard Text.writes else {
            var rows: [PostgresRandomAccessRow] = []
            for try await row in try await client.execute(statement, logger: logger) { rows.append(row) }
            return rows
        }
        return try await durably { [logger] connection in
            var rows: [PostgresRandomAccessRow] = []
            for try await row in try await connection.execute(statement, logger: logger) { rows.append(row) }
            return rows
        }
    }

    /// How many rows a write touched (statements say `RETURNING 1`), once it is committed.
    func touched(_ query: PostgresQuery) async throws -> Int {
        try await writtenRows(query).count
    }

    /// The rows a write returns, once it is committed.
    func writtenRows(_ query: PostgresQuery) async throws -> [PostgresRandomAccessRow] {
        try await durably { [logger] connection in
            try await connection.query(query, logger: logger).collect().map { $0.makeRandomAccess() }
        }
    }

    /// Runs a write on a connection of its own and answers only once PostgreSQL has committed it.
    ///
    /// A statement outside `BEGIN … COMMIT` commits at the protocol's Sync, after its rows and its
    /// CommandComplete; postgres-nio completes the query at CommandComplete. Normally the server
    /// sends those only with the ReadyForQuery that follows the commit, but a backend killed in
    /// between (`pg_ctl stop -m immediate`, a crash) flushes them on its way out: the client saw
    /// the write succeed and the commit never happened — acknowledged writes lost. So a write's
    /// answer is taken as final only when the next statement on the same connection is answered,
    /// which the server does after the previous one's ReadyForQuery, commit included (one more
    /// round trip; inside `transaction` COMMIT's own answer is the proof).
    func durably<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await client.withConnection { connection in
            let result = try await body(connection)
            // Prepared: one Bind and Execute, no Parse and Describe each time (every write runs it).
            for try await _ in try await connection.execute(Prepared<Statements.CommitProof>(bindings: PostgresBindings()), logger: logger) {}
            return result
        }
    }

    func transaction<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        try await call { [self] in
            try await client.withTransaction(logger: logger) { connection in try await body(connection) }
        }
    }
}

/// The one answer a bounded call gives: the work's result or the timeout, whichever comes first.
final class Outcome<T: Sendable>: @unchecked Sendable {
    let lock = NSLock()
    /// The event loop the caller resumes on (nil: wherever the result is).
    let home: (any EventLoop)?
    var continuation: CheckedContinuation<T, any Error>?
    var early: Result<T, any Error>?
    var done = false
    var finished: (@Sendable () -> Void)?

    init(home: (any EventLoop)? = nil) { self.home = home }

    func start(_ continuation: CheckedContinuation<T, any Error>) {
        lock.lock()
        if let early {
            lock.unlock()
            continuation.resume(with: early)
            return
        }
        self.continuation = continuation
        lock.unlock()
    }

    func onFinish(_ action: @escaping @Sendable () -> Void) {
        lock.lock()
        if done {
            lock.unlock()
            action()
            return
        }
        finished = action
        lock.unlock()
    }

    /// Answers `unavailable` once `limit` has passed, unless a result came first (then `expired`
    /// runs). Only one action waits for the result: this takes `onFinish`'s place. On an event
    /// loop (every request), the loop's own timer: a `Task.sleep` per call went through
    /// Dispatch's timer threads, whose wake-ups were a visible share of a login's CPU on PostgreSQL.
    func expires(after limit: Duration, _ expired: (@Sendable () -> Void)? = nil) {
        let expire: @Sendable () -> Void = { [self] in
            if finish(.failure(StoreError.noAnswer(within: limit))) { expired?() }
        }
        if let loop = home {
            let timer = loop.scheduleTask(in: TimeAmount(limit)) { expire() }
            onFinish { timer.cancel() }
        } else {
            let timer = Task {
                try? await Task.sleep(for: limit)
                expire()
            }
            onFinish { timer.cancel() }
        }
    }

    /// True for the first result only; it resumes the caller.
    @discardableResult
    func finish(_ result: Result<T, any Error>) -> Bool {
        lock.lock()
        guard !done else {
            lock.unlock()
            return false
        }
        done = true
        let continuation = self.continuation
        self.continuation = nil
        if continuation == nil { early = result }
        let action = finished
        lock.unlock()
        if let continuation {
            if let home, !home.inEventLoop {
                home.execute { continuation.resume(with: result) }
            } else {
                continuation.resume(with: result)
            }
        }
        action?()
        return true
    }
}

extension StoreError {
    /// A call, or a sign-in waiting for its batch, that got no answer in time.
    static func noAnswer(within limit: Duration) -> StoreError { .unavailable("no answer within \(limit)") }
}

/// Set once, read on every call.
final class Readiness: Sendable {
    private let value = Mutex(false)
    var isSet: Bool { value.withLock { $0 } }
    func set() { value.withLock { $0 = true } }
}

extension PostgresRowSequence {
    /// Every row (the store's queries return few: single rows or pages).
    @discardableResult
    func collect() async throws -> [PostgresRow] {
        var rows: [PostgresRow] = []
        for try await row in self { rows.append(row) }
        return rows
    }
}

extension PostgresRandomAccessRow: StoreRow {
    public func text(_ i: Int) throws -> String { try self[i].decode(String.self) }
    public func optionalText(_ i: Int) throws -> String? { try self[i].decode(String?.self) }
    public func int(_ i: Int) throws -> Int { try self[i].decode(Int.self) }
    public func optionalInt(_ i: Int) throws -> Int? { try self[i].decode(Int?.self) }
    public func bool(_ i: Int) throws -> Bool { try self[i].decode(Bool.self) }
    public func bytes(_ i: Int) throws -> [UInt8] { Array(try self[i].decode(ByteBuffer.self).readableBytesView) }
    public func optionalBytes(_ i: Int) throws -> [UInt8]? { try self[i].decode(ByteBuffer?.self).map { Array($0.readableBytesView) } }
    public func date(_ i: Int) throws -> Date { Date(timeIntervalSince1970: try self[i].decode(Double.self)) }
    public func optionalDate(_ i: Int) throws -> Date? { try self[i].decode(Double?.self).map(Date.init(timeIntervalSince1970:)) }
    public func optionalBool(_ i: Int) throws -> Bool? { try self[i].decode(Bool?.self) }
}
