import Foundation

// MARK: Substrate accounts, Polkadot requests, dapp metadata

extension SQLiteStore {
    public func substrateAccounts(ofUser userID: String) async throws -> [SubstrateAccountRecord] {
        try read { connection in
            try connection.query(
                "SELECT \(Columns.substrateAccount) FROM substrate_accounts WHERE user_id = ? ORDER BY created_at, id",
                [.text(userID)]
            ).map { try SubstrateAccountRecord(row: $0) }
        }
    }

    public func insertSubstrateAccount(_ a: SubstrateAccountRecord, maxPerUser: Int) async throws {
        try write {
            try connection.transaction {
                let count =
                    try connection.query("SELECT count(*) FROM substrate_accounts WHERE user_id = ?", [.text(a.userID)])
                    .first?.first?.int ?? 0
                guard count < maxPerUser else { throw StoreError.limitReached }
                try connection.query(
                    "INSERT INTO substrate_accounts (\(Columns.substrateAccount)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        .text(a.id), .text(a.userID), .text(a.keyType), .blob(a.publicKey), .text(a.name), .int(Int64(a.network)),
                        .blob(a.nonce), .blob(a.sealed), .date(a.createdAt), .int(a.acceptsUnverified ? 1 : 0),
                    ])
            }
        }
    }

    public func deleteSubstrateAccount(id: String, ofUser userID: String) async throws -> Bool {
        try write {
            try connection.query("DELETE FROM substrate_accounts WHERE id = ? AND user_id = ?", [.text(id), .text(userID)])
            return connection.changes == 1
        }
    }

    public func setSubstrateAccountAcceptsUnverified(id: String, ofUser userID: String, _ accepts: Bool) async throws -> Bool {
        try write {
            try connection.query(
                "UPDATE substrate_accounts SET accepts_unverified = ? WHERE id = ? AND user_id = ?",
                [.int(accepts ? 1 : 0), .text(id), .text(userID)])
            return connection.changes == 1
        }
    }

    public func insertPolkadotRequest(_ q: PolkadotRequestRecord, now: Date, maxPending: Int) async throws {
        try write {
            try connection.transaction {
                try connection.query(
                    "DELETE FROM polkadot_requests WHERE user_id = ? AND expires_at < ?",
                    [.text(q.userID), .date(now.addingTimeInterval(-86400))])
                let live =
                    try connection.query(
                        "SELECT count(*) FROM polkadot_requests WHERE user_id = ? AND state = 'pending' AND expires_at > ?",
                        [.text(q.userID), .date(now)]
                    ).first?.first?.int ?? 0
                guard live < maxPending else { throw StoreError.limitReached }
                try connection.query(
                    "INSERT INTO polkadot_requests (\(Columns.polkadotRequest)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        .text(q.id), .text(q.userID), .text(q.origin), .text(q.transport), .text(q.messageType), .text(q.request),
                        .text(q.state), q.result.map(SQLValue.text) ?? .null, q.confirmationNonce.map(SQLValue.blob) ?? .null,
                        .date(q.createdAt), .date(q.expiresAt),
                    ])
            }
        }
    }

    public func polkadotRequest(id: String, ofUser userID: String) async throws -> PolkadotRequestRecord? {
        try read { connection in
            try connection.query(
                "SELECT \(Columns.polkadotRequest) FROM polkadot_requests WHERE id = ? AND user_id = ?", [.text(id), .text(userID)]
            ).first.map { try PolkadotRequestRecord(row: $0) }
        }
    }

    public func finishPolkadotRequest(
        id: String, userID: String, state: String, result: String, now: Date, audit: AuditRecord?
    ) async throws -> Bool {
        try write {
            try connection.transaction {
                try connection.query(
                    """
                    UPDATE polkadot_requests SET state = ?, result = ?
                    WHERE id = ? AND user_id = ? AND state = 'pending' AND expires_at > ?
                    """, [.text(state), .text(result), .text(id), .text(userID), .date(now)])
                guard connection.changes == 1 else { return false }
                if let audit { _ = try Self.insert(audit, with: connection) }
                return true
            }
        }
    }

    public func putPolkadotMetadata(_ m: PolkadotMetadataRecord) async throws {
        try write {
            try connection.query(
                """
                INSERT INTO polkadot_metadata (\(Columns.polkadotMetadata)) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (user_id, origin, genesis_hash) DO UPDATE SET
                  spec_version = excluded.spec_version, definition = excluded.definition, updated_at = excluded.updated_at
                """,
                [.text(m.userID), .text(m.origin), .text(m.genesisHash), .int(Int64(m.specVersion)), .text(m.definition), .date(m.updatedAt)])
            try connection.query(
                """
                DELETE FROM polkadot_metadata WHERE user_id = ? AND (origin, genesis_hash) NOT IN
                  (SELECT origin, genesis_hash FROM polkadot_metadata WHERE user_id = ? ORDER BY updated_at DESC LIMIT ?)
                """, [.text(m.userID), .text(m.userID), .int(Int64(PolkadotMetadataRecord.maxPerUser))])
        }
    }

    public func polkadotMetadata(ofUser userID: String, origin: String) async throws -> [PolkadotMetadataRecord] {
        try read { connection in
            try connection.query(
                "SELECT \(Columns.polkadotMetadata) FROM polkadot_metadata WHERE user_id = ? AND origin = ? ORDER BY genesis_hash",
                [.text(userID), .text(origin)]
            ).map { try PolkadotMetadataRecord(row: $0) }
        }
    }
}
