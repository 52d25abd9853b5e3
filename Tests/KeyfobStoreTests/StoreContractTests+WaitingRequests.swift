import Foundation
import NIOCore
import PostgresNIO
import Synchronization
import Testing

@testable import KeyfobPostgres
@testable import KeyfobStore

/// A waiting request (a signer request, a Polkadot site's) is stored only while what it came
/// through (the browser's or extension's session, the NIP-46 client) still exists, checked as it is stored: a sign-out everywhere cancels what waits after
/// it removed those, so a request stored while it runs is either cancelled by it or refused.
extension StoreContractTests {
    func waiting(_ id: String, of user: UserRecord) -> PendingRequestRecord {
        PendingRequestRecord(
            id: id, userID: user.id, requester: "ip:10.0.0.1", client: "cc", transport: "nip46", method: "sign_event", kind: 1,
            nonce: [1], payload: [2], createdAt: t0, expiresAt: t0 + 300)
    }

    @Test(arguments: Kind.available)
    func aWaitingRequestIsStoredOnlyWhileItsSessionOrClientExists(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice")
        try await register([alice, user("bob")], in: store)  // sessions 1 and 2
        try await store.putBunkerClient(
            BunkerClientRecord(userID: alice.id, clientPubkey: "cc", name: "App", url: nil, perms: "", createdAt: t0))
        let session = PendingRequestSource.session(tokenHash: [UInt8](repeating: 1, count: 32))
        let client = PendingRequestSource.bunkerClient(userID: alice.id, clientPubkey: "cc")

        try await store.insertPendingRequest(waiting("by-session", of: alice), now: t0, maxPending: 8, source: session)
        try await store.insertPendingRequest(waiting("by-client", of: alice), now: t0, maxPending: 8, source: client)
        for (id, source) in [
            ("other-session", PendingRequestSource.session(tokenHash: [UInt8](repeating: 9, count: 32))),
            ("other-client", .bunkerClient(userID: alice.id, clientPubkey: "dd")),
            ("other-account", .bunkerClient(userID: "id-bob", clientPubkey: "cc")),
        ] {
            await #expect(throws: StoreError.notFound, "\(id)") {
                try await store.insertPendingRequest(waiting(id, of: alice), now: t0, maxPending: 8, source: source)
            }
            #expect(try await store.claimPendingRequest(id: id, userID: alice.id, now: t0) == nil, "\(id) is not stored")
        }

