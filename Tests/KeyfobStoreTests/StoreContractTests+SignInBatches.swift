import Foundation
import NIOCore
import Testing

@testable import KeyfobPostgres
@testable import KeyfobStore

/// PostgreSQL writes sign-ins that arrive together in one call (`SignInBatches`): each caller must
/// get what its sign-in alone would have got, and a batch that fails must cost no one their answer.
extension StoreContractTests {
    static func postgres(poolMax: Int? = nil) async throws -> PostgresStore {
        var settings = try TestPostgres.settings()
        if let poolMax { (settings.maxConnections, settings.minConnections) = (poolMax, 1) }
        let store = PostgresStore(settings: settings)
        try await store.migrate()
        return store
    }

    /// Every outcome a sign-in can have, side by side in one batch, each as the single call gives it.
    @Test(.timeLimit(.minutes(1)), .enabled(if: TestPostgres.isConfigured, "needs KEYFOB_TEST_POSTGRES"))
    func aBatchAnswersEachSignInAsItAloneWouldBeAnswered() async throws {
        let store = try await Self.postgres()
        let (alice, bob, carol, dave) = (user("alice"), user("bob"), user("carol"), user("dave"))
        let key = NostrKeyRecord(userID: bob.id, pubkey: "bb", version: 1, nonce: [1], sealed: [2], updatedAt: t0, passkeySealed: true)
        let plain = NostrKeyRecord(userID: "id-frank", pubkey: "cc", version: 1, nonce: [1], sealed: [2], updatedAt: t0)
        let frank = user("frank")
        try await store.completeRegistration(
            user: frank, createUser: true, nostrKey: plain, credential: credential(6, of: frank), session: session(6, of: frank))
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: nil, credential: credential(1, of: alice, count: 3), session: session(1, of: alice))
        try await store.completeRegistration(
            user: bob, createUser: true, nostrKey: key, credential: credential(2, of: bob), session: session(2, of: bob))
        try await store.completeRegistration(
            user: carol, createUser: true, nostrKey: nil, credential: credential(3, of: carol, count: 10), session: session(3, of: carol))
        try await store.completeRegistration(
            user: dave, createUser: true, nostrKey: nil, credential: credential(4, of: dave, count: 1), session: session(4, of: dave))
        // Dave's challenge was answered once already (a replay of it follows).
        let replayed = used(40, expiresAt: t0 + 120)
        #expect(try await store.completeSignIn(signInWrite(replayed, token: 41, of: dave, count: 2, passkey: 4)) != .passkeyGone)

