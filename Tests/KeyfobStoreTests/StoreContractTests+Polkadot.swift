import Foundation
import Testing

@testable import KeyfobStore

/// Substrate accounts, Polkadot requests and dapp metadata, for every backend.
extension StoreContractTests {
    @Test(arguments: Kind.available)
    func substrateAccountsAreCappedPerUserAndGoWithTheirOwner(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice"), bob = user("bob")
        try await register([alice, bob], in: store)
        func account(_ id: String, of owner: UserRecord, at offset: TimeInterval) -> SubstrateAccountRecord {
            SubstrateAccountRecord(
                id: id, userID: owner.id, keyType: "sr25519", publicKey: [UInt8](repeating: 1, count: 32), name: "main",
                network: 0, nonce: [1], sealed: [2, 3], createdAt: t0.addingTimeInterval(offset))
        }
        for owner in [alice, bob] {
            _ = try await store.insertNostrKeyIfAbsent(
                NostrKeyRecord(userID: owner.id, pubkey: owner.username, version: 1, nonce: [1], sealed: [2], updatedAt: t0))
        }
        // Sealed for a key version that has moved on: refused.
        await #expect(throws: StoreError.conflict) {
            try await store.insertSubstrateAccount(account("a2", of: alice, at: 2), maxPerUser: 2, ownerKeyVersion: 2)
        }
        try await store.insertSubstrateAccount(account("a2", of: alice, at: 2), maxPerUser: 2, ownerKeyVersion: 1)
        try await store.insertSubstrateAccount(account("a1", of: alice, at: 1), maxPerUser: 2, ownerKeyVersion: 1)
        await #expect(throws: StoreError.limitReached) {
            try await store.insertSubstrateAccount(account("a3", of: alice, at: 3), maxPerUser: 2, ownerKeyVersion: 1)
        }
        try await store.insertSubstrateAccount(account("b1", of: bob, at: 1), maxPerUser: 2, ownerKeyVersion: 1)
        #expect(try await store.substrateAccounts(ofUser: alice.id) == [account("a1", of: alice, at: 1), account("a2", of: alice, at: 2)])
        // Blind signing is off until its owner turns it on, and only its owner can.
        #expect(try await store.setSubstrateAccountAcceptsUnverified(id: "a2", ofUser: bob.id, true) == false)
        #expect(try await store.setSubstrateAccountAcceptsUnverified(id: "a2", ofUser: alice.id, true))
        #expect(try await store.substrateAccounts(ofUser: alice.id).map(\.acceptsUnverified) == [false, true])
        #expect(try await store.setSubstrateAccountAcceptsUnverified(id: "a2", ofUser: alice.id, false))
        #expect(try await store.substrateAccounts(ofUser: alice.id).map(\.acceptsUnverified) == [false, false])
        #expect(try await store.deleteSubstrateAccount(id: "b1", ofUser: alice.id) == false)
        #expect(try await store.deleteSubstrateAccount(id: "a1", ofUser: alice.id))
        #expect(try await store.substrateAccounts(ofUser: alice.id).map(\.id) == ["a2"])
        // A secret moves to another protection once, by whoever still holds what was stored.
        let stored = try #require(try await store.substrateAccounts(ofUser: alice.id).first)
        var moved = stored
        (moved.nonce, moved.sealed, moved.protection) = ([9], [8, 7], 1)
        #expect(try await store.substrateAccounts(atProtection: 0).map(\.id) == ["a2", "b1"])
        #expect(try await store.replaceSubstrateSecret(moved, expectedSealed: stored.sealed, ownerKeyVersion: 2) == false)
        #expect(try await store.replaceSubstrateSecret(moved, expectedSealed: stored.sealed, ownerKeyVersion: 1))
        #expect(try await store.replaceSubstrateSecret(moved, expectedSealed: stored.sealed, ownerKeyVersion: 1) == false)
        #expect(try await store.substrateAccounts(atProtection: 1) == [moved])
        // Rotation re-seals every one under the master key, or nothing.
        var rotated = moved
        rotated.sealed = [6, 5]
        let keys = try await store.allNostrKeys()
        await #expect(throws: StoreError.conflict) {
            try await store.rewrapNostrKeys(keys, bunkerSigners: [], substrateAccounts: [], masterKeyCheck: [1])
        }
        try await store.rewrapNostrKeys(keys, bunkerSigners: [], substrateAccounts: [rotated], masterKeyCheck: [1])
        #expect(try await store.substrateAccounts(ofUser: alice.id) == [rotated])
        #expect(try await store.deleteUser(id: bob.id))
        #expect(try await store.substrateAccounts(ofUser: bob.id).isEmpty)
    }

    @Test(arguments: Kind.available)
    func polkadotRequestsAreDecidedOnceAndOnlyByTheirOwner(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice"), bob = user("bob")
        try await register([alice, bob], in: store)
        let request = PolkadotRequestRecord(
            id: "r1", userID: alice.id, origin: "https://dapp.example", transport: "bridge", messageType: "pub(bytes.sign)",
            request: #"{"data":"0x00"}"#, createdAt: t0, expiresAt: t0.addingTimeInterval(300))
        try await store.insertPolkadotRequest(request, now: t0, maxPending: 1, session: nil)
        var second = request
        second.id = "r2"
        await #expect(throws: StoreError.limitReached) { try await store.insertPolkadotRequest(second, now: t0, maxPending: 1, session: nil) }
        #expect(try await store.polkadotRequest(id: "r1", ofUser: bob.id) == nil)
        #expect(try await store.setConfirmationNonce(.polkadot, id: "r1", userID: alice.id, nonce: [7], now: t0))
        #expect(try await store.setConfirmationNonce(.polkadot, id: "r1", userID: bob.id, nonce: [7], now: t0) == false)
        #expect(try await store.polkadotRequest(id: "r1", ofUser: alice.id)?.confirmationNonce == [7])
        #expect(try await store.finishPolkadotRequest(id: "r1", userID: alice.id, state: "approved", result: "{}", now: t0))
        #expect(try await store.finishPolkadotRequest(id: "r1", userID: alice.id, state: "rejected", result: "{}", now: t0) == false)
        let finished = try await store.polkadotRequest(id: "r1", ofUser: alice.id)
        #expect(finished?.state == "approved" && finished?.result == "{}")
        // Expired: cannot be decided; a day later it is cleared when the next request arrives.
        try await store.insertPolkadotRequest(second, now: t0, maxPending: 1, session: nil)
        #expect(
            try await store.finishPolkadotRequest(id: "r2", userID: alice.id, state: "approved", result: "{}", now: t0.addingTimeInterval(301))
                == false)
        var later = request
        later.id = "r3"
        later.createdAt = t0.addingTimeInterval(100_000)
        later.expiresAt = t0.addingTimeInterval(100_300)
        try await store.insertPolkadotRequest(later, now: t0.addingTimeInterval(100_000), maxPending: 1, session: nil)
        #expect(try await store.polkadotRequest(id: "r1", ofUser: alice.id) == nil)
        // Sign out everywhere cancels both waiting requests and counts only the one still live.
        var brief = later
        brief.id = "r4"
        brief.expiresAt = t0.addingTimeInterval(100_001)
        try await store.insertPolkadotRequest(brief, now: t0.addingTimeInterval(100_000), maxPending: 2, session: nil)
        #expect(try await store.signOutEverywhere(userID: alice.id, now: t0.addingTimeInterval(100_100)).requests == 1)
        #expect(try await store.polkadotRequest(id: "r3", ofUser: alice.id)?.state == "cancelled")
        #expect(try await store.polkadotRequest(id: "r4", ofUser: alice.id)?.state == "cancelled")
    }

    @Test(arguments: Kind.available)
    func dappMetadataIsKeptPerUserAndOrigin(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice")
        try await register([alice], in: store)
        var m = PolkadotMetadataRecord(
            userID: alice.id, origin: "https://a.example", genesisHash: "0x91", specVersion: 1, definition: "{}", updatedAt: t0)
        try await store.putPolkadotMetadata(m, runtime: nil)
        m.specVersion = 2
        try await store.putPolkadotMetadata(m, runtime: nil)
        #expect(try await store.polkadotMetadata(ofUser: alice.id, origin: "https://a.example") == [m])
        #expect(try await store.polkadotMetadata(ofUser: alice.id, origin: "https://b.example").isEmpty)
        // The most recent 16 per user stay.
        for i in 0..<20 {
            try await store.putPolkadotMetadata(
                PolkadotMetadataRecord(
                    userID: alice.id, origin: "https://site\(i).example", genesisHash: "0x91", specVersion: 1, definition: "{}",
                    updatedAt: t0.addingTimeInterval(Double(i + 1))), runtime: nil)
        }
        #expect(try await store.polkadotMetadata(ofUser: alice.id, origin: "https://a.example").isEmpty)
        #expect(try await store.polkadotMetadata(ofUser: alice.id, origin: "https://site3.example").isEmpty)
        #expect(try await store.polkadotMetadata(ofUser: alice.id, origin: "https://site4.example").count == 1)
    }

    @Test(arguments: Kind.available)
    func aRuntimeIsStoredOnceSharedAndCappedPerUser(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice"), bob = user("bob")
        try await register([alice, bob], in: store)
        // A runtime a little under a megabyte: eight of them and their rows fit under 8 MiB.
        let mib = 1024 * 1024 - 64
        func runtime(_ n: UInt8) -> (hash: [UInt8], bytes: [UInt8]) {
            ([UInt8](repeating: n, count: 32), [UInt8](repeating: n, count: mib))
        }
        var clock = 0.0
        func put(_ owner: UserRecord, _ origin: String, _ r: (hash: [UInt8], bytes: [UInt8])) async throws {
            clock += 1
            try await store.putPolkadotMetadata(
                PolkadotMetadataRecord(
                    userID: owner.id, origin: origin, genesisHash: "0x91", specVersion: 1, definition: "{}",
                    updatedAt: t0.addingTimeInterval(clock), runtimeHash: r.hash),
                runtime: r.bytes)
        }
        // Two accounts, three dapps, one runtime: its megabyte is stored once.
        try await put(alice, "https://a.example", runtime(1))
        try await put(alice, "https://b.example", runtime(1))
        try await put(bob, "https://a.example", runtime(1))
        #expect(try await store.polkadotRuntimeUsage() == (1, mib))
        #expect(try await store.polkadotRuntime(hash: runtime(1).hash) == runtime(1).bytes)
        #expect(try await store.polkadotMetadata(ofUser: bob.id, origin: "https://a.example").first?.runtimeHash == runtime(1).hash)
        // Eight more distinct runtimes of alice's: past 8 MiB her oldest rows go (a runtime named
        // by two of her rows counted once), and a runtime nobody names any more with them.
        for n in UInt8(2)...9 { try await put(alice, "https://site\(n).example", runtime(n)) }
        #expect(try await store.polkadotMetadata(ofUser: alice.id, origin: "https://a.example").isEmpty)
        #expect(try await store.polkadotMetadata(ofUser: alice.id, origin: "https://b.example").isEmpty)
        #expect(try await store.polkadotMetadata(ofUser: alice.id, origin: "https://site2.example").count == 1)
        #expect(try await store.polkadotRuntimeUsage() == (9, 9 * mib))  // runtime 1 is bob's still
        try await put(alice, "https://site10.example", runtime(10))
        #expect(try await store.polkadotMetadata(ofUser: alice.id, origin: "https://site2.example").isEmpty)
        #expect(try await store.polkadotRuntime(hash: runtime(2).hash) == nil)
        #expect(try await store.polkadotRuntimeUsage() == (9, 9 * mib))
        // A row provided again without its runtime lets that runtime go.
        try await store.putPolkadotMetadata(
            PolkadotMetadataRecord(
                userID: bob.id, origin: "https://a.example", genesisHash: "0x91", specVersion: 2, definition: "{}",
                updatedAt: t0.addingTimeInterval(100)),
            runtime: nil)
        #expect(try await store.polkadotRuntime(hash: runtime(1).hash) == nil)
        // Sign out everywhere takes alice's rows and the runtimes only she named.
        _ = try await store.signOutEverywhere(userID: alice.id, now: t0)
        #expect(try await store.polkadotRuntimeUsage() == (0, 0))
        // An account's deletion cascades to its rows; the sweep takes their runtimes.
        try await put(bob, "https://c.example", runtime(3))
        #expect(try await store.deleteUser(id: bob.id))
        #expect(try await store.polkadotRuntimeUsage() == (1, mib))
        _ = try await store.sweepExpired(now: t0, limit: 100)
        #expect(try await store.polkadotRuntimeUsage() == (0, 0))
    }

    /// A row's own bytes count too (a dapp's calls-only metadata is kept in its definition).
    @Test(arguments: Kind.available)
    func aRowsOwnBytesCountTowardTheCap(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice")
        try await register([alice], in: store)
        let big = "{\"metaCalls\":\"" + String(repeating: "A", count: 3 * 1024 * 1024) + "\"}"
        for n in 1...3 {
            try await store.putPolkadotMetadata(
                PolkadotMetadataRecord(
                    userID: alice.id, origin: "https://site\(n).example", genesisHash: "0x91", specVersion: 1, definition: big,
                    updatedAt: t0.addingTimeInterval(Double(n))),
                runtime: nil)
        }
        #expect(try await store.polkadotMetadata(ofUser: alice.id, origin: "https://site1.example").isEmpty)
        #expect(try await store.polkadotMetadata(ofUser: alice.id, origin: "https://site2.example").count == 1)
        #expect(try await store.polkadotMetadata(ofUser: alice.id, origin: "https://site3.example").count == 1)
    }
}
