import Foundation

// MARK: Credentials

extension SQLiteStore {
    public func credential(id: [UInt8]) async throws -> CredentialRecord? {
        try read { connection in
            try connection.query("SELECT \(Columns.credential) FROM credentials WHERE id = ?", [.blob(id)]).first.map {
                try CredentialRecord(row: $0)
            }
        }
    }

    public func credentialWithOwner(id: [UInt8]) async throws -> CredentialOwner? {
        try read { connection in
            try connection.query(Self.credentialWithOwnerSQL, [.blob(id)]).first.map { try CredentialOwner(row: $0) }
        }
    }

    /// The passkey's columns, then its user's, then the user's key's (NULL when none).
    static let credentialWithOwnerSQL = """
        SELECT \(Columns.prefixed("c", Columns.credential)), \(Columns.prefixed("u", Columns.user)), \(Columns.prefixed("k", Columns.nostrKey))
        FROM credentials c JOIN users u ON u.id = c.user_id LEFT JOIN nostr_keys k ON k.user_id = u.id
        WHERE c.id = ?
        """

    public func credentials(ofUser userID: String) async throws -> [CredentialRecord] {
        try read { connection in
            try connection.query(
                "SELECT \(Columns.credential) FROM credentials WHERE user_id = ? ORDER BY created_at",
                [.text(userID)]
            ).map { try CredentialRecord(row: $0) }
        }
    }

    public func deleteCredential(id: [UInt8], ofUser userID: String) async throws -> Bool {
        try write {
            try connection.transaction {
                let count = try connection.query("SELECT count(*) FROM credentials WHERE user_id = ?", [.text(userID)]).first?.first?.int ?? 0
                guard
                    try connection.query(
                        "SELECT 1 FROM credentials WHERE id = ? AND user_id = ?",
                        [.blob(id), .text(userID)]
                    ).first != nil
                else { return false }
                guard count > 1 else { throw StoreError.conflict }
                let sealed =
                    try connection.query("SELECT passkey_sealed FROM nostr_keys WHERE user_id = ?", [.text(userID)]).first?.first?.bool ?? false
                if sealed {
                    let others =
                        try connection.query(
                            "SELECT count(*) FROM key_wraps WHERE user_id = ? AND credential_id != ?",
                            [.text(userID), .blob(id)]
                        ).first?.first?.int ?? 0
                    guard others > 0 else { throw StoreError.lastSealingPasskey }
                }
                try connection.query("DELETE FROM credentials WHERE id = ? AND user_id = ?", [.blob(id), .text(userID)])
                try connection.query("DELETE FROM sessions WHERE user_id = ? AND credential_id = ?", [.text(userID), .blob(id)])
                return true
            }
        }
    }

    public func renameCredential(id: [UInt8], ofUser userID: String, name: String?) async throws -> Bool {
        try write {
            try connection.query(
                "UPDATE credentials SET name = ? WHERE id = ? AND user_id = ?",
                [name.map(SQLValue.text) ?? .null, .blob(id), .text(userID)])
            return connection.changes == 1
        }
    }

    public func countUsersAndCredentials() async throws -> (users: Int, credentials: Int) {
        try read { connection in
            let users = try connection.query("SELECT count(*) FROM users").first?.first?.int ?? 0
            let credentials = try connection.query("SELECT count(*) FROM credentials").first?.first?.int ?? 0
            return (Int(users), Int(credentials))
        }
    }
}
