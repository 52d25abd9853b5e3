import Foundation
import KeyfobStore
import Logging
import PostgresNIO

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
    let client: PostgresClient
    let settings: PostgresSettings
    let maxSessionsPerUser: Int
    let logger: Logger
    private let runner: Task<Void, Never>?
    private let readiness = Readiness()

    /// Creates the pool (no connection is made yet). Call `start()` (or `migrate()`) before use.
    ///
    /// - Parameter runsPool: true: the pool runs in a task of its own until `shutdown()` (commands,
    ///   tests); false: the caller runs it with `runPool()` — the server does, as a service of its
    ///   group, so that it stops with the others, after them.
    public init(settings: PostgresSettings, maxSessionsPerUser: Int = 50, logger: Logger = Logger(label: "keyfob.postgres"),
                runsPool: Bool = true) {
        self.settings = settings
        self.maxSessionsPerUser = maxSessionsPerUser
        self.logger = logger
        let client = PostgresClient(configuration: settings.clientConfiguration)
        self.client = client
        runner = runsPool ? Task { await client.run() } : nil
    }

    deinit { runner?.cancel() }

    /// Whether the pool runs in a task of the store's own (`runsPool: true`).
    public var runsOwnPool: Bool { runner != nil }

    /// Closes the pool (when it runs in its own task).
    public func shutdown() { runner?.cancel() }

    /// Runs the connection pool until the calling task is cancelled (for a store made with
    /// `runsPool: false`).
    public func runPool() async { await client.run() }

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
                logger.warning("database not reachable; keyfob answers 503 until it is. Retrying", metadata: [
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
                _ = try await connection.query("SELECT pg_advisory_lock(hashtext(\(lockName)))", logger: logger).collect()
                do {
                    try await applyMigrations(on: connection)
                    _ = try await connection.query("SELECT pg_advisory_unlock(hashtext(\(lockName)))", logger: logger).collect()
                } catch {
                    _ = try? await connection.query("SELECT pg_advisory_unlock(hashtext(\(lockName)))", logger: logger).collect()
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

    private func applyMigrations(on connection: PostgresConnection) async throws {
        if let schema = settings.schema {
            // The name was checked against [a-z0-9_] when the URL was read.
            try await connection.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA IF NOT EXISTS \(schema)"), logger: logger).collect()
        }
        try await connection.query(
            "CREATE TABLE IF NOT EXISTS keyfob_schema (version BIGINT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)",
            logger: logger).collect()
        let rows = try await connection.query("SELECT coalesce(max(version), 0) FROM keyfob_schema", logger: logger).collect()
        let current = try rows.first?.makeRandomAccess()[0].decode(Int.self) ?? 0
        guard current <= PostgresSchema.migrations.count else {
            throw StoreError.database("the database's schema (version \(current)) is newer than this keyfob (\(PostgresSchema.migrations.count)): upgrade keyfob")
        }
        for (index, statements) in PostgresSchema.migrations.enumerated().dropFirst(current) {
            let version = index + 1
            try await connection.withTransaction(logger: logger) { connection in
                for sql in statements { try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).collect() }
                try await connection.query(
                    "INSERT INTO keyfob_schema (version, applied_at) VALUES (\(version), \(Date().timeIntervalSince1970))",
                    logger: logger).collect()
            }
            logger.notice("database schema migrated", metadata: ["version": "\(version)"])
        }
    }

    /// The versions applied, in order, one row each (tests: migrations ran once).
    func appliedVersions() async throws -> [Int] {
        try await call { [self] in try await rows("SELECT version FROM keyfob_schema ORDER BY version").map { try $0.int(0) } }
    }

    // MARK: Running queries

    /// Runs `body` within the timeout, once the store is ready, with PostgreSQL's errors turned
    /// into `StoreError`s.
    func call<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        guard readiness.isSet else { throw StoreError.unavailable("the schema is not ready yet") }
        return try await bounded(settings.timeout, body)
    }

    /// Runs `body`, but answers within `limit` whatever it does. Not a task group: a group waits for
    /// all its children, and a query stuck on a half-dead connection does not end when cancelled,
    /// so the caller would wait for it after all. Here the caller gets `unavailable` at the limit and
    /// the stuck work is cancelled and left to end on its own (its result is dropped).
    private func bounded<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let outcome = Outcome<T>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                outcome.start(continuation)
                let work = Task {
                    do { outcome.finish(.success(try await body())) } catch { outcome.finish(.failure(Self.translate(error))) }
                }
                let timer = Task {
                    try? await Task.sleep(for: limit)
                    if outcome.finish(.failure(StoreError.unavailable("no answer within \(limit)"))) { work.cancel() }
                }
                outcome.onFinish { timer.cancel() }
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

    /// The rows of one run of a named prepared statement.
    private func run<Text: StatementText>(_ text: Text.Type, _ bind: (inout PostgresBindings) -> Void) async throws
        -> [PostgresRandomAccessRow] {
        var bindings = PostgresBindings(capacity: 16)
        bind(&bindings)
        var rows: [PostgresRandomAccessRow] = []
        for try await row in try await client.execute(Prepared<Text>(bindings: bindings), logger: logger) { rows.append(row) }
        return rows
    }

    /// How many rows a statement touched (statements say `RETURNING 1`).
    func touched(_ query: PostgresQuery) async throws -> Int {
        try await client.query(query, logger: logger).collect().count
    }

    private func transaction<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        try await call { [self] in
            try await client.withTransaction(logger: logger) { connection in try await body(connection) }
        }
    }

    // MARK: Users

    private static let userColumns = "id, username, is_anonymous, created_at"

    private static func userRow(_ r: PostgresRandomAccessRow) throws -> UserRecord { try userRow(r, from: 0) }

    /// The user whose columns start at `b`.
    private static func userRow(_ r: PostgresRandomAccessRow, from b: Int) throws -> UserRecord {
        UserRecord(id: try r.text(b), username: try r.text(b + 1), isAnonymous: try r.bool(b + 2), createdAt: try r.date(b + 3))
    }

    public func user(named username: String) async throws -> UserRecord? {
        try await call { [self] in
            try await rows("SELECT id, username, is_anonymous, created_at FROM users WHERE lower(username) = lower(\(username))")
                .first.map(Self.userRow)
        }
    }

    public func user(id: String) async throws -> UserRecord? {
        try await call { [self] in
            try await run(Statements.UserByID.self) { $0.append(id) }.first.map(Self.userRow)
        }
    }

    public func users(matching query: String?, after afterName: String?, limit: Int) async throws -> [UserRecord] {
        // ILIKE with the user's text escaped: % and _ in a search are literal (as in SQLite's LIKE).
        let pattern = query.map { text in
            "%" + text.replacingOccurrences(of: "!", with: "!!").replacingOccurrences(of: "%", with: "!%")
                .replacingOccurrences(of: "_", with: "!_") + "%"
        } ?? "%"
        let after = (afterName ?? "").lowercased()
        let limit = max(0, limit)
        return try await call { [self] in
            try await rows("""
                SELECT id, username, is_anonymous, created_at FROM users
                WHERE username ILIKE \(pattern) ESCAPE '!' AND lower(username) COLLATE "C" > \(after) COLLATE "C"
                ORDER BY lower(username) COLLATE "C" LIMIT \(limit)
                """).map(Self.userRow)
        }
    }

    public func deleteUser(id: String) async throws -> Bool {
        try await call { [self] in
            try await touched("DELETE FROM users WHERE id = \(id) RETURNING 1") == 1
        }
    }

    // MARK: Credentials

    private static let credentialColumns = """
        id, user_id, public_key, algorithm, sign_count, transports, aaguid, attestation_format,
        backup_eligible, backup_state, created_at, last_used_at, attestation_trusted, name, created_on
        """

    private static func credentialRow(_ r: PostgresRandomAccessRow) throws -> CredentialRecord {
        CredentialRecord(
            id: try r.bytes(0), userID: try r.text(1), publicKey: try r.bytes(2), algorithm: try r.int(3),
            signCount: UInt32(clamping: try r.int(4)),
            transports: try r.text(5).split(separator: ",").map(String.init), aaguid: try r.bytes(6),
            attestationFormat: try r.text(7), backupEligible: try r.bool(8), backupState: try r.bool(9),
            createdAt: try r.date(10), lastUsedAt: try r.optionalDate(11), attestationTrusted: try r.bool(12),
            name: try r.optionalText(13), createdOn: try r.optionalText(14))
    }

    public func credential(id: [UInt8]) async throws -> CredentialRecord? {
        try await call { [self] in
            try await run(Statements.CredentialByID.self) { $0.append(ByteBuffer(bytes: id)) }.first.map(Self.credentialRow)
        }
    }

    public func credentialWithOwner(id: [UInt8]) async throws -> CredentialOwner? {
        try await call { [self] in
            try await run(Statements.CredentialWithOwner.self) { $0.append(ByteBuffer(bytes: id)) }.first.map { row in
                CredentialOwner(credential: try Self.credentialRow(row), user: try Self.userRow(row, from: 15),
                                nostrKey: try row.optionalText(19) == nil ? nil : try Self.nostrKeyRow(row, from: 19))
            }
        }
    }

    public func credentials(ofUser userID: String) async throws -> [CredentialRecord] {
        try await call { [self] in
            try await rows("SELECT \(unescaped: Self.credentialColumns) FROM credentials WHERE user_id = \(userID) ORDER BY created_at, id")
                .map(Self.credentialRow)
        }
    }

    public func deleteCredential(id: [UInt8], ofUser userID: String) async throws -> Bool {
        try await transaction { connection in
            // Lock the user's passkeys: two removals at once cannot both see "not the last one".
            let owned = try await connection.query(
                "SELECT id FROM credentials WHERE user_id = \(userID) ORDER BY id FOR UPDATE", logger: self.logger).collect()
                .map { Array(try $0.makeRandomAccess()[0].decode(ByteBuffer.self).readableBytesView) }
            guard owned.contains(id) else { return false }
            guard owned.count > 1 else { throw StoreError.conflict }
            let sealed = try await connection.query("SELECT passkey_sealed FROM nostr_keys WHERE user_id = \(userID)",
                                                    logger: self.logger).collect().first?.makeRandomAccess()[0].decode(Bool.self) ?? false
            if sealed {
                let others = try await connection.query(
                    "SELECT 1 FROM key_wraps WHERE user_id = \(userID) AND credential_id <> \(ByteBuffer(bytes: id)) LIMIT 1",
                    logger: self.logger).collect().count
                guard others > 0 else { throw StoreError.lastSealingPasskey }
            }
            try await connection.query("DELETE FROM credentials WHERE id = \(ByteBuffer(bytes: id)) AND user_id = \(userID)",
                                       logger: self.logger).collect()
            try await connection.query("DELETE FROM sessions WHERE credential_id = \(ByteBuffer(bytes: id))", logger: self.logger).collect()
            return true
        }
    }

    public func renameCredential(id: [UInt8], ofUser userID: String, name: String?) async throws -> Bool {
        try await call { [self] in
            try await touched("UPDATE credentials SET name = \(name) WHERE id = \(ByteBuffer(bytes: id)) AND user_id = \(userID) RETURNING 1") == 1
        }
    }

    public func countUsersAndCredentials() async throws -> (users: Int, credentials: Int) {
        let counts = try await call { [self] in
            let row = try await rows("SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM credentials)").first
            return [try row?.int(0) ?? 0, try row?.int(1) ?? 0]
        }
        return (counts[0], counts[1])
    }

    // MARK: Challenges

    public func insertChallenge(_ c: ChallengeRecord, now: Date, maxPerClient: Int) async throws {
        let algorithms = c.algorithms.map(String.init).joined(separator: ",")
        let inserted = try await call { [self] in
            // One statement: insert only while the client has fewer than `maxPerClient` live
            // challenges. (Two inserts racing for the last place may both win; the cap is a
            // flood limit, a few over it do no harm, and a lock per insert would cost every login.)
            try await run(Statements.InsertChallenge.self) {
                $0.append(ByteBuffer(bytes: c.challenge)); $0.append(c.ceremony.rawValue); $0.append(c.key); $0.append(c.userID)
                $0.append(c.username); $0.append(c.isAnonymous); $0.append(c.existingUser); $0.append(algorithms)
                $0.append(c.expiresAt.timeIntervalSince1970); $0.append(c.clientIP); $0.append(now.timeIntervalSince1970)
                $0.append(maxPerClient)
            }.count
        }
        guard inserted == 1 else { throw StoreError.limitReached }
    }

    public func sweepExpired(now: Date, limit: Int) async throws -> Int {
        let moment = now.timeIntervalSince1970
        let limit = max(0, limit)
        return try await call { [self] in
            var removed = try await touched("""
                DELETE FROM challenges WHERE challenge IN
                    (SELECT challenge FROM challenges WHERE expires_at <= \(moment) LIMIT \(limit)) RETURNING 1
                """)
            removed += try await touched("""
                DELETE FROM signer_requests WHERE id IN
                    (SELECT id FROM signer_requests WHERE expires_at <= \(moment - 3600) LIMIT \(limit)) RETURNING 1
                """)
            removed += try await touched("""
                DELETE FROM grants WHERE id IN
                    (SELECT id FROM grants WHERE expires_at IS NOT NULL AND expires_at <= \(moment) LIMIT \(limit)) RETURNING 1
                """)
            removed += try await touched("""
                DELETE FROM sessions WHERE token_hash IN
                    (SELECT token_hash FROM sessions WHERE expires_at <= \(moment) LIMIT \(limit)) RETURNING 1
                """)
            // A sealed key's data key lives in a session for its unlock window only.
            removed += try await touched("""
                UPDATE sessions SET data_key = NULL WHERE token_hash IN
                    (SELECT token_hash FROM sessions WHERE data_key IS NOT NULL
                     AND (unlocked_until IS NULL OR unlocked_until <= \(moment)) LIMIT \(limit)) RETURNING 1
                """)
            removed += try await touched("""
                DELETE FROM bunker_replies WHERE id IN
                    (SELECT id FROM bunker_replies WHERE created_at < \(moment - Retention.bunkerReplies) LIMIT \(limit)) RETURNING 1
                """)
            return removed
        }
    }

    public func consumeChallenge(_ value: [UInt8]) async throws -> ChallengeRecord? {
        try await call { [self] in
            // DELETE … RETURNING: finding and consuming are one atomic step, on every instance.
            try await run(Statements.ConsumeChallenge.self) { $0.append(ByteBuffer(bytes: value)) }.first.map { r in
                ChallengeRecord(
                    challenge: try r.bytes(0), ceremony: ChallengeRecord.Ceremony(rawValue: try r.text(1)) ?? .authentication,
                    key: try r.text(2), userID: try r.optionalText(3), username: try r.optionalText(4), isAnonymous: try r.bool(5),
                    existingUser: try r.bool(6), algorithms: try r.text(7).split(separator: ",").compactMap { Int($0) },
                    expiresAt: try r.date(8), clientIP: try r.optionalText(9))
            }
        }
    }

    // MARK: Sessions

    public func session(tokenHash: [UInt8], now: Date) async throws -> SessionRecord? {
        try await call { [self] in
            try await run(Statements.SessionByToken.self) {
                $0.append(ByteBuffer(bytes: tokenHash)); $0.append(now.timeIntervalSince1970)
            }.first.map { r in
                SessionRecord(tokenHash: try r.bytes(0), userID: try r.text(1), createdAt: try r.date(2), expiresAt: try r.date(3),
                              unlockedUntil: try r.optionalDate(4), credentialID: try r.optionalBytes(5),
                              dataKey: try r.optionalBytes(6))
            }
        }
    }

    public func deleteSession(tokenHash: [UInt8]) async throws {
        _ = try await call { [self] in try await touched("DELETE FROM sessions WHERE token_hash = \(ByteBuffer(bytes: tokenHash)) RETURNING 1") }
    }

    public func deleteSessions(ofUser userID: String) async throws {
        _ = try await call { [self] in try await touched("DELETE FROM sessions WHERE user_id = \(userID) RETURNING 1") }
    }

    public func lockAllSessions() async throws -> Int {
        try await call { [self] in
            try await touched("""
                UPDATE sessions SET unlocked_until = NULL, data_key = NULL
                WHERE unlocked_until IS NOT NULL OR data_key IS NOT NULL RETURNING 1
                """)
        }
    }

    public func unlockSession(tokenHash: [UInt8], until: Date, dataKey: [UInt8]?) async throws -> Bool {
        try await call { [self] in
            try await touched("""
                UPDATE sessions SET unlocked_until = \(until.timeIntervalSince1970), data_key = \(dataKey.map { ByteBuffer(bytes: $0) })
                WHERE token_hash = \(ByteBuffer(bytes: tokenHash)) RETURNING 1
                """) == 1
        }
    }

    private func insertSession(_ s: SessionRecord, on connection: PostgresConnection) async throws {
        // At most `maxSessionsPerUser`: the oldest ones end first.
        try await connection.query("""
            DELETE FROM sessions WHERE token_hash IN
                (SELECT token_hash FROM sessions WHERE user_id = \(s.userID) ORDER BY created_at DESC
                 OFFSET \(max(0, maxSessionsPerUser - 1)))
            """, logger: logger).collect()
        try await connection.query("""
            INSERT INTO sessions (token_hash, user_id, created_at, expires_at, unlocked_until, credential_id, data_key)
            VALUES (\(ByteBuffer(bytes: s.tokenHash)), \(s.userID), \(s.createdAt.timeIntervalSince1970),
                    \(s.expiresAt.timeIntervalSince1970), \(s.unlockedUntil?.timeIntervalSince1970),
                    \(s.credentialID.map { ByteBuffer(bytes: $0) }), \(s.dataKey.map { ByteBuffer(bytes: $0) }))
            """, logger: logger).collect()
    }

    // MARK: Multi-row writes

    public func completeRegistration(user: UserRecord, createUser: Bool, nostrKey: NostrKeyRecord?,
                                     credential c: CredentialRecord, session: SessionRecord, wrap: KeyWrapRecord?) async throws {
        try await transaction { [self] connection in
            if createUser {
                do {
                    try await connection.query("""
                        INSERT INTO users (id, username, is_anonymous, created_at)
                        VALUES (\(user.id), \(user.username), \(user.isAnonymous), \(user.createdAt.timeIntervalSince1970))
                        """, logger: logger).collect()
                } catch {
                    if case StoreError.conflict = Self.translate(error) { throw StoreError.usernameTaken }
                    throw error
                }
            }
            if let nostrKey { try await insertNostrKey(nostrKey, onConflict: "", on: connection) }
            do {
                try await connection.query("""
                    INSERT INTO credentials (\(unescaped: Self.credentialColumns)) VALUES (
                        \(ByteBuffer(bytes: c.id)), \(c.userID), \(ByteBuffer(bytes: c.publicKey)), \(c.algorithm), \(Int(c.signCount)),
                        \(c.transports.joined(separator: ",")), \(ByteBuffer(bytes: c.aaguid)), \(c.attestationFormat),
                        \(c.backupEligible), \(c.backupState), \(c.createdAt.timeIntervalSince1970), \(c.lastUsedAt?.timeIntervalSince1970),
                        \(c.attestationTrusted), \(c.name), \(c.createdOn))
                    """, logger: logger).collect()
            } catch {
                if case StoreError.conflict = Self.translate(error) { throw StoreError.credentialExists }
                throw error
            }
            if let wrap { try await insertKeyWrap(wrap, on: connection) }
            try await insertSession(session, on: connection)
        }
    }

    public func completeAuthentication(credentialID: [UInt8], expectedSignCount: UInt32, newSignCount: UInt32,
                                       backupState: Bool, usedAt: Date, session: SessionRecord) async throws {
        let s = session
        let won = try await call { [self] in
            try await run(Statements.CompleteAuthentication.self) {
                $0.append(Int(newSignCount)); $0.append(backupState); $0.append(usedAt.timeIntervalSince1970)
                $0.append(ByteBuffer(bytes: credentialID)); $0.append(Int(expectedSignCount)); $0.append(s.userID)
                $0.append(max(0, maxSessionsPerUser - 1)); $0.append(ByteBuffer(bytes: s.tokenHash))
                $0.append(s.createdAt.timeIntervalSince1970); $0.append(s.expiresAt.timeIntervalSince1970)
                $0.append(s.unlockedUntil?.timeIntervalSince1970); $0.append(s.credentialID.map { ByteBuffer(bytes: $0) })
                $0.append(s.dataKey.map { ByteBuffer(bytes: $0) })
            }.first?.int(0) ?? 0
        }
        guard won == 1 else { throw StoreError.conflict }
    }

    public func updateSignCount(credentialID: [UInt8], expectedSignCount: UInt32, newSignCount: UInt32, backupState: Bool,
                                usedAt: Date) async throws {
        let updated = try await call { [self] in
            try await touched("""
                UPDATE credentials SET sign_count = \(Int(newSignCount)), backup_state = \(backupState),
                                       last_used_at = \(usedAt.timeIntervalSince1970)
                WHERE id = \(ByteBuffer(bytes: credentialID)) AND sign_count = \(Int(expectedSignCount)) RETURNING 1
                """)
        }
        guard updated == 1 else { throw StoreError.conflict }
    }

    public func healthCheck() async throws {
        _ = try await call { [self] in try await rows("SELECT 1").count }
    }

    // MARK: Nostr keys

    private static let nostrKeyColumns = "user_id, pubkey, version, nonce, sealed, updated_at, passkey_sealed"

    private static func nostrKeyRow(_ r: PostgresRandomAccessRow) throws -> NostrKeyRecord { try nostrKeyRow(r, from: 0) }

    /// The key whose columns start at `b`.
    private static func nostrKeyRow(_ r: PostgresRandomAccessRow, from b: Int) throws -> NostrKeyRecord {
        NostrKeyRecord(userID: try r.text(b), pubkey: try r.text(b + 1), version: try r.int(b + 2), nonce: try r.bytes(b + 3),
                       sealed: try r.bytes(b + 4), updatedAt: try r.date(b + 5), passkeySealed: try r.bool(b + 6))
    }

    /// The key with, as its 8th column, whether the user has data-key wraps (`NostrKeyOfUser`).
    private static func nostrKeyWithWrapsRow(_ r: PostgresRandomAccessRow) throws -> NostrKeyRecord {
        var record = try nostrKeyRow(r, from: 0)
        record.hasWraps = try r.bool(7)
        return record
    }

    private func insertNostrKey(_ k: NostrKeyRecord, onConflict: String, on connection: PostgresConnection) async throws {
        try await connection.query("""
            INSERT INTO nostr_keys (\(unescaped: Self.nostrKeyColumns))
            VALUES (\(k.userID), \(k.pubkey), \(k.version), \(ByteBuffer(bytes: k.nonce)), \(ByteBuffer(bytes: k.sealed)),
                    \(k.updatedAt.timeIntervalSince1970), \(k.passkeySealed)) \(unescaped: onConflict)
            """, logger: logger).collect()
    }

    public func nostrKey(ofUser userID: String) async throws -> NostrKeyRecord? {
        try await call { [self] in
            try await run(Statements.NostrKeyOfUser.self) { $0.append(userID) }.first.map(Self.nostrKeyWithWrapsRow)
        }
    }

    public func insertNostrKeyIfAbsent(_ record: NostrKeyRecord) async throws -> NostrKeyRecord {
        try await call { [self] in
            try await client.withConnection { connection in
                try await insertNostrKey(record, onConflict: "ON CONFLICT (user_id) DO NOTHING", on: connection)
                // A statement of its own: it sees the row whichever instance wrote it.
                guard let stored = try await connection.query(
                    "SELECT \(unescaped: Self.nostrKeyColumns) FROM nostr_keys WHERE user_id = \(record.userID)",
                    logger: logger).collect().first.map({ try Self.nostrKeyRow($0.makeRandomAccess()) }) else {
                    throw StoreError.notFound
                }
                return stored
            }
        }
    }

    public func replaceNostrKey(_ k: NostrKeyRecord, expectedVersion: Int) async throws {
        try await transaction { [self] connection in try await replaceKey(k, expectedVersion: expectedVersion, on: connection) }
    }

    private func replaceKey(_ k: NostrKeyRecord, expectedVersion: Int, on connection: PostgresConnection) async throws {
        let updated = try await connection.query("""
            UPDATE nostr_keys SET pubkey = \(k.pubkey), version = \(k.version), nonce = \(ByteBuffer(bytes: k.nonce)),
                   sealed = \(ByteBuffer(bytes: k.sealed)), updated_at = \(k.updatedAt.timeIntervalSince1970),
                   passkey_sealed = \(k.passkeySealed)
            WHERE user_id = \(k.userID) AND version = \(expectedVersion) RETURNING 1
            """, logger: logger).collect().count
        guard updated == 1 else { throw StoreError.conflict }
    }

    public func allNostrKeys() async throws -> [NostrKeyRecord] {
        try await call { [self] in
            try await rows("SELECT \(unescaped: Self.nostrKeyColumns) FROM nostr_keys ORDER BY user_id COLLATE \"C\"")
                .map(Self.nostrKeyRow)
        }
    }

    public func rewrapNostrKeys(_ records: [NostrKeyRecord], bunkerSigners: [BunkerSignerRecord], masterKeyCheck: [UInt8]) async throws {
        try await transaction { [self] connection in
            // Lock every key: none may change or appear until the new check value is written.
            try await connection.query("LOCK TABLE nostr_keys IN SHARE ROW EXCLUSIVE MODE", logger: logger).collect()
            let count = try await connection.query("SELECT count(*) FROM nostr_keys", logger: logger).collect()
                .first?.makeRandomAccess()[0].decode(Int.self) ?? 0
            guard count == records.count else { throw StoreError.conflict }
            for k in records {
                let updated = try await connection.query("""
                    UPDATE nostr_keys SET nonce = \(ByteBuffer(bytes: k.nonce)), sealed = \(ByteBuffer(bytes: k.sealed))
                    WHERE user_id = \(k.userID) AND version = \(k.version) AND pubkey = \(k.pubkey)
                      AND passkey_sealed = \(k.passkeySealed) RETURNING 1
                    """, logger: logger).collect().count
                guard updated == 1 else { throw StoreError.conflict }
            }
            try await connection.query("LOCK TABLE bunker_signers IN SHARE ROW EXCLUSIVE MODE", logger: logger).collect()
            let signers = try await connection.query("SELECT count(*) FROM bunker_signers", logger: logger).collect()
                .first?.makeRandomAccess()[0].decode(Int.self) ?? 0
            guard signers == bunkerSigners.count else { throw StoreError.conflict }
            for s in bunkerSigners {
                let updated = try await connection.query("""
                    UPDATE bunker_signers SET nonce = \(ByteBuffer(bytes: s.nonce)), sealed = \(ByteBuffer(bytes: s.sealed))
                    WHERE user_id = \(s.userID) AND pubkey = \(s.pubkey) RETURNING 1
                    """, logger: logger).collect().count
                guard updated == 1 else { throw StoreError.conflict }
            }
            try await upsertMeta(Self.masterKeyCheckName, masterKeyCheck, on: connection)
        }
    }

    // MARK: Key wraps

    public func keyWraps(ofUser userID: String) async throws -> [KeyWrapRecord] {
        try await call { [self] in
            try await rows("""
                SELECT user_id, credential_id, wrapped, created_at, salt FROM key_wraps WHERE user_id = \(userID)
                ORDER BY created_at, credential_id
                """).map { r in
                KeyWrapRecord(userID: try r.text(0), credentialID: try r.bytes(1), wrapped: try r.bytes(2), createdAt: try r.date(3),
                              salt: try r.optionalBytes(4) ?? [])
            }
        }
    }

    private func insertKeyWrap(_ w: KeyWrapRecord, on connection: PostgresConnection) async throws {
        try await connection.query("""
            INSERT INTO key_wraps (user_id, credential_id, wrapped, created_at, salt)
            VALUES (\(w.userID), \(ByteBuffer(bytes: w.credentialID)), \(ByteBuffer(bytes: w.wrapped)), \(w.createdAt.timeIntervalSince1970),
                    \(w.salt.isEmpty ? nil : ByteBuffer(bytes: w.salt)))
            ON CONFLICT (user_id, credential_id) DO UPDATE SET wrapped = excluded.wrapped, created_at = excluded.created_at,
                salt = excluded.salt
            """, logger: logger).collect()
    }

    public func putKeyWrap(_ w: KeyWrapRecord) async throws -> Bool {
        try await transaction { [self] connection in
            let sealed = try await connection.query(
                "SELECT passkey_sealed FROM nostr_keys WHERE user_id = \(w.userID) FOR SHARE", logger: logger).collect()
                .first?.makeRandomAccess()[0].decode(Bool.self) ?? false
            let owned = try await connection.query(
                "SELECT 1 FROM credentials WHERE id = \(ByteBuffer(bytes: w.credentialID)) AND user_id = \(w.userID) FOR SHARE",
                logger: logger).collect().count == 1
            guard sealed, owned else { return false }
            try await insertKeyWrap(w, on: connection)
            return true
        }
    }

    public func changeKeyProtection(_ k: NostrKeyRecord, expectedVersion: Int, wraps: [KeyWrapRecord],
                                    keepingSession: [UInt8]?, sessionDataKey: [UInt8]?, bunkerSigner: BunkerSignerRecord?) async throws {
        try await transaction { [self] connection in
            try await replaceKey(k, expectedVersion: expectedVersion, on: connection)
            if let bunkerSigner {
                let old = try await connection.query("DELETE FROM bunker_signers WHERE user_id = \(k.userID) RETURNING pubkey",
                                                     logger: logger).collect().first.map { try $0.makeRandomAccess().text(0) }
                try await connection.query(Self.insertSignerQuery(bunkerSigner, onConflict: ""), logger: logger).collect()
                if let old, old != bunkerSigner.pubkey {
                    try await connection.query("DELETE FROM bunker_clients WHERE user_id = \(k.userID)", logger: logger).collect()
                    try await connection.query("DELETE FROM grants WHERE user_id = \(k.userID) AND client LIKE 'nip46:%'",
                                               logger: logger).collect()
                    try await connection.query("DELETE FROM signer_requests WHERE user_id = \(k.userID) AND state = 'pending'",
                                               logger: logger).collect()
                }
            }
            try await connection.query("DELETE FROM key_wraps WHERE user_id = \(k.userID)", logger: logger).collect()
            for wrap in wraps { try await insertKeyWrap(wrap, on: connection) }
            try await connection.query(
                "UPDATE sessions SET data_key = NULL WHERE user_id = \(k.userID) AND data_key IS NOT NULL", logger: logger).collect()
            if let keepingSession {
                try await connection.query("""
                    UPDATE sessions SET data_key = \(sessionDataKey.map { ByteBuffer(bytes: $0) })
                    WHERE token_hash = \(ByteBuffer(bytes: keepingSession)) AND user_id = \(k.userID)
                    """, logger: logger).collect()
            }
        }
    }

    // MARK: Meta

    public func metaValue(_ name: String) async throws -> [UInt8]? {
        try await call { [self] in
            try await rows("SELECT value FROM meta WHERE name = \(name)").first.map { try $0.bytes(0) }
        }
    }

    private func upsertMeta(_ name: String, _ value: [UInt8], on connection: PostgresConnection) async throws {
        try await connection.query("""
            INSERT INTO meta (name, value) VALUES (\(name), \(ByteBuffer(bytes: value)))
            ON CONFLICT (name) DO UPDATE SET value = excluded.value
            """, logger: logger).collect()
    }

    public func setMetaValue(_ name: String, _ value: [UInt8]) async throws {
        try await call { [self] in try await client.withConnection { try await upsertMeta(name, value, on: $0) } }
    }

    public func setMetaValueIfAbsent(_ name: String, _ value: [UInt8]) async throws -> [UInt8] {
        try await call { [self] in
            _ = try await touched("INSERT INTO meta (name, value) VALUES (\(name), \(ByteBuffer(bytes: value))) ON CONFLICT (name) DO NOTHING RETURNING 1")
            return try await rows("SELECT value FROM meta WHERE name = \(name)").first.map { try $0.bytes(0) } ?? value
        }
    }

    // MARK: Audit log

    @discardableResult
    public func appendAudit(_ e: AuditRecord) async throws -> Int64 {
        try await call { [self] in
            Int64(try await run(Statements.AppendAudit.self) {
                $0.append(e.userID); $0.append(e.at.timeIntervalSince1970); $0.append(e.client); $0.append(e.transport)
                $0.append(e.method); $0.append(e.kind); $0.append(e.eventID); $0.append(e.outcome); $0.append(e.code)
                $0.append(e.receipt)
            }.first?.int(0) ?? 0)
        }
    }

    private static let auditColumns = "id, user_id, at, client, transport, method, kind, event_id, outcome, code, receipt"

    private static func auditRow(_ r: PostgresRandomAccessRow) throws -> AuditRecord {
        AuditRecord(id: Int64(try r.int(0)), userID: try r.text(1), at: try r.date(2), client: try r.text(3),
                    transport: try r.text(4), method: try r.text(5), kind: try r.optionalInt(6), eventID: try r.optionalText(7),
                    outcome: try r.text(8), code: try r.optionalText(9), receipt: try r.optionalText(10))
    }

    public func auditEntries(ofUser userID: String, before: Int64?, limit: Int) async throws -> [AuditRecord] {
        try await call { [self] in
            try await rows("""
                SELECT \(unescaped: Self.auditColumns) FROM audit_log WHERE user_id = \(userID) AND id < \(Int(before ?? Int64.max))
                ORDER BY id DESC LIMIT \(max(0, limit))
                """).map(Self.auditRow)
        }
    }

    public func auditEntry(id: Int64, ofUser userID: String) async throws -> AuditRecord? {
        try await call { [self] in
            try await rows("SELECT \(unescaped: Self.auditColumns) FROM audit_log WHERE id = \(Int(id)) AND user_id = \(userID)")
                .first.map(Self.auditRow)
        }
    }

    // MARK: Pending requests and grants

    private static let requestColumns = """
        id, user_id, requester, client, transport, method, kind, nonce, payload, confirmation_nonce, created_at, expires_at, state
        """

    private static func requestRow(_ r: PostgresRandomAccessRow) throws -> PendingRequestRecord {
        PendingRequestRecord(id: try r.text(0), userID: try r.optionalText(1), requester: try r.text(2), client: try r.text(3),
                             transport: try r.text(4), method: try r.text(5), kind: try r.optionalInt(6),
                             nonce: try r.bytes(7), payload: try r.bytes(8), confirmationNonce: try r.optionalBytes(9),
                             createdAt: try r.date(10), expiresAt: try r.date(11), state: try r.text(12))
    }

    public func insertPendingRequest(_ q: PendingRequestRecord, now: Date, maxPending: Int) async throws {
        let owner = q.userID ?? q.requester
        let inserted = try await call { [self] in
            // As with challenges: one statement, the cap checked as it inserts.
            try await touched("""
                INSERT INTO signer_requests (\(unescaped: Self.requestColumns))
                SELECT \(q.id), \(q.userID), \(q.requester), \(q.client), \(q.transport), \(q.method), \(q.kind),
                       \(ByteBuffer(bytes: q.nonce)), \(ByteBuffer(bytes: q.payload)), \(q.confirmationNonce.map { ByteBuffer(bytes: $0) }),
                       \(q.createdAt.timeIntervalSince1970), \(q.expiresAt.timeIntervalSince1970), \(q.state)
                WHERE (SELECT count(*) FROM (SELECT 1 FROM signer_requests
                       WHERE (user_id = \(owner) OR requester = \(owner)) AND client = \(q.client) AND state = 'pending'
                         AND expires_at > \(now.timeIntervalSince1970) LIMIT \(maxPending)) AS live) < \(maxPending)
                RETURNING 1
                """)
        }
        guard inserted == 1 else { throw StoreError.limitReached }
    }

    public func claimPendingRequest(id: String, userID: String, now: Date) async throws -> PendingRequestRecord? {
        try await call { [self] in
            // One statement: claim it if nobody owns it; it comes back only if it is (now) this user's.
            try await rows("""
                UPDATE signer_requests SET user_id = \(userID)
                WHERE id = \(id) AND (user_id IS NULL OR user_id = \(userID)) AND state = 'pending'
                  AND expires_at > \(now.timeIntervalSince1970)
                RETURNING \(unescaped: Self.requestColumns)
                """).first.map(Self.requestRow)
        }
    }

    public func setConfirmationNonce(id: String, userID: String, nonce: [UInt8], now: Date) async throws -> Bool {
        try await call { [self] in
            try await touched("""
                UPDATE signer_requests SET confirmation_nonce = \(ByteBuffer(bytes: nonce))
                WHERE id = \(id) AND user_id = \(userID) AND state = 'pending' AND expires_at > \(now.timeIntervalSince1970) RETURNING 1
                """) == 1
        }
    }

    public func decidePendingRequest(id: String, userID: String, state: String, now: Date) async throws -> Bool {
        try await call { [self] in
            try await touched("""
                UPDATE signer_requests SET state = \(state)
                WHERE id = \(id) AND user_id = \(userID) AND state = 'pending' AND expires_at > \(now.timeIntervalSince1970) RETURNING 1
                """) == 1
        }
    }

    public func pendingRequests(ofUser userID: String, now: Date, limit: Int) async throws -> [PendingRequestRecord] {
        try await call { [self] in
            try await rows("""
                SELECT \(unescaped: Self.requestColumns) FROM signer_requests
                WHERE user_id = \(userID) AND state = 'pending' AND expires_at > \(now.timeIntervalSince1970)
                ORDER BY created_at, id LIMIT \(limit)
                """).map(Self.requestRow)
        }
    }

    public func pendingRequestCount(now: Date) async throws -> Int {
        try await call { [self] in
            try await rows("SELECT count(*) FROM signer_requests WHERE state = 'pending' AND expires_at > \(now.timeIntervalSince1970)")
                .first?.int(0) ?? 0
        }
    }

    public func insertGrant(_ g: GrantRecord) async throws {
        _ = try await call { [self] in
            try await touched("""
                INSERT INTO grants (id, user_id, client, method, kind, allow, created_at, expires_at)
                VALUES (\(g.id), \(g.userID), \(g.client), \(g.method), \(g.kind), \(g.allow), \(g.createdAt.timeIntervalSince1970),
                        \(g.expiresAt?.timeIntervalSince1970)) RETURNING 1
                """)
        }
    }

    public func grants(ofUser userID: String, now: Date) async throws -> [GrantRecord] {
        try await call { [self] in
            try await rows("""
                SELECT id, user_id, client, method, kind, allow, created_at, expires_at FROM grants
                WHERE user_id = \(userID) AND (expires_at IS NULL OR expires_at > \(now.timeIntervalSince1970))
                ORDER BY created_at DESC, seq DESC LIMIT 1000
                """).map { r in
                GrantRecord(id: try r.text(0), userID: try r.text(1), client: try r.text(2), method: try r.text(3),
                            kind: try r.optionalInt(4), allow: try r.bool(5), createdAt: try r.date(6), expiresAt: try r.optionalDate(7))
            }
        }
    }

    public func deleteGrant(id: String, ofUser userID: String) async throws -> Bool {
        try await call { [self] in
            try await touched("DELETE FROM grants WHERE id = \(id) AND user_id = \(userID) RETURNING 1") == 1
        }
    }
}

