import Foundation
import KeyfobStore
import NIOCore
import NIOPosix
import PostgresNIO
import Synchronization

/// Sign-ins that arrive together written together: one call and one commit for all of them
/// (issue #57). A sign-in's call cost PostgreSQL about as much in fixed work — the round trip, the
/// procedure's start, the commit — as in the statement itself, and each call cost Keyfob a lease,
/// a write and a wake-up; in a batch each sign-in pays a share.
///
/// At most `runners` batches are in flight; a sign-in that arrives while they all are waits in the
/// queue and goes in the next batch, which takes everything waiting (at most `maxBatch`). A lone
/// sign-in is written at once by the single procedure, as before. A caller that finds a runner
/// free starts it, in a task that writes batches until nothing waits; each caller is answered as
/// soon as its own batch has committed, and within the store's timeout from when it arrived
/// (`unavailable` past it, as a single call is; so is a sign-in that finds `maxWaiting` queued).
///
/// Each item runs, in turn, the single procedure's statement (`Statements.CompleteSignIn.signIn`),
/// so each sees the ones before it as a later call would; then one COMMIT, before the answer.
/// Locks are taken in one order everywhere, so batches cannot deadlock each other or a single
/// call: every passkey of the batch first, sorted by id (a single call locks its one passkey
/// first too, and an account's deletion all of its passkeys, sorted), then the challenges in the
/// order of their hashes; a trim of old sessions skips the rows others hold (`SKIP LOCKED`)
/// rather than wait on them. A batch that fails all the same
/// (a constraint one item broke, a lock it waited on past `lock_timeout`) is rolled back whole,
/// and its items are written again one by one: each caller then gets what its sign-in alone
/// would have got.
final class SignInBatches: Sendable {
    struct Item: Sendable {
        let write: SignInWrite
        let outcome: Outcome<SignInOutcome>
        /// Past this, the caller is answered `unavailable` (as a single call past the timeout is).
        let deadline: ContinuousClock.Instant
    }

    static let maxBatch = 32
    /// Batches in flight at once: half the pool (4 of the default 8; BENCHMARKS.md, session 32),
    /// so the other connections stay free for everything else.
    let runners: Int
    /// Sign-ins that may wait at once; more are refused at once as `unavailable`.
    var maxWaiting: Int { runners * Self.maxBatch * 4 }
    private let state = Mutex<(queue: [Item], running: Int)>(([], 0))
    /// Sign-ins written in a batch of two or more (tests: the batch path ran).
    let batched = Atomic<Int>(0)

    init(runners: Int) { self.runners = max(1, runners) }

    enum Admission { case queued, runnerStarted, refused }

    /// Queues `item`: `runnerStarted` when the caller must start a runner (one was free, and is
    /// now taken), `refused` when too many wait already.
    func enqueue(_ item: Item) -> Admission {
        state.withLock { state in
            guard state.queue.count < maxWaiting else { return .refused }
            state.queue.append(item)
            guard state.running < runners else { return .queued }
            state.running += 1
            return .runnerStarted
        }
    }

    /// The next batch for a runner, and the items that waited past their deadline; nil, and the
    /// runner ends, when nothing waits.
    func next(now: ContinuousClock.Instant) -> (batch: [Item], expired: [Item])? {
        state.withLock { state in
            guard !state.queue.isEmpty else {
                state.running -= 1
                return nil
            }
            let count = min(state.queue.count, Self.maxBatch)
            defer { state.queue.removeFirst(count) }  // at most `maxWaiting` moved: bounded
            let taken = state.queue.prefix(count)
            return (taken.filter { $0.deadline > now }, taken.filter { $0.deadline <= now })
        }
    }

    /// How many sign-ins wait for a batch, and how many runners write (tests).
    var waiting: Int { state.withLock { $0.queue.count } }
    var running: Int { state.withLock { $0.running } }
}