        // A Polkadot site's request: the session it came through, the account's own.
        func polkadot(_ id: String) -> PolkadotRequestRecord {
            PolkadotRequestRecord(
                id: id, userID: alice.id, origin: "https://dapp.example", transport: "bridge", messageType: "pub(bytes.sign)",
                request: #"{"data":"0x00"}"#, createdAt: t0, expiresAt: t0 + 300)
        }
        try await store.insertPolkadotRequest(polkadot("p1"), now: t0, maxPending: 8, session: [UInt8](repeating: 1, count: 32))
        for (id, token) in [("p2", UInt8(9)), ("p3", UInt8(2))] {  // unknown; Bob's session: not Alice's
            await #expect(throws: StoreError.notFound, "\(id)") {
                try await store.insertPolkadotRequest(polkadot(id), now: t0, maxPending: 8, session: [UInt8](repeating: token, count: 32))
            }
            #expect(try await store.polkadotRequest(id: id, ofUser: alice.id) == nil)
        }
        await #expect(throws: StoreError.notFound, "another account's session") {
            try await store.insertPendingRequest(
                waiting("bobs-session", of: alice), now: t0, maxPending: 8, source: .session(tokenHash: [UInt8](repeating: 2, count: 32)))
        }

        #expect(try await store.signOutEverywhere(userID: alice.id, now: t0).requests == 3)
        for source in [session, client] {
            await #expect(throws: StoreError.notFound) {
                try await store.insertPendingRequest(waiting("after", of: alice), now: t0, maxPending: 8, source: source)
            }
        }
        await #expect(throws: StoreError.notFound) {
            try await store.insertPolkadotRequest(polkadot("p4"), now: t0, maxPending: 8, session: [UInt8](repeating: 1, count: 32))
        }
        #expect(try await store.claimPendingRequest(id: "after", userID: alice.id, now: t0) == nil)
        // The cap still answers as before when the source is there.
        try await store.putBunkerClient(
            BunkerClientRecord(userID: alice.id, clientPubkey: "cc", name: "App", url: nil, perms: "", createdAt: t0))
        try await store.insertPendingRequest(waiting("one", of: alice), now: t0, maxPending: 1, source: client)
        await #expect(throws: StoreError.limitReached) {
            try await store.insertPendingRequest(waiting("two", of: alice), now: t0, maxPending: 1, source: client)
        }
    }

    /// On PostgreSQL the two race for real: a sign-out everywhere that has removed the session
    /// and clients and cancelled what waited, but not yet committed (held here at its next step,
    /// the sites' metadata), makes the request's store wait, then refuse once it commits.
    @Test(
        .timeLimit(.minutes(1)), .enabled(if: TestPostgres.isConfigured, "needs KEYFOB_TEST_POSTGRES"),
        arguments: [true, false])
    func aRequestStoredWhileASignOutRemovesItsSourceWaitsThenIsRefused(_ bySession: Bool) async throws {
        let store = try await Self.postgres()
        let alice = user("alice")
        try await register([alice], in: store)
        try await store.putBunkerClient(
            BunkerClientRecord(userID: alice.id, clientPubkey: "cc", name: "App", url: nil, perms: "", createdAt: t0))
        try await store.putPolkadotMetadata(
            PolkadotMetadataRecord(
                userID: alice.id, origin: "https://a.example", genesisHash: "0x91", specVersion: 1, definition: "{}", updatedAt: t0),
            runtime: nil)
        let source: PendingRequestSource =
            bySession ? .session(tokenHash: [UInt8](repeating: 1, count: 32)) : .bunkerClient(userID: alice.id, clientPubkey: "cc")
        let request = waiting("r", of: alice), now = t0
        // Without the check the store would not wait, and the request would outlive the sign-out.
        let (ended, stored) = try await whileSigningOut(
            alice, heldAt: "SELECT 1 FROM polkadot_metadata WHERE user_id = \(alice.id) FOR UPDATE", in: store
        ) {
            try await store.insertPendingRequest(request, now: now, maxPending: 8, source: source)
        }
        #expect(throws: StoreError.notFound) { try stored.get() }
        #expect(ended.sessions == 1)
        #expect(try await store.claimPendingRequest(id: "r", userID: alice.id, now: t0) == nil)
    }

    /// A check made after writes (`SessionBound`) reads the session as a sign-out in progress
    /// leaves it: one that deleted the session and the grants it could see, and has not committed
    /// (held here at its next step, the waiting requests), makes the read wait, then find it gone.
    @Test(.timeLimit(.minutes(1)), .enabled(if: TestPostgres.isConfigured, "needs KEYFOB_TEST_POSTGRES"))
    func aSessionReadAfterWritesWaitsForASignOutInProgress() async throws {
        let store = try await Self.postgres()
        let alice = user("alice")
        try await register([alice], in: store)
        try await store.insertPendingRequest(waiting("w", of: alice), now: t0, maxPending: 8)
        let token = [UInt8](repeating: 1, count: 32), now = t0
        #expect(try await store.sessionRemains(tokenHash: token, now: now))
        // Without the lock the read would not wait, and find the session still there.
        let (ended, remains) = try await whileSigningOut(alice, heldAt: "SELECT 1 FROM signer_requests WHERE id = 'w' FOR UPDATE", in: store) {
            try await store.sessionRemains(tokenHash: token, now: now)
        }
        #expect(try remains.get() == false)
        #expect(ended.requests == 1)
    }

    /// Holds `lock` in a transaction, starts a sign-out everywhere of `user` and waits until it
    /// waits on that lock, then starts `next` and waits until it waits on the sign-out (or is
    /// done), then lets both go on: what each came to.
    func whileSigningOut<T: Sendable>(
        _ user: UserRecord, heldAt lock: PostgresQuery, in store: PostgresStore, then next: @escaping @Sendable () async throws -> T
    ) async throws -> (SignedOutEverywhere, Result<T, any Error>) {
        let tasks = Mutex<(signOut: Task<SignedOutEverywhere, any Error>, next: Task<T, any Error>)?>(nil)
        let now = t0
        let held = await holding(lock, in: store) { connection in
            let signOut = Task { try await store.signOutEverywhere(userID: user.id, now: now) }
            let signingOut = try #require(try await Self.backend(blockedBy: try await Self.pid(of: connection, in: store), in: store))
            let done = Flag()
            let second = Task {
                defer { done.value.store(true, ordering: .releasing) }
                return try await next()
            }
            tasks.withLock { $0 = (signOut, second) }
            _ = try await Self.backend(blockedBy: signingOut, in: store, unless: done)
        }
        try await held.value
        let (signOut, second) = try #require(tasks.withLock { $0 })
        return (try await signOut.value, await second.result)
    }

    static func pid(of connection: PostgresConnection, in store: PostgresStore) async throws -> Int32 {
        for try await row in try await connection.query("SELECT pg_backend_pid()", logger: store.logger) { return try row.decode(Int32.self) }
        return 0
    }

    /// The backend `pid` blocks, once one is (found by pid, not counted: other tests share the
    /// cluster); nil if `done` is set first.
    static func backend(blockedBy pid: Int32, in store: PostgresStore, unless done: Flag? = nil) async throws -> Int32? {
        while done?.value.load(ordering: .acquiring) != true {
            if let blocked = try await store.rows("SELECT pid FROM pg_stat_activity WHERE \(pid) = ANY (pg_blocking_pids(pid))").first {
                return Int32(try blocked.int(0))
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }
}

/// Set once by one task, read by another.
final class Flag: Sendable {
    let value = Atomic<Bool>(false)
}
