import Foundation
import PostgresNIO
import Testing

@testable import KeyfobPostgres
@testable import KeyfobStore

/// The contract every `KeyfobStore` keeps, run against each implementation: an in-memory SQLite
/// database, a WAL file on disk, and PostgreSQL (a schema of its own per test, in the cluster
/// `KEYFOB_TEST_POSTGRES` names; `make test` starts a throwaway one).
@Suite struct StoreContractTests {
    enum Kind: String, CaseIterable, Sendable {
        case memory, file, postgres

        /// The backends this run can test: PostgreSQL only with a cluster (`TestPostgres`).
        static var available: [Kind] { TestPostgres.isConfigured ? allCases : [.memory, .file] }
    }

    static func make(_ kind: Kind, maxSessionsPerUser: Int = 50) async throws -> (any KeyfobStore, String?) {
        switch kind {
        case .memory: return (try SQLiteStore(path: ":memory:", maxSessionsPerUser: maxSessionsPerUser), nil)
        case .file:
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keyfob-store-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let path = dir.appendingPathComponent("keyfob.sqlite").path
            return (try SQLiteStore(path: path, maxSessionsPerUser: maxSessionsPerUser), path)
        case .postgres:
            let store = PostgresStore(settings: try TestPostgres.settings(), maxSessionsPerUser: maxSessionsPerUser)
            try await store.migrate()
            return (store, nil)
        }
    }

    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    func user(_ name: String) -> UserRecord { UserRecord(id: "id-\(name)", username: name, isAnonymous: false, createdAt: t0) }
    func credential(_ id: UInt8, of user: UserRecord, count: UInt32 = 0) -> CredentialRecord {
        CredentialRecord(
            id: [id, id], userID: user.id, publicKey: [1, 2, 3], algorithm: -7, signCount: count,
            transports: ["internal", "hybrid"], aaguid: [UInt8](repeating: 0, count: 16), attestationFormat: "none",
            backupEligible: true, backupState: false, createdAt: t0)
    }
    func session(_ byte: UInt8, of user: UserRecord, ttl: TimeInterval = 3600) -> SessionRecord {
        SessionRecord(
            tokenHash: [UInt8](repeating: byte, count: 32), userID: user.id, createdAt: t0,
            expiresAt: t0 + ttl, unlockedUntil: t0 + 600)
    }

    /// New accounts, the n-th with passkey [n, n] and session n (from 1).
    func register(_ users: [UserRecord], in store: any KeyfobStore) async throws {
        for (i, u) in users.enumerated() {
            try await store.completeRegistration(
                user: u, createUser: true, nostrKey: nil, credential: credential(UInt8(i + 1), of: u),
                session: session(UInt8(i + 1), of: u))
        }
    }

