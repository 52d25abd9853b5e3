import Foundation
import Testing

@testable import KeyfobPostgres
@testable import KeyfobStore

/// Sign-in challenges that are never stored (sealed by the server) are single use through the
/// store: the sign-in records each one's hash in its own transaction (`completeSignIn`; also when
/// its counter swap loses a race, never for a refusal), and the record is kept until the expiry it was given. Several instances share one store,
/// so a ceremony begun on one finishes on any, and only once.
extension StoreContractTests {
    func used(_ byte: UInt8, expiresAt: Date) -> UsedChallenge {
        UsedChallenge(hash: [UInt8](repeating: byte, count: 32), expiresAt: expiresAt)
    }

    /// Two stores on one database, as two instances of a deployment have (in memory: the same one).
    static func twoInstances(_ kind: Kind) async throws -> (any KeyfobStore, any KeyfobStore) {
        switch kind {
        case .memory:
            let store = try SQLiteStore(path: ":memory:")
            return (store, store)
        case .file:
            let (first, path) = try await make(.file)
            return (first, try SQLiteStore(path: try #require(path)))
        case .postgres:
            let settings = try TestPostgres.settings()
            let first = PostgresStore(settings: settings), second = PostgresStore(settings: settings)
            try await first.migrate()
            try await second.migrate()
            return (first, second)
        }
    }

    /// A sign-in answering `challenge` with a fresh session `token`: true when it signed in, false
    /// when the challenge was recorded already (and then nothing was written).
    func signIn(_ store: any KeyfobStore, _ challenge: UsedChallenge, token: UInt8, of user: UserRecord, count: UInt32 = 0) async throws
        -> Bool
    {
        switch try await store.completeSignIn(signInWrite(challenge, token: token, of: user, count: count)) {
        case .signedIn: return true
        case .challengeUsed:
            #expect(try await hasSession(store, token) == false)
            return false
        case let other: throw StoreError.database("unexpected \(other)")
        }
    }

    @Test(arguments: Kind.available)
    func aUsedChallengeIsRecordedOnceAndForgottenOnceExpired(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice")
        try await register([alice], in: store)
        let challenge = used(7, expiresAt: t0 + 120)
        // The first sign-in records it; a second with it writes nothing: not the session, not the
        // passkey's last use.
        #expect(try await store.isChallengeUsed(hash: challenge.hash) == false)
        #expect(try await signIn(store, challenge, token: 20, of: alice))
        #expect(try await store.isChallengeUsed(hash: challenge.hash))
        #expect(try await signIn(store, challenge, token: 21, of: alice) == false)
        #expect(try await store.credential(id: [1, 1])?.lastUsedAt == t0 + 20)
        // Another challenge signs in, once.
        let fresh = used(8, expiresAt: t0 + 120)
        #expect(try await signIn(store, fresh, token: 22, of: alice))
        #expect(try await signIn(store, fresh, token: 23, of: alice) == false)
        // Kept until its record's expiry (the server sets it past the challenge's own), swept after.
        _ = try await store.sweepExpired(now: t0 + 119, limit: 100)
        #expect(try await signIn(store, challenge, token: 24, of: alice) == false)
        _ = try await store.sweepExpired(now: t0 + 120, limit: 100)
        #expect(try await store.isChallengeUsed(hash: challenge.hash) == false)
        #expect(try await signIn(store, challenge, token: 25, of: alice))
    }

    /// A sign-in refused for its counter leaves its challenge unused (nothing is written for a
    /// refusal); the right counter then signs in with it, once.
    @Test(arguments: Kind.available)
    func aCounterBehindLeavesTheChallengeUnused(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice")
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: nil, credential: credential(1, of: alice, count: 5), session: session(1, of: alice))
        let challenge = used(9, expiresAt: t0 + 120)
        #expect(try await store.completeSignIn(signInWrite(challenge, token: 30, of: alice, count: 5)) == .counterBehind(stored: 5))
        #expect(try await hasSession(store, 30) == false)
        #expect(try await store.isChallengeUsed(hash: challenge.hash) == false)
        #expect(try await store.credential(id: [1, 1])?.signCount == 5)
        #expect(try await signIn(store, challenge, token: 31, of: alice, count: 6))
        #expect(try await signIn(store, challenge, token: 32, of: alice, count: 7) == false)
        #expect(try await store.credential(id: [1, 1])?.signCount == 6)
    }

    /// One challenge answered on two instances at once, many times over: exactly one sign-in wins
    /// and writes its session. The passkey keeps no counter (0 → 0, as many synced passkeys), so
    /// only the challenge's record stops the others.
    @Test(arguments: Kind.available)
    func twoInstancesRacingOneChallengeSignInOnce(_ kind: Kind) async throws {
        let (first, second) = try await Self.twoInstances(kind)
        let alice = user("alice")
        try await register([alice], in: first)
        for round in 0..<5 {
            let challenge = used(UInt8(40 + round), expiresAt: t0 + 120)
            let outcomes = try await withThrowingTaskGroup(of: (UInt8, Bool).self) { group in
                for attempt in 0..<8 {
                    let token = UInt8(100 + round * 8 + attempt)
                    let store = attempt % 2 == 0 ? first : second
                    let write = signInWrite(challenge, token: token, of: alice, count: 0)
                    group.addTask {
                        switch try await store.completeSignIn(write) {
                        case .signedIn: return (token, true)
                        case .challengeUsed: return (token, false)
                        case let other: throw StoreError.database("unexpected \(other)")
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(outcomes.filter(\.1).count == 1, "round \(round): \(outcomes)")
            for (token, won) in outcomes {
                let stored = try await second.session(tokenHash: [UInt8](repeating: token, count: 32), now: t0)
                #expect((stored != nil) == won)
            }
        }
    }
}
