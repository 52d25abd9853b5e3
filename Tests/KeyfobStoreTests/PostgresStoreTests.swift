import Foundation
import KeyfobStore
import NIOCore
import Testing

@testable import KeyfobPostgres

/// What only the PostgreSQL store has: its URL, migrations shared by instances, outages.
@Suite struct PostgresStoreTests {
    @Test func urlsAreReadWithTLSPoolAndSchemaAndNeverShowThePassword() throws {
        let s = try PostgresSettings(url: "postgres://keyfob:s3cr%40t@db.example:6543/keyfob?sslmode=require&pool_max=8&schema=kf&timeout=2.5")
        #expect(s.host == "db.example" && s.port == 6543 && s.username == "keyfob" && s.password == "s3cr@t")
        #expect(s.database == "keyfob" && s.tls == .require && s.maxConnections == 8 && s.schema == "kf")
        #expect(s.timeout == .milliseconds(2500))
        #expect(!s.redacted.contains("s3cr"))
        #expect(try PostgresSettings(url: "postgresql://u@h/d").tls == .disable)  // TLS only when the URL asks
        #expect(try PostgresSettings(url: "postgres://u@h/d?sslmode=verify-full").tls == .verifyFull)
        #expect(try PostgresSettings(url: "postgres://u@/d?host=/run/postgresql").socketPath == "/run/postgresql")
        // The pool: kept connections and the idle check.
        let defaults = try PostgresSettings(url: "postgres://u@h/d")
        #expect(defaults.maxConnections == PostgresSettings.defaultMaxConnections && defaults.minConnections == 2)
        #expect(defaults.keepAlive == nil && (4...20).contains(PostgresSettings.defaultMaxConnections))
        #expect(try PostgresSettings(url: "postgres://u@h/d?pool_max=1").minConnections == 0)  // always below the maximum
        let pinned = try PostgresSettings(url: "postgres://u@h/d?pool_max=6&pool_min=5&keepalive=0")
        #expect(pinned.minConnections == 5 && pinned.maxConnections == 6 && pinned.keepAlive == nil)
        #expect(pinned.clientConfiguration.options.minimumConnections == 5 && pinned.clientConfiguration.options.keepAliveBehavior == nil)
        #expect(try PostgresSettings(url: "postgres://u@h/d?keepalive=10").clientConfiguration.options.keepAliveBehavior?.frequency == .seconds(10))
        for bad in [
            "postgres://u@h/d?pool_max=4&pool_min=5", "postgres://u@h/d?pool_max=4&pool_min=4", "postgres://u@h/d?pool_min=-1",
            "postgres://u@h/d?keepalive=x", "postgres://u@h/d?keepalive=-3",
            "postgres://h/d", "postgres://u@h/", "postgres://u@h/d?sslmode=maybe", "postgres://u@h/d?pool_max=0",
            "postgres://u@h/d?schema=Robert');DROP", "postgres://u@h/d?timeout=-1", "mysql://u@h/d",
        ] {
            #expect(throws: PostgresSettings.Invalid.self, "\(bad)") { try PostgresSettings(url: bad) }
        }
    }

    /// A sign-in whose write waits for a removal of its passkey (another transaction holds the
    /// row) reads the passkey as gone once the removal commits, not as a lost race.
    @Test(.timeLimit(.minutes(1)), .enabled(if: TestPostgres.isConfigured, "needs KEYFOB_TEST_POSTGRES"))
    func aRemovalASignInWaitedForReadsAsGone() async throws {
        let store = PostgresStore(settings: try TestPostgres.settings())
        try await store.migrate()
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        let alice = UserRecord(id: "id-alice", username: "alice", isAnonymous: false, createdAt: t0)
        let passkey = CredentialRecord(
            id: [1, 1], userID: alice.id, publicKey: [1, 2, 3], algorithm: -7, signCount: 3, transports: [],
            aaguid: [UInt8](repeating: 0, count: 16), attestationFormat: "none", backupEligible: true, backupState: false, createdAt: t0)
        let session = { (byte: UInt8) in
            SessionRecord(tokenHash: [UInt8](repeating: byte, count: 32), userID: alice.id, createdAt: t0, expiresAt: t0 + 3600, unlockedUntil: nil)
        }
        try await store.completeRegistration(user: alice, createUser: true, nostrKey: nil, credential: passkey, session: session(1))
        // The sign-in starts only once the removal has deleted the row (a fixed delay let a
        // loaded machine run the sign-in first); the removal then holds its transaction open.
        let (deleted, signal) = AsyncStream<Void>.makeStream()
        let removing = Task {
            defer { signal.finish() }
            try await store.transaction { connection in
                try await connection.query("DELETE FROM credentials WHERE id = \(ByteBuffer(bytes: [1, 1]))", logger: store.logger).collect()
                signal.yield()
                try await Task.sleep(for: .milliseconds(1000))
            }
        }
        for await _ in deleted { break }
        let outcome = try await store.completeSignIn(
            SignInWrite(
                credentialID: [1, 1], userID: alice.id, publicKey: [1, 2, 3], newSignCount: 4, backupState: false, usedAt: t0,
                session: session(2), usedChallenge: UsedChallenge(hash: [UInt8](repeating: 9, count: 32), expiresAt: t0 + 120)))
        try await removing.value
        #expect(outcome == .passkeyGone)
        #expect(try await store.session(tokenHash: [UInt8](repeating: 2, count: 32), now: t0) == nil)
    }