extension PostgresStore {
    public func completeSignIn(_ w: SignInWrite) async throws -> SignInOutcome {
        let outcome = Outcome<SignInOutcome>(home: MultiThreadedEventLoopGroup.currentEventLoop)
        switch signIns.enqueue(.init(write: w, outcome: outcome, deadline: .now + settings.timeout)) {
        case .refused:
            // Load, not an outage: no recovery probe.
            throw StoreError.unavailable("\(signIns.maxWaiting) sign-ins wait for the database already")
        case .queued: break
        case .runnerStarted:
            // Detached: no caller's cancellation or task-locals reach it (a batch holds others'
            // sign-ins too). It writes until nothing waits; each caller waits only for its own.
            Task.detached { [self] in
                while let (batch, expired) = signIns.next(now: .now) {
                    for item in expired { item.outcome.finish(.failure(StoreError.noAnswer(within: settings.timeout))) }
                    if !batch.isEmpty { await write(batch) }
                }
            }
        }
        // Answered by the deadline whatever the batch does (it may hold others that came later).
        outcome.expires(after: settings.timeout)
        return try await withCheckedThrowingContinuation { outcome.start($0) }
    }

    /// Writes `batch` and answers each of its callers.
    func write(_ batch: [SignInBatches.Item]) async {
        let results = await writeSignIns(batch.map(\.write), deadlines: batch.map(\.deadline))
        for (item, result) in zip(batch, results) { item.outcome.finish(result) }
    }

    /// `writes` in one call (one alone: the single procedure), each one's outcome in their order;
    /// when the batch fails, each written alone before its deadline. A database that is away fails
    /// them all at once.
    func writeSignIns(_ writes: [SignInWrite], deadlines: [ContinuousClock.Instant]? = nil) async -> [Result<SignInOutcome, any Error>] {
        let deadlines = deadlines ?? writes.map { _ in .now + settings.timeout }
        if writes.count == 1 { return [await signInAlone(writes[0], before: deadlines[0])] }
        // The challenges in the order of their hashes (the passkeys are locked first, in order, inside).
        let order = writes.indices.sorted { writes[$0].usedChallenge.hash.lexicographicallyPrecedes(writes[$1].usedChallenge.hash) }
        let sorted = order.map { writes[$0] }
        let rows: [PostgresRandomAccessRow]
        do {
            let limit = deadlines.max()! - .now
            rows = try await call(within: limit) { [self] in try await signInBatch(sorted, within: limit) }
        } catch StoreError.unavailable(let reason) {
            return writes.map { _ in .failure(StoreError.unavailable(reason)) }
        } catch {
            // Rolled back whole: each again, alone.
            logger.notice("a batch of sign-ins failed; writing each alone", metadata: ["count": "\(writes.count)", "error": "\(error)"])
            var results: [Result<SignInOutcome, any Error>] = []
            for (w, deadline) in zip(writes, deadlines) { results.append(await signInAlone(w, before: deadline)) }
            return results
        }
        // Committed: an answer that cannot be read fails every caller, but is never written again.
        do {
            let outcomes = try Self.outcomes(of: sorted, in: rows)
            var results = [Result<SignInOutcome, any Error>](repeating: .failure(StoreError.conflict), count: writes.count)
            for (position, index) in order.enumerated() { results[index] = .success(outcomes[position]) }
            signIns.batched.add(writes.count, ordering: .relaxed)
            return results
        } catch {
            return writes.map { _ in .failure(Self.translate(error)) }
        }
    }

    /// One sign-in by the single procedure, by `deadline` (and within the store's timeout).
    func signInAlone(_ w: SignInWrite, before deadline: ContinuousClock.Instant) async -> Result<SignInOutcome, any Error> {
        let left = deadline - .now
        guard left > .zero else { return .failure(StoreError.noAnswer(within: settings.timeout)) }
        do { return .success(try await call(within: left) { [self] in try await signInCall(w) }) } catch { return .failure(error) }
    }

    func signInCall(_ w: SignInWrite) async throws -> SignInOutcome {
        guard
            let row = try await run(
                Statements.CompleteSignIn.self,
                {
                    $0.append(Int(w.newSignCount)); $0.append(w.backupState); $0.append(w.usedAt.timeIntervalSince1970)
                    $0.append(ByteBuffer(bytes: w.credentialID)); $0.append(w.userID); $0.append(ByteBuffer(bytes: w.publicKey))
                    bindNewSession(w.session, into: &$0)
                    $0.append(ByteBuffer(bytes: w.usedChallenge.hash)); $0.append(w.usedChallenge.expiresAt.timeIntervalSince1970)
                }
            ).first
        else { throw StoreError.database("the sign-in procedure answered no row") }
        return try SignInOutcome(row: row, of: w)
    }

