import Foundation

// MARK: Pending requests and grants

extension SQLiteStore {
    public func insertPendingRequest(_ q: PendingRequestRecord, now: Date, maxPending: Int, source: PendingRequestSource?) async throws {
        try write {
            try connection.transaction {
                // In the one write transaction a sign-out everywhere also takes: before it or after it.
                if let source, try !exists(source, owner: q.userID) { throw StoreError.notFound }
                let owner = q.userID ?? q.requester
                let live =
                    try connection.query(
                        """
                        SELECT count(*) FROM (SELECT 1 FROM signer_requests
                        WHERE (user_id = ? OR requester = ?) AND client = ? AND state = 'pending' AND expires_at > ? LIMIT ?)
                        """, [.text(owner), .text(owner), .text(q.client), .date(now), .int(Int64(maxPending))]
                    ).first?.first?.int ?? 0
                guard live < maxPending else { throw StoreError.limitReached }
                try connection.query(
                    "INSERT INTO signer_requests (\(Columns.request)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        .text(q.id), q.userID.map(SQLValue.text) ?? .null, .text(q.requester), .text(q.client), .text(q.transport),
                        .text(q.method), q.kind.map { .int(Int64($0)) } ?? .null, .blob(q.nonce), .blob(q.payload),
                        q.confirmationNonce.map(SQLValue.blob) ?? .null, .date(q.createdAt), .date(q.expiresAt), .text(q.state),
                    ])
            }
        }
    }

    /// Throws `StoreError.notFound` unless the session `tokenHash` (nil: none asked) is `userID`'s
    /// (inside the write transaction, which a sign-out everywhere also takes).
    func requireSession(_ tokenHash: [UInt8]?, of userID: String) throws {
        if let tokenHash, try !exists(.session(tokenHash: tokenHash), owner: userID) { throw StoreError.notFound }
    }

    /// Whether what a waiting request came through is there (inside the write transaction).
    func exists(_ source: PendingRequestSource, owner: String?) throws -> Bool {
        switch source {
        case .session(let tokenHash):
            try !connection.query(
                "SELECT 1 FROM sessions WHERE token_hash = ? AND user_id IS ?", [.blob(tokenHash), owner.map(SQLValue.text) ?? .null]
            ).isEmpty
        case .bunkerClient(let userID, let clientPubkey):
            try !connection.query(
                "SELECT 1 FROM bunker_clients WHERE user_id = ? AND client_pubkey = ?", [.text(userID), .text(clientPubkey)]
            ).isEmpty
        }
    }

    public func claimPendingRequest(id: String, userID: String, session: [UInt8]?, now: Date) async throws -> PendingRequestRecord? {
        try write {
            try connection.transaction {
                try requireSession(session, of: userID)
                try connection.query(
                    "UPDATE signer_requests SET user_id = ? WHERE id = ? AND user_id IS NULL AND state = 'pending' AND expires_at > ?",
                    [.text(userID), .text(id), .date(now)])
                return try connection.query(
                    "SELECT \(Columns.request) FROM signer_requests WHERE id = ? AND user_id = ? AND state = 'pending' AND expires_at > ?",
                    [.text(id), .text(userID), .date(now)]
                ).first.map { try PendingRequestRecord(row: $0) }
            }
        }
    }

    public func signerRequest(id: String, visibleTo userID: String) async throws -> PendingRequestRecord? {
        try read { connection in
            try connection.query(
                "SELECT \(Columns.request) FROM signer_requests WHERE id = ? AND (user_id IS NULL OR user_id = ?)",
                [.text(id), .text(userID)]
            ).first.map { try PendingRequestRecord(row: $0) }
        }
    }

    public func setConfirmationNonce(
        _ approval: PendingApproval, id: String, userID: String, nonce: [UInt8], now: Date
    ) async throws -> Bool {
        try write {
            try connection.query(
                "UPDATE \(approval.table) SET confirmation_nonce = ? WHERE id = ? AND user_id = ? AND state = 'pending' AND expires_at > ?",
                [.blob(nonce), .text(id), .text(userID), .date(now)])
            return connection.changes == 1
        }
    }

    public func decidePendingRequest(id: String, userID: String, state: String, now: Date) async throws -> Bool {
        try write {
            try connection.query(
                "UPDATE signer_requests SET state = ? WHERE id = ? AND user_id = ? AND state = 'pending' AND expires_at > ?",
                [.text(state), .text(id), .text(userID), .date(now)])
            return connection.changes == 1
        }
    }

    public func pendingRequests(ofUser userID: String, now: Date, limit: Int) async throws -> [PendingRequestRecord] {
        try read { connection in
            try connection.query(
                """
                SELECT \(Columns.request) FROM signer_requests
                WHERE user_id = ? AND state = 'pending' AND expires_at > ? ORDER BY created_at, id LIMIT ?
                """, [.text(userID), .date(now), .int(Int64(limit))]
            ).map { try PendingRequestRecord(row: $0) }
        }
    }

    public func pendingRequestCount(now: Date) async throws -> Int {
        try read { connection in
            Int(
                try connection.query(
                    "SELECT count(*) FROM signer_requests WHERE state = 'pending' AND expires_at > ?",
                    [.date(now)]
                ).first?.first?.int ?? 0)
        }
    }

    public func insertGrant(_ g: GrantRecord) async throws {
        try write {
            try connection.query(
                "INSERT INTO grants (id, user_id, client, method, kind, allow, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    .text(g.id), .text(g.userID), .text(g.client), .text(g.method), g.kind.map { .int(Int64($0)) } ?? .null,
                    .bool(g.allow), .date(g.createdAt), .date(g.expiresAt),
                ])
        }
    }

    public func grants(ofUser userID: String, now: Date) async throws -> [GrantRecord] {
        try read { connection in
            try connection.query(
                """
                SELECT \(Columns.grant) FROM grants
                WHERE user_id = ? AND (expires_at IS NULL OR expires_at > ?) ORDER BY created_at DESC, rowid DESC LIMIT 1000
                """, [.text(userID), .date(now)]
            ).map { try GrantRecord(row: $0) }
        }
    }

    public func deleteGrant(id: String, ofUser userID: String) async throws -> Bool {
        try write {
            try connection.query("DELETE FROM grants WHERE id = ? AND user_id = ?", [.text(id), .text(userID)])
            return connection.changes == 1
        }
    }

    public func updateSignCount(
        credentialID: [UInt8], expectedSignCount: UInt32, newSignCount: UInt32, backupState: Bool,
        usedAt: Date
    ) async throws {
        try write {
            try connection.query(
                "UPDATE credentials SET sign_count = ?, backup_state = ?, last_used_at = ? WHERE id = ? AND sign_count = ?",
                [.int(Int64(newSignCount)), .bool(backupState), .date(usedAt), .blob(credentialID), .int(Int64(expectedSignCount))])
            guard connection.changes == 1 else { throw StoreError.conflict }
        }
    }

    /// The store reads and writes: a probe row in `meta` is written through the writer, so a full
    /// disk or a read-only file fails here (a read alone answered while nothing could be written).
    public func healthCheck() async throws {
        try read { connection in
            try connection.query("SELECT 1")
        }
        try write {
            try connection.query(
                "INSERT OR REPLACE INTO meta (name, value) VALUES ('health_probe', ?)",
                [.blob(withUnsafeBytes(of: Date().timeIntervalSince1970.bitPattern.littleEndian) { Array($0) })])
        }
    }
}
