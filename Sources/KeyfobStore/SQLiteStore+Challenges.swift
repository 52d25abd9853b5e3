import Foundation

// MARK: Challenges

extension SQLiteStore {
    public func insertChallenge(_ c: ChallengeRecord, now: Date, maxPerClient: Int) async throws {
        try challenges.insert(c, now: now, maxPerClient: maxPerClient)
    }

    public func sweepExpired(now: Date, limit: Int) async throws -> Int {
        let swept = challenges.sweep(now: now, limit: limit)
        return try write {
            var removed = swept
            try connection.query(
                "DELETE FROM used_challenges WHERE hash IN (SELECT hash FROM used_challenges WHERE expires_at <= ? LIMIT ?)",
                [.date(now), .int(Int64(limit))])
            removed += connection.changes
            try connection.query(
                "DELETE FROM signer_requests WHERE rowid IN (SELECT rowid FROM signer_requests WHERE expires_at <= ? LIMIT ?)",
                [.date(now.addingTimeInterval(-3600)), .int(Int64(limit))])
            removed += connection.changes
            try connection.query(
                "DELETE FROM grants WHERE rowid IN (SELECT rowid FROM grants WHERE expires_at IS NOT NULL AND expires_at <= ? LIMIT ?)",
                [.date(now), .int(Int64(limit))])
            removed += connection.changes
            try connection.query(
                "DELETE FROM sessions WHERE rowid IN (SELECT rowid FROM sessions WHERE expires_at <= ? LIMIT ?)",
                [.date(now), .int(Int64(limit))])
            removed += connection.changes
            // A sealed key's data key lives in a session for its unlock window only.
            try connection.query(
                """
                UPDATE sessions SET data_key = NULL WHERE rowid IN
                    (SELECT rowid FROM sessions WHERE data_key IS NOT NULL AND (unlocked_until IS NULL OR unlocked_until <= ?) LIMIT ?)
                """, [.date(now), .int(Int64(limit))])
            removed += connection.changes
            // Replies are read by other instances within seconds; none is kept past its lifetime,
            // whether or not another reply came to push it out.
            try connection.query(
                "DELETE FROM bunker_replies WHERE rowid IN (SELECT rowid FROM bunker_replies WHERE created_at < ? LIMIT ?)",
                [.date(now.addingTimeInterval(-Retention.bunkerReplies)), .int(Int64(limit))])
            removed += connection.changes
            // Runtimes whose rows went with their account (a cascade the puts do not see).
            try connection.query(
                """
                DELETE FROM polkadot_runtimes WHERE hash IN (SELECT hash FROM polkadot_runtimes r
                  WHERE NOT EXISTS (SELECT 1 FROM polkadot_metadata m WHERE m.runtime_hash = r.hash) LIMIT ?)
                """, [.int(Int64(limit))])
            removed += connection.changes
            if removed == 0 {
                // Nothing left to sweep: a good moment to fold the WAL back into the database.
                _ = try? connection.query("PRAGMA wal_checkpoint(TRUNCATE)")
            }
            return removed
        }
    }

    public func consumeChallenge(_ value: [UInt8]) async throws -> ChallengeRecord? {
        challenges.consume(value)
    }

    public func isChallengeUsed(hash: [UInt8]) async throws -> Bool {
        try read { connection in try !connection.query("SELECT 1 FROM used_challenges WHERE hash = ?", [.blob(hash)]).isEmpty }
    }
}