        var writes = [
            signInWrite(used(10, expiresAt: t0 + 120), token: 10, of: alice, count: 4, passkey: 1),
            signInWrite(used(20, expiresAt: t0 + 120), token: 20, of: bob, count: 0, passkey: 2),
            signInWrite(used(30, expiresAt: t0 + 120), token: 30, of: carol, count: 5, passkey: 3),
            signInWrite(replayed, token: 42, of: dave, count: 3, passkey: 4),
            signInWrite(used(50, expiresAt: t0 + 120), token: 50, of: user("eve"), count: 1, passkey: 5),
            signInWrite(used(11, expiresAt: t0 + 120), token: 11, of: alice, count: 4, passkey: 1),
            // A session with none of the optional columns but its data key (NULLs the arrays carry as NaN and empty).
            {
                var w = signInWrite(used(60, expiresAt: t0 + 120), token: 60, of: frank, count: 1, passkey: 6)
                (w.session.unlockedUntil, w.session.credentialID, w.session.dataKey) = (nil, nil, [7, 7, 7])
                return w
            }(),
        ]
        writes[1].session.credentialID = [2, 2]
        let results = await store.writeSignIns(writes).map { try? $0.get() }
        #expect(results[1] == .signedIn(bob, keySealed: true, backupStateBefore: false))
        #expect(results[2] == .counterBehind(stored: 10))
        #expect(results[3] == .challengeUsed(dave))
        #expect(results[4] == .passkeyGone)
        #expect(results[6] == .signedIn(frank, keySealed: false, backupStateBefore: false))
        let written = try #require(try await store.session(tokenHash: [UInt8](repeating: 60, count: 32), now: t0))
        #expect(written.unlockedUntil == nil && written.credentialID == nil && written.dataKey == [7, 7, 7])
        let withColumns = try #require(try await store.session(tokenHash: [UInt8](repeating: 20, count: 32), now: t0))
        #expect(withColumns.unlockedUntil == t0 + 600 && withColumns.credentialID == [2, 2] && withColumns.dataKey == nil)
        // One counter, two assertions: the first written wins, the second finds the counter moved.
        let alices = [results[0], results[5]]
        #expect(alices.contains(.signedIn(alice, keySealed: nil, backupStateBefore: false)))
        #expect(alices.contains(.counterBehind(stored: 4)))
        #expect(store.signIns.batched.load(ordering: .relaxed) == writes.count)
        // Written: only what the single calls would have written.
        for (token, written) in [(20, true), (30, false), (42, false), (50, false)] {
            #expect(try await hasSession(store, UInt8(token)) == written, "session \(token)")
        }
        #expect(try await hasSession(store, 10) != (try await hasSession(store, 11)))
        #expect(try await store.credential(id: [1, 1])?.signCount == 4)
        #expect(try await store.isChallengeUsed(hash: used(20, expiresAt: t0).hash))
        #expect(try await !store.isChallengeUsed(hash: used(30, expiresAt: t0).hash))
    }

    /// A batch one item breaks (two sessions with one token) is rolled back whole and written
    /// again one by one: the first signs in, the second alone fails.
    @Test(.timeLimit(.minutes(1)), .enabled(if: TestPostgres.isConfigured, "needs KEYFOB_TEST_POSTGRES"))
    func aBatchThatFailsIsWrittenAgainOneByOne() async throws {
        let store = try await Self.postgres()
        let (alice, bob) = (user("alice"), user("bob"))
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: nil, credential: credential(1, of: alice), session: session(1, of: alice))
        try await store.completeRegistration(
            user: bob, createUser: true, nostrKey: nil, credential: credential(2, of: bob), session: session(2, of: bob))
        let results = await store.writeSignIns([
            signInWrite(used(10, expiresAt: t0 + 120), token: 7, of: bob, count: 1, passkey: 2),
            signInWrite(used(20, expiresAt: t0 + 120), token: 7, of: alice, count: 1, passkey: 1),
        ])
        #expect(try results[0].get() == .signedIn(bob, keySealed: nil, backupStateBefore: false))
        #expect(throws: StoreError.self) { try results[1].get() }
        #expect(store.signIns.batched.load(ordering: .relaxed) == 0)
        #expect(try await store.credential(id: [1, 1])?.signCount == 0)
        #expect(try await !store.isChallengeUsed(hash: used(20, expiresAt: t0).hash))
    }

    /// Sign-ins that arrive while the batches in flight are busy go in the next batch together,
    /// and each caller gets its own answer.
    @Test(.timeLimit(.minutes(1)), .enabled(if: TestPostgres.isConfigured, "needs KEYFOB_TEST_POSTGRES"))
    func signInsThatArriveTogetherAreWrittenTogether() async throws {
        // A pool of 2: one batch in flight at a time.
        let store = try await Self.postgres(poolMax: 2)
        #expect(store.signIns.runners == 1)
        let users = (1...30).map { user("u\($0)") }
        try await register(users, in: store)
        // The first sign-in waits on its passkey's row, which another transaction holds, so the
        // others queue behind it.
        // Held until every other sign-in waits in the queue (a loaded machine is slow to start them).
        let holding = await holding("SELECT 1 FROM credentials WHERE id = \(ByteBuffer(bytes: [1, 1])) FOR UPDATE", in: store) { _ in
            while store.signIns.waiting < users.count - 1 { try await Task.sleep(for: .milliseconds(10)) }
        }
        let first = Task { try await store.completeSignIn(signInWrite(used(200, expiresAt: t0 + 120), token: 200, of: users[0], count: 1)) }
        // The first is in flight: its runner took it from the queue.
        while store.signIns.running == 0 || store.signIns.waiting > 0 { try await Task.sleep(for: .milliseconds(10)) }
        let outcomes = try await withThrowingTaskGroup(of: (Int, SignInOutcome).self) { group in
            for n in 1..<users.count {
                group.addTask {
                    let write = signInWrite(
                        used(UInt8(100 + n), expiresAt: t0 + 120), token: UInt8(100 + n), of: users[n], count: 1, passkey: UInt8(n + 1))
                    return (n, try await store.completeSignIn(write))
                }
            }
            return try await group.reduce(into: [Int: SignInOutcome]()) { $0[$1.0] = $1.1 }
        }
        try await holding.value
        #expect(try await first.value == .signedIn(users[0], keySealed: nil, backupStateBefore: false))
        for n in 1..<users.count {
            #expect(outcomes[n] == .signedIn(users[n], keySealed: nil, backupStateBefore: false), "\(users[n].username)")
            #expect(try await hasSession(store, UInt8(100 + n)))
        }
        #expect(store.signIns.batched.load(ordering: .relaxed) == users.count - 1)
    }

    /// The queue's own rules: one runner started per free slot, at most `maxWaiting` waiting (then
    /// refused), batches of at most `maxBatch`, sign-ins past their deadline set apart, and the
    /// runner slot given back when nothing waits.
    @Test func theQueueBoundsWhatWaitsAndGivesItsRunnersBack() {
        let queue = SignInBatches(runners: 2)
        let now = ContinuousClock.now
        let item = { (deadline: ContinuousClock.Instant) in
            SignInBatches.Item(
                write: signInWrite(used(1, expiresAt: t0), token: 1, of: user("a"), count: 1), outcome: Outcome(), deadline: deadline)
        }
        #expect(queue.enqueue(item(now - .seconds(1))) == .runnerStarted)
        #expect(queue.enqueue(item(now + .seconds(5))) == .runnerStarted)
        for _ in 2..<queue.maxWaiting { #expect(queue.enqueue(item(now + .seconds(5))) == .queued) }
        #expect(queue.enqueue(item(now + .seconds(5))) == .refused)
        #expect(queue.waiting == queue.maxWaiting)
        let first = queue.next(now: now)
        #expect(first?.batch.count == SignInBatches.maxBatch - 1 && first?.expired.count == 1)
        var taken = SignInBatches.maxBatch
        while let next = queue.next(now: now) {
            #expect(next.batch.count <= SignInBatches.maxBatch && next.expired.isEmpty)
            taken += next.batch.count
        }
        #expect(taken == queue.maxWaiting && queue.waiting == 0)
        // One runner ended with the queue empty; the other still runs, then ends the same way.
        #expect(queue.enqueue(item(now + .seconds(5))) == .runnerStarted)
        #expect(queue.next(now: now)?.batch.count == 1)
        #expect(queue.next(now: now) == nil && queue.next(now: now) == nil && queue.running == 0)
        #expect(queue.enqueue(item(now + .seconds(5))) == .runnerStarted)
    }
}
