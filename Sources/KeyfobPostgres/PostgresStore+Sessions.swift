import Foundation
import KeyfobStore
import Logging
import PostgresNIO

// MARK: Sessions

extension PostgresStore {
    public func session(tokenHash: [UInt8], now: Date) async throws -> SessionRecord? {
        try await call { [self] in
            try await run(Statements.SessionByToken.self) {
                $0.append(ByteBuffer(bytes: tokenHash)); $0.append(now.timeIntervalSince1970)
            }.first.map { try SessionRecord(row: $0) }
        }
    }

    /// Locked as it is read (KEY SHARE): a sign-out everywhere that deleted the row and has not
    /// committed makes this wait, then read it as gone (READ COMMITTED whatever the server's
    /// default: a stricter level would fail the read instead).
    public func sessionRemains(tokenHash: [UInt8], now: Date) async throws -> Bool {
        try await transaction { [logger] connection in
            try await Self.readCommitted(connection, logger: logger)
            return try await !connection.query(
                """
                SELECT 1 FROM sessions WHERE token_hash = \(ByteBuffer(bytes: tokenHash)) AND expires_at > \(now.timeIntervalSince1970)
                FOR KEY SHARE
                """, logger: logger
            ).collect().isEmpty
        }
    }

    public func addSession(_ session: SessionRecord, parent: [UInt8]?) async throws {
        try await transaction { [self] connection in
            if let parent {
                try await Self.readCommitted(connection, logger: logger)
                if let passkey = session.credentialID {
                    // The passkey it names first (passkeys come before sessions): a removal of that
                    // passkey waits for this session and then ends it, or went first and this refuses.
                    try await Self.requireHeld(
                        "SELECT 1 FROM credentials WHERE id = \(ByteBuffer(bytes: passkey)) AND user_id = \(session.userID) FOR KEY SHARE",
                        on: connection, logger: logger)
                }
                try await Self.requireHeld(Self.lock(.session(tokenHash: parent), owner: session.userID), on: connection, logger: logger)
            }
            try await insertSession(session, keeping: parent, on: connection)
        }
    }

    public func deleteSession(tokenHash: [UInt8]) async throws {
        _ = try await call { [self] in try await touched("DELETE FROM sessions WHERE token_hash = \(ByteBuffer(bytes: tokenHash)) RETURNING 1") }
    }

    /// An operator's "end this account's sessions": as a sign-out's (`endSessions`).
    public func deleteSessions(ofUser userID: String) async throws {
        try await transaction { [logger] connection in
            try await Self.readCommitted(connection, logger: logger)
            _ = try await Self.endSessions(of: userID, on: connection, logger: logger)
        }
    }

    /// Every unlocked session locked again, in token order (the order every writer of more than
    /// one session takes them in): a sign-out or a seal at the same time waits in line, not in a
    /// circle. A thousand at a time, each batch a transaction of its own, so that no one call holds
    /// every session of a large deployment or outlasts the store's timeout.
    public func lockAllSessions() async throws -> Int {
        let batch = 1000
        var locked = 0
        var after = ByteBuffer()  // before every token hash
        while true {
            let (count, last) = try await transaction { [logger, after] connection in
                try await Self.readCommitted(connection, logger: logger)
                // The limit counts rows locked (LIMIT sits above the row locks in the plan): a row
                // that changed meanwhile and no longer matches does not end the walk early.
                let tokens = try await Self.lockedKeys(
                    """
                    SELECT token_hash FROM sessions WHERE token_hash > \(after) AND (unlocked_until IS NOT NULL OR data_key IS NOT NULL)
                    ORDER BY token_hash LIMIT \(batch) FOR NO KEY UPDATE
                    """, on: connection, logger: logger)
                return (try await Self.lock(tokens, on: connection, logger: logger), tokens.count == batch ? tokens.last : nil)
            }
            locked += count
            guard let last else { return locked }
            after = last
        }
    }

    /// "Lock now": the account's sessions locked in token order, then the unlocked ones locked.
    public func lockSessions(ofUser userID: String) async throws -> Int {
        try await transaction { [logger] connection in
            try await Self.readCommitted(connection, logger: logger)
            let tokens = try await Self.lockSessions(of: userID, mode: "NO KEY UPDATE", on: connection, logger: logger)
            return try await Self.lock(tokens, on: connection, logger: logger)
        }
    }

