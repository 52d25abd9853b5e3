import Foundation
import NIOConcurrencyHelpers

// MARK: Multi-row writes

extension SQLiteStore {
    public func completeRegistration(
        user: UserRecord, createUser: Bool, nostrKey: NostrKeyRecord?,
        credential c: CredentialRecord, session: SessionRecord, wrap: KeyWrapRecord?
    ) async throws {
        try write {
            try connection.transaction {
                if createUser {
                    do {
                        try connection.query(
                            "INSERT INTO users (id, username, is_anonymous, created_at) VALUES (?, ?, ?, ?)",
                            [.text(user.id), .text(user.username), .bool(user.isAnonymous), .date(user.createdAt)])
                    } catch StoreError.conflict { throw StoreError.usernameTaken }
                }
                if let nostrKey { try insertNostrKey(nostrKey, orIgnore: false) }
                do {
                    try connection.query(
                        "INSERT INTO credentials (\(Columns.credential)) VALUES (\(Columns.placeholders(Columns.credential)))",
                        [
                            .blob(c.id), .text(c.userID), .blob(c.publicKey), .int(Int64(c.algorithm)), .int(Int64(c.signCount)),
                            .text(c.transports.joined(separator: ",")), .blob(c.aaguid), .text(c.attestationFormat),
                            .bool(c.backupEligible), .bool(c.backupState), .date(c.createdAt), .date(c.lastUsedAt),
                            .bool(c.attestationTrusted), c.name.map(SQLValue.text) ?? .null, c.createdOn.map(SQLValue.text) ?? .null,
                            c.prfCapable.map(SQLValue.bool) ?? .null,
                        ])
                } catch StoreError.conflict { throw StoreError.credentialExists }
                if let wrap { try insertKeyWrap(wrap) }
                try insertSession(session)
            }
        }
    }

    public func completeAuthentication(
        credentialID: [UInt8], expectedSignCount: UInt32, newSignCount: UInt32,
        backupState: Bool, usedAt: Date, session: SessionRecord
    ) async throws {
        let complete: GroupCommit.Write = { [unowned self] connection in
            try connection.query(
                "UPDATE credentials SET sign_count = ?, backup_state = ?, last_used_at = ? WHERE id = ? AND sign_count = ?",
                [.int(Int64(newSignCount)), .bool(backupState), .date(usedAt), .blob(credentialID), .int(Int64(expectedSignCount))])
            guard connection.changes == 1 else { throw StoreError.conflict }
            try insertSession(session)
        }
        if let groupCommit { return try await groupCommit.perform(complete) }
        try write { try connection.transaction { try complete(connection) } }
    }

    public func completeSignIn(_ w: SignInWrite) async throws -> SignInOutcome {
        let outcome = NIOLockedValueBox(SignInOutcome.passkeyGone)
        // One write transaction: nothing else writes between its read and its update.
        let complete: GroupCommit.Write = { [unowned self] connection in
            guard
                let row = try connection.query(
                    """
                    SELECT c.sign_count, c.backup_state, \(Columns.prefixed("u", Columns.user)), k.passkey_sealed
                    FROM credentials c JOIN users u ON u.id = c.user_id LEFT JOIN nostr_keys k ON k.user_id = u.id
                    WHERE c.id = ? AND c.user_id = ? AND c.public_key = ?
                    """, [.blob(w.credentialID), .text(w.userID), .blob(w.publicKey)]
                ).first
            else { return }
            let stored = UInt32(clamping: try row.int(0))
            guard w.counterMoves(from: stored) else { return outcome.withLockedValue { $0 = .counterBehind(stored: stored) } }
            let user = try UserRecord(row: row, from: 2)
            try connection.query(
                "INSERT OR IGNORE INTO used_challenges (hash, expires_at) VALUES (?, ?)",
                [.blob(w.usedChallenge.hash), .date(w.usedChallenge.expiresAt)])
            guard connection.changes == 1 else { return outcome.withLockedValue { $0 = .challengeUsed(user) } }
            try connection.query(
                "UPDATE credentials SET sign_count = ?, backup_state = ?, last_used_at = ? WHERE id = ?",
                [.int(Int64(w.newSignCount)), .bool(w.backupState), .date(w.usedAt), .blob(w.credentialID)])
            try insertSession(w.session)
            let signedIn = SignInOutcome.signedIn(
                user, keySealed: try row.optionalBool(2 + Columns.userCount), backupStateBefore: try row.bool(1))
            outcome.withLockedValue { $0 = signedIn }
        }
        if let groupCommit {
            try await groupCommit.perform(complete)
        } else {
            try write { try connection.transaction { try complete(connection) } }
        }
        return outcome.withLockedValue { $0 }
    }
}