/// The one answer a bounded call gives: the work's result or the timeout, whichever comes first.
private final class Outcome<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var continuation: CheckedContinuation<T, any Error>?
    private var early: Result<T, any Error>?
    private var done = false
    private var finished: (@Sendable () -> Void)?

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
        continuation?.resume(with: result)
        action?()
        return true
    }
}

/// Set once, read on every call.
private final class Readiness: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
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

extension PostgresRandomAccessRow {
    func text(_ i: Int) throws -> String { try self[i].decode(String.self) }
    func optionalText(_ i: Int) throws -> String? { try self[i].decode(String?.self) }
    func int(_ i: Int) throws -> Int { try self[i].decode(Int.self) }
    func optionalInt(_ i: Int) throws -> Int? { try self[i].decode(Int?.self) }
    func bool(_ i: Int) throws -> Bool { try self[i].decode(Bool.self) }
    func bytes(_ i: Int) throws -> [UInt8] { Array(try self[i].decode(ByteBuffer.self).readableBytesView) }
    func optionalBytes(_ i: Int) throws -> [UInt8]? { try self[i].decode(ByteBuffer?.self).map { Array($0.readableBytesView) } }
    func date(_ i: Int) throws -> Date { Date(timeIntervalSince1970: try self[i].decode(Double.self)) }
    func optionalDate(_ i: Int) throws -> Date? { try self[i].decode(Double?.self).map(Date.init(timeIntervalSince1970:)) }
}