    /// Ends the unlock window and drops the data-key copy of those of `tokens` that have either.
    static func lock(_ tokens: [ByteBuffer], on connection: PostgresConnection, logger: Logger) async throws -> Int {
        try await connection.query(
            """
            UPDATE sessions SET unlocked_until = NULL, data_key = NULL
            WHERE token_hash = ANY(\(tokens)) AND (unlocked_until IS NOT NULL OR data_key IS NOT NULL) RETURNING 1
            """, logger: logger
        ).collect().count
    }

    public func signOutEverywhere(userID: String, now: Date) async throws -> SignedOutEverywhere {
        try await transaction { [logger] connection in
            // Sessions and clients go before the waiting requests are cancelled, each statement
            // seeing what committed before it: a request stored meanwhile (it locks its session or
            // client as it is stored) is then cancelled too. READ COMMITTED whatever the server's
            // default isolation is: one snapshot for the whole transaction would miss it.
            try await Self.readCommitted(connection, logger: logger)
            let (sessions, clients) = try await Self.endSessionsAndClients(of: userID, on: connection, logger: logger)
            let grants = try await connection.query("DELETE FROM grants WHERE user_id = \(userID) RETURNING client", logger: logger)
                .collect().map { try $0.makeRandomAccess().text(0) }
            // What an intruder's client left waiting is cancelled, not left to be approved; the
            // Polkadot metadata its dapps stored goes with their permissions.
            // Only requests still live are counted: an expired one was waiting for nobody.
            var requests = 0
            for table in ["signer_requests", "polkadot_requests"] {
                requests +=
                    try await connection.query(
                        """
                        WITH cancelled AS (
                            UPDATE \(unescaped: table) SET state = 'cancelled' WHERE user_id = \(userID) AND state = 'pending' RETURNING expires_at)
                        SELECT count(*)::bigint FROM cancelled WHERE expires_at > \(now.timeIntervalSince1970)
                        """, logger: logger
                    ).collect().first.map { try $0.makeRandomAccess().int(0) } ?? 0
            }
            let runtimes = try await connection.query(
                "DELETE FROM polkadot_metadata WHERE user_id = \(userID) RETURNING runtime_hash", logger: logger
            ).collect().compactMap { try $0.makeRandomAccess().optionalBytes(0) }
            try await PostgresStore.sweepRuntimes(runtimes, on: connection, logger: logger)
            return SignedOutEverywhere(
                sessions: sessions.count, clients: clients.count, grants: grants.count, requests: requests,
                extensionSessions: sessions.filter { $0 == "extension" }.count, clientNames: clients.sorted(),
                grantClients: Set(grants).sorted())
        }
    }

    public func unlockSession(tokenHash: [UInt8], until: Date, dataKey: [UInt8]?) async throws -> Bool {
        try await call { [self] in
            try await touched(
                """
                UPDATE sessions SET unlocked_until = \(until.timeIntervalSince1970), data_key = \(dataKey.map { ByteBuffer(bytes: $0) })
                WHERE token_hash = \(ByteBuffer(bytes: tokenHash)) RETURNING 1
                """) == 1
        }
    }

    /// Adds `s`, the user's oldest sessions past the cap ending first; never `keeping` (the session
    /// that gives this one) while the cap leaves room for both.
    func insertSession(_ s: SessionRecord, keeping parent: [UInt8]? = nil, on connection: PostgresConnection) async throws {
        // At most `maxSessionsPerUser`: the oldest ones end first (but not those another
        // transaction holds, which the next trim removes: no wait outside the lock order).
        let kept = maxSessionsPerUser >= 2 ? parent.map { ByteBuffer(bytes: $0) } : nil
        try await connection.query(
            """
            DELETE FROM sessions WHERE token_hash IN
                (SELECT token_hash FROM sessions WHERE token_hash IN
                    (SELECT token_hash FROM sessions WHERE user_id = \(s.userID) AND token_hash IS DISTINCT FROM \(kept)
                     ORDER BY created_at DESC OFFSET \(max(0, maxSessionsPerUser - (kept == nil ? 1 : 2))))
                 FOR UPDATE SKIP LOCKED)
            """, logger: logger
        ).collect()
        try await connection.query(
            """
            INSERT INTO sessions (token_hash, user_id, created_at, expires_at, unlocked_until, credential_id, data_key, kind)
            VALUES (\(ByteBuffer(bytes: s.tokenHash)), \(s.userID), \(s.createdAt.timeIntervalSince1970),
                    \(s.expiresAt.timeIntervalSince1970), \(s.unlockedUntil?.timeIntervalSince1970),
                    \(s.credentialID.map { ByteBuffer(bytes: $0) }), \(s.dataKey.map { ByteBuffer(bytes: $0) }), \(s.kind))
            """, logger: logger
        ).collect()
    }
}
