import Foundation
import PostgresNIO
import Testing

@testable import KeyfobPostgres
@testable import KeyfobStore

/// The rest of the store contract: keys, approvals, audit and NIP-46, for every backend.
extension StoreContractTests {
    @Test(arguments: Kind.available)
    func usersAreFoundByNameCaseInsensitivelyAndPaged(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        try await register(["carol", "Alice", "bob", "al_x", "dave"].map(user), in: store)
        #expect(try await store.users(matching: nil, after: nil, limit: 10).map(\.username) == ["al_x", "Alice", "bob", "carol", "dave"])
        #expect(try await store.users(matching: nil, after: "bob", limit: 2).map(\.username) == ["carol", "dave"])
        #expect(try await store.users(matching: "AL", after: nil, limit: 10).map(\.username) == ["al_x", "Alice"])
        // % and _ are literal in a search.
        #expect(try await store.users(matching: "_", after: nil, limit: 10).map(\.username) == ["al_x"])
        #expect(try await store.users(matching: "%", after: nil, limit: 10).isEmpty)
        #expect(try await store.user(id: "id-bob")?.username == "bob")
        #expect(try await store.countUsersAndCredentials() == (5, 5))
        // Deleting an account takes its passkeys and sessions with it.
        #expect(try await store.deleteUser(id: "id-bob"))
        #expect(try await store.deleteUser(id: "id-bob") == false)
        #expect(try await store.credential(id: [3, 3]) == nil)
        #expect(try await store.session(tokenHash: [UInt8](repeating: 3, count: 32), now: t0) == nil)
        #expect(try await store.countUsersAndCredentials() == (4, 4))
        #expect(try await store.renameCredential(id: [1, 1], ofUser: "id-carol", name: "work laptop"))
        #expect(try await store.renameCredential(id: [1, 1], ofUser: "id-dave", name: "theirs") == false)
        #expect(try await store.credential(id: [1, 1])?.name == "work laptop")
        #expect(try await store.renameCredential(id: [1, 1], ofUser: "id-carol", name: nil))
        #expect(try await store.credential(id: [1, 1])?.name == nil)
    }