// MARK: NIP-46

extension PostgresStore {
    static let signerColumns = "user_id, pubkey, nonce, sealed, secret_hash, secret_expires_at, created_at, passkey_sealed"

    private static func signerRow(_ r: PostgresRandomAccessRow) throws -> BunkerSignerRecord {
        BunkerSignerRecord(userID: try r.text(0), pubkey: try r.text(1), nonce: try r.bytes(2), sealed: try r.bytes(3),
                           secretHash: try r.optionalBytes(4), secretExpiresAt: try r.optionalDate(5), createdAt: try r.date(6),
                           passkeySealed: try r.bool(7))
    }

    static func insertSignerQuery(_ s: BunkerSignerRecord, onConflict: String) -> PostgresQuery {
        """
        INSERT INTO bunker_signers (\(unescaped: Self.signerColumns))
        VALUES (\(s.userID), \(s.pubkey), \(ByteBuffer(bytes: s.nonce)), \(ByteBuffer(bytes: s.sealed)),
                \(s.secretHash.map { ByteBuffer(bytes: $0) }), \(s.secretExpiresAt?.timeIntervalSince1970),
                \(s.createdAt.timeIntervalSince1970), \(s.passkeySealed)) \(unescaped: onConflict)
        """
    }

    public func bunkerSigner(ofUser userID: String) async throws -> BunkerSignerRecord? {
        try await call { [self] in
            try await rows("SELECT \(unescaped: Self.signerColumns) FROM bunker_signers WHERE user_id = \(userID)").first.map(Self.signerRow)
        }
    }

