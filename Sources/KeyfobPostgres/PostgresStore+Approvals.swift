import Foundation
import KeyfobStore
import Logging
import PostgresNIO

// MARK: Pending requests and grants

extension PostgresStore {
    public func insertPendingRequest(_ q: PendingRequestRecord, now: Date, maxPending: Int, source: PendingRequestSource?) async throws {
        let owner = q.userID ?? q.requester
        let inserted = try await transaction { [logger] connection in
            try await Self.require(source, owner: q.userID, on: connection, logger: logger)
            // As with challenges: one statement, the cap checked as it inserts.
            return try await connection.query(
                """
                INSERT INTO signer_requests (\(unescaped: Columns.request))
                SELECT \(q.id), \(q.userID), \(q.requester), \(q.client), \(q.transport), \(q.method), \(q.kind),
                       \(ByteBuffer(bytes: q.nonce)), \(ByteBuffer(bytes: q.payload)), \(q.confirmationNonce.map { ByteBuffer(bytes: $0) }),
                       \(q.createdAt.timeIntervalSince1970), \(q.expiresAt.timeIntervalSince1970), \(q.state)
                WHERE (SELECT count(*) FROM (SELECT 1 FROM signer_requests
                       WHERE (user_id = \(owner) OR requester = \(owner)) AND client = \(q.client) AND state = 'pending'
                         AND expires_at > \(now.timeIntervalSince1970) LIMIT \(maxPending)) AS live) < \(maxPending)
                RETURNING 1
                """, logger: logger
            ).collect().count
        }
        guard inserted == 1 else { throw StoreError.limitReached }
    }

    /// Locks what a write for `source` needs to still exist (the session, `owner`'s; or the NIP-46
    /// client) for the rest of the transaction, or throws `StoreError.notFound` when it is gone. KEY
    /// SHARE, what a foreign key takes: a sign-out everywhere that deleted the row first makes this
    /// wait, then find it gone; one that comes after waits for this transaction, and then removes
    /// what it wrote (it ends sessions and clients before it cancels what waits).
    /// Its transaction's first statement: it also makes that transaction READ COMMITTED (as every
    /// connection's startup parameter does, unless a pooler in between dropped it). Nil: nothing.
    static func require(_ source: PendingRequestSource?, owner: String?, on connection: PostgresConnection, logger: Logger) async throws {
        guard let source else { return }
        try await readCommitted(connection, logger: logger)
        try await requireHeld(lock(source, owner: owner), on: connection, logger: logger)
    }

    /// The KEY SHARE lock on what `source` names (the session, `owner`'s; or the NIP-46 client).
    static func lock(_ source: PendingRequestSource, owner: String?) -> PostgresQuery {
        switch source {
        case .session(let tokenHash):
            "SELECT 1 FROM sessions WHERE token_hash = \(ByteBuffer(bytes: tokenHash)) AND user_id = \(owner) FOR KEY SHARE"
        case .bunkerClient(let userID, let clientPubkey):
            "SELECT 1 FROM bunker_clients WHERE user_id = \(userID) AND client_pubkey = \(clientPubkey) FOR KEY SHARE"
        }
    }

    /// Runs `lock` (a locking SELECT): `StoreError.notFound` when it found nothing to hold.
    static func requireHeld(_ lock: PostgresQuery, on connection: PostgresConnection, logger: Logger) async throws {
        if try await connection.query(lock, logger: logger).collect().isEmpty { throw StoreError.notFound }
    }

    /// `require` for the session `tokenHash` (nil: none asked) of `userID`.
    static func requireSession(_ tokenHash: [UInt8]?, of userID: String, on connection: PostgresConnection, logger: Logger) async throws {
        try await require(tokenHash.map { .session(tokenHash: $0) }, owner: userID, on: connection, logger: logger)
    }

    /// Makes the transaction READ COMMITTED (its first statement): a row another transaction
    /// deletes is waited for and then read as gone, not a serialization error.
    static func readCommitted(_ connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query("SET TRANSACTION ISOLATION LEVEL READ COMMITTED", logger: logger).collect()
    }

