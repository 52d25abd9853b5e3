import Foundation
import KeyfobStore
import Logging
import PostgresNIO

// MARK: NIP-46

extension PostgresStore {
    static func insertSignerQuery(_ s: BunkerSignerRecord, onConflict: String) -> PostgresQuery {
        """
        INSERT INTO bunker_signers (\(unescaped: Columns.signer))
        VALUES (\(s.userID), \(s.pubkey), \(ByteBuffer(bytes: s.nonce)), \(ByteBuffer(bytes: s.sealed)),
                \(s.secretHash.map { ByteBuffer(bytes: $0) }), \(s.secretExpiresAt?.timeIntervalSince1970),
                \(s.createdAt.timeIntervalSince1970), \(s.passkeySealed)) \(unescaped: onConflict)
        """
    }

    public func bunkerSigner(ofUser userID: String) async throws -> BunkerSignerRecord? {
        try await call { [self] in
            try await rows("SELECT \(unescaped: Columns.signer) FROM bunker_signers WHERE user_id = \(userID)").first.map {
                try BunkerSignerRecord(row: $0)
            }
        }
    }

    public func allBunkerSigners() async throws -> [BunkerSignerRecord] {
        try await call { [self] in
            try await rows("SELECT \(unescaped: Columns.signer) FROM bunker_signers ORDER BY user_id COLLATE \"C\"").map {
                try BunkerSignerRecord(row: $0)
            }
        }
    }

    public func bunkerSigner(pubkey: String) async throws -> BunkerSignerRecord? {
        try await call { [self] in
            try await rows("SELECT \(unescaped: Columns.signer) FROM bunker_signers WHERE pubkey = \(pubkey)").first.map {
                try BunkerSignerRecord(row: $0)
            }
        }
    }

    public func insertBunkerSignerIfAbsent(_ s: BunkerSignerRecord) async throws -> BunkerSignerRecord {
        try await call { [self] in
            _ = try await touched(Self.insertSignerQuery(s, onConflict: "ON CONFLICT (user_id) DO NOTHING RETURNING 1"))
            guard
                let stored = try await rows("SELECT \(unescaped: Columns.signer) FROM bunker_signers WHERE user_id = \(s.userID)")
                    .first.map({ try BunkerSignerRecord(row: $0) })
            else { throw StoreError.notFound }
            return stored
        }
    }

    public func setBunkerSecret(userID: String, secretHash: [UInt8]?, expiresAt: Date?, session: [UInt8]?) async throws -> Bool {
        try await transaction { [logger] connection in
            try await Self.requireSession(session, of: userID, on: connection, logger: logger)
            return try await connection.query(
                """
                UPDATE bunker_signers SET secret_hash = \(secretHash.map { ByteBuffer(bytes: $0) }),
                       secret_expires_at = \(expiresAt?.timeIntervalSince1970)
                WHERE user_id = \(userID) RETURNING 1
                """, logger: logger
            ).collect().count == 1
        }
    }

    public func connectBunkerClient(_ c: BunkerClientRecord, secretHash: [UInt8], now: Date) async throws -> Bool {
        try await transaction { [logger] connection in
            // The signer's row first, as a sign-out everywhere takes it (before the clients): one
            // that cleared the secret first makes this find none; one that comes after waits for
            // this commit, then removes the client it added.
            try await Self.readCommitted(connection, logger: logger)
            let used = try await connection.query(
                """
                UPDATE bunker_signers SET secret_hash = NULL, secret_expires_at = NULL
                WHERE user_id = \(c.userID) AND secret_hash = \(ByteBuffer(bytes: secretHash))
                  AND secret_expires_at > \(now.timeIntervalSince1970) RETURNING 1
                """, logger: logger
            ).collect()
            guard used.count == 1 else { return false }
            try await connection.query(Self.insertClientQuery(c), logger: logger).collect()
            return true
        }
    }

    public func bunkerClients(ofUser userID: String) async throws -> [BunkerClientRecord] {
        try await call { [self] in
            try await rows(
                """
                SELECT \(unescaped: Columns.client) FROM bunker_clients WHERE user_id = \(userID) ORDER BY created_at, client_pubkey
                """
            ).map { try BunkerClientRecord(row: $0) }
        }
    }

    public func bunkerClient(userID: String, clientPubkey: String) async throws -> BunkerClientRecord? {
        try await call { [self] in
            try await rows(
                """
                SELECT \(unescaped: Columns.client) FROM bunker_clients WHERE user_id = \(userID) AND client_pubkey = \(clientPubkey)
                """
            ).first.map { try BunkerClientRecord(row: $0) }
        }
    }

    public func putBunkerClient(_ c: BunkerClientRecord, session: [UInt8]?) async throws {
        try await transaction { [logger] connection in
            try await Self.requireSession(session, of: c.userID, on: connection, logger: logger)
            try await connection.query(Self.insertClientQuery(c), logger: logger).collect()
        }
    }