    public func allBunkerSigners() async throws -> [BunkerSignerRecord] {
        try await call { [self] in
            try await rows("SELECT \(unescaped: Self.signerColumns) FROM bunker_signers ORDER BY user_id COLLATE \"C\"").map(Self.signerRow)
        }
    }

    public func bunkerSigner(pubkey: String) async throws -> BunkerSignerRecord? {
        try await call { [self] in
            try await rows("SELECT \(unescaped: Self.signerColumns) FROM bunker_signers WHERE pubkey = \(pubkey)").first.map(Self.signerRow)
        }
    }

    public func insertBunkerSignerIfAbsent(_ s: BunkerSignerRecord) async throws -> BunkerSignerRecord {
        try await call { [self] in
            _ = try await touched(Self.insertSignerQuery(s, onConflict: "ON CONFLICT (user_id) DO NOTHING RETURNING 1"))
            guard let stored = try await rows("SELECT \(unescaped: Self.signerColumns) FROM bunker_signers WHERE user_id = \(s.userID)")
                .first.map(Self.signerRow) else { throw StoreError.notFound }
            return stored
        }
    }

    public func setBunkerSecret(userID: String, secretHash: [UInt8]?, expiresAt: Date?) async throws -> Bool {
        try await call { [self] in
            try await touched("""
                UPDATE bunker_signers SET secret_hash = \(secretHash.map { ByteBuffer(bytes: $0) }),
                       secret_expires_at = \(expiresAt?.timeIntervalSince1970)
                WHERE user_id = \(userID) RETURNING 1
                """) == 1
        }
    }

