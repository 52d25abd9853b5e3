import Foundation

// MARK: Sessions

extension SQLiteStore {
    public func session(tokenHash: [UInt8], now: Date) async throws -> SessionRecord? {
        try read { connection in
            try connection.query(
                """
                SELECT \(Columns.session)
                FROM sessions WHERE token_hash = ? AND expires_at > ?
                """,
                [.blob(tokenHash), .date(now)]
            ).first.map { try SessionRecord(row: $0) }
        }
    }

    public func lockAllSessions() async throws -> Int {
        try write {
            try connection.query(
                "UPDATE sessions SET unlocked_until = NULL, data_key = NULL WHERE unlocked_until IS NOT NULL OR data_key IS NOT NULL")
            return connection.changes
        }
    }

    public func lockSessions(ofUser userID: String) async throws -> Int {
        try write {
            try connection.query(
                """
                UPDATE sessions SET unlocked_until = NULL, data_key = NULL
                WHERE user_id = ? AND (unlocked_until IS NOT NULL OR data_key IS NOT NULL)
                """, [.text(userID)])
            return connection.changes
        }
    }

    public func signOutEverywhere(userID: String, now: Date) async throws -> SignedOutEverywhere {
        try write {
            try connection.transaction {
                var ended = SignedOutEverywhere(sessions: 0, clients: 0, grants: 0)
                let kinds = try connection.query("DELETE FROM sessions WHERE user_id = ? RETURNING kind", [.text(userID)])
                ended.sessions = kinds.count
                ended.extensionSessions = kinds.filter { $0.first?.text == "extension" }.count
                let clients = try connection.query(
                    "DELETE FROM bunker_clients WHERE user_id = ? RETURNING coalesce(name, client_pubkey)", [.text(userID)])
                ended.clients = clients.count
                ended.clientNames = clients.compactMap { $0.first?.text }.sorted()
                try connection.query(
                    "UPDATE bunker_signers SET secret_hash = NULL, secret_expires_at = NULL WHERE user_id = ?", [.text(userID)])
                let grants = try connection.query("DELETE FROM grants WHERE user_id = ? RETURNING client", [.text(userID)])
                ended.grants = grants.count
                ended.grantClients = Set(grants.compactMap { $0.first?.text }).sorted()
                // What an intruder's client left waiting is cancelled, not left to be approved; the
                // Polkadot metadata its dapps stored goes with their permissions.
                // Only requests still live are counted: an expired one was waiting for nobody.
                for table in ["signer_requests", "polkadot_requests"] {
                    ended.requests += try connection.query(
                        "UPDATE \(table) SET state = 'cancelled' WHERE user_id = ? AND state = 'pending' RETURNING expires_at > ?",
                        [.text(userID), .date(now)]
                    ).filter { $0.first?.int == 1 }.count
                }
                let runtimes = try connection.query(
                    "SELECT DISTINCT runtime_hash FROM polkadot_metadata WHERE user_id = ? AND runtime_hash IS NOT NULL", [.text(userID)]
                ).compactMap { $0.first?.blob }
                try connection.query("DELETE FROM polkadot_metadata WHERE user_id = ?", [.text(userID)])
                try Self.sweepRuntimes(runtimes, with: connection)
                return ended
            }
        }
    }

    public func unlockSession(tokenHash: [UInt8], until: Date, dataKey: [UInt8]?) async throws -> Bool {
        try write {
            try connection.query(
                "UPDATE sessions SET unlocked_until = ?, data_key = ? WHERE token_hash = ?",
                [.date(until), dataKey.map(SQLValue.blob) ?? .null, .blob(tokenHash)])
            return connection.changes == 1
        }
    }

    public func hasUnlockedSession(ofUser userID: String, now: Date) async throws -> Bool {
        try read { connection in
            try !connection.query(
                "SELECT 1 FROM sessions WHERE user_id = ? AND unlocked_until > ? AND expires_at > ? LIMIT 1",
                [.text(userID), .date(now), .date(now)]
            ).isEmpty
        }
    }

    public func deleteSessions(ofUser userID: String) async throws {
        try write {
            try connection.query("DELETE FROM sessions WHERE user_id = ?", [.text(userID)])
        }
    }

    public func addSession(_ session: SessionRecord, parent: [UInt8]?) async throws {
        try write {
            try connection.transaction {
                if parent != nil, let passkey = session.credentialID,
                    try connection.query("SELECT 1 FROM credentials WHERE id = ? AND user_id = ?", [.blob(passkey), .text(session.userID)])
                        .isEmpty
                {
                    throw StoreError.notFound
                }
                try requireSession(parent, of: session.userID)
                try insertSession(session, keeping: parent)
            }
        }
    }

    public func deleteSession(tokenHash: [UInt8]) async throws {
        try write {
            try connection.query("DELETE FROM sessions WHERE token_hash = ?", [.blob(tokenHash)])
        }
    }

    /// Adds `s`, the user's oldest sessions past the cap ending first; never `keeping` (the session
    /// that gives this one) while the cap leaves room for both.
    func insertSession(_ s: SessionRecord, keeping parent: [UInt8]? = nil) throws {
        // At most `maxSessionsPerUser`: the oldest ones end first. The bound is the newest session
        // past the limit, found on the (user_id, created_at) index, whose entries end in the rowid
        // (insertion order breaks ties); everything at or before it goes. A user under the limit has
        // no bound, and nothing is deleted (no temporary table either, as `IN (SELECT …)` needed).
        let kept = maxSessionsPerUser >= 2 ? parent : nil
        try connection.query(
            """
            DELETE FROM sessions WHERE user_id = ?1 AND token_hash IS NOT ?3 AND (created_at, rowid) <=
                (SELECT created_at, rowid FROM sessions WHERE user_id = ?1 AND token_hash IS NOT ?3
                 ORDER BY created_at DESC, rowid DESC LIMIT 1 OFFSET ?2)
            """, [.text(s.userID), .int(Int64(max(0, maxSessionsPerUser - (kept == nil ? 1 : 2)))), kept.map(SQLValue.blob) ?? .null])
        try connection.query(
            """
            INSERT INTO sessions (token_hash, user_id, created_at, expires_at, unlocked_until, credential_id, data_key, kind)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .blob(s.tokenHash), .text(s.userID), .date(s.createdAt), .date(s.expiresAt), .date(s.unlockedUntil),
                s.credentialID.map(SQLValue.blob) ?? .null, s.dataKey.map(SQLValue.blob) ?? .null, s.kind.map(SQLValue.text) ?? .null,
            ])
    }
}
