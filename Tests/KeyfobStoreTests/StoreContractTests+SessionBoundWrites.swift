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

    /// Each of the writes, for `session` (a token byte: 1 is Alice's, 2 Bob's, 9 nobody's). A claim
    /// makes a request nobody owned yet (one a web page opened) the account's; the extension's
    /// session is given by a signed-in page.
    enum SessionWrite: String, CaseIterable, Sendable {
        case secret, pastedClient, metadata, claim, extensionSession
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
        case .claim:
            if try await store.signerRequest(id: "u", visibleTo: user.id) == nil {
                var unowned = waiting("u", of: user)
                (unowned.userID, unowned.client, unowned.transport) = (nil, "web:https://app.example", "web")
                try await store.insertPendingRequest(unowned, now: t0, maxPending: 8, source: nil)
            }
            #expect(try await store.claimPendingRequest(id: "u", userID: user.id, session: token, now: t0)?.userID == user.id)
        case .extensionSession:
            try await store.addSession(extensionSession(of: user, passkey: [1, 1]), parent: token)
        }
    }

    /// Whether `kind`'s write of `user` is stored (the secret: the one `byte` wrote).
    func written(_ kind: SessionWrite, of user: UserRecord, by byte: UInt8, in store: any KeyfobStore) async throws -> Bool {
        switch kind {
        case .secret: try await store.bunkerSigner(ofUser: user.id)?.secretHash == [byte, 8]
        case .pastedClient: try await store.bunkerClient(userID: user.id, clientPubkey: "pasted") != nil
        case .metadata: try await !store.polkadotMetadata(ofUser: user.id, origin: "https://dapp.example").isEmpty
        case .claim: try await store.signerRequest(id: "u", visibleTo: user.id).map { $0.userID == user.id && $0.state == "pending" } ?? false
        case .extensionSession: try await hasSession(store, 0xE0)
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
        // Without the check the write would not wait, and would outlive the sign-out.
        let (_, ended) = try await writtenWhileSigningOut(what, in: try await Self.postgres())
        #expect(ended.sessions == 1)
    }

    /// Alice's `what` for her session 1, while a sign-out everywhere that removed it has not
    /// committed (held at its step after, the waiting requests): refused, and nothing written.
    @discardableResult
    func writtenWhileSigningOut(_ what: SessionWrite, in store: PostgresStore) async throws -> (UserRecord, SignedOutEverywhere) {
        let alice = user("alice")
        try await register([alice], in: store)
        _ = try await store.insertBunkerSignerIfAbsent(signer(of: alice))
        try await store.insertPendingRequest(waiting("w", of: alice), now: t0, maxPending: 8)
        let (ended, wrote) = try await whileSigningOut(alice, heldAt: "SELECT 1 FROM signer_requests WHERE id = 'w' FOR UPDATE", in: store) {
            try await self.write(what, for: alice, session: 1, in: store)
        }
        #expect(throws: StoreError.notFound) { try wrote.get() }
        #expect(try await !written(what, of: alice, by: 1, in: store))
        return (alice, ended)
    }

    /// The browser extension's session a page gives (token E0), signed with `passkey`.
    func extensionSession(of user: UserRecord, passkey: [UInt8]) -> SessionRecord {
        var given = session(0xE0, of: user)
        (given.kind, given.credentialID) = ("extension", passkey)
        return given
    }

    /// The extension's session names the passkey that confirmed it: one that is not (or no longer)
    /// the account's gives no session.
    @Test(arguments: Kind.available)
    func anExtensionSessionIsGivenOnlyForAPasskeyTheAccountHas(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let alice = user("alice")
        try await register([alice, user("bob")], in: store)  // passkeys [1, 1] and [2, 2]
        let token1 = [UInt8](repeating: 1, count: 32)
        await #expect(throws: StoreError.notFound) {
            try await store.addSession(extensionSession(of: alice, passkey: [2, 2]), parent: token1)
        }
        // One she removed.
        try await store.completeRegistration(
            user: alice, createUser: false, nostrKey: nil, credential: credential(3, of: alice), session: session(3, of: alice))
        #expect(try await store.deleteCredential(id: [3, 3], ofUser: alice.id))
        await #expect(throws: StoreError.notFound) {
            try await store.addSession(extensionSession(of: alice, passkey: [3, 3]), parent: token1)
        }
        #expect(try await !hasSession(store, 0xE0))
        try await store.addSession(extensionSession(of: alice, passkey: [1, 1]), parent: token1)
        #expect(try await hasSession(store, 0xE0))
    }

    /// At the session cap, the extension's session ends the account's oldest session but never the
    /// page's own that gives it: connecting the extension does not sign that page out.
    @Test(arguments: Kind.available)
    func anExtensionSessionAtTheCapKeepsThePageThatGaveIt(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind, maxSessionsPerUser: 3)
        let alice = user("alice")
        try await register([alice], in: store)  // passkey [1, 1], session 1, the oldest
        for byte: UInt8 in [2, 3] {
            var later = session(byte, of: alice)
            later.createdAt = t0 + Double(byte)
            try await store.addSession(later)
        }
        var given = extensionSession(of: alice, passkey: [1, 1])
        given.createdAt = t0 + 9
        try await store.addSession(given, parent: [UInt8](repeating: 1, count: 32))
        for (token, kept) in [(UInt8(1), true), (2, false), (3, true), (0xE0, true)] {
            #expect(try await hasSession(store, token) == kept, "session \(token)")
        }
    }

    /// The remedies an extension's session must not outlive.
    enum Remedy: String, CaseIterable, Sendable {
        case signOutEverywhere, passkeyRemoval, operatorEnd
    }

    /// On PostgreSQL, an extension's session given while a remedy runs: held at its insert (its
    /// foreign key waits on the user row), having locked the passkey it names and the page's
    /// session; the remedy waits on one of them, then ends the new session too. Before, the
    /// sign-out's lock had begun before the new row existed and left it, and a passkey's removal
    /// did not wait at all.
    @Test(
        .timeLimit(.minutes(1)), .enabled(if: TestPostgres.isConfigured, "needs KEYFOB_TEST_POSTGRES"),
        arguments: Remedy.allCases)
    func anExtensionSessionGivenAsARemedyRunsIsEndedByIt(_ remedy: Remedy) async throws {
        let store = try await Self.postgres()
        let alice = user("alice")
        try await register([alice], in: store)  // passkey [1, 1], session 1
        var second = session(2, of: alice)
        second.credentialID = [2, 2]
        try await store.completeRegistration(
            user: alice, createUser: false, nostrKey: nil, credential: credential(2, of: alice), session: second)
        let now = t0
        let giving = Mutex<Task<Void, any Error>?>(nil)
        let remedying = Mutex<Task<Int, any Error>?>(nil)
        let held = await holding("SELECT 1 FROM users WHERE id = \(alice.id) FOR UPDATE", in: store) { connection in
            let give = Task {
                try await store.addSession(self.extensionSession(of: alice, passkey: [2, 2]), parent: [UInt8](repeating: 1, count: 32))
            }
            giving.withLock { $0 = give }
            let giver = try #require(try await Self.backend(blockedBy: try await Self.pid(of: connection, in: store), in: store))
            let done = Flag()
            let remedyTask = Task {
                defer { done.value.store(true, ordering: .releasing) }
                switch remedy {
                case .signOutEverywhere: return try await store.signOutEverywhere(userID: alice.id, now: now).extensionSessions
                case .passkeyRemoval: return try await store.deleteCredential(id: [2, 2], ofUser: alice.id) ? 1 : 0
                case .operatorEnd:
                    try await store.deleteSessions(ofUser: alice.id)
                    return 1
                }
            }
            remedying.withLock { $0 = remedyTask }
            _ = try await Self.backend(blockedBy: giver, in: store, unless: done)
        }
        try await held.value
        try await #require(giving.withLock { $0 }).value
        #expect(try await #require(remedying.withLock { $0 }).value == 1)
        #expect(try await !hasSession(store, 0xE0), "the extension's session outlived the remedy")
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
            // The connect itself, held after it used the secret: its client's foreign key waits on
            // the user row, which another transaction holds until the sign-out waits on the connect.
            let signOut = Mutex<Task<SignedOutEverywhere, any Error>?>(nil)
            let connect = Mutex<Task<Bool, any Error>?>(nil)
            let held = await holding("SELECT 1 FROM users WHERE id = \(alice.id) FOR UPDATE", in: store) { connection in
                let connecting = Task { try await store.connectBunkerClient(app, secretHash: [7], now: now) }
                connect.withLock { $0 = connecting }
                let connector = try #require(try await Self.backend(blockedBy: try await Self.pid(of: connection, in: store), in: store))
                let signingOut = Task { try await store.signOutEverywhere(userID: alice.id, now: now) }
                signOut.withLock { $0 = signingOut }
                _ = try await Self.backend(blockedBy: connector, in: store)
            }
            try await held.value
            #expect(try await #require(connect.withLock { $0 }).value, "the connect used the secret first")
            let ended = try await #require(signOut.withLock { $0 }).value
            #expect(ended.clients == 1, "the sign-out saw the client the connect added")
        }
        #expect(try await store.bunkerClients(ofUser: alice.id).isEmpty)
        #expect(try await store.bunkerSigner(ofUser: alice.id)?.secretHash == nil)
    }

    /// Unsealing writes the NIP-46 signer back under the master key from a record read before; a
    /// sign-out everywhere in between cleared the connect secret, and it stays cleared (the record's
    /// secret was written back before, and the intruder's app could connect with it).
    @Test(arguments: Kind.available)
    func aSignerWrittenBackByAnUnsealKeepsTheSecretASignOutCleared(_ kind: Kind) async throws {
        let (store, _) = try await Self.make(kind)
        let (alice, key) = try await sealedAccount(in: store)
        let read = try #require(try await store.bunkerSigner(ofUser: alice.id))
        #expect(read.secretHash == [7])
        _ = try await store.signOutEverywhere(userID: alice.id, now: t0)
        try await store.changeKeyProtection(
            unsealed(key), expectedVersion: 1, wraps: [], keepingSession: nil, sessionDataKey: nil, bunkerSigner: unsealed(read),
            substrateAccounts: nil)
        #expect(try await store.bunkerSigner(ofUser: alice.id)?.secretHash == nil)
        let app = BunkerClientRecord(userID: alice.id, clientPubkey: "evil", name: "Evil", url: nil, perms: "", createdAt: t0)
        #expect(try await store.connectBunkerClient(app, secretHash: [7], now: t0) == false)
        // Without a sign-out the same key keeps its secret; a new key starts with none.
        try await store.addSession(session(1, of: alice))
        #expect(try await store.setBunkerSecret(userID: alice.id, secretHash: [8], expiresAt: t0 + 600, session: nil))
        var again = unsealed(key)
        again.version = 3
        try await store.changeKeyProtection(
            again, expectedVersion: 2, wraps: [], keepingSession: nil, sessionDataKey: nil, bunkerSigner: unsealed(read),
            substrateAccounts: nil)
        #expect(try await store.bunkerSigner(ofUser: alice.id)?.secretHash == [8])
        var newKey = unsealed(read)
        newKey.pubkey = "other-signer"
        again.version = 4
        try await store.changeKeyProtection(
            again, expectedVersion: 3, wraps: [], keepingSession: nil, sessionDataKey: nil, bunkerSigner: newKey, substrateAccounts: nil)
        #expect(try await store.bunkerSigner(ofUser: alice.id)?.secretHash == nil)
    }

    /// Alice with a sealed nostr key, session 1, and a sealed NIP-46 signer whose secret is [7].
    func sealedAccount(in store: any KeyfobStore) async throws -> (UserRecord, NostrKeyRecord) {
        let alice = user("alice")
        var key = NostrKeyRecord(userID: alice.id, pubkey: "ab", version: 1, nonce: [1], sealed: [2], updatedAt: t0)
        key.passkeySealed = true
        try await store.completeRegistration(
            user: alice, createUser: true, nostrKey: key, credential: credential(1, of: alice), session: session(1, of: alice))
        var sealed = signer(of: alice)
        sealed.passkeySealed = true
        _ = try await store.insertBunkerSignerIfAbsent(sealed)
        return (alice, key)
    }

    func unsealed(_ key: NostrKeyRecord) -> NostrKeyRecord {
        var next = key
        (next.version, next.passkeySealed, next.nonce) = (key.version + 1, false, [3])
        return next
    }

    func unsealed(_ signer: BunkerSignerRecord) -> BunkerSignerRecord {
        var plain = signer
        (plain.passkeySealed, plain.nonce) = (false, [3])
        return plain
    }

    /// On PostgreSQL, an unseal and a sign-out everywhere at once: the unseal holds the signer's row
    /// (held here at its step after, the key wraps), the sign-out waits on the sessions the unseal
    /// locked first; whichever order they commit in, the secret is gone after the sign-out.
    @Test(.timeLimit(.minutes(1)), .enabled(if: TestPostgres.isConfigured, "needs KEYFOB_TEST_POSTGRES"), arguments: [false, true])
    func anUnsealAndASignOutAtOnceLeaveNoSecretAndNoDeadlock(_ keepingSession: Bool) async throws {
        let store = try await Self.postgres()
        let (alice, key) = try await sealedAccount(in: store)
        _ = try await store.rows(
            """
            INSERT INTO key_wraps (user_id, credential_id, wrapped, created_at)
            VALUES (\(alice.id), \(ByteBuffer(bytes: [1, 1])), \(ByteBuffer(bytes: [9])), 0) RETURNING 1
            """)
        let plain = unsealed(try #require(try await store.bunkerSigner(ofUser: alice.id)))
        let next = unsealed(key), now = t0
        let session: [UInt8]? = keepingSession ? [UInt8](repeating: 1, count: 32) : nil
        let unseal = Mutex<Task<Void, any Error>?>(nil)
        let signOut = Mutex<Task<SignedOutEverywhere, any Error>?>(nil)
        let held = await holding("SELECT 1 FROM key_wraps WHERE user_id = \(alice.id) FOR UPDATE", in: store) { connection in
            let unsealing = Task {
                try await store.changeKeyProtection(
                    next, expectedVersion: 1, wraps: [], keepingSession: session, sessionDataKey: session.map { _ in [5] },
                    bunkerSigner: plain, substrateAccounts: nil)
            }
            unseal.withLock { $0 = unsealing }
            let unsealer = try #require(try await Self.backend(blockedBy: try await Self.pid(of: connection, in: store), in: store))
            let signingOut = Task { try await store.signOutEverywhere(userID: alice.id, now: now) }
            signOut.withLock { $0 = signingOut }
            _ = try await Self.backend(blockedBy: unsealer, in: store)
        }
        try await held.value
        try await #require(unseal.withLock { $0 }).value
        #expect(try await #require(signOut.withLock { $0 }).value.sessions == 1)
        #expect(try await store.bunkerSigner(ofUser: alice.id)?.secretHash == nil)
    }

    /// On PostgreSQL, a session that signed in while a sign-out everywhere runs (after it ended the
    /// sessions it found) and asks for a bunker URL is left alone by it, not waited on: the two
    /// finish, instead of each waiting on what the other holds.
    @Test(.timeLimit(.minutes(1)), .enabled(if: TestPostgres.isConfigured, "needs KEYFOB_TEST_POSTGRES"))
    func aSessionAddedWhileASignOutRunsNeitherWaitsInACircleNorIsEnded() async throws {
        let store = try await Self.postgres()
        let (alice, _) = try await sealedAccount(in: store)
        try await store.putBunkerClient(BunkerClientRecord(userID: alice.id, clientPubkey: "cc", name: nil, url: nil, perms: "", createdAt: t0))
        let now = t0
        let signOut = Mutex<Task<SignedOutEverywhere, any Error>?>(nil)
        let secret = Mutex<Task<Bool, any Error>?>(nil)
        // The sign-out held at its clients (after the sessions and the signer).
        let held = await holding("SELECT 1 FROM bunker_clients WHERE user_id = \(alice.id) FOR KEY SHARE", in: store) { connection in
            let signingOut = Task { try await store.signOutEverywhere(userID: alice.id, now: now) }
            signOut.withLock { $0 = signingOut }
            let signer = try #require(try await Self.backend(blockedBy: try await Self.pid(of: connection, in: store), in: store))
            try await store.addSession(self.session(2, of: alice))
            let asking = Task {
                try await store.setBunkerSecret(
                    userID: alice.id, secretHash: [2, 8], expiresAt: now + 600, session: [UInt8](repeating: 2, count: 32))
            }
            secret.withLock { $0 = asking }
            _ = try await Self.backend(blockedBy: signer, in: store)
        }
        try await held.value
        #expect(try await #require(signOut.withLock { $0 }).value.sessions == 1)
        #expect(try await #require(secret.withLock { $0 }).value)
        #expect(try await hasSession(store, 2))
        #expect(try await store.bunkerSigner(ofUser: alice.id)?.secretHash == [2, 8])
    }

    /// The session checks read committed whatever the server's default isolation: a write for a
    /// session that a sign-out in progress removes waits, then is refused (a 401), rather than
    /// failing with a serialization error (a 503) — by each connection's startup parameter (a
    /// client setting, which outranks the server's and the database's defaults), and where a
    /// pooler in between dropped it and the default is REPEATABLE READ, by each transaction's own
    /// first statement.
    @Test(
        .timeLimit(.minutes(1)), .enabled(if: TestPostgres.isConfigured, "needs KEYFOB_TEST_POSTGRES"),
        arguments: [true, false], SessionWrite.allCases)
    func theSessionChecksReadCommittedWhateverTheDatabasesDefault(_ atStartup: Bool, _ what: SessionWrite) async throws {
        var settings = try TestPostgres.settings()
        if !atStartup { settings.startupIsolation = "repeatable read" }
        let store = PostgresStore(settings: settings)
        try await store.migrate()
        let setting = try #require(
            try await store.rows("SELECT setting, source FROM pg_settings WHERE name = 'default_transaction_isolation'").first)
        #expect(try setting.text(0) == (atStartup ? "read committed" : "repeatable read"))
        #expect(try setting.text(1) == "client")
        try await writtenWhileSigningOut(what, in: store)
    }

    /// On PostgreSQL, an unseal and the removal of a passkey at once (one a session signed in
    /// with): the unseal takes the passkeys before the sessions, as the removal does, so one waits
    /// for the other instead of each holding what the other needs (the removal: the passkey, its
    /// wrap, then its sessions; the unseal: the sessions, then the wraps).
    @Test(.timeLimit(.minutes(1)), .enabled(if: TestPostgres.isConfigured, "needs KEYFOB_TEST_POSTGRES"))
    func anUnsealAndAPasskeyRemovalAtOnceBothFinish() async throws {
        let store = try await Self.postgres()
        let (alice, key) = try await sealedAccount(in: store)
        var second = session(2, of: alice)
        second.credentialID = [2, 2]
        try await store.completeRegistration(
            user: alice, createUser: false, nostrKey: nil, credential: credential(2, of: alice), session: second)
        for id: UInt8 in [1, 2] {
            _ = try await store.rows(
                """
                INSERT INTO key_wraps (user_id, credential_id, wrapped, created_at)
                VALUES (\(alice.id), \(ByteBuffer(bytes: [id, id])), \(ByteBuffer(bytes: [9])), 0) RETURNING 1
                """)
        }
        let plain = unsealed(try #require(try await store.bunkerSigner(ofUser: alice.id)))
        let next = unsealed(key)
        let unseal = Mutex<Task<Void, any Error>?>(nil)
        let removal = Mutex<Task<Bool, any Error>?>(nil)
        // The unseal held at the NIP-46 signer (after the sessions, before the wraps).
        let held = await holding("SELECT 1 FROM bunker_signers WHERE user_id = \(alice.id) FOR UPDATE", in: store) { connection in
            let unsealing = Task {
                try await store.changeKeyProtection(
                    next, expectedVersion: 1, wraps: [], keepingSession: nil, sessionDataKey: nil, bunkerSigner: plain, substrateAccounts: nil)
            }
            unseal.withLock { $0 = unsealing }
            let unsealer = try #require(try await Self.backend(blockedBy: try await Self.pid(of: connection, in: store), in: store))
            let removing = Task { try await store.deleteCredential(id: [2, 2], ofUser: alice.id) }
            removal.withLock { $0 = removing }
            _ = try await Self.backend(blockedBy: unsealer, in: store)
        }
        try await held.value
        try await #require(unseal.withLock { $0 }).value
        #expect(try await #require(removal.withLock { $0 }).value)
        #expect(try await !hasSession(store, 2))
    }
}