    public func consumeBunkerSecret(userID: String, secretHash: [UInt8], now: Date) async throws -> Bool {
        try await call { [self] in
            try await touched("""
                UPDATE bunker_signers SET secret_hash = NULL, secret_expires_at = NULL
                WHERE user_id = \(userID) AND secret_hash = \(ByteBuffer(bytes: secretHash))
                  AND secret_expires_at > \(now.timeIntervalSince1970) RETURNING 1
                """) == 1
        }
    }

    private static let clientColumns = "user_id, client_pubkey, name, url, perms, created_at, last_used_at, relays"

    private static func clientRow(_ r: PostgresRandomAccessRow) throws -> BunkerClientRecord {
        BunkerClientRecord(userID: try r.text(0), clientPubkey: try r.text(1), name: try r.optionalText(2), url: try r.optionalText(3),
                           perms: try r.text(4), createdAt: try r.date(5), lastUsedAt: try r.optionalDate(6),
                           relays: try r.text(7).split(separator: "\n").map(String.init))
    }

    public func bunkerClients(ofUser userID: String) async throws -> [BunkerClientRecord] {
        try await call { [self] in
            try await rows("""
                SELECT \(unescaped: Self.clientColumns) FROM bunker_clients WHERE user_id = \(userID) ORDER BY created_at, client_pubkey
                """).map(Self.clientRow)
        }
    }

