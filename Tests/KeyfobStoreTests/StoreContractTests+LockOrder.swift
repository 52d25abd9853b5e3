import Foundation
import NIOCore
import PostgresNIO
import Synchronization
import Testing

@testable import KeyfobPostgres
@testable import KeyfobStore

/// PostgreSQL takes an account's row locks in one order (its nostr key, its passkeys in id order,
/// its sessions, its NIP-46 signer and clients, then its user row), never waits on the sessions a trim would remove, and bounds
/// every lock wait: a sign-in, a batch and an account's deletion never wait on each other in a circle.
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
        // Session 1 was held, so it stayed (the cap passed by one); session 2 is the one the cap keeps.
        for token: UInt8 in [1, 2, 3] { #expect(try await hasSession(store, token), "session \(token)") }
        // The next sign-in trims back to the cap.
        #expect(try await signIn(4, count: 3) == .signedIn(alice, keySealed: nil, backupStateBefore: true))
        #expect(try await store.rows("SELECT count(*) FROM sessions WHERE user_id = \(alice.id)").first?.int(0) == 2)
    }

    /// Writes that lock one of an account's rows and then need its user row (a new row's foreign
    /// key), caught between the two steps while the account is deleted.
    enum InFlight: String, CaseIterable, Sendable {
        /// A sign-in: its passkey, then its session.
        case signIn
        /// A key wrap added: the nostr key, then the passkey it wraps for.
        case keyWrap
        /// A session added at the cap: an old session trimmed, then the new one.
        case sessionAtTheCap
        /// A NIP-46 client's waiting request stored: its client row, then the request (its owner).
        case waitingRequest
        /// A bunker `connect`: its signer's row (the secret used), then its new client (its owner).
        case bunkerConnect
    }

    /// Deleting an account locks its nostr key, passkeys, sessions, NIP-46 signer and clients before its user row: a
    /// write in flight that holds one of them and then needs the user row finishes first, and the
    /// deletion then removes the account with what that write added. The other order deadlocked.
    @Test(
        .timeLimit(.minutes(1)), .enabled(if: TestPostgres.isConfigured, "needs KEYFOB_TEST_POSTGRES"),
        arguments: InFlight.allCases)
    func deletingAnAccountWaitsForWritesInFlightInsteadOfDeadlocking(_ write: InFlight) async throws {
        let store = try await Self.postgres()
        let alice = user("alice")
        let key = NostrKeyRecord(userID: alice.id, pubkey: "aa", version: 1, nonce: [1], sealed: [2], updatedAt: t0)
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: key, credential: credential(1, of: alice), session: session(1, of: alice))
        try await store.putBunkerClient(
            BunkerClientRecord(userID: alice.id, clientPubkey: "cc", name: "App", url: nil, perms: "", createdAt: t0))
        _ = try await store.insertBunkerSignerIfAbsent(signer(of: alice))
        let first: PostgresQuery =
            switch write {
            case .signIn: "SELECT 1 FROM credentials WHERE id = \(ByteBuffer(bytes: [1, 1])) FOR NO KEY UPDATE"
            case .keyWrap: "SELECT passkey_sealed FROM nostr_keys WHERE user_id = \(alice.id) FOR SHARE"
            case .sessionAtTheCap: "SELECT 1 FROM sessions WHERE token_hash = \(ByteBuffer(repeating: 1, count: 32)) FOR UPDATE"
            case .waitingRequest: "SELECT 1 FROM bunker_clients WHERE user_id = \(alice.id) AND client_pubkey = 'cc' FOR KEY SHARE"
            case .bunkerConnect: "UPDATE bunker_signers SET secret_hash = NULL WHERE user_id = \(alice.id) RETURNING 1"
            }
        let inFlight = await holding(first, in: store) { connection in
            // Until the deletion waits on what this write holds.
            var pid: Int32 = 0
            for try await row in try await connection.query("SELECT pg_backend_pid()", logger: store.logger) {
                pid = try row.decode(Int32.self)
            }
            while try await store.rows("SELECT count(*) FROM pg_stat_activity WHERE \(pid) = ANY (pg_blocking_pids(pid))").first?.int(0) == 0 {
                try await Task.sleep(for: .milliseconds(10))
            }
            switch write {
            case .signIn, .sessionAtTheCap: try await store.insertSession(self.session(2, of: alice), on: connection)
            case .keyWrap:
                for try await _ in try await connection.query(
                    "SELECT 1 FROM credentials WHERE id = \(ByteBuffer(bytes: [1, 1])) AND user_id = \(alice.id) FOR SHARE",
                    logger: store.logger)
                {}
            case .waitingRequest, .bunkerConnect:
                // What the new row's foreign key takes on its owner's row.
                for try await _ in try await connection.query("SELECT 1 FROM users WHERE id = \(alice.id) FOR KEY SHARE", logger: store.logger) {}
            }
        }
        let deleted = Task { try await store.deleteUser(id: alice.id) }
        try await inFlight.value
        #expect(try await deleted.value)
        #expect(try await store.user(id: alice.id) == nil)
        #expect(try await !hasSession(store, 2))
    }

    /// The writes that change more than one of an account's sessions, beside a sign-out everywhere.
    enum ManySessions: String, CaseIterable, Sendable {
        /// "Lock now" (also after every passkey removal).
        case lockNow
        /// An operator locking every session.
        case lockAll
        /// A passkey removed: the sessions it signed in.
        case passkeyRemoval
        /// An operator ending the account's sessions.
        case operatorEnd
        /// The expiry sweep, the sessions expired.
        case sweep
        /// The expiry sweep, the sessions' unlock windows over: their data-key copies dropped.
        case sweepDataKeys
    }

    /// Every write that changes more than one session takes them in token order, as a sign-out
    /// everywhere does (the sweep skips the ones held): caught beside a sign-out, one waits for the
    /// other. In the order a scan found them (the rows' order on disk), the write held a session the
    /// sign-out needed next while it waited for one the sign-out held: a deadlock, one of the two
    /// failed.
    @Test(
        .timeLimit(.minutes(1)), .enabled(if: TestPostgres.isConfigured, "needs KEYFOB_TEST_POSTGRES"),
        arguments: ManySessions.allCases)
    func aWriteOfManySessionsAndASignOutWaitInLineNotInACircle(_ write: ManySessions) async throws {
        let store = try await Self.postgres()
        let alice = user("alice")
        // On disk in the order FE, F0, 03; in token order 03, F0, FE. F0 and 03 signed in with passkey 2.
        func alices(_ byte: UInt8, passkey: UInt8) -> SessionRecord {
            var s = session(byte, of: alice)
            s.credentialID = [passkey, passkey]
            s.dataKey = [byte]
            return s
        }
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: nil, credential: credential(1, of: alice), session: alices(0xFE, passkey: 1))
        try await store.completeRegistration(
            user: alice, createUser: false, nostrKey: nil, credential: credential(2, of: alice), session: alices(0xF0, passkey: 2))
        try await store.addSession(alices(0x03, passkey: 2))
        // Unlocked until t0 + 600, expiring at t0 + 3600.
        let (windowsOver, expired) = (t0 + 1200, t0 + 7200)
        // The sign-out held at the first session in token order; the write comes meanwhile.
        let (ended, wrote) = try await whileSigningOut(
            alice, heldAt: "SELECT 1 FROM sessions WHERE token_hash = \(ByteBuffer(repeating: 3, count: 32)) FOR UPDATE", in: store
        ) {
            switch write {
            case .lockNow: _ = try await store.lockSessions(ofUser: alice.id)
            case .lockAll: _ = try await store.lockAllSessions()
            case .passkeyRemoval: #expect(try await store.deleteCredential(id: [2, 2], ofUser: alice.id))
            case .operatorEnd: try await store.deleteSessions(ofUser: alice.id)
            case .sweep: _ = try await store.sweepExpired(now: expired, limit: 100)
            case .sweepDataKeys: _ = try await store.sweepExpired(now: windowsOver, limit: 100)
            }
        }
        try wrote.get()
        #expect(ended.sessions >= 1)
        for token: UInt8 in [0x03, 0xF0, 0xFE] {
            #expect(try await store.rows("SELECT 1 FROM sessions WHERE token_hash = \(ByteBuffer(repeating: token, count: 32))").isEmpty)
        }
    }

    /// An operator's "lock every session" goes through the sessions a thousand at a time in token
    /// order, each batch its own transaction: every unlocked session of a large deployment is
    /// locked, counted once, and the locked ones are left as they are.
    @Test(.timeLimit(.minutes(1)), .enabled(if: TestPostgres.isConfigured, "needs KEYFOB_TEST_POSTGRES"))
    func lockingEverySessionGoesThroughThemAllInBatches() async throws {
        let store = try await Self.postgres()
        let alice = user("alice")
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: nil, credential: credential(1, of: alice), session: session(1, of: alice))
        // 2,500 more, every third one already locked.
        _ = try await store.rows(
            """
            INSERT INTO sessions (token_hash, user_id, created_at, expires_at, unlocked_until, data_key)
            SELECT sha256(int4send(n)), \(alice.id), 0, \(t0.timeIntervalSince1970 + 3600),
                   CASE WHEN n % 3 = 0 THEN NULL ELSE \(t0.timeIntervalSince1970 + 600) END, NULL
            FROM generate_series(1, 2500) AS n RETURNING 1
            """)
        let unlocked = try #require(try await store.rows("SELECT count(*) FROM sessions WHERE unlocked_until IS NOT NULL").first?.int(0))
        #expect(unlocked == 1 + 2500 - 833)
        #expect(try await store.lockAllSessions() == unlocked)
        #expect(try await store.rows("SELECT count(*) FROM sessions WHERE unlocked_until IS NOT NULL").first?.int(0) == 0)
        #expect(try await store.lockAllSessions() == 0)
    }

    /// Every call's wait for a lock is bounded at half the store's timeout: a sign-in stuck behind
    /// another transaction's lock fails from PostgreSQL's side (lock_timeout, 55P03) and gives its
    /// connection back, rather than running on after its caller was told it took too long.
    @Test(.timeLimit(.minutes(1)), .enabled(if: TestPostgres.isConfigured, "needs KEYFOB_TEST_POSTGRES"))
    func aCallWaitsForALockAtMostHalfTheTimeout() async throws {
        var settings = try TestPostgres.settings()
        settings.timeout = .seconds(6)
        let store = PostgresStore(settings: settings)
        try await store.migrate()
        #expect(try await store.rows("SHOW lock_timeout").first?.text(0) == "3s")
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
