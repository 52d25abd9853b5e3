import Foundation
import NIOCore
import PostgresNIO
import Synchronization
import Testing

@testable import KeyfobPostgres
@testable import KeyfobStore

/// PostgreSQL takes row locks in one order on every path (an account's passkeys first, in id
/// order), never waits on the sessions a trim would remove, and bounds every lock wait: a sign-in,
/// a batch and an account's deletion can then never wait on each other in a circle.
extension StoreContractTests {
    /// A sign-in at the session cap skips the old sessions another transaction holds (the cap is
    /// then passed by those until the next sign-in trims them) instead of waiting on them.
    @Test(.timeLimit(.minutes(1)), .enabled(if: TestPostgres.isConfigured, "needs KEYFOB_TEST_POSTGRES"))
    func aSignInAtTheCapDoesNotWaitOnSessionsAnotherTransactionHolds() async throws {
        let store = PostgresStore(settings: try TestPostgres.settings(), maxSessionsPerUser: 2)
        try await store.migrate()
        let alice = user("alice")
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: nil, credential: credential(1, of: alice), session: session(1, of: alice))
        func signIn(_ token: UInt8, count: UInt32) async throws -> SignInOutcome {
            var write = signInWrite(used(token, expiresAt: t0 + 120), token: token, of: alice, count: count)
            write.session.createdAt = t0 + Double(token)  // newer with each token
            return try await store.completeSignIn(write)
        }
        #expect(try await signIn(2, count: 1) == .signedIn(alice, keySealed: nil, backupStateBefore: false))

        // Another transaction holds Alice's oldest session until the sign-in has answered (or 10 s).
        let answered = Atomic<Bool>(false)
        let holding = await holding(
            "SELECT 1 FROM sessions WHERE token_hash = \(ByteBuffer(repeating: 1, count: 32)) FOR UPDATE", in: store
        ) { _ in
            let start = ContinuousClock.now
            while !answered.load(ordering: .acquiring), ContinuousClock.now - start < .seconds(10) {
                try await Task.sleep(for: .milliseconds(10))
            }
            return answered.load(ordering: .acquiring)
        }
        #expect(try await signIn(3, count: 2) == .signedIn(alice, keySealed: nil, backupStateBefore: true))
        answered.store(true, ordering: .releasing)
        #expect(try await holding.value, "the sign-in answered while the old session was held")
        // Session 1 was held, so it stayed (the cap passed by one); session 2 is newer than the one kept.
        for token: UInt8 in [1, 2, 3] { #expect(try await hasSession(store, token), "session \(token)") }
        // The next sign-in trims back to the cap.
        #expect(try await signIn(4, count: 3) == .signedIn(alice, keySealed: nil, backupStateBefore: true))
        #expect(try await store.rows("SELECT count(*) FROM sessions WHERE user_id = \(alice.id)").first?.int(0) == 2)
    }

    /// Deleting an account locks its passkeys before its user row: a sign-in that holds a passkey
    /// and then adds its session (which needs the user row) finishes first, and the deletion then
    /// removes the account with that session. The other order deadlocked.
    @Test(.timeLimit(.minutes(1)), .enabled(if: TestPostgres.isConfigured, "needs KEYFOB_TEST_POSTGRES"))
    func deletingAnAccountWaitsForItsSignInInsteadOfDeadlocking() async throws {
        let store = try await Self.postgres()
        let alice = user("alice")
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: nil, credential: credential(1, of: alice), session: session(1, of: alice))
        // A sign-in's transaction, step by step: the passkey first, then (once the deletion waits) the session.
        let signingIn = await holding(
            "SELECT 1 FROM credentials WHERE id = \(ByteBuffer(bytes: [1, 1])) FOR NO KEY UPDATE", in: store
        ) { connection in
            // Until the deletion waits (on the passkey; in the old order, on the cascade, holding the user row).
            while try await store.rows(
                """
                SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
                AND (query LIKE 'DELETE FROM users%' OR query LIKE 'SELECT 1 FROM credentials WHERE user_id%')
                """
            ).first?.int(0) == 0 {
                try await Task.sleep(for: .milliseconds(10))
            }
            try await store.insertSession(self.session(2, of: alice), on: connection)
        }
        let deleted = Task { try await store.deleteUser(id: alice.id) }
        try await signingIn.value
        #expect(try await deleted.value)
        #expect(try await store.user(id: alice.id) == nil)
        #expect(try await !hasSession(store, 2))
    }

    /// Every call's wait for a lock is bounded at half the store's timeout: a sign-in stuck behind
    /// another transaction's lock fails from PostgreSQL's side (lock_timeout, 55P03) and gives its
    /// connection back, rather than running on after its caller was told it took too long.
    @Test(.timeLimit(.minutes(1)), .enabled(if: TestPostgres.isConfigured, "needs KEYFOB_TEST_POSTGRES"))
    func aCallWaitsForALockAtMostHalfTheTimeout() async throws {
        var settings = try TestPostgres.settings()
        settings.timeout = .seconds(2)
        let store = PostgresStore(settings: settings)
        try await store.migrate()
        #expect(try await store.rows("SHOW lock_timeout").first?.text(0) == "1s")
        let alice = user("alice")
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: nil, credential: credential(1, of: alice), session: session(1, of: alice))
        let released = Atomic<Bool>(false)
        let holding = await holding("SELECT 1 FROM credentials WHERE id = \(ByteBuffer(bytes: [1, 1])) FOR UPDATE", in: store) { _ in
            while !released.load(ordering: .acquiring) { try await Task.sleep(for: .milliseconds(10)) }
        }
        await #expect {
            _ = try await store.completeSignIn(signInWrite(used(2, expiresAt: t0 + 120), token: 2, of: alice, count: 1))
        } throws: { error in
            guard case StoreError.database(let reason) = error else { return false }
            return reason.contains("55P03")
        }
        released.store(true, ordering: .releasing)
        try await holding.value
    }

    /// Takes a lock in a transaction of its own (`lock`, a query) and keeps it while `hold` runs;
    /// returns once the lock is held, with the task that ends the transaction.
    func holding<T: Sendable>(
        _ lock: PostgresQuery, in store: PostgresStore, while hold: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async -> Task<T, any Error> {
        let (locked, signal) = AsyncStream<Void>.makeStream()
        let task = Task {
            defer { signal.finish() }
            return try await store.transaction { connection in
                for try await _ in try await connection.query(lock, logger: store.logger) {}
                signal.yield()
                return try await hold(connection)
            }
        }
        for await _ in locked { break }
        return task
    }
}