    static func insertClientQuery(_ c: BunkerClientRecord) -> PostgresQuery {
        """
        INSERT INTO bunker_clients (\(unescaped: Columns.client))
        VALUES (\(c.userID), \(c.clientPubkey), \(c.name), \(c.url), \(c.perms), \(c.createdAt.timeIntervalSince1970),
                \(c.lastUsedAt?.timeIntervalSince1970), \(c.relays.joined(separator: "\n")))
        ON CONFLICT (user_id, client_pubkey) DO UPDATE SET name = excluded.name, url = excluded.url, perms = excluded.perms,
            created_at = excluded.created_at, last_used_at = excluded.last_used_at, relays = excluded.relays
        RETURNING 1
        """
    }

    public func touchBunkerClient(userID: String, clientPubkey: String, at date: Date) async throws {
        _ = try await call { [self] in
            try await touched(
                """
                UPDATE bunker_clients SET last_used_at = \(date.timeIntervalSince1970)
                WHERE user_id = \(userID) AND client_pubkey = \(clientPubkey) RETURNING 1
                """)
        }
    }

    public func deleteBunkerClient(userID: String, clientPubkey: String, client: String) async throws -> Bool {
        try await transaction { [logger] connection in
            let deleted = try await connection.query(
                "DELETE FROM bunker_clients WHERE user_id = \(userID) AND client_pubkey = \(clientPubkey) RETURNING 1", logger: logger
            ).collect()
            guard deleted.count == 1 else { return false }
            try await connection.query("DELETE FROM grants WHERE user_id = \(userID) AND client = \(client)", logger: logger).collect()
            try await connection.query(
                "UPDATE signer_requests SET state = 'cancelled' WHERE user_id = \(userID) AND client = \(client) AND state = 'pending'",
                logger: logger
            ).collect()
            return true
        }
    }

    public func activeBunkerSigners(now: Date, limit: Int) async throws -> [String] {
        try await call { [self] in
            try await rows(
                """
                SELECT pubkey FROM bunker_signers s
                WHERE secret_expires_at > \(now.timeIntervalSince1970) OR EXISTS (SELECT 1 FROM bunker_clients c WHERE c.user_id = s.user_id)
                ORDER BY pubkey LIMIT \(limit)
                """
            ).map { try $0.text(0) }
        }
    }

    public func nostrConnectClients() async throws -> [BunkerClientRecord] {
        try await call { [self] in
            try await rows("SELECT \(unescaped: Columns.client) FROM bunker_clients WHERE relays <> '' ORDER BY created_at")
                .map { try BunkerClientRecord(row: $0) }
        }
    }

    public func appendBunkerReply(_ event: String, at date: Date, dropBefore: Date) async throws {
        try await transaction { connection in
            _ = try await connection.query(
                "DELETE FROM bunker_replies WHERE created_at < \(dropBefore.timeIntervalSince1970)",
                logger: self.logger
            ).collect()
            _ = try await connection.query(
                "INSERT INTO bunker_replies (event, created_at) VALUES (\(event), \(date.timeIntervalSince1970))",
                logger: self.logger
            ).collect()
            // Delivered to the listeners when this transaction commits.
            _ = try await connection.query("SELECT pg_notify(\(self.replyChannel), '')", logger: self.logger).collect()
        }
    }

    /// The NOTIFY channel for queued replies, one per schema (instances of one deployment share it).
    var replyChannel: String { "keyfob_bunker_replies_\(settings.schema ?? "default")" }

    /// LISTEN on a connection of its own, kept (and re-opened after a loss, every second) for as
    /// long as the stream is read.
    public func bunkerReplySignals() -> AsyncStream<Void>? {
        let (stream, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let listener = Task { [self] in
            while !Task.isCancelled {
                do {
                    guard readiness.isSet else { throw StoreError.unavailable("the schema is not ready yet") }
                    try await client.withConnection { connection in
                        try await connection.listen(on: self.replyChannel) { notifications in
                            signal.yield()  // listening now: read once for what came before
                            for try await _ in notifications { signal.yield() }
                        }
                    }
                } catch is CancellationError {
                    break
                } catch {
                    logger.debug("bunker reply listener: \(error)")
                }
                try? await Task.sleep(for: .seconds(1))
            }
        }
        signal.onTermination = { _ in listener.cancel() }
        return stream
    }

    public func bunkerReplies(since: Date, limit: Int) async throws -> [BunkerReplyRecord] {
        try await call { [self] in
            try await rows(
                """
                SELECT id, event FROM bunker_replies WHERE created_at >= \(since.timeIntervalSince1970) ORDER BY id LIMIT \(limit)
                """
            ).map { try BunkerReplyRecord(row: $0) }
        }
    }

    public func hasUnlockedSession(ofUser userID: String, now: Date) async throws -> Bool {
        try await call { [self] in
            let at = now.timeIntervalSince1970
            return try await rows(
                """
                SELECT 1 FROM sessions WHERE user_id = \(userID) AND unlocked_until > \(at) AND expires_at > \(at) LIMIT 1
                """
            ).isEmpty == false
        }
    }
}
