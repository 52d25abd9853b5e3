import Foundation

// MARK: NIP-46

extension SQLiteStore {
    func insertSigner(_ s: BunkerSignerRecord, orIgnore: Bool) throws {
        try connection.query(
            "INSERT \(orIgnore ? "OR IGNORE " : "")INTO bunker_signers (\(Columns.signer)) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                .text(s.userID), .text(s.pubkey), .blob(s.nonce), .blob(s.sealed), s.secretHash.map(SQLValue.blob) ?? .null,
                .date(s.secretExpiresAt), .date(s.createdAt), .bool(s.passkeySealed),
            ])
    }

    public func bunkerSigner(ofUser userID: String) async throws -> BunkerSignerRecord? {
        try read { connection in
            try connection.query("SELECT \(Columns.signer) FROM bunker_signers WHERE user_id = ?", [.text(userID)]).first.map {
                try BunkerSignerRecord(row: $0)
            }
        }
    }

    public func allBunkerSigners() async throws -> [BunkerSignerRecord] {
        try read { connection in
            try connection.query("SELECT \(Columns.signer) FROM bunker_signers ORDER BY user_id").map { try BunkerSignerRecord(row: $0) }
        }
    }

    public func bunkerSigner(pubkey: String) async throws -> BunkerSignerRecord? {
        try read { connection in
            try connection.query("SELECT \(Columns.signer) FROM bunker_signers WHERE pubkey = ?", [.text(pubkey)]).first.map {
                try BunkerSignerRecord(row: $0)
            }
        }
    }

    public func insertBunkerSignerIfAbsent(_ s: BunkerSignerRecord) async throws -> BunkerSignerRecord {
        try write {
            try insertSigner(s, orIgnore: true)
            guard
                let stored = try connection.query(
                    "SELECT \(Columns.signer) FROM bunker_signers WHERE user_id = ?",
                    [.text(s.userID)]
                ).first.map({ try BunkerSignerRecord(row: $0) })
            else { throw StoreError.notFound }
            return stored
        }
    }

    public func setBunkerSecret(userID: String, secretHash: [UInt8]?, expiresAt: Date?, session: [UInt8]?) async throws -> Bool {
        try write {
            try connection.transaction {
                // In the one write transaction a sign-out everywhere also takes: before it or after it.
                try requireSession(session, of: userID)
                try connection.query(
                    "UPDATE bunker_signers SET secret_hash = ?, secret_expires_at = ? WHERE user_id = ?",
                    [secretHash.map(SQLValue.blob) ?? .null, .date(expiresAt), .text(userID)])
                return connection.changes == 1
            }
        }
    }

    public func connectBunkerClient(_ c: BunkerClientRecord, secretHash: [UInt8], now: Date) async throws -> Bool {
        try write {
            try connection.transaction {
                try connection.query(
                    """
                    UPDATE bunker_signers SET secret_hash = NULL, secret_expires_at = NULL
                    WHERE user_id = ? AND secret_hash = ? AND secret_expires_at > ?
                    """, [.text(c.userID), .blob(secretHash), .date(now)])
                guard connection.changes == 1 else { return false }
                try insertClient(c)
                return true
            }
        }
    }

    public func bunkerClients(ofUser userID: String) async throws -> [BunkerClientRecord] {
        try read { connection in
            try connection.query(
                "SELECT \(Columns.client) FROM bunker_clients WHERE user_id = ? ORDER BY created_at, client_pubkey",
                [.text(userID)]
            ).map { try BunkerClientRecord(row: $0) }
        }
    }

    public func bunkerClient(userID: String, clientPubkey: String) async throws -> BunkerClientRecord? {
        try read { connection in
            try connection.query(
                "SELECT \(Columns.client) FROM bunker_clients WHERE user_id = ? AND client_pubkey = ?",
                [.text(userID), .text(clientPubkey)]
            ).first.map { try BunkerClientRecord(row: $0) }
        }
    }

    public func putBunkerClient(_ c: BunkerClientRecord, session: [UInt8]?) async throws {
        try write {
            try connection.transaction {
                try requireSession(session, of: c.userID)
                try insertClient(c)
            }
        }
    }

    private func insertClient(_ c: BunkerClientRecord) throws {
        try connection.query(
            "INSERT OR REPLACE INTO bunker_clients (\(Columns.client)) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                .text(c.userID), .text(c.clientPubkey), c.name.map(SQLValue.text) ?? .null, c.url.map(SQLValue.text) ?? .null,
                .text(c.perms), .date(c.createdAt), .date(c.lastUsedAt), .text(c.relays.joined(separator: "\n")),
            ])
    }

    public func touchBunkerClient(userID: String, clientPubkey: String, at date: Date) async throws {
        try write {
            try connection.query(
                "UPDATE bunker_clients SET last_used_at = ? WHERE user_id = ? AND client_pubkey = ?",
                [.date(date), .text(userID), .text(clientPubkey)])
        }
    }

    public func deleteBunkerClient(userID: String, clientPubkey: String, client: String) async throws -> Bool {
        try write {
            try connection.transaction {
                try connection.query(
                    "DELETE FROM bunker_clients WHERE user_id = ? AND client_pubkey = ?", [.text(userID), .text(clientPubkey)])
                guard connection.changes == 1 else { return false }
                try connection.query("DELETE FROM grants WHERE user_id = ? AND client = ?", [.text(userID), .text(client)])
                try connection.query(
                    "UPDATE signer_requests SET state = 'cancelled' WHERE user_id = ? AND client = ? AND state = 'pending'",
                    [.text(userID), .text(client)])
                return true
            }
        }
    }

    public func activeBunkerSigners(now: Date, limit: Int) async throws -> [String] {
        try read { connection in
            try connection.query(
                """
                SELECT pubkey FROM bunker_signers s
                WHERE secret_expires_at > ? OR EXISTS (SELECT 1 FROM bunker_clients c WHERE c.user_id = s.user_id)
                ORDER BY pubkey LIMIT ?
                """, [.date(now), .int(Int64(limit))]
            ).compactMap { $0[0].text }
        }
    }

    public func nostrConnectClients() async throws -> [BunkerClientRecord] {
        try read { connection in
            try connection.query("SELECT \(Columns.client) FROM bunker_clients WHERE relays != '' ORDER BY created_at").map {
                try BunkerClientRecord(row: $0)
            }
        }
    }

    public func holdingRole(_ name: String, _ body: @escaping @Sendable () async throws -> Void) async throws -> Bool {
        try await body()
        return true
    }

    public func appendBunkerReply(_ event: String, at date: Date, dropBefore: Date) async throws {
        try write {
            try connection.transaction {
                try connection.query("DELETE FROM bunker_replies WHERE created_at < ?", [.date(dropBefore)])
                try connection.query("INSERT INTO bunker_replies (event, created_at) VALUES (?, ?)", [.text(event), .date(date)])
            }
        }
    }

    public func bunkerReplySignals() -> AsyncStream<Void>? { nil }

    public func bunkerReplies(since: Date, limit: Int) async throws -> [BunkerReplyRecord] {
        try read { connection in
            try connection.query(
                "SELECT id, event FROM bunker_replies WHERE created_at >= ? ORDER BY id LIMIT ?",
                [.date(since), .int(Int64(limit))]
            ).map { try BunkerReplyRecord(row: $0) }
        }
    }
}
