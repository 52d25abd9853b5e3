import Foundation

// MARK: Nostr keys

extension SQLiteStore {
    /// Also read with the key (8th column): whether the user has data-key wraps.
    static let hasWrapsColumn = "EXISTS (SELECT 1 FROM key_wraps w WHERE w.user_id = nostr_keys.user_id)"

    func insertNostrKey(_ k: NostrKeyRecord, orIgnore: Bool) throws {
        try connection.query(
            "INSERT \(orIgnore ? "OR IGNORE " : "")INTO nostr_keys (\(Columns.nostrKey)) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                .text(k.userID), .text(k.pubkey), .int(Int64(k.version)), .blob(k.nonce), .blob(k.sealed), .date(k.updatedAt),
                .bool(k.passkeySealed),
            ])
    }

    public func nostrKey(ofUser userID: String) async throws -> NostrKeyRecord? {
        try read { connection in
            try connection.query(
                "SELECT \(Columns.nostrKey), \(Self.hasWrapsColumn) FROM nostr_keys WHERE user_id = ?",
                [.text(userID)]
            ).first.map { try NostrKeyRecord(row: $0, hasWrapsAt: 7) }
        }
    }

    public func insertNostrKeyIfAbsent(_ record: NostrKeyRecord) async throws -> NostrKeyRecord {
        try write {
            try connection.transaction {
                try insertNostrKey(record, orIgnore: true)
                // Read back on the writer: a reader would not see this transaction.
                guard
                    let stored = try connection.query(
                        "SELECT \(Columns.nostrKey) FROM nostr_keys WHERE user_id = ?",
                        [.text(record.userID)]
                    ).first.map({ try NostrKeyRecord(row: $0) })
                else {
                    throw StoreError.notFound
                }
                return stored
            }
        }
    }

    public func replaceNostrKey(_ k: NostrKeyRecord, expectedVersion: Int) async throws {
        try write { try replaceKey(k, expectedVersion: expectedVersion) }
    }

    func replaceKey(_ k: NostrKeyRecord, expectedVersion: Int) throws {
        try connection.query(
            """
            UPDATE nostr_keys SET pubkey = ?, version = ?, nonce = ?, sealed = ?, updated_at = ?, passkey_sealed = ?
            WHERE user_id = ? AND version = ?
            """,
            [
                .text(k.pubkey), .int(Int64(k.version)), .blob(k.nonce), .blob(k.sealed), .date(k.updatedAt),
                .bool(k.passkeySealed), .text(k.userID), .int(Int64(expectedVersion)),
            ])
        guard connection.changes == 1 else { throw StoreError.conflict }
    }
}

// MARK: Key wraps

extension SQLiteStore {
    public func keyWraps(ofUser userID: String) async throws -> [KeyWrapRecord] {
        try read { connection in
            try connection.query(
                "SELECT \(Columns.keyWrap) FROM key_wraps WHERE user_id = ? ORDER BY created_at",
                [.text(userID)]
            ).map { try KeyWrapRecord(row: $0) }
        }
    }

    func insertKeyWrap(_ w: KeyWrapRecord) throws {
        try connection.query(
            "INSERT OR REPLACE INTO key_wraps (\(Columns.keyWrap)) VALUES (?, ?, ?, ?, ?)",
            [.text(w.userID), .blob(w.credentialID), .blob(w.wrapped), .date(w.createdAt), w.salt.isEmpty ? .null : .blob(w.salt)])
    }

    public func putKeyWrap(_ w: KeyWrapRecord) async throws -> Bool {
        try write {
            try connection.transaction {
                let sealed =
                    try connection.query("SELECT passkey_sealed FROM nostr_keys WHERE user_id = ?", [.text(w.userID)])
                    .first?.first?.bool ?? false
                let owned =
                    try connection.query(
                        "SELECT 1 FROM credentials WHERE id = ? AND user_id = ?",
                        [.blob(w.credentialID), .text(w.userID)]
                    ).first != nil
                guard sealed, owned else { return false }
                try insertKeyWrap(w)
                return true
            }
        }
    }