    public func claimPendingRequest(id: String, userID: String, session: [UInt8]?, now: Date) async throws -> PendingRequestRecord? {
        try await transaction { [logger] connection in
            // The session that asks held first, as for a request stored: a sign-out everywhere then
            // waits for this claim and cancels the request, or ran first and this refuses.
            try await Self.requireSession(session, of: userID, on: connection, logger: logger)
            // One statement: claim it if nobody owns it; it comes back only if it is (now) this user's.
            return try await connection.query(
                """
                UPDATE signer_requests SET user_id = \(userID)
                WHERE id = \(id) AND (user_id IS NULL OR user_id = \(userID)) AND state = 'pending'
                  AND expires_at > \(now.timeIntervalSince1970)
                RETURNING \(unescaped: Columns.request)
                """, logger: logger
            ).collect().first.map { try PendingRequestRecord(row: $0.makeRandomAccess()) }
        }
    }

    public func signerRequest(id: String, visibleTo userID: String) async throws -> PendingRequestRecord? {
        try await call { [self] in
            try await rows(
                "SELECT \(unescaped: Columns.request) FROM signer_requests WHERE id = \(id) AND (user_id IS NULL OR user_id = \(userID))"
            ).first.map { try PendingRequestRecord(row: $0) }
        }
    }

    public func setConfirmationNonce(
        _ approval: PendingApproval, id: String, userID: String, nonce: [UInt8], now: Date
    ) async throws -> Bool {
        try await call { [self] in
            try await touched(
                """
                UPDATE \(unescaped: approval.table) SET confirmation_nonce = \(ByteBuffer(bytes: nonce))
                WHERE id = \(id) AND user_id = \(userID) AND state = 'pending' AND expires_at > \(now.timeIntervalSince1970) RETURNING 1
                """) == 1
        }
    }

    public func decidePendingRequest(id: String, userID: String, state: String, now: Date) async throws -> Bool {
        try await call { [self] in
            try await touched(
                """
                UPDATE signer_requests SET state = \(state)
                WHERE id = \(id) AND user_id = \(userID) AND state = 'pending' AND expires_at > \(now.timeIntervalSince1970) RETURNING 1
                """) == 1
        }
    }

    public func pendingRequests(ofUser userID: String, now: Date, limit: Int) async throws -> [PendingRequestRecord] {
        try await call { [self] in
            try await rows(
                """
                SELECT \(unescaped: Columns.request) FROM signer_requests
                WHERE user_id = \(userID) AND state = 'pending' AND expires_at > \(now.timeIntervalSince1970)
                ORDER BY created_at, id LIMIT \(limit)
                """
            ).map { try PendingRequestRecord(row: $0) }
        }
    }

    public func pendingRequestCount(now: Date) async throws -> Int {
        try await call { [self] in
            try await rows("SELECT count(*) FROM signer_requests WHERE state = 'pending' AND expires_at > \(now.timeIntervalSince1970)")
                .first?.int(0) ?? 0
        }
    }

    public func insertGrant(_ g: GrantRecord) async throws {
        _ = try await call { [self] in
            try await touched(
                """
                INSERT INTO grants (id, user_id, client, method, kind, allow, created_at, expires_at)
                VALUES (\(g.id), \(g.userID), \(g.client), \(g.method), \(g.kind), \(g.allow), \(g.createdAt.timeIntervalSince1970),
                        \(g.expiresAt?.timeIntervalSince1970)) RETURNING 1
                """)
        }
    }

    public func grants(ofUser userID: String, now: Date) async throws -> [GrantRecord] {
        try await call { [self] in
            try await rows(
                """
                SELECT \(unescaped: Columns.grant) FROM grants
                WHERE user_id = \(userID) AND (expires_at IS NULL OR expires_at > \(now.timeIntervalSince1970))
                ORDER BY created_at DESC, seq DESC LIMIT 1000
                """
            ).map { try GrantRecord(row: $0) }
        }
    }

    public func deleteGrant(id: String, ofUser userID: String) async throws -> Bool {
        try await call { [self] in
            try await touched("DELETE FROM grants WHERE id = \(id) AND user_id = \(userID) RETURNING 1") == 1
        }
    }
}