    @Test(arguments: Kind.available)
    func nostrKeysAreInsertedOnceReplacedByVersionAndRewrappedTogether(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice"), bob = user("bob")
        try await register([alice, bob], in: store)
        let key = NostrKeyRecord(userID: alice.id, pubkey: "aa", version: 1, nonce: [1, 2], sealed: [3, 4], updatedAt: t0)
        #expect(try await store.insertNostrKeyIfAbsent(key) == key)
        var other = key
        other.pubkey = "bb"
        #expect(try await store.insertNostrKeyIfAbsent(other) == key)  // the first one stays
        var imported = key
        imported.pubkey = "cc"
        imported.version = 2
        try await store.replaceNostrKey(imported, expectedVersion: 1)
        await #expect(throws: StoreError.conflict) { try await store.replaceNostrKey(imported, expectedVersion: 1) }
        #expect(try await store.nostrKey(ofUser: alice.id) == imported)
        let bobKey = NostrKeyRecord(userID: bob.id, pubkey: "dd", version: 1, nonce: [5], sealed: [6], updatedAt: t0)
        _ = try await store.insertNostrKeyIfAbsent(bobKey)
        let all = try await store.allNostrKeys()
        #expect(all.map(\.userID) == [alice.id, bob.id])
        // Rotation: all keys and the check value, or nothing.
        var rewrapped = all.map {
            var k = $0; k.nonce = [9]; k.sealed = [9, 9]; return k
        }
        await #expect(throws: StoreError.conflict) {
            try await store.rewrapNostrKeys(Array(rewrapped.prefix(1)), masterKeyCheck: [1])  // one key missing
        }
        #expect(try await store.metaValue("master_key_check") == nil)
        rewrapped[1].version = 7  // changed since it was read
        await #expect(throws: StoreError.conflict) { try await store.rewrapNostrKeys(rewrapped, masterKeyCheck: [1]) }
        #expect(try await store.nostrKey(ofUser: alice.id)?.sealed == [3, 4])
        rewrapped[1].version = 1
        try await store.rewrapNostrKeys(rewrapped, masterKeyCheck: [1])
        #expect(try await store.allNostrKeys().map(\.sealed) == [[9, 9], [9, 9]])
        #expect(try await store.metaValue("master_key_check") == [1])
    }

    @Test(arguments: Kind.available)
    func metaValuesAndTheAuditLog(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        #expect(try await store.metaValue("x") == nil)
        #expect(try await store.setMetaValueIfAbsent("x", [1]) == [1])
        #expect(try await store.setMetaValueIfAbsent("x", [2]) == [1])
        try await store.setMetaValue("x", [3])
        #expect(try await store.metaValue("x") == [3])
        var ids: [Int64] = []
        for i in 0..<5 {
            ids.append(
                try await store.appendAudit(
                    AuditRecord(
                        userID: i == 4 ? "id-bob" : "id-alice", at: t0 + Double(i), client: "app",
                        transport: "rest", method: "sign_event", kind: i == 0 ? nil : 1,
                        eventID: i == 0 ? nil : "e\(i)", outcome: .approved,
                        code: nil, receipt: i == 3 ? "{}" : nil)))
        }
        #expect(ids == ids.sorted() && Set(ids).count == 5)
        let page = try await store.auditEntries(ofUser: "id-alice", before: nil, limit: 2)
        #expect(page.map(\.eventID) == ["e3", "e2"])
        let next = try await store.auditEntries(ofUser: "id-alice", before: page.last!.id, limit: 10)
        #expect(next.map(\.eventID) == ["e1", nil])
        #expect(next.last?.kind == nil && next.first?.kind == 1 && next.first?.at == t0 + 1)
        #expect(try await store.auditEntry(id: ids[3], ofUser: "id-alice")?.receipt == "{}")
        #expect(try await store.auditEntry(id: ids[3], ofUser: "id-bob") == nil)
    }

    /// Entries appended at once (on a file they are committed in groups, with sign-ins) each get
    /// their own id, and each id reads back as its entry.
    @Test(arguments: Kind.available)
    func auditEntriesAppendedAtOnceEachGetTheirOwnID(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let ids = try await withThrowingTaskGroup(of: (Int, Int64).self) { group in
            for i in 0..<48 {
                group.addTask {
                    let entry = AuditRecord(
                        userID: "id-alice", at: t0, client: "app", transport: "rest", method: "sign_event", kind: 1,
                        eventID: "e\(i)", outcome: .approved, code: nil, receipt: nil)
                    return (i, try await store.appendAudit(entry))
                }
            }
            return try await group.reduce(into: [Int: Int64]()) { $0[$1.0] = $1.1 }
        }
        #expect(Set(ids.values).count == 48)
        for (i, id) in ids { #expect(try await store.auditEntry(id: id, ofUser: "id-alice")?.eventID == "e\(i)") }
    }

    @Test(arguments: Kind.available)
    func pendingRequestsAreClaimedDecidedOnceAndCapped(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice"), bob = user("bob")
        try await register([alice, bob], in: store)
        func request(_ id: String, user: String?, expires: TimeInterval = 300) -> PendingRequestRecord {
            PendingRequestRecord(
                id: id, userID: user, requester: "ip:10.0.0.1", client: "app", transport: "redirect",
                method: "sign_event", kind: 1, nonce: [1], payload: [2, 3], createdAt: t0, expiresAt: t0 + expires)
        }
        try await store.insertPendingRequest(request("r1", user: nil), now: t0, maxPending: 2)
        try await store.insertPendingRequest(request("r2", user: nil), now: t0, maxPending: 2)
        await #expect(throws: StoreError.limitReached) {
            try await store.insertPendingRequest(request("r3", user: nil), now: t0, maxPending: 2)
        }
        #expect(try await store.pendingRequestCount(now: t0) == 2)
        // The first signed-in user to open it owns it; to anyone else it does not exist.
        #expect(try await store.claimPendingRequest(id: "r1", userID: alice.id, now: t0)?.payload == [2, 3])
        #expect(try await store.claimPendingRequest(id: "r1", userID: bob.id, now: t0) == nil)
        #expect(try await store.claimPendingRequest(id: "r1", userID: alice.id, now: t0)?.userID == alice.id)
        #expect(try await store.claimPendingRequest(id: "r1", userID: alice.id, now: t0 + 301) == nil)  // expired
        #expect(try await store.setConfirmationNonce(.signer, id: "r1", userID: alice.id, nonce: [4], now: t0))
        #expect(try await store.setConfirmationNonce(.signer, id: "r1", userID: bob.id, nonce: [4], now: t0) == false)
        #expect(try await store.claimPendingRequest(id: "r1", userID: alice.id, now: t0)?.confirmationNonce == [4])
        #expect(try await store.decidePendingRequest(id: "r1", userID: bob.id, state: "approved", now: t0) == false)
        #expect(try await store.decidePendingRequest(id: "r1", userID: alice.id, state: "approved", now: t0))
        #expect(try await store.decidePendingRequest(id: "r1", userID: alice.id, state: "rejected", now: t0) == false)
        #expect(try await store.claimPendingRequest(id: "r1", userID: alice.id, now: t0) == nil)
        #expect(try await store.pendingRequestCount(now: t0) == 1)
        // Decided requests no longer count against the cap.
        try await store.insertPendingRequest(request("r3", user: nil), now: t0, maxPending: 2)
        // Swept an hour after they expire (with the two sessions, expired by then).
        #expect(try await store.sweepExpired(now: t0 + 300 + 3601, limit: 100) == 3 + 2)
    }

    @Test(arguments: Kind.available)
    func grantsAreListedNewestFirstUntilTheyExpire(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice")
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: nil, credential: credential(1, of: alice),
            session: session(1, of: alice))
        for (i, expires) in [nil, t0 + 60, nil].enumerated() {
            try await store.insertGrant(
                GrantRecord(
                    id: "g\(i)", userID: alice.id, client: "app", method: "sign_event",
                    kind: i == 2 ? nil : 1, allow: i != 1, createdAt: t0, expiresAt: expires))
        }
        let grants = try await store.grants(ofUser: alice.id, now: t0)
        #expect(grants.map(\.id) == ["g2", "g1", "g0"])  // same instant: the later one first
        #expect(grants[0].kind == nil && grants[1].allow == false && grants[1].expiresAt == t0 + 60)
        #expect(try await store.grants(ofUser: alice.id, now: t0 + 61).map(\.id) == ["g2", "g0"])
        #expect(try await store.deleteGrant(id: "g0", ofUser: "id-bob") == false)
        #expect(try await store.deleteGrant(id: "g0", ofUser: alice.id))
        #expect(try await store.grants(ofUser: alice.id, now: t0).map(\.id) == ["g2", "g1"])
        #expect(try await store.deleteUser(id: alice.id))
        #expect(try await store.grants(ofUser: alice.id, now: t0).isEmpty)
    }

    @Test(arguments: Kind.available)
    func concurrentAssertionsWithOneCounterAcceptExactlyOne(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice")
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: nil, credential: credential(1, of: alice, count: 1),
            session: session(1, of: alice))
        let wins = try await withThrowingTaskGroup(of: Bool.self) { group in
            for i in 0..<16 {
                group.addTask {
                    do {
                        try await store.completeAuthentication(
                            credentialID: [1, 1], expectedSignCount: 1, newSignCount: 2, backupState: false,
                            usedAt: self.t0, session: self.session(UInt8(10 + i), of: alice))
                        return true
                    } catch StoreError.conflict { return false }
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(wins == 1)
        #expect(try await store.credential(id: [1, 1])?.signCount == 2)
    }

    @Test(arguments: Kind.available)
    func bunkerSignersSecretsAndClients(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice"), bob = user("bob")
        try await register([alice, bob], in: store)
        let signer = BunkerSignerRecord(
            userID: alice.id, pubkey: "aa", nonce: [1], sealed: [2], secretHash: nil, secretExpiresAt: nil,
            createdAt: t0)
        #expect(try await store.insertBunkerSignerIfAbsent(signer) == signer)
        var other = signer
        other.pubkey = "bb"
        #expect(try await store.insertBunkerSignerIfAbsent(other) == signer)  // one per user, the first stays
        #expect(try await store.bunkerSigner(pubkey: "aa")?.userID == alice.id)
        #expect(try await store.bunkerSigner(ofUser: bob.id) == nil)
        // The secret: single use, expiring, replaceable.
        #expect(try await store.setBunkerSecret(userID: alice.id, secretHash: [7], expiresAt: t0 + 600))
        #expect(try await store.setBunkerSecret(userID: bob.id, secretHash: [7], expiresAt: t0 + 600) == false)
        // A bunker `connect` uses it and connects its client at once, or writes nothing.
        let app = BunkerClientRecord(
            userID: alice.id, clientPubkey: "cc", name: "App", url: "https://app.example",
            perms: "sign_event:1", createdAt: t0)
        #expect(try await store.connectBunkerClient(app, secretHash: [8], now: t0) == false)
        #expect(try await store.connectBunkerClient(app, secretHash: [7], now: t0 + 601) == false)  // expired
        #expect(try await store.bunkerClients(ofUser: alice.id).isEmpty)
        #expect(try await store.connectBunkerClient(app, secretHash: [7], now: t0))
        #expect(try await store.bunkerClients(ofUser: alice.id) == [app])
        try await store.putBunkerClient(app, session: nil)
        var late = app
        late.clientPubkey = "dd"
        #expect(try await store.connectBunkerClient(late, secretHash: [7], now: t0) == false)  // used
        #expect(try await store.bunkerClient(userID: alice.id, clientPubkey: "dd") == nil)
        // Clients: added, touched, listed, revoked; gone with the account.
        try await store.touchBunkerClient(userID: alice.id, clientPubkey: "cc", at: t0 + 5)
        #expect(try await store.bunkerClient(userID: alice.id, clientPubkey: "cc")?.lastUsedAt == t0 + 5)
        #expect(try await store.bunkerClient(userID: bob.id, clientPubkey: "cc") == nil)
        #expect(try await store.bunkerClients(ofUser: alice.id).map(\.name) == ["App"])
        // Disconnecting takes its grants and cancels what it left waiting, in one transaction.
        try await store.insertGrant(
            GrantRecord(id: "g-cc", userID: alice.id, client: "nip46:cc", method: "sign_event", kind: 1, allow: true, createdAt: t0, expiresAt: nil))
        try await store.insertPendingRequest(
            PendingRequestRecord(
                id: "r-cc", userID: alice.id, requester: "ip:10.0.0.1", client: "nip46:cc", transport: "nip46",
                method: "sign_event", kind: 1, nonce: [1], payload: [2], createdAt: t0, expiresAt: t0 + 300),
            now: t0, maxPending: 8)
        #expect(try await store.deleteBunkerClient(userID: bob.id, clientPubkey: "cc", client: "nip46:cc") == false)
        #expect(try await store.grants(ofUser: alice.id, now: t0).count == 1)
        #expect(try await store.deleteBunkerClient(userID: alice.id, clientPubkey: "cc", client: "nip46:cc"))
        #expect(try await store.grants(ofUser: alice.id, now: t0).isEmpty)
        #expect(try await store.pendingRequests(ofUser: alice.id, now: t0, limit: 10).isEmpty)
        try await store.putBunkerClient(app)
        #expect(try await store.deleteUser(id: alice.id))
        #expect(try await store.bunkerClients(ofUser: alice.id).isEmpty)
        #expect(try await store.bunkerSigner(pubkey: "aa") == nil)
    }

    @Test(arguments: Kind.available)
    func bunkerRepliesUnlockedSessionsAndWaitingRequests(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice"), bob = user("bob")
        try await register([alice, bob], in: store)  // sessions unlocked until t0 + 600
        #expect(try await store.hasUnlockedSession(ofUser: alice.id, now: t0 + 599))
        #expect(try await store.hasUnlockedSession(ofUser: alice.id, now: t0 + 600) == false)
        #expect(try await store.hasUnlockedSession(ofUser: "nobody", now: t0) == false)
        _ = try await store.lockAllSessions()
        #expect(try await store.hasUnlockedSession(ofUser: bob.id, now: t0) == false)

        // Replies: read back by time, oldest first; old ones dropped on the next append.
        try await store.appendBunkerReply("one", at: t0, dropBefore: t0 - 600)
        try await store.appendBunkerReply("two", at: t0 + 10, dropBefore: t0 - 590)
        #expect(try await store.bunkerReplies(since: t0, limit: 10).map(\.event) == ["one", "two"])
        #expect(try await store.bunkerReplies(since: t0 + 5, limit: 10).map(\.event) == ["two"])
        let ids = try await store.bunkerReplies(since: t0, limit: 10).map(\.id)
        #expect(ids[0] < ids[1])
        try await store.appendBunkerReply("three", at: t0 + 700, dropBefore: t0 + 100)
        #expect(try await store.bunkerReplies(since: .distantPast, limit: 10).map(\.event) == ["three"])
        #expect(try await store.bunkerReplies(since: .distantPast, limit: 10)[0].id > ids[1])  // ids are never reused

        // Waiting requests: the user's own, pending and live, oldest first.
        func request(_ id: String, user: String?, at offset: TimeInterval) -> PendingRequestRecord {
            PendingRequestRecord(
                id: id, userID: user, requester: "nip46:cc", client: "nip46:cc", transport: "nip46",
                method: "sign_event", kind: 1, nonce: [1], payload: [2], createdAt: t0 + offset,
                expiresAt: t0 + offset + 300)
        }
        try await store.insertPendingRequest(request("w2", user: alice.id, at: 2), now: t0, maxPending: 20)
        try await store.insertPendingRequest(request("w1", user: alice.id, at: 1), now: t0, maxPending: 20)
        try await store.insertPendingRequest(request("w3", user: bob.id, at: 1), now: t0, maxPending: 20)
        try await store.insertPendingRequest(request("w4", user: nil, at: 1), now: t0, maxPending: 20)
        #expect(try await store.pendingRequests(ofUser: alice.id, now: t0 + 10, limit: 50).map(\.id) == ["w1", "w2"])
        #expect(try await store.decidePendingRequest(id: "w1", userID: alice.id, state: "approved", now: t0 + 10))
        #expect(try await store.pendingRequests(ofUser: alice.id, now: t0 + 10, limit: 50).map(\.id) == ["w2"])
        #expect(try await store.pendingRequests(ofUser: alice.id, now: t0 + 302, limit: 50).isEmpty)  // expired
    }

    @Test func aFileDatabaseUsesWALAndSurvivesReopening() async throws {
        let (store, path) = try await Self.make(.file)
        let alice = user("alice")
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: nil, credential: credential(1, of: alice), session: session(1, of: alice))
        let reopened = try SQLiteStore(path: path!)  // migrations run again and change nothing
        #expect(try await reopened.user(named: "alice") == alice)
        #expect(FileManager.default.fileExists(atPath: path! + "-wal"))
        try await reopened.healthCheck()
    }
}

