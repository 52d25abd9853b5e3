import Foundation

// MARK: Users

extension SQLiteStore {
    public func user(named username: String) async throws -> UserRecord? {
        try read { connection in
            try connection.query("SELECT \(Columns.user) FROM users WHERE username = ?", [.text(username)]).first.map { try UserRecord(row: $0) }
        }
    }

    public func user(id: String) async throws -> UserRecord? {
        try read { connection in
            try connection.query("SELECT \(Columns.user) FROM users WHERE id = ?", [.text(id)]).first.map { try UserRecord(row: $0) }
        }
    }

    public func users(matching query: String?, after afterName: String?, limit: Int) async throws -> [UserRecord] {
        try read { connection in
            // LIKE with the user's text escaped: % and _ in a search are literal.
            let pattern = Columns.likePattern(containing: query)
            return try connection.query(
                "SELECT \(Columns.user) FROM users WHERE username LIKE ? ESCAPE '!' AND username > ? ORDER BY username LIMIT ?",
                [.text(pattern), .text(afterName ?? ""), .int(Int64(max(0, limit)))]
            ).map { try UserRecord(row: $0) }
        }
    }

    public func deleteUser(id: String) async throws -> Bool {
        try write {
            try connection.transaction {
                try connection.query("DELETE FROM users WHERE id = ?", [.text(id)])
                return connection.changes == 1
            }
        }
    }
}