    public func changeKeyProtection(
        _ k: NostrKeyRecord, expectedVersion: Int, wraps: [KeyWrapRecord],
        keepingSession: [UInt8]?, sessionDataKey: [UInt8]?, bunkerSigner: BunkerSignerRecord?,
        substrateAccounts: [SubstrateAccountRecord]?
    ) async throws {
        try write {
            try connection.transaction {
                try replaceKey(k, expectedVersion: expectedVersion)
                if let substrateAccounts {
                    let count =
                        try connection.query("SELECT count(*) FROM substrate_accounts WHERE user_id = ?", [.text(k.userID)])
                        .first?.first?.int ?? 0
                    guard count == substrateAccounts.count else { throw StoreError.conflict }
                    for a in substrateAccounts {
                        try connection.query(
                            "UPDATE substrate_accounts SET nonce = ?, sealed = ?, protection = ? WHERE id = ? AND user_id = ?",
                            [.blob(a.nonce), .blob(a.sealed), .int(Int64(a.protection)), .text(a.id), .text(k.userID)])
                        guard connection.changes == 1 else { throw StoreError.conflict }
                    }
                }
                if let bunkerSigner {
                    let old = try connection.query("SELECT pubkey FROM bunker_signers WHERE user_id = ?", [.text(k.userID)]).first?.first?.text
                    if old != nil {
                        let s = bunkerSigner
                        // In place: the secret stays as the row has it, with the same key only.
                        try connection.query(
                            """
                            UPDATE bunker_signers SET pubkey = ?, nonce = ?, sealed = ?, created_at = ?, passkey_sealed = ?,
                              secret_hash = CASE WHEN pubkey = ? THEN secret_hash END,
                              secret_expires_at = CASE WHEN pubkey = ? THEN secret_expires_at END
                            WHERE user_id = ?
                            """,
                            [
                                .text(s.pubkey), .blob(s.nonce), .blob(s.sealed), .date(s.createdAt), .bool(s.passkeySealed), .text(s.pubkey),
                                .text(s.pubkey), .text(k.userID),
                            ])
                    } else {
                        try insertSigner(bunkerSigner.withoutSecret, orIgnore: false)
                    }
                    if old != nil, old != bunkerSigner.pubkey {
                        try connection.query("DELETE FROM bunker_clients WHERE user_id = ?", [.text(k.userID)])
                        try connection.query("DELETE FROM grants WHERE user_id = ? AND client LIKE 'nip46:%'", [.text(k.userID)])
                        try connection.query("DELETE FROM signer_requests WHERE user_id = ? AND state = 'pending'", [.text(k.userID)])
                    }
                }
                try connection.query("DELETE FROM key_wraps WHERE user_id = ?", [.text(k.userID)])
                for wrap in wraps { try insertKeyWrap(wrap) }
                try connection.query("UPDATE sessions SET data_key = NULL WHERE user_id = ? AND data_key IS NOT NULL", [.text(k.userID)])
                if let keepingSession {
                    try connection.query(
                        "UPDATE sessions SET data_key = ? WHERE token_hash = ? AND user_id = ?",
                        [sessionDataKey.map(SQLValue.blob) ?? .null, .blob(keepingSession), .text(k.userID)])
                }
            }
            // The row this replaced (server-protected, when sealing) must not linger in the WAL until
            // the next idle checkpoint: folded back now, where secure_delete has zeroed its page.
            // Best effort: a reader in the middle of a read can make it partial; the sweeper repeats it.
            _ = try? connection.query("PRAGMA wal_checkpoint(TRUNCATE)")
        }
    }

    public func allNostrKeys() async throws -> [NostrKeyRecord] {
        try read { connection in
            try connection.query("SELECT \(Columns.nostrKey) FROM nostr_keys ORDER BY user_id").map { try NostrKeyRecord(row: $0) }
        }
    }

    public func rewrapNostrKeys(
        _ records: [NostrKeyRecord], bunkerSigners: [BunkerSignerRecord], substrateAccounts: [SubstrateAccountRecord],
        masterKeyCheck: [UInt8]
    ) async throws {
        try write {
            try connection.transaction {
                let count = try connection.query("SELECT count(*) FROM nostr_keys").first?.first?.int ?? 0
                guard count == records.count else { throw StoreError.conflict }
                for k in records {
                    try connection.query(
                        "UPDATE nostr_keys SET nonce = ?, sealed = ? WHERE user_id = ? AND version = ? AND pubkey = ? AND passkey_sealed = ?",
                        [.blob(k.nonce), .blob(k.sealed), .text(k.userID), .int(Int64(k.version)), .text(k.pubkey), .bool(k.passkeySealed)])
                    guard connection.changes == 1 else { throw StoreError.conflict }
                }
                let signers = try connection.query("SELECT count(*) FROM bunker_signers").first?.first?.int ?? 0
                guard signers == bunkerSigners.count else { throw StoreError.conflict }
                for s in bunkerSigners {
                    try connection.query(
                        "UPDATE bunker_signers SET nonce = ?, sealed = ? WHERE user_id = ? AND pubkey = ?",
                        [.blob(s.nonce), .blob(s.sealed), .text(s.userID), .text(s.pubkey)])
                    guard connection.changes == 1 else { throw StoreError.conflict }
                }
                let underMaster = try connection.query("SELECT count(*) FROM substrate_accounts WHERE protection > 0").first?.first?.int ?? 0
                guard underMaster == substrateAccounts.count else { throw StoreError.conflict }
                for a in substrateAccounts {
                    try connection.query(
                        "UPDATE substrate_accounts SET nonce = ?, sealed = ? WHERE id = ? AND user_id = ? AND protection = ?",
                        [.blob(a.nonce), .blob(a.sealed), .text(a.id), .text(a.userID), .int(Int64(a.protection))])
                    guard connection.changes == 1 else { throw StoreError.conflict }
                }
                try connection.query("INSERT OR REPLACE INTO meta (name, value) VALUES ('master_key_check', ?)", [.blob(masterKeyCheck)])
            }
        }
    }
}
