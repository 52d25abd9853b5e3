import Foundation
import KeyfobStore
import PostgresNIO

// MARK: Substrate accounts, Polkadot requests, dapp metadata

extension PostgresStore {
    public func substrateAccounts(ofUser userID: String) async throws -> [SubstrateAccountRecord] {
        try await call { [self] in
            try await rows(
                "SELECT \(unescaped: Columns.substrateAccount) FROM substrate_accounts WHERE user_id = \(userID) ORDER BY created_at, id"
            ).map { try SubstrateAccountRecord(row: $0) }
        }
    }

    public func insertSubstrateAccount(_ a: SubstrateAccountRecord, maxPerUser: Int) async throws {
        let inserted = try await call { [self] in
            // One statement: the cap checked as it inserts.
            try await touched(
                """
                INSERT INTO substrate_accounts (\(unescaped: Columns.substrateAccount))
                SELECT \(a.id), \(a.userID), \(a.keyType), \(ByteBuffer(bytes: a.publicKey)), \(a.name), \(a.network),
                       \(ByteBuffer(bytes: a.nonce)), \(ByteBuffer(bytes: a.sealed)), \(a.createdAt.timeIntervalSince1970),
                       \(a.acceptsUnverified)
                WHERE (SELECT count(*) FROM substrate_accounts WHERE user_id = \(a.userID)) < \(maxPerUser)
                RETURNING 1
                """)
        }
        guard inserted == 1 else { throw StoreError.limitReached }
    }

    public func deleteSubstrateAccount(id: String, ofUser userID: String) async throws -> Bool {
        try await call { [self] in
            try await touched("DELETE FROM substrate_accounts WHERE id = \(id) AND user_id = \(userID) RETURNING 1") == 1
        }
    }

    public func setSubstrateAccountAcceptsUnverified(id: String, ofUser userID: String, _ accepts: Bool) async throws -> Bool {
        try await call { [self] in
            try await touched(
                "UPDATE substrate_accounts SET accepts_unverified = \(accepts) WHERE id = \(id) AND user_id = \(userID) RETURNING 1") == 1
        }
    }

    public func insertPolkadotRequest(_ q: PolkadotRequestRecord, now: Date, maxPending: Int) async throws {
        let nowValue = now.timeIntervalSince1970
        let inserted = try await call { [self] in
            _ = try await touched(
                "DELETE FROM polkadot_requests WHERE user_id = \(q.userID) AND expires_at < \(nowValue - 86400) RETURNING 1")
            return try await touched(
                """
                INSERT INTO polkadot_requests (\(unescaped: Columns.polkadotRequest))
                SELECT \(q.id), \(q.userID), \(q.origin), \(q.transport), \(q.messageType), \(q.request), \(q.state), \(q.result),
                       \(q.confirmationNonce.map { ByteBuffer(bytes: $0) }), \(q.createdAt.timeIntervalSince1970),
                       \(q.expiresAt.timeIntervalSince1970)
                WHERE (SELECT count(*) FROM polkadot_requests
                       WHERE user_id = \(q.userID) AND state = 'pending' AND expires_at > \(nowValue)) < \(maxPending)
                RETURNING 1
                """)
        }
        guard inserted == 1 else { throw StoreError.limitReached }
    }

    public func polkadotRequest(id: String, ofUser userID: String) async throws -> PolkadotRequestRecord? {
        try await call { [self] in
            try await rows(
                "SELECT \(unescaped: Columns.polkadotRequest) FROM polkadot_requests WHERE id = \(id) AND user_id = \(userID)"
            ).first.map { try PolkadotRequestRecord(row: $0) }
        }
    }

    public func finishPolkadotRequest(
        id: String, userID: String, state: String, result: String, now: Date, audit: AuditRecord?
    ) async throws -> Bool {
        try await transaction { [self] connection in
            let decided =
                try await connection.query(
                    """
                    UPDATE polkadot_requests SET state = \(state), result = \(result)
                    WHERE id = \(id) AND user_id = \(userID) AND state = 'pending' AND expires_at > \(now.timeIntervalSince1970) RETURNING 1
                    """, logger: logger
                ).collect().count == 1
            if decided, let audit { try await insertAudit(audit, on: connection) }
            return decided
        }
    }

    public func putPolkadotMetadata(_ m: PolkadotMetadataRecord) async throws {
        _ = try await call { [self] in
            _ = try await touched(
                """
                INSERT INTO polkadot_metadata (\(unescaped: Columns.polkadotMetadata))
                VALUES (\(m.userID), \(m.origin), \(m.genesisHash), \(m.specVersion), \(m.definition), \(m.updatedAt.timeIntervalSince1970))
                ON CONFLICT (user_id, origin, genesis_hash) DO UPDATE SET
                  spec_version = excluded.spec_version, definition = excluded.definition, updated_at = excluded.updated_at
                RETURNING 1
                """)
            return try await touched(
                """
                DELETE FROM polkadot_metadata WHERE user_id = \(m.userID) AND (origin, genesis_hash) NOT IN
                  (SELECT origin, genesis_hash FROM polkadot_metadata WHERE user_id = \(m.userID)
                   ORDER BY updated_at DESC LIMIT \(PolkadotMetadataRecord.maxPerUser))
                RETURNING 1
                """)
        }
    }

    public func polkadotMetadata(ofUser userID: String, origin: String) async throws -> [PolkadotMetadataRecord] {
        try await call { [self] in
            try await rows(
                """
                SELECT \(unescaped: Columns.polkadotMetadata) FROM polkadot_metadata
                WHERE user_id = \(userID) AND origin = \(origin) ORDER BY genesis_hash
                """
            ).map { try PolkadotMetadataRecord(row: $0) }
        }
    }
}
