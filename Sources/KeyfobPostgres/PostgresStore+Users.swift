import Foundation
import KeyfobStore
import Logging
import PostgresNIO

// MARK: Users

extension PostgresStore {
    public func user(named username: String) async throws -> UserRecord? {
        try await call { [self] in
            try await rows("SELECT id, username, is_anonymous, created_at FROM users WHERE lower(username) = lower(\(username))")
                .first.map { try UserRecord(row: $0) }
        }
    }

    public func user(id: String) async throws -> UserRecord? {
        try await call { [self] in
            try await run(Statements.UserByID.self) { $0.append(id) }.first.map { try UserRecord(row: $0) }
        }
    }

    public func users(matching query: String?, after afterName: String?, limit: Int) async throws -> [UserRecord] {
        // ILIKE with the user's text escaped: % and _ in a search are literal (as in SQLite's LIKE).
        let pattern = Columns.likePattern(containing: query)
        let after = (afterName ?? "").lowercased()
        let limit = max(0, limit)
        return try await call { [self] in
            try await rows(
                """
                SELECT id, username, is_anonymous, created_at FROM users
                WHERE username ILIKE \(pattern) ESCAPE '!' AND lower(username) COLLATE "C" > \(after) COLLATE "C"
                ORDER BY lower(username) COLLATE "C" LIMIT \(limit)
                """
            ).map { try UserRecord(row: $0) }
        }
    }

    /// Everything the deletion's cascade reaches that other writes lock before they need the user
    /// row is locked first, in the order they take it: the nostr key, the passkeys (in id order,
    /// as a sign-in and a batch lock them), then the sessions, the NIP-46 signer and its clients
    /// (`endSessionsAndClients`). Deleting the user row first would hold
    /// it while the cascade waited on a row another write holds, and that write's next insert
    /// waits on the user row (its foreign key): a deadlock.
    public func deleteUser(id: String) async throws -> Bool {
        try await transaction { [logger] connection in
            try await Self.readCommitted(connection, logger: logger)
            for lock: PostgresQuery in [
                "SELECT 1 FROM nostr_keys WHERE user_id = \(id) FOR UPDATE",
                "SELECT 1 FROM credentials WHERE user_id = \(id) ORDER BY id FOR UPDATE",
            ] {
                _ = try await connection.query(lock, logger: logger).collect()
            }
            _ = try await Self.endSessionsAndClients(of: id, on: connection, logger: logger)
            return try await connection.query("DELETE FROM users WHERE id = \(id) RETURNING 1", logger: logger).collect().count == 1
        }
    }

    /// Ends the account's sessions, voids its NIP-46 connect secret and disconnects its NIP-46
    /// clients: the sessions' kinds and the clients' names. One order, shared by an account's
    /// deletion and a sign-out everywhere with every write that holds two of these rows: the
    /// sessions (in token order), the signer's row, the clients (in key order). A write stored for
    /// a session holds that session first (it finishes, or finds it gone); a bunker `connect` holds
    /// the signer's row until its client is committed, so the clients taken last include it. Only
    /// the rows locked are deleted: a session a sign-in added after the first step (with a passkey)
    /// is left alone by a sign-out, not waited on, so a write holding it cannot close a circle with
    /// it (an account's deletion removes it with the user row); an extension session given meanwhile
    /// goes too (`endSessions`).
    static func endSessionsAndClients(
        of userID: String, on connection: PostgresConnection, logger: Logger
    ) async throws -> (sessionKinds: [String?], clientNames: [String]) {
        let sessions = try await endSessions(of: userID, on: connection, logger: logger)
        try await connection.query(
            "UPDATE bunker_signers SET secret_hash = NULL, secret_expires_at = NULL WHERE user_id = \(userID)", logger: logger
        ).collect()
        let keys = try await lockClients(of: userID, on: connection, logger: logger)
        let clients = try await connection.query(
            "DELETE FROM bunker_clients WHERE client_pubkey = ANY(\(keys)) AND user_id = \(userID) RETURNING coalesce(name, client_pubkey)",
            logger: logger
        ).collect().map { try $0.makeRandomAccess().text(0) }
        return (sessions, clients)
    }

    /// Ends the account's sessions, locked in token order: their kinds. An extension session given
    /// while the lock waited on the session that gave it (`addSession` holds that one) was not
    /// there when the lock's statement began; a second statement ends those too, skipping any that
    /// another transaction holds at that moment (waiting there would be out of token order).
    static func endSessions(of userID: String, on connection: PostgresConnection, logger: Logger) async throws -> [String?] {
        let tokens = try await lockSessions(of: userID, mode: "UPDATE", on: connection, logger: logger)
        let ended = try await connection.query(
            "DELETE FROM sessions WHERE token_hash = ANY(\(tokens)) RETURNING kind", logger: logger
        ).collect()
        let given = try await connection.query(
            """
            DELETE FROM sessions WHERE token_hash IN
                (SELECT token_hash FROM sessions WHERE user_id = \(userID) AND kind = 'extension' AND NOT token_hash = ANY(\(tokens))
                 FOR UPDATE SKIP LOCKED)
            RETURNING kind
            """, logger: logger
        ).collect()
        return try (ended + given).map { try $0.makeRandomAccess().optionalText(0) }
    }

    /// Locks the account's sessions in token order (`FOR <mode>`), only those signed in with
    /// `passkey` when it is given: the token hashes it locked. What follows writes only those (a
    /// statement that locks in a sub-select may not run it at all). Every writer of more than one
    /// session locks them this way, so two of them wait in line instead of in a circle; the sweep
    /// and the sign-in's trim skip what is held instead.
    static func lockSessions(
        of userID: String, passkey: [UInt8]? = nil, mode: String, on connection: PostgresConnection, logger: Logger
    ) async throws -> [ByteBuffer] {
        let query: PostgresQuery =
            if let passkey {
                """
                SELECT token_hash FROM sessions WHERE user_id = \(userID) AND credential_id = \(ByteBuffer(bytes: passkey))
                ORDER BY token_hash FOR \(unescaped: mode)
                """
            } else {
                "SELECT token_hash FROM sessions WHERE user_id = \(userID) ORDER BY token_hash FOR \(unescaped: mode)"
            }
        return try await lockedKeys(query, on: connection, logger: logger)
    }

    /// Locks the account's NIP-46 clients in key order, for their removal: their keys.
    static func lockClients(of userID: String, on connection: PostgresConnection, logger: Logger) async throws -> [String] {
        try await connection.query(
            "SELECT client_pubkey FROM bunker_clients WHERE user_id = \(userID) ORDER BY client_pubkey FOR UPDATE", logger: logger
        ).collect().map { try $0.makeRandomAccess().text(0) }
    }

    /// The first column of what `query` locked, as bytes (a session's token hash).
    static func lockedKeys(_ query: PostgresQuery, on connection: PostgresConnection, logger: Logger) async throws -> [ByteBuffer] {
        try await connection.query(query, logger: logger).collect().map { try $0.makeRandomAccess()[0].decode(ByteBuffer.self) }
    }
}
