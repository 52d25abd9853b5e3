import Foundation
import Testing

@testable import KeyfobStore

/// `completeSignIn`: a sign-in checked against a passkey known from an earlier read. The store
/// finds the passkey by id, account and key, checks the counter against what it holds now, and
/// writes the challenge, the counter and the session together, or nothing but what it says.
extension StoreContractTests {
    func signInWrite(
        _ challenge: UsedChallenge, token: UInt8, of user: UserRecord, count: UInt32, key: [UInt8] = [1, 2, 3], passkey: UInt8 = 1
    ) -> SignInWrite {
        SignInWrite(
            credentialID: [passkey, passkey], userID: user.id, publicKey: key, newSignCount: count, backupState: true,
            usedAt: t0 + Double(token), session: session(token, of: user), usedChallenge: challenge)
    }

    func hasSession(_ store: any KeyfobStore, _ token: UInt8) async throws -> Bool {
        try await store.session(tokenHash: [UInt8](repeating: token, count: 32), now: t0) != nil
    }

    @Test(arguments: Kind.available)
    func aKnownPasskeySignsInWithEverythingItsWriteChecks(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice")
        let key = NostrKeyRecord(userID: alice.id, pubkey: "aa", version: 1, nonce: [1], sealed: [2], updatedAt: t0)
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: key, credential: credential(1, of: alice, count: 5), session: session(1, of: alice))

        // Signed in: the account as stored, its key's state, the backup state before; all written.
        let first = used(50, expiresAt: t0 + 120)
        #expect(
            try await store.completeSignIn(signInWrite(first, token: 60, of: alice, count: 6))
                == .signedIn(alice, keySealed: false, backupStateBefore: false))
        #expect(try await hasSession(store, 60))
        #expect(try await store.isChallengeUsed(hash: first.hash))
        let moved = try #require(try await store.credential(id: [1, 1]))
        #expect(moved.signCount == 6 && moved.backupState && moved.lastUsedAt == t0 + 60)

        // The same challenge again: refused, nothing written.
        #expect(try await store.completeSignIn(signInWrite(first, token: 61, of: alice, count: 7)) == .challengeUsed(alice))
        #expect(try await hasSession(store, 61) == false)

        // A counter that is not ahead of the stored one: refused, and the challenge stays unused.
        let second = used(51, expiresAt: t0 + 120)
        #expect(try await store.completeSignIn(signInWrite(second, token: 62, of: alice, count: 6)) == .counterBehind(stored: 6))
        #expect(try await store.isChallengeUsed(hash: second.hash) == false)
        #expect(try await hasSession(store, 62) == false)

        // Another key, another account, a passkey no one has: gone, nothing written.
        let bob = user("bob")
        try await store.completeRegistration(
            user: bob, createUser: true, nostrKey: nil, credential: credential(2, of: bob), session: session(2, of: bob))
        for write in [
            signInWrite(second, token: 63, of: alice, count: 9, key: [9, 9, 9]),
            signInWrite(second, token: 64, of: bob, count: 9),
            signInWrite(second, token: 65, of: alice, count: 9, passkey: 7),
        ] {
            #expect(try await store.completeSignIn(write) == .passkeyGone)
            #expect(try await hasSession(store, UInt8(write.session.tokenHash[0])) == false)
        }
        #expect(try await store.isChallengeUsed(hash: second.hash) == false)
        #expect(try await store.credential(id: [1, 1])?.signCount == 6)

        // The rule's one exception: a passkey without a counter (0 stored, 0 sent) signs in.
        let carol = user("carol")
        try await store.completeRegistration(
            user: carol, createUser: true, nostrKey: nil, credential: credential(3, of: carol), session: session(3, of: carol))
        #expect(
            try await store.completeSignIn(signInWrite(second, token: 66, of: carol, count: 0, passkey: 3))
                == .signedIn(carol, keySealed: nil, backupStateBefore: false))
        #expect(
            try await store.completeSignIn(signInWrite(used(52, expiresAt: t0 + 120), token: 67, of: carol, count: 0, passkey: 3))
                == .signedIn(carol, keySealed: nil, backupStateBefore: true))
    }

    /// Sign-ins with one passkey on two instances at once, each with its own challenge and the
    /// same next counter: one wins and writes its session; every other writes no session (it lost
    /// the race, or saw the winner's counter).
    @Test(arguments: Kind.available)
    func twoInstancesRacingOneCounterSignInOnce(_ kind: Kind) async throws {
        let (first, second) = try await Self.twoInstances(kind)
        let alice = user("alice")
        try await first.completeRegistration(
            user: alice, createUser: true, nostrKey: nil, credential: credential(1, of: alice, count: 5), session: session(1, of: alice))
        for round in 0..<5 {
            let outcomes = try await withThrowingTaskGroup(of: (UInt8, SignInOutcome).self) { group in
                for attempt in 0..<8 {
                    let token = UInt8(100 + round * 8 + attempt)
                    let store = attempt % 2 == 0 ? first : second
                    let write = signInWrite(used(token, expiresAt: t0 + 120), token: token, of: alice, count: UInt32(6 + round))
                    group.addTask { (token, try await store.completeSignIn(write)) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let won = outcomes.filter { if case .signedIn = $0.1 { true } else { false } }
            #expect(won.count == 1, "round \(round): \(outcomes)")
            for (token, outcome) in outcomes {
                if case .signedIn = outcome { continue }
                #expect(outcome == .lostRace(alice) || outcome == .counterBehind(stored: UInt32(6 + round)), "\(outcome)")
                #expect(try await hasSession(second, token) == false)
            }
            #expect(try await hasSession(second, won[0].0))
        }
    }

    /// The cap counts the sessions an account has, not the sign-ins it made: sessions ended
    /// elsewhere (signed out) leave their room, and once the cap is reached the oldest end first.
    @Test(arguments: Kind.available)
    func theSessionCapCountsSessionsNotSignIns(_ kind: Kind) async throws {
        let (store, alice) = try await aliceWithSessionsCappedAtThree(kind)
        func signIn(_ token: UInt8) async throws {
            var write = signInWrite(used(token, expiresAt: t0 + 120), token: token, of: alice, count: UInt32(token))
            write.session.createdAt = t0 + Double(token)
            let outcome = try await store.completeSignIn(write)
            guard case .signedIn = outcome else { throw StoreError.database("sign-in \(token): \(outcome)") }
        }
        for token in UInt8(10)..<30 {
            try await signIn(token)
            try await store.deleteSession(tokenHash: [UInt8](repeating: token, count: 32))
        }
        #expect(try await hasSession(store, 1), "twenty sign-ins, each signed out, leave the first session")
        for token in UInt8(40)...42 { try await signIn(token) }
        let live = try await [1, 40, 41, 42].asyncFilter { try await hasSession(store, $0) }
        #expect(live == [40, 41, 42])
    }
}