    /// Several sign-ins by the batch procedure, its one row of answers; throws when any fails
    /// (nothing was written then).
    func signInBatch(_ writes: [SignInWrite], within limit: Duration) async throws -> [PostgresRandomAccessRow] {
        let limit = min(limit, settings.timeout)
        return try await run(Statements.CompleteSignInBatch.self) { b in
            b.append(writes.map { Int($0.newSignCount) }); b.append(writes.map(\.backupState))
            b.append(writes.map { $0.usedAt.timeIntervalSince1970 }); b.append(writes.map { ByteBuffer(bytes: $0.credentialID) })
            b.append(writes.map(\.userID)); b.append(writes.map { ByteBuffer(bytes: $0.publicKey) })
            b.append(max(0, maxSessionsPerUser - 1))
            b.append(writes.map { ByteBuffer(bytes: $0.session.tokenHash) })
            b.append(writes.map { $0.session.createdAt.timeIntervalSince1970 })
            b.append(writes.map { $0.session.expiresAt.timeIntervalSince1970 })
            // Arrays carry no NULL here: NaN and the empty string stand for none (neither is a value).
            b.append(writes.map { $0.session.unlockedUntil?.timeIntervalSince1970 ?? .nan })
            b.append(writes.map { ByteBuffer(bytes: $0.session.credentialID ?? []) })
            b.append(writes.map { ByteBuffer(bytes: $0.session.dataKey ?? []) })
            b.append(writes.map { ByteBuffer(bytes: $0.usedChallenge.hash) })
            b.append(writes.map { $0.usedChallenge.expiresAt.timeIntervalSince1970 })
            // The server gives up a lock wait well before the batch's time is up: the batch fails
            // (and each is written alone) instead of committing after its callers were told 503.
            b.append(PostgresSettings.lockTimeout(halfOf: limit))
        }
    }

    /// The batch procedure's answers, one outcome per write.
    static func outcomes(of writes: [SignInWrite], in rows: [PostgresRandomAccessRow]) throws -> [SignInOutcome] {
        guard let r = rows.first else { throw StoreError.database("the batch sign-in procedure answered no row") }
        let won = try r[0].decode([Int].self), used = try r[1].decode([Int].self), stored = try r[2].decode([Int].self)
        let backup = try r[3].decode([Bool].self), names = try r[4].decode([String].self)
        let anonymous = try r[5].decode([Bool].self), created = try r[6].decode([Double].self), sealed = try r[7].decode([Int].self)
        guard
            [won.count, used.count, stored.count, backup.count, names.count, anonymous.count, created.count, sealed.count]
                .allSatisfy({ $0 == writes.count })
        else { throw StoreError.database("the batch sign-in procedure answered \(won.count) of \(writes.count)") }
        return writes.indices.map { i in
            SignInOutcome(stored: stored[i] >= 0 ? stored[i] : nil, used: used[i] != 0, won: won[i] != 0, of: writes[i]) {
                let user = UserRecord(
                    id: writes[i].userID, username: names[i], isAnonymous: anonymous[i], createdAt: Date(timeIntervalSince1970: created[i]))
                return (user, sealed[i] < 0 ? nil : sealed[i] == 1, backup[i])
            }
        }
    }
}

