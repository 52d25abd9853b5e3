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

    public func deleteUser(id: String) async throws -> Bool {
        try await call { [self] in
            try await touched("DELETE FROM users WHERE id = \(id) RETURNING 1") == 1
        }
    }
}