extension StoreContractTests {
    /// The break-in remedy and "Lock now": one user's sessions, NIP-46 clients, connect secret and
    /// grants end together; another user's stay.
    @Test(arguments: Kind.available)
    func signingOutEverywhereEndsSessionsClientsSecretAndGrantsOfOneUser(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice"), bob = user("bob")
        try await register([alice, bob], in: store)  // one unlocked session each
        for owner in [alice, bob] {
            let signer = BunkerSignerRecord(
                userID: owner.id, pubkey: owner.id + "-signer", nonce: [1], sealed: [2], secretHash: [7], secretExpiresAt: t0 + 600,
                createdAt: t0)
            _ = try await store.insertBunkerSignerIfAbsent(signer)
            #expect(try await store.setBunkerSecret(userID: owner.id, secretHash: [7], expiresAt: t0 + 600))
            try await store.putBunkerClient(
                BunkerClientRecord(userID: owner.id, clientPubkey: "cc", name: "App", url: nil, perms: "", createdAt: t0))
            try await store.insertGrant(
                GrantRecord(
                    id: owner.id + "-g", userID: owner.id, client: "app", method: "sign_event", kind: 1, allow: true, createdAt: t0, expiresAt: nil))
            try await store.insertGrant(
                GrantRecord(
                    id: owner.id + "-p", userID: owner.id, client: "https://dapp.example", method: "polkadot.authorize", kind: nil, allow: true,
                    createdAt: t0, expiresAt: nil))
        }
        // Lock now: the user's sessions locked, still signed in; the other user's untouched.
        #expect(try await store.lockSessions(ofUser: alice.id) == 1)
        #expect(try await store.hasUnlockedSession(ofUser: alice.id, now: t0) == false)
        #expect(try await store.hasUnlockedSession(ofUser: bob.id, now: t0))
        #expect(try await store.session(tokenHash: [UInt8](repeating: 1, count: 32), now: t0)?.unlockedUntil == nil)
        #expect(try await store.lockSessions(ofUser: alice.id) == 0)

        // A request each left waiting (#55): the signed-out user's is cancelled, the other's waits.
        for owner in [alice, bob] {
            try await store.insertPendingRequest(
                PendingRequestRecord(
                    id: owner.id + "-r", userID: owner.id, requester: "ip:10.0.0.1", client: "cc", transport: "nip46",
                    method: "sign_event", kind: 1, nonce: [1], payload: [2], createdAt: t0, expiresAt: t0 + 300),
                now: t0, maxPending: 8)
        }

        // One that expired before the sign-out is cancelled too, but was waiting for nobody: not counted.
        try await store.insertPendingRequest(
            PendingRequestRecord(
                id: alice.id + "-old", userID: alice.id, requester: "ip:10.0.0.1", client: "cc", transport: "nip46",
                method: "sign_event", kind: 1, nonce: [1], payload: [2], createdAt: t0 - 900, expiresAt: t0 - 600),
            now: t0 - 900, maxPending: 8)

        let ended = try await store.signOutEverywhere(userID: alice.id, now: t0)
        #expect(
            ended
                == SignedOutEverywhere(
                    sessions: 1, clients: 1, grants: 2, requests: 1, extensionSessions: 0, clientNames: ["App"],
                    grantClients: ["app", "https://dapp.example"]))
        #expect(try await store.claimPendingRequest(id: alice.id + "-r", userID: alice.id, now: t0) == nil)
        #expect(try await store.claimPendingRequest(id: bob.id + "-r", userID: bob.id, now: t0) != nil)
        #expect(try await store.session(tokenHash: [UInt8](repeating: 1, count: 32), now: t0) == nil)
        #expect(try await store.bunkerClients(ofUser: alice.id).isEmpty)
        #expect(try await store.grants(ofUser: alice.id, now: t0).isEmpty)
        #expect(try await store.bunkerSigner(ofUser: alice.id)?.secretHash == nil)  // void
        #expect(try await store.bunkerSigner(ofUser: alice.id) != nil)  // the signer key stays
        #expect(try await store.bunkerClients(ofUser: bob.id).count == 1)
        #expect(try await store.grants(ofUser: bob.id, now: t0).count == 2)
        #expect(try await store.hasUnlockedSession(ofUser: bob.id, now: t0))
    }
}