    public func bunkerClient(userID: String, clientPubkey: String) async throws -> BunkerClientRecord? {
        try await call { [self] in
            try await rows("""
                SELECT \(unescaped: Self.clientColumns) FROM bunker_clients WHERE user_id = \(userID) AND client_pubkey = \(clientPubkey)
                """).first.map(Self.clientRow)
        }
    }

    public func putBunkerClient(_ c: BunkerClientRecord) async throws {
        _ = try await call { [self] in
            try await touched("""
                INSERT INTO bunker_clients (\(unescaped: Self.clientColumns))
                VALUES (\(c.userID), \(c.clientPubkey), \(c.name), \(c.url), \(c.perms), \(c.createdAt.timeIntervalSince1970),
                        \(c.lastUsedAt?.timeIntervalSince1970), \(c.relays.joined(separator: "\n")))
                ON CONFLICT (user_id, client_pubkey) DO UPDATE SET name = excluded.name, url = excluded.url, perms = excluded.perms,
                    created_at = excluded.created_at, last_used_at = excluded.last_used_at, relays = excluded.relays
                RETURNING 1
                """)
        }
    }

    public func touchBunkerClient(userID: String, clientPubkey: String, at date: Date) async throws {
        _ = try await call { [self] in
            try await touched("""
                UPDATE bunker_clients SET last_used_at = \(date.timeIntervalSince1970)
                WHERE user_id = \(userID) AND client_pubkey = \(clientPubkey) RETURNING 1
                """)
        }
    }

