import Foundation
import KeyfobStore
import Logging
import PostgresNIO

// MARK: Nostr keys

extension PostgresStore {
    func insertNostrKey(_ k: NostrKeyRecord, onConflict: String, on connection: PostgresConnection) async throws {
        try await connection.query(
            """
            INSERT INTO nostr_keys (\(unescaped: Columns.nostrKey))
            VALUES (\(k.userID), \(k.pubkey), \(k.version), \(ByteBuffer(bytes: k.nonce)), \(ByteBuffer(bytes: k.sealed)),
                    \(k.updatedAt.timeIntervalSince1970), \(k.passkeySealed)) \(unescaped: onConflict)
            """, logger: logger
        ).collect()
    }

    public func nostrKey(ofUser userID: String) async throws -> NostrKeyRecord? {
        try await call { [self] in
            try await run(Statements.NostrKeyOfUser.self) { $0.append(userID) }.first.map { try NostrKeyRecord(row: $0, hasWrapsAt: 7) }
        }
    }

    public func insertNostrKeyIfAbsent(_ record: NostrKeyRecord) async throws -> NostrKeyRecord {
        try await call { [self] in
            try await client.withConnection { connection in
                try await insertNostrKey(record, onConflict: "ON CONFLICT (user_id) DO NOTHING", on: connection)
                // A statement of its own: it sees the row whichever instance wrote it.
                guard
                    let stored = try await connection.query(
                        "SELECT \(unescaped: Columns.nostrKey) FROM nostr_keys WHERE user_id = \(record.userID)",
                        logger: logger
                    ).collect().first.map({ try NostrKeyRecord(row: $0.makeRandomAccess()) })
                else {
                    throw StoreError.notFound
                }
                return stored
            }
        }
    }

    public func replaceNostrKey(_ k: NostrKeyRecord, expectedVersion: Int) async throws {
        try await transaction { [self] connection in try await replaceKey(k, expectedVersion: expectedVersion, on: connection) }
    }

    func replaceKey(_ k: NostrKeyRecord, expectedVersion: Int, on connection: PostgresConnection) async throws {
        let updated = try await connection.query(
            """
            UPDATE nostr_keys SET pubkey = \(k.pubkey), version = \(k.version), nonce = \(ByteBuffer(bytes: k.nonce)),
                   sealed = \(ByteBuffer(bytes: k.sealed)), updated_at = \(k.updatedAt.timeIntervalSince1970),
                   passkey_sealed = \(k.passkeySealed)
            WHERE user_id = \(k.userID) AND version = \(expectedVersion) RETURNING 1
            """, logger: logger
        ).collect().count
        guard updated == 1 else { throw StoreError.conflict }
    }

    public func allNostrKeys() async throws -> [NostrKeyRecord] {
        try await call { [self] in
            try await rows("SELECT \(unescaped: Columns.nostrKey) FROM nostr_keys ORDER BY user_id COLLATE \"C\"")
                .map { try NostrKeyRecord(row: $0) }
        }
    }

