import Foundation
import KeyfobStore
import Logging
import PostgresNIO

// MARK: Pending requests and grants

extension PostgresStore {
    public func insertPendingRequest(_ q: PendingRequestRecord, now: Date, maxPending: Int, source: PendingRequestSource?) async throws {
        let owner = q.userID ?? q.requester
        // The source row is locked as the request is stored (KEY SHARE, what a foreign key takes):
        // a sign-out everywhere that deleted it first makes this wait, then find it gone; one that
        // comes after waits for this insert, and cancels the request it stored.
        let session = source.flatMap { if case .session(let hash) = $0 { ByteBuffer(bytes: hash) } else { nil } }
        let client: (user: String, pubkey: String)? = source.flatMap {
            if case .bunkerClient(let user, let pubkey) = $0 { (user, pubkey) } else { nil }
        }
        let inserted = try await call { [self] in
            // As with challenges: one statement, the cap checked as it inserts.
            try await touched(
                """
                INSERT INTO signer_requests (\(unescaped: Columns.request))
                SELECT \(q.id), \(q.userID), \(q.requester), \(q.client), \(q.transport), \(q.method), \(q.kind),
                       \(ByteBuffer(bytes: q.nonce)), \(ByteBuffer(bytes: q.payload)), \(q.confirmationNonce.map { ByteBuffer(bytes: $0) }),
                       \(q.createdAt.timeIntervalSince1970), \(q.expiresAt.timeIntervalSince1970), \(q.state)
                WHERE (SELECT count(*) FROM (SELECT 1 FROM signer_requests
                       WHERE (user_id = \(owner) OR requester = \(owner)) AND client = \(q.client) AND state = 'pending'
                         AND expires_at > \(now.timeIntervalSince1970) LIMIT \(maxPending)) AS live) < \(maxPending)
                  AND (\(session)::BYTEA IS NULL
                       OR EXISTS (SELECT 1 FROM sessions WHERE token_hash = \(session) AND user_id = \(q.userID) FOR KEY SHARE))
                  AND (\(client?.user)::TEXT IS NULL
                       OR EXISTS (SELECT 1 FROM bunker_clients WHERE user_id = \(client?.user) AND client_pubkey = \(client?.pubkey)
                                  FOR KEY SHARE))
                RETURNING 1
                """)
        }
        guard inserted == 1 else {
            // Refused: by the cap, or because the source is gone (said first: retrying cannot help).
            if let source, try await !exists(source, owner: q.userID) { throw StoreError.notFound }
            throw StoreError.limitReached
        }
    }

    /// Locks the session `tokenHash` (nil: none asked) of `userID` for the rest of the transaction
    /// (KEY SHARE, what a foreign key takes), or throws `StoreError.notFound` when it is gone. A
    /// sign-out everywhere locks the account's sessions first: one that deleted this one makes the
    /// lock wait, then find it gone; one that comes after waits for this transaction, and then
    /// removes what it wrote.
    /// Its transaction's first statement: it also makes that transaction READ COMMITTED (as every
    /// connection's startup parameter does, unless a pooler in between dropped it).
    static func requireSession(_ tokenHash: [UInt8]?, of userID: String, on connection: PostgresConnection, logger: Logger) async throws {
        guard let tokenHash else { return }
        try await readCommitted(connection, logger: logger)
        let found = try await connection.query(
            "SELECT 1 FROM sessions WHERE token_hash = \(ByteBuffer(bytes: tokenHash)) AND user_id = \(userID) FOR KEY SHARE", logger: logger
        ).collect()
        if found.isEmpty { throw StoreError.notFound }
    }

    /// Makes the transaction READ COMMITTED (its first statement): a row another transaction
    /// deletes is waited for and then read as gone, not a serialization error.
    static func readCommitted(_ connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query("SET TRANSACTION ISOLATION LEVEL READ COMMITTED", logger: logger).collect()
    }

    /// Whether what a waiting request came through is there (to say why an insert stored nothing).
    func exists(_ source: PendingRequestSource, owner: String?) async throws -> Bool {
        try await call { [self] in
            switch source {
            case .session(let tokenHash):
                try await !rows("SELECT 1 FROM sessions WHERE token_hash = \(ByteBuffer(bytes: tokenHash)) AND user_id = \(owner)").isEmpty
            case .bunkerClient(let userID, let clientPubkey):
                try await !rows("SELECT 1 FROM bunker_clients WHERE user_id = \(userID) AND client_pubkey = \(clientPubkey)").isEmpty
            }
        }
    }

    public func claimPendingRequest(id: String, userID: String, now: Date) async throws -> PendingRequestRecord? {
        try await call { [self] in
            // One statement: claim it if nobody owns it; it comes back only if it is (now) this user's.
            try await writtenRows(
                """
                UPDATE signer_requests SET user_id = \(userID)
                WHERE id = \(id) AND (user_id IS NULL OR user_id = \(userID)) AND state = 'pending'
                  AND expires_at > \(now.timeIntervalSince1970)
                RETURNING \(unescaped: Columns.request)
                """
            ).first.map { try PendingRequestRecord(row: $0) }
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