    public func deleteBunkerClient(userID: String, clientPubkey: String) async throws -> Bool {
        try await call { [self] in
            try await touched("DELETE FROM bunker_clients WHERE user_id = \(userID) AND client_pubkey = \(clientPubkey) RETURNING 1") == 1
        }
    }

    public func activeBunkerSigners(now: Date, limit: Int) async throws -> [String] {
        try await call { [self] in
            try await rows("""
                SELECT pubkey FROM bunker_signers s
                WHERE secret_expires_at > \(now.timeIntervalSince1970) OR EXISTS (SELECT 1 FROM bunker_clients c WHERE c.user_id = s.user_id)
                ORDER BY pubkey LIMIT \(limit)
                """).map { try $0.text(0) }
        }
    }

    public func nostrConnectClients() async throws -> [BunkerClientRecord] {
        try await call { [self] in
            try await rows("SELECT \(unescaped: Self.clientColumns) FROM bunker_clients WHERE relays <> '' ORDER BY created_at")
                .map(Self.clientRow)
        }
    }

    public func appendBunkerReply(_ event: String, at date: Date, dropBefore: Date) async throws {
        try await transaction { connection in
            _ = try await connection.query("DELETE FROM bunker_replies WHERE created_at < \(dropBefore.timeIntervalSince1970)",
                                           logger: self.logger).collect()
            _ = try await connection.query(
                "INSERT INTO bunker_replies (event, created_at) VALUES (\(event), \(date.timeIntervalSince1970))",
                logger: self.logger).collect()
            // Delivered to the listeners when this transaction commits.
            _ = try await connection.query("SELECT pg_notify(\(self.replyChannel), '')", logger: self.logger).collect()
        }
    }

