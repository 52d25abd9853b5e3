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

    public func insertSubstrateAccount(_ a: SubstrateAccountRecord, maxPerUser: Int, ownerKeyVersion: Int) async throws {
        let inserted = try await call { [self] in
            // One statement: the cap and the owner's key version checked as it inserts; the key's
            // row locked (FOR SHARE), so a seal or unseal waits for this insert or it for them.
            let inserted = try await touched(
                """
                INSERT INTO substrate_accounts (\(unescaped: Columns.substrateAccount))
                SELECT \(a.id), \(a.userID), \(a.keyType), \(ByteBuffer(bytes: a.publicKey)), \(a.name), \(a.network),
                       \(ByteBuffer(bytes: a.nonce)), \(ByteBuffer(bytes: a.sealed)), \(a.createdAt.timeIntervalSince1970),
                       \(a.acceptsUnverified), \(a.protection)
                WHERE (SELECT count(*) FROM substrate_accounts WHERE user_id = \(a.userID)) < \(maxPerUser)
                  AND EXISTS (SELECT 1 FROM nostr_keys WHERE user_id = \(a.userID) AND version = \(ownerKeyVersion) FOR SHARE)
                RETURNING 1
                """)
            guard inserted == 0 else { return inserted }
            // Which check refused it: the key's version (a conflict) or the cap.
            let current = try await rows("SELECT version FROM nostr_keys WHERE user_id = \(a.userID)").first.map { try $0.int(0) }
            return current == ownerKeyVersion ? 0 : -1
        }
        guard inserted >= 0 else { throw StoreError.conflict }
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

    public func substrateAccounts(atProtection protection: Int) async throws -> [SubstrateAccountRecord] {
        try await call { [self] in
            try await rows(
                """
                SELECT \(unescaped: Columns.substrateAccount) FROM substrate_accounts WHERE protection = \(protection) ORDER BY user_id, id
                """
            ).map { try SubstrateAccountRecord(row: $0) }
        }
    }

    public func replaceSubstrateSecret(_ a: SubstrateAccountRecord, expectedSealed: [UInt8], ownerKeyVersion: Int) async throws -> Bool {
        try await call { [self] in
            try await touched(
                """
                UPDATE substrate_accounts SET nonce = \(ByteBuffer(bytes: a.nonce)), sealed = \(ByteBuffer(bytes: a.sealed)),
                  protection = \(a.protection)
                WHERE id = \(a.id) AND user_id = \(a.userID) AND sealed = \(ByteBuffer(bytes: expectedSealed))
                  AND EXISTS (SELECT 1 FROM nostr_keys WHERE user_id = \(a.userID) AND version = \(ownerKeyVersion) FOR SHARE)
                RETURNING 1
                """) == 1
        }
    }

    public func insertPolkadotRequest(_ q: PolkadotRequestRecord, now: Date, maxPending: Int, session: [UInt8]?) async throws {
        let nowValue = now.timeIntervalSince1970
        let inserted = try await transaction { [logger] connection in
            try await Self.requireSession(session, of: q.userID, on: connection, logger: logger)
            try await connection.query(
                "DELETE FROM polkadot_requests WHERE user_id = \(q.userID) AND expires_at < \(nowValue - 86400)", logger: logger
            ).collect()
            return try await connection.query(
                """
                INSERT INTO polkadot_requests (\(unescaped: Columns.polkadotRequest))
                SELECT \(q.id), \(q.userID), \(q.origin), \(q.transport), \(q.messageType), \(q.request), \(q.state), \(q.result),
                       \(q.confirmationNonce.map { ByteBuffer(bytes: $0) }), \(q.createdAt.timeIntervalSince1970),
                       \(q.expiresAt.timeIntervalSince1970)
                WHERE (SELECT count(*) FROM polkadot_requests
                       WHERE user_id = \(q.userID) AND state = 'pending' AND expires_at > \(nowValue)) < \(maxPending)
                RETURNING 1
                """, logger: logger
            ).collect().count
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

    public func putPolkadotMetadata(_ m: PolkadotMetadataRecord, runtime: [UInt8]?, session: [UInt8]?) async throws {
        try await transaction { [logger] connection in
            try await Self.requireSession(session, of: m.userID, on: connection, logger: logger)
            let before = try await connection.query(
                """
                SELECT runtime_hash FROM polkadot_metadata
                WHERE user_id = \(m.userID) AND origin = \(m.origin) AND genesis_hash = \(m.genesisHash)
                """, logger: logger
            ).collect().first.flatMap { try $0.makeRandomAccess().optionalBytes(0) }
            if let hash = m.runtimeHash, let runtime {
                try await connection.query(
                    """
                    INSERT INTO polkadot_runtimes (hash, size, bytes) VALUES (\(ByteBuffer(bytes: hash)), \(runtime.count), \(ByteBuffer(bytes: runtime)))
                    ON CONFLICT (hash) DO NOTHING
                    """, logger: logger
                ).collect()
            }
            try await connection.query(
                """
                INSERT INTO polkadot_metadata (\(unescaped: Columns.polkadotMetadata))
                VALUES (\(m.userID), \(m.origin), \(m.genesisHash), \(m.specVersion), \(m.definition), \(m.updatedAt.timeIntervalSince1970),
                        \(m.runtimeHash.map { ByteBuffer(bytes: $0) }))
                ON CONFLICT (user_id, origin, genesis_hash) DO UPDATE SET spec_version = excluded.spec_version,
                  definition = excluded.definition, updated_at = excluded.updated_at, runtime_hash = excluded.runtime_hash
                """, logger: logger
            ).collect()
            let held = try await connection.query(
                """
                SELECT m.origin, m.genesis_hash, octet_length(m.definition), m.runtime_hash, coalesce(r.size, 0) FROM polkadot_metadata m
                LEFT JOIN polkadot_runtimes r ON r.hash = m.runtime_hash WHERE m.user_id = \(m.userID) ORDER BY m.updated_at DESC
                """, logger: logger
            ).collect().map { $0.makeRandomAccess() }.map { row in
                PolkadotMetadataRecord.Held(
                    origin: try row.text(0), genesisHash: try row.text(1), ownSize: try row.int(2), runtimeHash: try row.optionalBytes(3),
                    runtimeSize: try row.int(4))
            }
            let gone = PolkadotMetadataRecord.overflow(newestFirst: held, keeping: (m.origin, m.genesisHash))
            for row in gone {
                try await connection.query(
                    """
                    DELETE FROM polkadot_metadata WHERE user_id = \(m.userID) AND origin = \(row.origin) AND genesis_hash = \(row.genesisHash)
                    """, logger: logger
                ).collect()
            }
            try await Self.sweepRuntimes(gone.compactMap(\.runtimeHash) + (before.map { [$0] } ?? []), on: connection, logger: logger)
        }
    }

    /// Removes those of `hashes` no row names any more. A row another transaction adds meanwhile
    /// may lose its runtime: it then reads as not provided, and the dapp provides it again.
    static func sweepRuntimes(_ hashes: [[UInt8]], on connection: PostgresConnection, logger: Logger) async throws {
        for hash in Set(hashes) {
            try await connection.query(
                """
                DELETE FROM polkadot_runtimes r WHERE r.hash = \(ByteBuffer(bytes: hash))
                  AND NOT EXISTS (SELECT 1 FROM polkadot_metadata m WHERE m.runtime_hash = r.hash)
                """, logger: logger
            ).collect()
        }
    }

    public func polkadotMetadata(ofUser userID: String, origin: String) async throws -> [PolkadotMetadataRecord] {
        try await call { [self] in
            try await rows(
                """
                SELECT \(unescaped: Columns.prefixed("m", Columns.polkadotMetadata)) FROM polkadot_metadata m
                WHERE m.user_id = \(userID) AND m.origin = \(origin)
                  AND (m.runtime_hash IS NULL OR EXISTS (SELECT 1 FROM polkadot_runtimes r WHERE r.hash = m.runtime_hash))
                ORDER BY m.genesis_hash
                """
            ).map { try PolkadotMetadataRecord(row: $0) }
        }
    }

    public func polkadotRuntime(hash: [UInt8]) async throws -> [UInt8]? {
        try await call { [self] in
            try await rows("SELECT bytes FROM polkadot_runtimes WHERE hash = \(ByteBuffer(bytes: hash))").first.map { try $0.bytes(0) }
        }
    }

    public func polkadotRuntimeUsage() async throws -> (runtimes: Int, bytes: Int) {
        try await call { [self] in
            let row = try await rows("SELECT count(*), coalesce(sum(size), 0)::BIGINT FROM polkadot_runtimes").first
            return (try row?.int(0) ?? 0, try row?.int(1) ?? 0)
        }
    }
}
