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

    public func insertSubstrateAccount(_ a: SubstrateAccountRecord, maxPerUser: Int, ownerKeyVersion: Int) async throws {
        try write {
            try connection.transaction {
                let version = try connection.query("SELECT version FROM nostr_keys WHERE user_id = ?", [.text(a.userID)]).first?.first?.int
                guard version == Int64(ownerKeyVersion) else { throw StoreError.conflict }
                let count =
                    try connection.query("SELECT count(*) FROM substrate_accounts WHERE user_id = ?", [.text(a.userID)])
                    .first?.first?.int ?? 0
                guard count < maxPerUser else { throw StoreError.limitReached }
                try connection.query(
                    "INSERT INTO substrate_accounts (\(Columns.substrateAccount)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        .text(a.id), .text(a.userID), .text(a.keyType), .blob(a.publicKey), .text(a.name), .int(Int64(a.network)),
                        .blob(a.nonce), .blob(a.sealed), .date(a.createdAt), .int(a.acceptsUnverified ? 1 : 0), .int(Int64(a.protection)),
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

    public func substrateAccounts(atProtection protection: Int) async throws -> [SubstrateAccountRecord] {
        try read { connection in
            try connection.query(
                "SELECT \(Columns.substrateAccount) FROM substrate_accounts WHERE protection = ? ORDER BY user_id, id",
                [.int(Int64(protection))]
            ).map { try SubstrateAccountRecord(row: $0) }
        }
    }

    public func replaceSubstrateSecret(_ a: SubstrateAccountRecord, expectedSealed: [UInt8], ownerKeyVersion: Int) async throws -> Bool {
        try write {
            try connection.query(
                """
                UPDATE substrate_accounts SET nonce = ?, sealed = ?, protection = ? WHERE id = ? AND user_id = ? AND sealed = ?
                  AND (SELECT version FROM nostr_keys WHERE user_id = ?) = ?
                """,
                [
                    .blob(a.nonce), .blob(a.sealed), .int(Int64(a.protection)), .text(a.id), .text(a.userID), .blob(expectedSealed),
                    .text(a.userID), .int(Int64(ownerKeyVersion)),
                ])
            return connection.changes == 1
        }
    }

    public func insertPolkadotRequest(_ q: PolkadotRequestRecord, now: Date, maxPending: Int, session: [UInt8]?) async throws {
        try write {
            try connection.transaction {
                if let session, try !exists(.session(tokenHash: session), owner: q.userID) { throw StoreError.notFound }
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

    public func putPolkadotMetadata(_ m: PolkadotMetadataRecord, runtime: [UInt8]?, session: [UInt8]?) async throws {
        try write {
            try connection.transaction {
                try requireSession(session, of: m.userID)
                try putMetadata(m, runtime: runtime)
            }
        }
    }

    private func putMetadata(_ m: PolkadotMetadataRecord, runtime: [UInt8]?) throws {
        let before = try connection.query(
            "SELECT runtime_hash FROM polkadot_metadata WHERE user_id = ? AND origin = ? AND genesis_hash = ?",
            [.text(m.userID), .text(m.origin), .text(m.genesisHash)]
        ).first?.first?.blob
        if let hash = m.runtimeHash, let runtime {
            try connection.query(
                "INSERT INTO polkadot_runtimes (hash, size, bytes) VALUES (?, ?, ?) ON CONFLICT (hash) DO NOTHING",
                [.blob(hash), .int(Int64(runtime.count)), .blob(runtime)])
        }
        try connection.query(
            """
            INSERT INTO polkadot_metadata (\(Columns.polkadotMetadata)) VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (user_id, origin, genesis_hash) DO UPDATE SET spec_version = excluded.spec_version,
              definition = excluded.definition, updated_at = excluded.updated_at, runtime_hash = excluded.runtime_hash
            """,
            [
                .text(m.userID), .text(m.origin), .text(m.genesisHash), .int(Int64(m.specVersion)), .text(m.definition),
                .date(m.updatedAt), m.runtimeHash.map(SQLValue.blob) ?? .null,
            ])
        let held = try connection.query(
            """
            SELECT m.origin, m.genesis_hash, length(CAST(m.definition AS BLOB)), m.runtime_hash, coalesce(r.size, 0) FROM polkadot_metadata m
            LEFT JOIN polkadot_runtimes r ON r.hash = m.runtime_hash WHERE m.user_id = ? ORDER BY m.updated_at DESC
            """, [.text(m.userID)]
        ).map {
            PolkadotMetadataRecord.Held(
                origin: try $0.text(0), genesisHash: try $0.text(1), ownSize: try $0.int(2), runtimeHash: try $0.optionalBytes(3),
                runtimeSize: try $0.int(4))
        }
        let gone = PolkadotMetadataRecord.overflow(newestFirst: held, keeping: (m.origin, m.genesisHash))
        for row in gone {
            try connection.query(
                "DELETE FROM polkadot_metadata WHERE user_id = ? AND origin = ? AND genesis_hash = ?",
                [.text(m.userID), .text(row.origin), .text(row.genesisHash)])
        }
        try Self.sweepRuntimes(gone.compactMap(\.runtimeHash) + (before.map { [$0] } ?? []), with: connection)
    }

    /// Removes those of `hashes` no row names any more.
    static func sweepRuntimes(_ hashes: [[UInt8]], with connection: SQLiteConnection) throws {
        for hash in Set(hashes) {
            try connection.query(
                """
                DELETE FROM polkadot_runtimes WHERE hash = ?
                  AND NOT EXISTS (SELECT 1 FROM polkadot_metadata WHERE runtime_hash = polkadot_runtimes.hash)
                """, [.blob(hash)])
        }
    }

    public func polkadotMetadata(ofUser userID: String, origin: String) async throws -> [PolkadotMetadataRecord] {
        try read { connection in
            try connection.query(
                """
                SELECT \(Columns.prefixed("m", Columns.polkadotMetadata)) FROM polkadot_metadata m
                WHERE m.user_id = ? AND m.origin = ?
                  AND (m.runtime_hash IS NULL OR EXISTS (SELECT 1 FROM polkadot_runtimes r WHERE r.hash = m.runtime_hash))
                ORDER BY m.genesis_hash
                """,
                [.text(userID), .text(origin)]
            ).map { try PolkadotMetadataRecord(row: $0) }
        }
    }

    public func polkadotRuntime(hash: [UInt8]) async throws -> [UInt8]? {
        try read { connection in
            try connection.query("SELECT bytes FROM polkadot_runtimes WHERE hash = ?", [.blob(hash)]).first?.first?.blob
        }
    }

    public func polkadotRuntimeUsage() async throws -> (runtimes: Int, bytes: Int) {
        try read { connection in
            let row = try connection.query("SELECT count(*), coalesce(sum(size), 0) FROM polkadot_runtimes").first
            return (Int(row?[0].int ?? 0), Int(row?[1].int ?? 0))
        }
    }
}