    @Test(.enabled(if: TestPostgres.isConfigured, "needs KEYFOB_TEST_POSTGRES"))
    func tenInstancesStartingTogetherMigrateOnce() async throws {
        let settings = try TestPostgres.settings()
        let stores = (0..<10).map { _ in PostgresStore(settings: settings) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for store in stores { group.addTask { try await store.migrate() } }
            try await group.waitForAll()
        }
        #expect(try await stores[3].appliedVersions() == Array(1...PostgresSchema.migrations.count))
        // Every instance works on the one schema.
        let user = UserRecord(id: "u1", username: "alice", isAnonymous: false, createdAt: Date(timeIntervalSince1970: 1_800_000_000))
        try await stores[0].completeRegistration(
            user: user, createUser: true, nostrKey: nil,
            credential: CredentialRecord(
                id: [1], userID: "u1", publicKey: [1], algorithm: -7, signCount: 0, transports: [], aaguid: [],
                attestationFormat: "none", backupEligible: false, backupState: false, createdAt: user.createdAt),
            session: SessionRecord(tokenHash: [1], userID: "u1", createdAt: user.createdAt, expiresAt: user.createdAt + 60, unlockedUntil: nil))
        #expect(try await stores[9].user(named: "ALICE") == user)
        for store in stores { store.shutdown() }
    }

    /// A reply queued by one instance wakes the others at once (LISTEN/NOTIFY), and one holder
    /// of a role at a time.
    @Test(.timeLimit(.minutes(1)), .enabled(if: TestPostgres.isConfigured, "needs KEYFOB_TEST_POSTGRES"))
    func queuedRepliesNotifyOtherInstancesAndARoleHasOneHolder() async throws {
        let settings = try TestPostgres.settings()
        let (a, b) = (PostgresStore(settings: settings), PostgresStore(settings: settings))
        defer { a.shutdown(); b.shutdown() }
        try await a.migrate()
        try await b.migrate()
        let signals = try #require(b.bunkerReplySignals())
        var iterator = signals.makeAsyncIterator()
        _ = await iterator.next()  // listening
        try await a.appendBunkerReply("{}", at: Date(), dropBefore: Date().addingTimeInterval(-600))
        _ = await iterator.next()  // notified
        #expect(try await b.bunkerReplies(since: Date().addingTimeInterval(-5), limit: 10).map(\.event) == ["{}"])

        let holding = AsyncStream.makeStream(of: Void.self)
        let holder = Task {
            try await a.holdingRole("test") {
                holding.continuation.yield(); try await Task.sleep(for: .seconds(60))
            }
        }
        var held = holding.stream.makeAsyncIterator()
        _ = await held.next()
        #expect(try await b.holdingRole("test") { Issue.record("two holders") } == false)
        holder.cancel()
        _ = try? await holder.value
        #expect(try await b.holdingRole("test") {})  // released with the holder
    }

    /// How fast is pinned by the end-to-end outage test (a separate process); here, with the whole
    /// suite competing for two cores, only that it ends as `unavailable` and never hangs.
    @Test(.timeLimit(.minutes(1)))
    func anUnreachableDatabaseFailsAsUnavailable() async throws {
        // Nothing listens on port 1.
        let store = PostgresStore(settings: try PostgresSettings(url: "postgres://keyfob@127.0.0.1:1/keyfob?timeout=1"))
        defer { store.shutdown() }
        await #expect {
            try await store.migrate()
        } throws: { error in
            if case StoreError.unavailable = error { return true }
            return false
        }
        // Before start-up finished, calls are refused at once.
        await #expect(throws: StoreError.self) { try await store.healthCheck() }
    }
}
