import Foundation
import NIOCore
import PostgresNIO
import Synchronization
import Testing

@testable import KeyfobPostgres
@testable import KeyfobStore

/// What a session adds that a sign-out everywhere removes (a bunker URL's connect secret, a
/// client connected from a pasted `nostrconnect://` URL, a Polkadot site's metadata) is stored
/// only while that session exists, and a bunker `connect` uses its secret and adds its client in
/// one step: none of them can be added while the sign-out runs and outlive it.
extension StoreContractTests {
    func signer(of user: UserRecord) -> BunkerSignerRecord {
        BunkerSignerRecord(
            userID: user.id, pubkey: user.id + "-signer", nonce: [1], sealed: [2], secretHash: [7], secretExpiresAt: t0 + 600,
            createdAt: t0)
    }

    func metadata(of user: UserRecord, _ origin: String = "https://dapp.example") -> PolkadotMetadataRecord {
        PolkadotMetadataRecord(userID: user.id, origin: origin, genesisHash: "0x91", specVersion: 1, definition: "{}", updatedAt: t0)
    }

    /// Each of the three writes, for `session` (a token byte: 1 is Alice's, 2 Bob's, 9 nobody's).
    enum SessionWrite: String, CaseIterable, Sendable {
        case secret, pastedClient, metadata
    }

    func write(_ kind: SessionWrite, for user: UserRecord, session byte: UInt8, in store: any KeyfobStore) async throws {
        let token = [UInt8](repeating: byte, count: 32)
        switch kind {
        case .secret:
            #expect(try await store.setBunkerSecret(userID: user.id, secretHash: [byte, 8], expiresAt: t0 + 600, session: token))
        case .pastedClient:
            try await store.putBunkerClient(
                BunkerClientRecord(
                    userID: user.id, clientPubkey: "pasted", name: "App", url: nil, perms: "", createdAt: t0, relays: ["wss://r.example"]),
                session: token)
        case .metadata:
            try await store.putPolkadotMetadata(metadata(of: user), runtime: nil, session: token)
        }
    }

    /// Whether `kind`'s write of `user` is stored (the secret: the one `byte` wrote).
    func written(_ kind: SessionWrite, of user: UserRecord, by byte: UInt8, in store: any KeyfobStore) async throws -> Bool {
        switch kind {
        case .secret: try await store.bunkerSigner(ofUser: user.id)?.secretHash == [byte, 8]
        case .pastedClient: try await store.bunkerClient(userID: user.id, clientPubkey: "pasted") != nil
        case .metadata: try await !store.polkadotMetadata(ofUser: user.id, origin: "https://dapp.example").isEmpty
        }
    }

    @Test(arguments: Kind.available, SessionWrite.allCases)
    func whatASessionAddsIsStoredOnlyWhileThatSessionExists(_ kind: Kind, _ what: SessionWrite) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice")
        try await register([alice, user("bob")], in: store)  // sessions 1 and 2
        _ = try await store.insertBunkerSignerIfAbsent(signer(of: alice))
        // Nobody's session, then Bob's: not Alice's, so nothing is written for her.
        for byte: UInt8 in [9, 2] {
            await #expect(throws: StoreError.notFound, "session \(byte)") { try await write(what, for: alice, session: byte, in: store) }
            #expect(try await !written(what, of: alice, by: byte, in: store), "session \(byte)")
        }
        try await write(what, for: alice, session: 1, in: store)
        #expect(try await written(what, of: alice, by: 1, in: store))
        _ = try await store.signOutEverywhere(userID: alice.id, now: t0)
        #expect(try await !written(what, of: alice, by: 1, in: store), "the sign-out removed it")
        await #expect(throws: StoreError.notFound) { try await write(what, for: alice, session: 1, in: store) }
        #expect(try await !written(what, of: alice, by: 1, in: store))
    }

    /// On PostgreSQL, for real: a sign-out everywhere that removed the session and the rest but has
    /// not committed (held at its step after, the waiting requests) makes the write wait, then refuse.
    @Test(
        .timeLimit(.minutes(1)), .enabled(if: TestPostgres.isConfigured, "needs KEYFOB_TEST_POSTGRES"),
        arguments: SessionWrite.allCases)
    func aWriteForASessionASignOutIsRemovingWaitsThenIsRefused(_ what: SessionWrite) async throws {
        let store = try await Self.postgres()
        let alice = user("alice")
        try await register([alice], in: store)
        _ = try await store.insertBunkerSignerIfAbsent(signer(of: alice))
        try await store.insertPendingRequest(waiting("w", of: alice), now: t0, maxPending: 8)
        // Without the check the write would not wait, and would outlive the sign-out.
        let (ended, wrote) = try await whileSigningOut(alice, heldAt: "SELECT 1 FROM signer_requests WHERE id = 'w' FOR UPDATE", in: store) {
            try await self.write(what, for: alice, session: 1, in: store)
        }
        #expect(throws: StoreError.notFound) { try wrote.get() }
        #expect(ended.sessions == 1)
        #expect(try await !written(what, of: alice, by: 1, in: store))
    }

    /// A bunker `connect` racing a sign-out everywhere, on PostgreSQL, in both orders: the sign-out
    /// that cleared the secret first makes the connect find none; a connect that used the secret
    /// first holds the signer's row, so the sign-out (which takes it before the clients) waits for
    /// its client and removes it. The old order (clients, then the secret) left that client.
    @Test(
        .timeLimit(.minutes(1)), .enabled(if: TestPostgres.isConfigured, "needs KEYFOB_TEST_POSTGRES"),
        arguments: [true, false])
    func aBunkerConnectRacingASignOutIsRefusedOrRemoved(_ signOutFirst: Bool) async throws {
        let store = try await Self.postgres()
        let alice = user("alice")
        try await register([alice], in: store)
        _ = try await store.insertBunkerSignerIfAbsent(signer(of: alice))
        let app = BunkerClientRecord(userID: alice.id, clientPubkey: "cc", name: "App", url: nil, perms: "", createdAt: t0)
        let now = t0
        if signOutFirst {
            try await store.insertPendingRequest(waiting("w", of: alice), now: t0, maxPending: 8)
            let (ended, connected) = try await whileSigningOut(
                alice, heldAt: "SELECT 1 FROM signer_requests WHERE id = 'w' FOR UPDATE", in: store
            ) {
                try await store.connectBunkerClient(app, secretHash: [7], now: now)
            }
            #expect(try connected.get() == false)
            #expect(ended.clients == 0)
        } else {
            // The connect's own first step, held: the secret used, its client not yet added.
            let used: PostgresQuery = """
                UPDATE bunker_signers SET secret_hash = NULL, secret_expires_at = NULL
                WHERE user_id = \(alice.id) AND secret_hash = \(ByteBuffer(bytes: [7])) RETURNING 1
                """
            let signOut = Mutex<Task<SignedOutEverywhere, any Error>?>(nil)
            let connecting = await holding(used, in: store) { connection in
                let task = Task { try await store.signOutEverywhere(userID: alice.id, now: now) }
                signOut.withLock { $0 = task }
                _ = try await Self.backend(blockedBy: try await Self.pid(of: connection, in: store), in: store)
                for try await _ in try await connection.query(PostgresStore.insertClientQuery(app), logger: store.logger) {}
            }
            try await connecting.value
            let ended = try await #require(signOut.withLock { $0 }).value
            #expect(ended.clients == 1, "the sign-out saw the client the connect added")
        }
        #expect(try await store.bunkerClients(ofUser: alice.id).isEmpty)
        #expect(try await store.bunkerSigner(ofUser: alice.id)?.secretHash == nil)
    }
}
