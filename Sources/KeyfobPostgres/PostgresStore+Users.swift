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
    /// as a sign-in and a batch lock them), the sessions, the NIP-46 clients (a waiting request
    /// locks its session or client as it is stored). Deleting the user row first would hold
    /// it while the cascade waited on a row another write holds, and that write's next insert
    /// waits on the user row (its foreign key): a deadlock.
    public func deleteUser(id: String) async throws -> Bool {
        try await transaction { [logger] connection in
            for lock: PostgresQuery in [
                "SELECT 1 FROM nostr_keys WHERE user_id = \(id) FOR UPDATE",
                "SELECT 1 FROM credentials WHERE user_id = \(id) ORDER BY id FOR UPDATE",
            ] {
                _ = try await connection.query(lock, logger: logger).collect()
            }
            try await Self.lockSessionsSignerAndClients(
                of: id, signer: "SELECT 1 FROM bunker_signers WHERE user_id = \(id) FOR UPDATE", on: connection, logger: logger)
            return try await connection.query("DELETE FROM users WHERE id = \(id) RETURNING 1", logger: logger).collect().count == 1
        }
    }

    /// Locks the account's sessions, then its NIP-46 signer's row (`signer`: the statement that
    /// takes it), then its NIP-46 clients: the one order an account's deletion and a sign-out
    /// everywhere share with every write that holds two of them (a secret or client stored for a
    /// session: the session, then the signer or client; a bunker `connect`: the signer, then the
    /// client; a waiting request: its session or client).
    static func lockSessionsSignerAndClients(
        of userID: String, signer: PostgresQuery, on connection: PostgresConnection, logger: Logger
    ) async throws {
        for lock: PostgresQuery in [
            "SELECT 1 FROM sessions WHERE user_id = \(userID) ORDER BY token_hash FOR UPDATE", signer,
            "SELECT 1 FROM bunker_clients WHERE user_id = \(userID) ORDER BY client_pubkey FOR UPDATE",
        ] {
            _ = try await connection.query(lock, logger: logger).collect()
        }
    }
}