extension Statements {
    /// `CompleteSignIn` for several sign-ins in one call: the passkeys locked in order, then each
    /// item's statement in turn (each sees those before it), then one COMMIT. The answers are arrays in the items' order; a
    /// stored counter of -1 is a passkey gone, a key state of -1 an account without a key.
    enum CompleteSignInBatch: StatementText {
        static let sql = "CALL keyfob_sign_in_batch($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)"
        /// Not `writes`: the procedure commits before it answers, so its answer is the proof.
        static let writes = false
        static let procedure = """
            CREATE OR REPLACE PROCEDURE keyfob_sign_in_batch(
                a_count BIGINT[], a_backup BOOLEAN[], a_used_at DOUBLE PRECISION[], a_passkey BYTEA[], a_owner TEXT[],
                a_key BYTEA[], p_keep BIGINT, a_token BYTEA[], a_created DOUBLE PRECISION[], a_expires DOUBLE PRECISION[],
                a_unlocked DOUBLE PRECISION[], a_session_passkey BYTEA[], a_data_key BYTEA[], a_hash BYTEA[],
                a_hash_expires DOUBLE PRECISION[], p_lock_timeout TEXT,
                INOUT o_won BIGINT[] DEFAULT NULL, INOUT o_used BIGINT[] DEFAULT NULL, INOUT o_stored BIGINT[] DEFAULT NULL,
                INOUT o_backup BOOLEAN[] DEFAULT NULL, INOUT o_username TEXT[] DEFAULT NULL,
                INOUT o_anonymous BOOLEAN[] DEFAULT NULL, INOUT o_user_created DOUBLE PRECISION[] DEFAULT NULL,
                INOUT o_key_sealed BIGINT[] DEFAULT NULL)
            LANGUAGE plpgsql AS $$
            DECLARE
                p_count BIGINT; p_backup BOOLEAN; p_used_at DOUBLE PRECISION; p_passkey BYTEA; p_owner TEXT; p_key BYTEA;
                p_token BYTEA; p_created DOUBLE PRECISION; p_expires DOUBLE PRECISION; p_unlocked DOUBLE PRECISION;
                p_session_passkey BYTEA; p_data_key BYTEA; p_hash BYTEA; p_hash_expires DOUBLE PRECISION;
                v_won BIGINT; v_used BIGINT; v_stored BIGINT; v_backup BOOLEAN; v_username TEXT; v_anonymous BOOLEAN;
                v_user_created DOUBLE PRECISION; v_key_sealed BOOLEAN;
            BEGIN
                PERFORM set_config('lock_timeout', p_lock_timeout, TRUE);
                -- Every passkey of the batch locked first, in one order: no two batches wait on each other.
                PERFORM 1 FROM credentials WHERE id = ANY (a_passkey) ORDER BY id FOR NO KEY UPDATE;
                o_won := '{}'; o_used := '{}'; o_stored := '{}'; o_backup := '{}'; o_username := '{}';
                o_anonymous := '{}'; o_user_created := '{}'; o_key_sealed := '{}';
                FOR i IN 1 .. coalesce(array_length(a_count, 1), 0) LOOP
                    p_count := a_count[i]; p_backup := a_backup[i]; p_used_at := a_used_at[i]; p_passkey := a_passkey[i];
                    p_owner := a_owner[i]; p_key := a_key[i]; p_token := a_token[i]; p_created := a_created[i];
                    p_expires := a_expires[i]; p_unlocked := NULLIF(a_unlocked[i], 'NaN');
                    p_session_passkey := NULLIF(a_session_passkey[i], ''::BYTEA); p_data_key := NULLIF(a_data_key[i], ''::BYTEA);
                    p_hash := a_hash[i]; p_hash_expires := a_hash_expires[i];
            \(CompleteSignIn.signIn(into: "v_"))
                    -- A passkey gone leaves the account's columns unread: placeholders, as arrays here hold no NULL.
                    IF v_stored IS NULL THEN
                        v_backup := FALSE; v_username := ''; v_anonymous := FALSE; v_user_created := 0;
                    END IF;
                    o_won := o_won || v_won; o_used := o_used || v_used; o_stored := o_stored || coalesce(v_stored, -1);
                    o_backup := o_backup || v_backup; o_username := o_username || v_username;
                    o_anonymous := o_anonymous || v_anonymous; o_user_created := o_user_created || v_user_created;
                    o_key_sealed := o_key_sealed || (CASE WHEN v_key_sealed IS NULL THEN -1 WHEN v_key_sealed THEN 1 ELSE 0 END)::BIGINT;
                END LOOP;
                COMMIT;
            END $$
            """
    }
}
