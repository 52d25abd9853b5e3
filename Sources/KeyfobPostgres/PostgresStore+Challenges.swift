import Foundation
import KeyfobStore
import Logging
import PostgresNIO

// MARK: Challenges

extension PostgresStore {
    public func insertChallenge(_ c: ChallengeRecord, now: Date, maxPerClient: Int) async throws {
        let algorithms = c.algorithms.map(String.init).joined(separator: ",")
        let inserted = try await call { [self] in
            // One statement: insert only while the client has fewer than `maxPerClient` live
            // challenges. (Two inserts racing for the last place may both win; the cap is a
            // flood limit, a few over it do no harm, and a lock per insert would cost every login.)
            try await run(Statements.InsertChallenge.self) {
                $0.append(ByteBuffer(bytes: c.challenge)); $0.append(c.ceremony.rawValue); $0.append(c.key); $0.append(c.userID)
                $0.append(c.username); $0.append(c.isAnonymous); $0.append(c.existingUser); $0.append(algorithms)
                $0.append(c.expiresAt.timeIntervalSince1970); $0.append(c.clientIP); $0.append(now.timeIntervalSince1970)
                $0.append(maxPerClient)
            }.count
        }
        guard inserted == 1 else { throw StoreError.limitReached }
    }

    public func sweepExpired(now: Date, limit: Int) async throws -> Int {
        let moment = now.timeIntervalSince1970
        let limit = max(0, limit)
        // Each statement skips the rows another transaction holds (the next sweep takes them): it
        // never waits, so it cannot wait in a circle with a sign-out or a deletion that locks the
        // same account's rows in an order of its own.
        return try await call { [self] in
            var removed = try await touched(
                """
                DELETE FROM used_challenges WHERE hash IN
                    (SELECT hash FROM used_challenges WHERE expires_at <= \(moment) LIMIT \(limit) FOR UPDATE SKIP LOCKED) RETURNING 1
                """)
            removed += try await touched(
                """
                DELETE FROM challenges WHERE challenge IN
                    (SELECT challenge FROM challenges WHERE expires_at <= \(moment) LIMIT \(limit) FOR UPDATE SKIP LOCKED) RETURNING 1
                """)
            removed += try await touched(
                """
                DELETE FROM signer_requests WHERE id IN
                    (SELECT id FROM signer_requests WHERE expires_at <= \(moment - 3600) LIMIT \(limit) FOR UPDATE SKIP LOCKED) RETURNING 1
                """)
            removed += try await touched(
                """
                DELETE FROM grants WHERE id IN
                    (SELECT id FROM grants WHERE expires_at IS NOT NULL AND expires_at <= \(moment) LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING 1
                """)
            removed += try await touched(
                """
                DELETE FROM sessions WHERE token_hash IN
                    (SELECT token_hash FROM sessions WHERE expires_at <= \(moment) LIMIT \(limit) FOR UPDATE SKIP LOCKED) RETURNING 1
                """)
            // A sealed key's data key lives in a session for its unlock window only.
            removed += try await touched(
                """
                UPDATE sessions SET data_key = NULL WHERE token_hash IN
                    (SELECT token_hash FROM sessions WHERE data_key IS NOT NULL
                     AND (unlocked_until IS NULL OR unlocked_until <= \(moment)) LIMIT \(limit) FOR NO KEY UPDATE SKIP LOCKED) RETURNING 1
                """)
            removed += try await touched(
                """
                DELETE FROM bunker_replies WHERE id IN
                    (SELECT id FROM bunker_replies WHERE created_at < \(moment - Retention.bunkerReplies) LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING 1
                """)
            // Runtimes whose rows went with their account (a cascade the puts do not see).
            removed += try await touched(
                """
                DELETE FROM polkadot_runtimes WHERE hash IN (SELECT hash FROM polkadot_runtimes r
                  WHERE NOT EXISTS (SELECT 1 FROM polkadot_metadata m WHERE m.runtime_hash = r.hash) LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING 1
                """)
            return removed
        }
    }

    public func consumeChallenge(_ value: [UInt8]) async throws -> ChallengeRecord? {
        try await call { [self] in
            // DELETE … RETURNING: finding and consuming are one atomic step, on every instance.
            try await run(Statements.ConsumeChallenge.self) { $0.append(ByteBuffer(bytes: value)) }.first
                .map { try Self.challenge($0) }
        }
    }

    public func isChallengeUsed(hash: [UInt8]) async throws -> Bool {
        try await call { [self] in try await !rows("SELECT 1 FROM used_challenges WHERE hash = \(ByteBuffer(bytes: hash))").isEmpty }
    }

    public func consumeChallenge(_ value: [UInt8], credentialID: [UInt8]) async throws -> (ChallengeRecord, CredentialOwner?)? {
        try await call { [self] in
            try await run(Statements.ConsumeChallengeWithCredential.self) {
                $0.append(ByteBuffer(bytes: value)); $0.append(ByteBuffer(bytes: credentialID))
            }.first.map { row in
                let at = Statements.ConsumeChallengeWithCredential.credentialAt
                return (try Self.challenge(row), try row.optionalBytes(at) == nil ? nil : try CredentialOwner(row: row, from: at))
            }
        }
    }

    /// The challenge whose columns (`ConsumeChallenge`'s) start the row.
    static func challenge(_ r: PostgresRandomAccessRow) throws -> ChallengeRecord {
        ChallengeRecord(
            challenge: try r.bytes(0), ceremony: ChallengeRecord.Ceremony(rawValue: try r.text(1)) ?? .authentication,
            key: try r.text(2), userID: try r.optionalText(3), username: try r.optionalText(4), isAnonymous: try r.bool(5),
            existingUser: try r.bool(6), algorithms: try r.text(7).split(separator: ",").compactMap { Int($0) },
            expiresAt: try r.date(8), clientIP: try r.optionalText(9))
    }
}