    public func rewrapNostrKeys(
        _ records: [NostrKeyRecord], bunkerSigners: [BunkerSignerRecord], substrateAccounts: [SubstrateAccountRecord],
        masterKeyCheck: [UInt8]
    ) async throws {
        try await transaction { [self] connection in
            // Lock every key: none may change or appear until the new check value is written.
            try await connection.query("LOCK TABLE nostr_keys IN SHARE ROW EXCLUSIVE MODE", logger: logger).collect()
            let count =
                try await connection.query("SELECT count(*) FROM nostr_keys", logger: logger).collect()
                .first?.makeRandomAccess()[0].decode(Int.self) ?? 0
            guard count == records.count else { throw StoreError.conflict }
            for k in records {
                let updated = try await connection.query(
                    """
                    UPDATE nostr_keys SET nonce = \(ByteBuffer(bytes: k.nonce)), sealed = \(ByteBuffer(bytes: k.sealed))
                    WHERE user_id = \(k.userID) AND version = \(k.version) AND pubkey = \(k.pubkey)
                      AND passkey_sealed = \(k.passkeySealed) RETURNING 1
                    """, logger: logger
                ).collect().count
                guard updated == 1 else { throw StoreError.conflict }
            }
            try await connection.query("LOCK TABLE bunker_signers IN SHARE ROW EXCLUSIVE MODE", logger: logger).collect()
            let signers =
                try await connection.query("SELECT count(*) FROM bunker_signers", logger: logger).collect()
                .first?.makeRandomAccess()[0].decode(Int.self) ?? 0
            guard signers == bunkerSigners.count else { throw StoreError.conflict }
            for s in bunkerSigners {
                let updated = try await connection.query(
                    """
                    UPDATE bunker_signers SET nonce = \(ByteBuffer(bytes: s.nonce)), sealed = \(ByteBuffer(bytes: s.sealed))
                    WHERE user_id = \(s.userID) AND pubkey = \(s.pubkey) RETURNING 1
                    """, logger: logger
                ).collect().count
                guard updated == 1 else { throw StoreError.conflict }
            }
            try await connection.query("LOCK TABLE substrate_accounts IN SHARE ROW EXCLUSIVE MODE", logger: logger).collect()
            let underMaster =
                try await connection.query("SELECT count(*) FROM substrate_accounts WHERE protection > 0", logger: logger).collect()
                .first?.makeRandomAccess()[0].decode(Int.self) ?? 0
            guard underMaster == substrateAccounts.count else { throw StoreError.conflict }
            for a in substrateAccounts {
                let updated = try await connection.query(
                    """
                    UPDATE substrate_accounts SET nonce = \(ByteBuffer(bytes: a.nonce)), sealed = \(ByteBuffer(bytes: a.sealed))
                    WHERE id = \(a.id) AND user_id = \(a.userID) AND protection = \(a.protection) RETURNING 1
                    """, logger: logger
                ).collect().count
                guard updated == 1 else { throw StoreError.conflict }
            }
            try await upsertMeta(Self.masterKeyCheckName, masterKeyCheck, on: connection)
        }
    }
}

// MARK: Key wraps

extension PostgresStore {
    public func keyWraps(ofUser userID: String) async throws -> [KeyWrapRecord] {
        try await call { [self] in
            try await rows(
                """
                SELECT \(unescaped: Columns.keyWrap) FROM key_wraps WHERE user_id = \(userID)
                ORDER BY created_at, credential_id
                """
            ).map { try KeyWrapRecord(row: $0) }
        }
    }

    func insertKeyWrap(_ w: KeyWrapRecord, on connection: PostgresConnection) async throws {
        try await connection.query(
            """
            INSERT INTO key_wraps (\(unescaped: Columns.keyWrap))
            VALUES (\(w.userID), \(ByteBuffer(bytes: w.credentialID)), \(ByteBuffer(bytes: w.wrapped)), \(w.createdAt.timeIntervalSince1970),
                    \(w.salt.isEmpty ? nil : ByteBuffer(bytes: w.salt)))
            ON CONFLICT (user_id, credential_id) DO UPDATE SET wrapped = excluded.wrapped, created_at = excluded.created_at,
                salt = excluded.salt
            """, logger: logger
        ).collect()
    }

    public func putKeyWrap(_ w: KeyWrapRecord) async throws -> Bool {
        try await transaction { [self] connection in
            let sealed =
                try await connection.query(
                    "SELECT passkey_sealed FROM nostr_keys WHERE user_id = \(w.userID) FOR SHARE", logger: logger
                ).collect()
                .first?.makeRandomAccess()[0].decode(Bool.self) ?? false
            let owned =
                try await connection.query(
                    "SELECT 1 FROM credentials WHERE id = \(ByteBuffer(bytes: w.credentialID)) AND user_id = \(w.userID) FOR SHARE",
                    logger: logger
                ).collect().count == 1
            guard sealed, owned else { return false }
            try await insertKeyWrap(w, on: connection)
            return true
        }
    }