    /// The NOTIFY channel for queued replies, one per schema (instances of one deployment share it).
    var replyChannel: String { "keyfob_bunker_replies_\(settings.schema ?? "default")" }

    /// LISTEN on a connection of its own, kept (and re-opened after a loss, every second) for as
    /// long as the stream is read.
    public func bunkerReplySignals() -> AsyncStream<Void>? {
        let (stream, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let listener = Task { [self] in
            while !Task.isCancelled {
                do {
                    guard readiness.isSet else { throw StoreError.unavailable("the schema is not ready yet") }
                    try await client.withConnection { connection in
                        try await connection.listen(on: self.replyChannel) { notifications in
                            signal.yield()  // listening now: read once for what came before
                            for try await _ in notifications { signal.yield() }
                        }
                    }
                } catch is CancellationError {
                    break
                } catch {
                    logger.debug("bunker reply listener: \(error)")
                }
                try? await Task.sleep(for: .seconds(1))
            }
        }
        signal.onTermination = { _ in listener.cancel() }
        return stream
    }

    public func bunkerReplies(since: Date, limit: Int) async throws -> [BunkerReplyRecord] {
        try await call { [self] in
            try await rows("""
                SELECT id, event FROM bunker_replies WHERE created_at >= \(since.timeIntervalSince1970) ORDER BY id LIMIT \(limit)
                """).map { BunkerReplyRecord(id: Int64(try $0.int(0)), event: try $0.text(1)) }
        }
    }

    public func hasUnlockedSession(ofUser userID: String, now: Date) async throws -> Bool {
        try await call { [self] in
            let at = now.timeIntervalSince1970
            return try await rows("""
                SELECT 1 FROM sessions WHERE user_id = \(userID) AND unlocked_until > \(at) AND expires_at > \(at) LIMIT 1
                """).isEmpty == false
        }
    }
}
