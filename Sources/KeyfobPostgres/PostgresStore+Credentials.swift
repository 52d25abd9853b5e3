import Foundation
import KeyfobStore
import Logging
import PostgresNIO

// MARK: Credentials

extension PostgresStore {
    public func credential(id: [UInt8]) async throws -> CredentialRecord? {
        try await call { [self] in
            try await run(Statements.CredentialByID.self) { $0.append(ByteBuffer(bytes: id)) }.first.map { try CredentialRecord(row: $0) }
        }
    }

    public func credentialWithOwner(id: [UInt8]) async throws -> CredentialOwner? {
        try await call { [self] in
            try await run(Statements.CredentialWithOwner.self) { $0.append(ByteBuffer(bytes: id)) }.first
                .map { try CredentialOwner(row: $0) }
        }
    }

    public func credentials(ofUser userID: String) async throws -> [CredentialRecord] {
        try await call { [self] in
            try await rows("SELECT \(unescaped: Columns.credential) FROM credentials WHERE user_id = \(userID) ORDER BY created_at, id")
                .map { try CredentialRecord(row: $0) }
        }
    }

    public func deleteCredential(id: [UInt8], ofUser userID: String) async throws -> Bool {
        try await transaction { connection in
            try await Self.readCommitted(connection, logger: self.logger)
            // Lock the user's passkeys: two removals at once cannot both see "not the last one".
            let owned = try await connection.query(
                "SELECT id FROM credentials WHERE user_id = \(userID) ORDER BY id FOR UPDATE", logger: self.logger
            ).collect()
                .map { Array(try $0.makeRandomAccess()[0].decode(ByteBuffer.self).readableBytesView) }
            guard owned.contains(id) else { return false }
            guard owned.count > 1 else { throw StoreError.conflict }
            let sealed =
                try await connection.query(
                    "SELECT passkey_sealed FROM nostr_keys WHERE user_id = \(userID)",
                    logger: self.logger
                ).collect().first?.makeRandomAccess()[0].decode(Bool.self) ?? false
            if sealed {
                let others = try await connection.query(
                    "SELECT 1 FROM key_wraps WHERE user_id = \(userID) AND credential_id <> \(ByteBuffer(bytes: id)) LIMIT 1",
                    logger: self.logger
                ).collect().count
                guard others > 0 else { throw StoreError.lastSealingPasskey }
            }
            try await connection.query(
                "DELETE FROM credentials WHERE id = \(ByteBuffer(bytes: id)) AND user_id = \(userID)",
                logger: self.logger
            ).collect()
            // Its sessions in token order, as every writer of more than one session takes them.
            let tokens = try await Self.lockSessions(of: userID, passkey: id, mode: "UPDATE", on: connection, logger: self.logger)
            try await connection.query("DELETE FROM sessions WHERE token_hash = ANY(\(tokens))", logger: self.logger).collect()
            return true
        }
    }

    public func renameCredential(id: [UInt8], ofUser userID: String, name: String?) async throws -> Bool {
        try await call { [self] in
            try await touched("UPDATE credentials SET name = \(name) WHERE id = \(ByteBuffer(bytes: id)) AND user_id = \(userID) RETURNING 1") == 1
        }
    }

    public func countUsersAndCredentials() async throws -> (users: Int, credentials: Int) {
        let counts = try await call { [self] in
            let row = try await rows("SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM credentials)").first
            return [try row?.int(0) ?? 0, try row?.int(1) ?? 0]
        }
        return (counts[0], counts[1])
    }
}