    public func changeKeyProtection(
        _ k: NostrKeyRecord, expectedVersion: Int, wraps: [KeyWrapRecord],
        keepingSession: [UInt8]?, sessionDataKey: [UInt8]?, bunkerSigner: BunkerSignerRecord?,
        substrateAccounts: [SubstrateAccountRecord]?
    ) async throws {
        try await transaction { [self] connection in
            // The count below must see an account inserted while this waited for the key's row:
            // READ COMMITTED whatever the server's default isolation is.
            try await Self.readCommitted(connection, logger: logger)
            try await replaceKey(k, expectedVersion: expectedVersion, on: connection)
            // Then, in the order an account's deletion takes them: its passkeys (their wraps are
            // replaced below; a passkey's removal holds it, then its wrap and its sessions), then its
            // sessions, whose data-key copies go here (the kept session's is set again below), before
            // the NIP-46 signer, as a sign-out everywhere continues (`endSessionsAndClients`). Only
            // the sessions locked here are written: one signed in meanwhile is not waited on.
            try await connection.query(
                "SELECT 1 FROM credentials WHERE user_id = \(k.userID) ORDER BY id FOR KEY SHARE", logger: logger
            ).collect()
            let tokens = try await Self.lockSessions(of: k.userID, mode: "NO KEY UPDATE", on: connection, logger: logger)
            try await connection.query(
                "UPDATE sessions SET data_key = NULL WHERE token_hash = ANY(\(tokens)) AND data_key IS NOT NULL", logger: logger
            ).collect()
            if let substrateAccounts {
                // The key's row is locked by the version check above: no account is added meanwhile
                // (an insert checks that version too).
                let count =
                    try await connection.query("SELECT count(*) FROM substrate_accounts WHERE user_id = \(k.userID)", logger: logger)
                    .collect().first?.makeRandomAccess()[0].decode(Int.self) ?? 0
                guard count == substrateAccounts.count else { throw StoreError.conflict }
                for a in substrateAccounts {
                    let updated = try await connection.query(
                        """
                        UPDATE substrate_accounts SET nonce = \(ByteBuffer(bytes: a.nonce)), sealed = \(ByteBuffer(bytes: a.sealed)),
                          protection = \(a.protection)
                        WHERE id = \(a.id) AND user_id = \(k.userID) RETURNING 1
                        """, logger: logger
                    ).collect().count
                    guard updated == 1 else { throw StoreError.conflict }
                }
            }
            if let bunkerSigner {
                let old = try await connection.query(
                    "SELECT pubkey FROM bunker_signers WHERE user_id = \(k.userID) FOR UPDATE", logger: logger
                ).collect().first.map { try $0.makeRandomAccess().text(0) }
                let s = bunkerSigner
                if old != nil {
                    // In place: the secret stays as the row has it now (a sign-out everywhere that
                    // cleared it committed first), with the same key only.
                    try await connection.query(
                        """
                        UPDATE bunker_signers SET pubkey = \(s.pubkey), nonce = \(ByteBuffer(bytes: s.nonce)),
                          sealed = \(ByteBuffer(bytes: s.sealed)), created_at = \(s.createdAt.timeIntervalSince1970),
                          passkey_sealed = \(s.passkeySealed),
                          secret_hash = CASE WHEN pubkey = \(s.pubkey) THEN secret_hash END,
                          secret_expires_at = CASE WHEN pubkey = \(s.pubkey) THEN secret_expires_at END
                        WHERE user_id = \(k.userID)
                        """, logger: logger
                    ).collect()
                } else {
                    try await connection.query(Self.insertSignerQuery(s.withoutSecret, onConflict: ""), logger: logger).collect()
                }
                if let old, old != bunkerSigner.pubkey {
                    try await connection.query("DELETE FROM bunker_clients WHERE user_id = \(k.userID)", logger: logger).collect()
                    try await connection.query(
                        "DELETE FROM grants WHERE user_id = \(k.userID) AND client LIKE 'nip46:%'",
                        logger: logger
                    ).collect()
                    try await connection.query(
                        "DELETE FROM signer_requests WHERE user_id = \(k.userID) AND state = 'pending'",
                        logger: logger
                    ).collect()
                }
            }
            try await connection.query("DELETE FROM key_wraps WHERE user_id = \(k.userID)", logger: logger).collect()
            for wrap in wraps { try await insertKeyWrap(wrap, on: connection) }
            if let keepingSession {
                try await connection.query(
                    """
                    UPDATE sessions SET data_key = \(sessionDataKey.map { ByteBuffer(bytes: $0) })
                    WHERE token_hash = \(ByteBuffer(bytes: keepingSession)) AND user_id = \(k.userID)
                    """, logger: logger
                ).collect()
            }
        }
    }
}