    @Test(arguments: Kind.available)
    func registrationWritesUserCredentialAndSessionTogether(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice")
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: nil, credential: credential(1, of: alice), session: session(1, of: alice))
        #expect(try await store.user(named: "ALICE") == alice)  // usernames are case-insensitive
        #expect(try await store.credential(id: [1, 1])?.transports == ["internal", "hybrid"])
        #expect(try await store.session(tokenHash: [UInt8](repeating: 1, count: 32), now: t0)?.userID == alice.id)
        #expect(try await store.countUsersAndCredentials() == (1, 1))
    }

    /// A row the store cannot read as its record (a time that is not a time, put there by hand or a
    /// bad restore) is an error in both backends, never a record with an empty field.
    @Test(arguments: Kind.available)
    func aBadRowIsAnErrorNotAnEmptyRecord(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice")
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: nil, credential: credential(1, of: alice), session: session(1, of: alice))
        if let sqlite = store as? SQLiteStore {
            try sqlite.write { try sqlite.connection.execute("UPDATE users SET created_at = 'yesterday'") }
        } else if let postgres = store as? PostgresStore {
            try await postgres.client.query("ALTER TABLE users ALTER COLUMN created_at DROP NOT NULL")
            try await postgres.client.query("UPDATE users SET created_at = NULL")
        }
        await #expect(throws: (any Error).self) { try await store.user(id: alice.id) }
        await #expect(throws: (any Error).self) { try await store.user(named: "alice") }
        await #expect(throws: (any Error).self) { try await store.credentialWithOwner(id: [1, 1]) }
        // Rows of other records still read.
        #expect(try await store.credential(id: [1, 1])?.userID == alice.id)
    }

    /// A sign-in's one read: the same records the three separate lookups give, the key absent
    /// until the account has one.
    @Test(arguments: Kind.available)
    func aPasskeyComesWithItsAccountAndKeyInOneRead(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let (alice, bob) = (user("alice"), user("bob"))
        var aliceKey = NostrKeyRecord(userID: alice.id, pubkey: "ab", version: 3, nonce: [1, 2], sealed: [3, 4], updatedAt: t0 + 0.25)
        aliceKey.passkeySealed = true
        // Every column round-trips through both lookups, the optional ones included.
        var aliceCredential = credential(1, of: alice)
        (aliceCredential.name, aliceCredential.createdOn, aliceCredential.prfCapable) = ("work laptop", "Chrome on Linux", true)
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: aliceKey, credential: aliceCredential, session: session(1, of: alice))
        var bobCredential = credential(2, of: bob)
        bobCredential.prfCapable = false
        try await store.completeRegistration(
            user: bob, createUser: true, nostrKey: nil, credential: bobCredential,
            session: session(2, of: bob))
        let bobs = try #require(try await store.credentialWithOwner(id: [2, 2]))
        #expect(bobs.user == bob && bobs.nostrKey == nil && bobs.credential.userID == bob.id)
        let owner = try #require(try await store.credentialWithOwner(id: [1, 1]))
        #expect(owner.credential == (try await store.credential(id: [1, 1])) && owner.credential == aliceCredential)
        #expect(bobs.credential == bobCredential && bobs.credential.prfCapable == false)
        #expect(owner.user == alice)
        #expect(owner.nostrKey == aliceKey)
        #expect(try await store.credentialWithOwner(id: [9, 9]) == nil)
    }

    @Test(arguments: Kind.available)
    func aFailedRegistrationLeavesNothingBehind(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice")
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: nil, credential: credential(1, of: alice), session: session(1, of: alice))
        // Same username, new user: nothing of it may remain.
        var other = user("Alice"); other.id = "id-other"
        await #expect(throws: StoreError.usernameTaken) {
            try await store.completeRegistration(
                user: other, createUser: true, nostrKey: nil, credential: credential(2, of: other), session: session(2, of: other))
        }
        // A credential id registers once; the new user is rolled back with it.
        let bob = user("bob")
        await #expect(throws: StoreError.credentialExists) {
            try await store.completeRegistration(
                user: bob, createUser: true, nostrKey: nil, credential: credential(1, of: bob), session: session(3, of: bob))
        }
        #expect(try await store.user(named: "bob") == nil)
        #expect(try await store.session(tokenHash: [UInt8](repeating: 3, count: 32), now: t0) == nil)
        #expect(try await store.countUsersAndCredentials() == (1, 1))
    }

    @Test(arguments: Kind.available)
    func challengesAreConsumedOnce(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let c = ChallengeRecord(
            challenge: [7, 7], ceremony: .registration, key: "alice", userID: "u", username: "alice",
            algorithms: [-7, -8], expiresAt: t0 + 60)
        try await store.insertChallenge(c, now: t0, maxPerClient: 10)
        #expect(try await store.consumeChallenge([7, 7]) == c)
        #expect(try await store.consumeChallenge([7, 7]) == nil)
    }

    /// A sign-in's one call: the challenge consumed and its passkey read, as the two calls would.
    @Test(arguments: Kind.available)
    func aSignInConsumesItsChallengeAndReadsItsPasskeyInOneCall(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice")
        let aliceKey = NostrKeyRecord(
            userID: alice.id, pubkey: String(repeating: "ab", count: 32), version: 1, nonce: [1], sealed: [2], updatedAt: t0)
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: aliceKey, credential: credential(1, of: alice), session: session(1, of: alice))
        let bob = user("bob")
        try await store.completeRegistration(
            user: bob, createUser: true, nostrKey: nil, credential: credential(2, of: bob), session: session(2, of: bob))
        for value: UInt8 in 1...3 {
            try await store.insertChallenge(
                ChallengeRecord(challenge: [9, value], ceremony: .authentication, key: "k\(value)", expiresAt: t0 + 60, clientIP: "10.0.0.1"),
                now: t0, maxPerClient: 10)
        }

        let (challenge, owner) = try #require(try await store.consumeChallenge([9, 1], credentialID: [1, 1]))
        #expect(challenge.key == "k1" && challenge.clientIP == "10.0.0.1" && challenge.expiresAt == t0 + 60)
        #expect(owner == (try await store.credentialWithOwner(id: [1, 1])))
        #expect(owner?.user == alice && owner?.nostrKey == aliceKey)
        // An account without a key yet: its key columns read as none.
        let (_, bobs) = try #require(try await store.consumeChallenge([9, 2], credentialID: [2, 2]))
        #expect(bobs?.user == bob && bobs?.nostrKey == nil)
        // An unknown passkey still uses the challenge up.
        let (third, nobody) = try #require(try await store.consumeChallenge([9, 3], credentialID: [7, 7]))
        #expect(third.key == "k3" && nobody == nil)
        // A challenge is consumed once, whatever passkey comes with it.
        #expect(try await store.consumeChallenge([9, 1], credentialID: [1, 1]) == nil)
        #expect(try await store.consumeChallenge([9, 3]) == nil)
        #expect(try await store.consumeChallenge([8, 8], credentialID: [1, 1]) == nil)
    }

    @Test(arguments: Kind.available)
    func expiredRowsAreSweptInBoundedBatches(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        for i in 0..<25 {
            try await store.insertChallenge(
                ChallengeRecord(
                    challenge: [1, UInt8(i)], ceremony: .authentication, key: "k",
                    expiresAt: t0 + 60), now: t0, maxPerClient: 100)
        }
        try await store.insertChallenge(
            ChallengeRecord(challenge: [2], ceremony: .authentication, key: "k", expiresAt: t0 + 200),
            now: t0 + 100, maxPerClient: 100)
        let alice = user("alice")
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: nil, credential: credential(1, of: alice),
            session: session(1, of: alice, ttl: 60))
        // Inserting no longer sweeps; the sweeper does, at most `limit` rows of each kind a call.
        #expect(try await store.sweepExpired(now: t0 + 100, limit: 10) == 11)  // 10 challenges + 1 session
        #expect(try await store.sweepExpired(now: t0 + 100, limit: 10) == 10)
        #expect(try await store.sweepExpired(now: t0 + 100, limit: 10) == 5)
        #expect(try await store.sweepExpired(now: t0 + 100, limit: 10) == 0)
        #expect(try await store.consumeChallenge([1, 0]) == nil)
        #expect(try await store.consumeChallenge([2]) != nil)
    }

    @Test(arguments: Kind.available)
    func liveChallengesAreCappedPerClient(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        func challenge(_ i: UInt8, ip: String, expires: TimeInterval = 60) -> ChallengeRecord {
            ChallengeRecord(challenge: [3, i], ceremony: .authentication, key: "k", expiresAt: t0 + expires, clientIP: ip)
        }
        try await store.insertChallenge(challenge(0, ip: "10.0.0.1", expires: -1), now: t0, maxPerClient: 3)  // expired: not counted
        for i in 1...3 { try await store.insertChallenge(challenge(UInt8(i), ip: "10.0.0.1"), now: t0, maxPerClient: 3) }
        await #expect(throws: StoreError.limitReached) {
            try await store.insertChallenge(challenge(9, ip: "10.0.0.1"), now: t0, maxPerClient: 3)
        }
        try await store.insertChallenge(challenge(10, ip: "10.0.0.2"), now: t0, maxPerClient: 3)
        #expect(try await store.consumeChallenge([3, 1])?.clientIP == "10.0.0.1")
        try await store.insertChallenge(challenge(11, ip: "10.0.0.1"), now: t0, maxPerClient: 3)  // one was used
    }

    /// A store that keeps three sessions a user, and alice registered with session 1.
    func aliceWithSessionsCappedAtThree(_ kind: Kind) async throws -> (any KeyfobStore, UserRecord) {
        let (store, _) = try await Self.make(kind, maxSessionsPerUser: 3)
        let alice = user("alice")
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: nil, credential: credential(1, of: alice, count: 1),
            session: session(1, of: alice))
        return (store, alice)
    }

    @Test(arguments: Kind.available)
    func sessionsPerUserAreCappedOldestFirst(_ kind: Kind) async throws {
        let (store, alice) = try await aliceWithSessionsCappedAtThree(kind)
        for i in 2...5 {
            var s = session(UInt8(i), of: alice)
            s.createdAt = t0 + TimeInterval(i)
            try await store.completeAuthentication(
                credentialID: [1, 1], expectedSignCount: UInt32(i - 1), newSignCount: UInt32(i),
                backupState: false, usedAt: t0, session: s)
        }
        let live = try await (1...5).asyncFilter { try await store.session(tokenHash: [UInt8](repeating: $0, count: 32), now: t0) != nil }
        #expect(live == [3, 4, 5])
    }

    /// Sessions started in the same instant (a fixed clock, or two sign-ins within a timer tick)
    /// still leave exactly the cap: the bound breaks ties instead of taking every tied session.
    @Test(arguments: Kind.available)
    func theSessionCapHoldsWhenSessionsShareTheirStartTime(_ kind: Kind) async throws {
        let (store, alice) = try await aliceWithSessionsCappedAtThree(kind)
        for i in 2...6 {
            try await store.completeAuthentication(
                credentialID: [1, 1], expectedSignCount: UInt32(i - 1), newSignCount: UInt32(i),
                backupState: false, usedAt: t0, session: session(UInt8(i), of: alice))
        }
        let live = try await (1...6).asyncFilter { try await store.session(tokenHash: [UInt8](repeating: $0, count: 32), now: t0) != nil }
        #expect(live.count == 3)
        #expect(live.contains(6), "the session just started is never the one that ends")
    }

    @Test(arguments: Kind.available)
    func theCounterIsACompareAndSwap(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice")
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: nil, credential: credential(1, of: alice, count: 5), session: session(1, of: alice))
        try await store.completeAuthentication(
            credentialID: [1, 1], expectedSignCount: 5, newSignCount: 6, backupState: true,
            usedAt: t0 + 10, session: session(2, of: alice))
        // A second assertion that read the old counter loses, and writes no session.
        await #expect(throws: StoreError.conflict) {
            try await store.completeAuthentication(
                credentialID: [1, 1], expectedSignCount: 5, newSignCount: 6, backupState: true,
                usedAt: t0 + 11, session: session(3, of: alice))
        }
        let stored = try await store.credential(id: [1, 1])
        #expect(stored?.signCount == 6 && stored?.backupState == true && stored?.lastUsedAt == t0 + 10)
        #expect(try await store.session(tokenHash: [UInt8](repeating: 3, count: 32), now: t0) == nil)
    }

    /// Sign-ins racing on the same counters, all at once (SQLite on disk commits them in groups,
    /// each a savepoint): per passkey exactly one wins and writes its session; a loser's rollback
    /// takes nothing of the others' with it.
    @Test(arguments: Kind.available)
    func racingSignInsEachWinOrLoseAlone(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let users = (0..<8).map { user("racer\($0)") }
        for (n, u) in users.enumerated() {
            try await store.completeRegistration(
                user: u, createUser: true, nostrKey: nil, credential: credential(UInt8(n + 1), of: u), session: session(UInt8(n + 1), of: u))
        }
        let outcomes = try await withThrowingTaskGroup(of: (Int, UInt8, Bool).self) { group in
            for (n, u) in users.enumerated() {
                for attempt in 0..<4 {
                    let token = UInt8(100 + n * 4 + attempt)
                    let s = session(token, of: u)
                    group.addTask {
                        do {
                            try await store.completeAuthentication(
                                credentialID: [UInt8(n + 1), UInt8(n + 1)], expectedSignCount: 0, newSignCount: 1,
                                backupState: false, usedAt: t0, session: s)
                            return (n, token, true)
                        } catch StoreError.conflict {
                            return (n, token, false)
                        }
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for n in users.indices {
            let mine = outcomes.filter { $0.0 == n }
            #expect(mine.filter(\.2).count == 1, "passkey \(n): \(mine)")
            for (_, token, won) in mine {
                let stored = try await store.session(tokenHash: [UInt8](repeating: token, count: 32), now: t0)
                #expect((stored != nil) == won)
            }
            #expect(try await store.credential(id: [UInt8(n + 1), UInt8(n + 1)])?.signCount == 1)
        }
    }

    @Test(arguments: Kind.available)
    func sessionsExpireAndCanBeDeleted(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice")
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: nil, credential: credential(1, of: alice), session: session(1, of: alice, ttl: 60))
        let hash = [UInt8](repeating: 1, count: 32)
        #expect(try await store.session(tokenHash: hash, now: t0 + 59) != nil)
        #expect(try await store.session(tokenHash: hash, now: t0 + 61) == nil)
        try await store.deleteSession(tokenHash: hash)
        #expect(try await store.session(tokenHash: hash, now: t0) == nil)
    }

    @Test(arguments: Kind.available)
    func theLastPasskeyCannotBeRemoved(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice")
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: nil, credential: credential(1, of: alice), session: session(1, of: alice))
        await #expect(throws: StoreError.conflict) { _ = try await store.deleteCredential(id: [1, 1], ofUser: alice.id) }
        try await store.completeRegistration(
            user: alice, createUser: false, nostrKey: nil, credential: credential(2, of: alice), session: session(2, of: alice))
        #expect(try await store.deleteCredential(id: [9, 9], ofUser: alice.id) == false)
        #expect(try await store.deleteCredential(id: [1, 1], ofUser: "id-mallory") == false)
        #expect(try await store.deleteCredential(id: [1, 1], ofUser: alice.id))
        #expect(try await store.credentials(ofUser: alice.id).map(\.id) == [[2, 2]])
    }

    /// Removing a passkey ends the sessions it started, and only those (found through the account's
    /// sessions: there is no index of sessions by passkey).
    @Test(arguments: Kind.available)
    func removingAPasskeyEndsTheSessionsItStarted(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice")
        var first = session(1, of: alice)
        first.credentialID = [1, 1]
        var second = session(2, of: alice)
        second.credentialID = [2, 2]
        try await store.completeRegistration(user: alice, createUser: true, nostrKey: nil, credential: credential(1, of: alice), session: first)
        try await store.completeRegistration(user: alice, createUser: false, nostrKey: nil, credential: credential(2, of: alice), session: second)
        var again = session(3, of: alice)
        again.credentialID = [1, 1]
        try await store.completeAuthentication(
            credentialID: [1, 1], expectedSignCount: 0, newSignCount: 1, backupState: false, usedAt: t0, session: again)
        #expect(try await store.deleteCredential(id: [1, 1], ofUser: alice.id))
        for byte: UInt8 in [1, 3] { #expect(try await store.session(tokenHash: [UInt8](repeating: byte, count: 32), now: t0) == nil) }
        #expect(try await store.session(tokenHash: [UInt8](repeating: 2, count: 32), now: t0) != nil)
    }

    @Test(arguments: Kind.available)
    func keyWrapsFollowTheSealAndTheirPasskeys(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice")
        let key = NostrKeyRecord(userID: alice.id, pubkey: "ab", version: 1, nonce: [1], sealed: [2], updatedAt: t0)
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: key, credential: credential(1, of: alice), session: session(1, of: alice))
        try await store.completeRegistration(
            user: alice, createUser: false, nostrKey: nil, credential: credential(2, of: alice), session: session(2, of: alice))
        let wrap1 = KeyWrapRecord(userID: alice.id, credentialID: [1, 1], wrapped: [9], createdAt: t0)
        // Not sealed yet: no wrap can be put.
        #expect(try await store.putKeyWrap(wrap1) == false)
        var sealed = key
        sealed.version = 2
        sealed.passkeySealed = true
        try await store.changeKeyProtection(
            sealed, expectedVersion: 1, wraps: [wrap1], keepingSession: [UInt8](repeating: 1, count: 32),
            sessionDataKey: [7, 7])
        #expect(try await store.nostrKey(ofUser: alice.id)?.passkeySealed == true)
        #expect(try await store.session(tokenHash: [UInt8](repeating: 1, count: 32), now: t0)?.dataKey == [7, 7])
        #expect(try await store.session(tokenHash: [UInt8](repeating: 2, count: 32), now: t0)?.dataKey == nil)
        // A stale version changes nothing.
        await #expect(throws: StoreError.conflict) {
            try await store.changeKeyProtection(key, expectedVersion: 1, wraps: [], keepingSession: nil, sessionDataKey: nil)
        }
        // Someone else's passkey cannot be wrapped; one's own can.
        #expect(try await store.putKeyWrap(KeyWrapRecord(userID: alice.id, credentialID: [5, 5], wrapped: [9], createdAt: t0)) == false)
        #expect(try await store.putKeyWrap(KeyWrapRecord(userID: alice.id, credentialID: [2, 2], wrapped: [8], createdAt: t0)))
        #expect(try await store.keyWraps(ofUser: alice.id).count == 2)
        // Removing a passkey removes its wrap; the last sealing passkey stays.
        #expect(try await store.deleteCredential(id: [1, 1], ofUser: alice.id))
        #expect(try await store.keyWraps(ofUser: alice.id).map(\.credentialID) == [[2, 2]])
        try await store.completeRegistration(
            user: alice, createUser: false, nostrKey: nil, credential: credential(3, of: alice), session: session(3, of: alice))
        await #expect(throws: StoreError.lastSealingPasskey) { _ = try await store.deleteCredential(id: [2, 2], ofUser: alice.id) }
        // The session copy: set with the unlock window, cleared by the kill switch, and swept when the window ends.
        #expect(try await store.unlockSession(tokenHash: [UInt8](repeating: 3, count: 32), until: t0 + 600, dataKey: [6]))
        #expect(try await store.unlockSession(tokenHash: [UInt8](repeating: 9, count: 32), until: t0 + 600, dataKey: [6]) == false)
        #expect(try await store.session(tokenHash: [UInt8](repeating: 3, count: 32), now: t0)?.dataKey == [6])
        #expect(try await store.session(tokenHash: [UInt8](repeating: 3, count: 32), now: t0)?.isUnlocked(at: t0 + 599) == true)
        _ = try await store.sweepExpired(now: t0 + 601, limit: 100)
        #expect(try await store.session(tokenHash: [UInt8](repeating: 3, count: 32), now: t0 + 601)?.dataKey == nil)
        #expect(try await store.unlockSession(tokenHash: [UInt8](repeating: 3, count: 32), until: t0 + 600, dataKey: [6]))
        _ = try await store.lockAllSessions()
        #expect(try await store.session(tokenHash: [UInt8](repeating: 3, count: 32), now: t0)?.dataKey == nil)
        // Unsealing drops every wrap.
        var plain = sealed
        plain.version = 3
        plain.passkeySealed = false
        try await store.changeKeyProtection(plain, expectedVersion: 2, wraps: [], keepingSession: nil, sessionDataKey: nil)
        #expect(try await store.keyWraps(ofUser: alice.id).isEmpty)
        #expect(try await store.deleteCredential(id: [2, 2], ofUser: alice.id))
    }
}

extension Sequence {
    func asyncFilter(_ keep: (Element) async throws -> Bool) async rethrows -> [Element] {
        var out: [Element] = []
        for item in self where try await keep(item) { out.append(item) }
        return out
    }
}
