import KeyfobStore
import PostgresNIO

/// The statements of the hot paths (a sign-in's options and verification, a signer call), as named
/// prepared statements: each connection parses and plans them once, then only binds and runs.
/// Everything else runs as unnamed statements (parsed on each call; bound parameters all the same).
protocol StatementText {
    static var sql: String { get }
    /// It writes rows that must survive a crash: answered only once committed (`PostgresStore.durably`).
    static var writes: Bool { get }
}

extension StatementText {
    static var writes: Bool { false }
}

/// One execution of `Text`'s statement with these bindings; rows come back as they are.
struct Prepared<Text: StatementText>: PostgresPreparedStatement {
    static var name: String { "keyfob_\(Text.self)" }
    static var sql: String { Text.sql }
    typealias Row = PostgresRandomAccessRow

    let bindings: PostgresBindings

    func makeBindings() -> PostgresBindings { bindings }
    func decodeRow(_ row: PostgresRow) throws -> PostgresRandomAccessRow { row.makeRandomAccess() }
}

enum Statements {
    /// What `PostgresStore.durably` sends after a write: answered only after the write's commit.
    enum CommitProof: StatementText {
        static let sql = "SELECT 1"
    }

    enum InsertChallenge: StatementText {
        static let sql = """
            INSERT INTO challenges (challenge, ceremony, challenge_key, user_id, username, is_anonymous,
                                    existing_user, algorithms, expires_at, client_ip)
            SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10
            WHERE $10::text IS NULL OR (SELECT count(*) FROM (SELECT 1 FROM challenges
                  WHERE client_ip = $10 AND expires_at > $11 LIMIT $12) AS live) < $12
            RETURNING 1
            """
    }

    enum ConsumeChallenge: StatementText {
        static let sql = "DELETE FROM challenges WHERE challenge = $1 RETURNING \(returning)"
        /// The challenge's columns, in the order `PostgresStore.challenge(_:)` reads them.
        static let returning = """
            challenge, ceremony, challenge_key, user_id, username, is_anonymous, existing_user, algorithms, expires_at, client_ip
            """
    }

    /// `ConsumeChallenge` and `CredentialWithOwner` in one round trip: no row when no challenge
    /// has the value; the passkey's columns NULL when no passkey has the id.
    enum ConsumeChallengeWithCredential: StatementText {
        static let sql = """
            WITH consumed AS (\(ConsumeChallenge.sql))
            SELECT consumed.*, \(CredentialWithOwner.columns)
            FROM consumed LEFT JOIN (\(CredentialWithOwner.tables)) ON c.id = $2
            """
        /// Where the passkey's columns start.
        static let credentialAt = Columns.count(ConsumeChallenge.returning)
    }

    enum CredentialByID: StatementText {
        static let sql = """
            SELECT \(Columns.credential) FROM credentials WHERE id = $1
            """
    }

    /// A sign-in's three lookups in one: the passkey's columns, its user's, the user's key's (NULL when none).
    enum CredentialWithOwner: StatementText {
        static let sql = "SELECT \(columns) FROM \(tables) WHERE c.id = $1"
        static let columns = """
            \(Columns.prefixed("c", Columns.credential)), \(Columns.prefixed("u", Columns.user)), \(Columns.prefixed("k", Columns.nostrKey))
            """
        static let tables = "credentials c JOIN users u ON u.id = c.user_id LEFT JOIN nostr_keys k ON k.user_id = u.id"
    }

    enum UserByID: StatementText {
        static let sql = "SELECT id, username, is_anonymous, created_at FROM users WHERE id = $1"
    }

    enum SessionByToken: StatementText {
        static let sql = """
            SELECT \(Columns.session)
            FROM sessions WHERE token_hash = $1 AND expires_at > $2
            """
    }

    enum NostrKeyOfUser: StatementText {
        static let sql = """
            SELECT \(Columns.nostrKey),
                   EXISTS (SELECT 1 FROM key_wraps w WHERE w.user_id = nostr_keys.user_id)
            FROM nostr_keys WHERE user_id = $1
            """
    }

    /// A stored challenge's sign-in (a sealed account's): the counter's compare-and-swap and, only
    /// if it won, the oldest sessions past the cap out and the new one in, in one statement. Under
    /// READ COMMITTED a concurrent update makes this one wait, then re-check `sign_count` on the new
    /// row: of two assertions with one counter, one wins. The trim locks only the sessions past
    /// the cap and skips those another transaction holds (the cap is passed by them until the
    /// next sign-in): waiting on them would take a lock outside the passkey-first order.
    enum CompleteAuthentication: StatementText {
        static let sql = """
            WITH won AS (
                UPDATE credentials SET sign_count = $1, backup_state = $2, last_used_at = $3
                WHERE id = $4 AND sign_count = $5 RETURNING 1
            ), trimmed AS (
                DELETE FROM sessions WHERE EXISTS (SELECT 1 FROM won) AND token_hash IN
                    (SELECT token_hash FROM sessions WHERE token_hash IN
                        (SELECT token_hash FROM sessions WHERE user_id = $6 ORDER BY created_at DESC OFFSET $7)
                     FOR UPDATE SKIP LOCKED)
            ), added AS (
                INSERT INTO sessions (token_hash, user_id, created_at, expires_at, unlocked_until, credential_id, data_key)
                SELECT $8, $6, $9, $10, $11, $12, $13 WHERE EXISTS (SELECT 1 FROM won)
            )
            SELECT count(*) FROM won
            """
        static let writes = true
    }

    /// `CeremonyStore.completeSignIn`: the passkey found by id, account and public key and locked
    /// (its counter as stored), the counter's rule checked, the challenge recorded, the counter
    /// moved and the session added (the oldest past the cap out), then COMMIT, all inside the
    /// procedure. The lock comes before the challenge's record, as in a batch (`SignInBatches`), so
    /// the two never wait on each other. Under READ COMMITTED a concurrent update of the passkey
    /// makes the lock wait, then read the row as it is now: of two assertions with one counter, one
    /// wins; a removal it waited for reads as gone (the stored counter NULL). Answers (won, used,
    /// stored counter, backup state before, username, is_anonymous, created_at, key sealed):
    /// `SignInOutcome(row:of:)` reads them. The trim skips the sessions another transaction holds,
    /// as `CompleteAuthentication`'s does.
    enum CompleteSignIn: StatementText {
        static let sql = "CALL keyfob_sign_in($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)"
        /// Not `writes`: the procedure commits before it answers, so its answer is the proof.
        static let writes = false
        static let procedure = """
            CREATE OR REPLACE PROCEDURE keyfob_sign_in(
                p_count BIGINT, p_backup BOOLEAN, p_used_at DOUBLE PRECISION, p_passkey BYTEA, p_owner TEXT, p_key BYTEA,
                p_keep BIGINT, p_token BYTEA, p_created DOUBLE PRECISION, p_expires DOUBLE PRECISION,
                p_unlocked DOUBLE PRECISION, p_session_passkey BYTEA, p_data_key BYTEA, p_hash BYTEA,
                p_hash_expires DOUBLE PRECISION,
                INOUT o_won BIGINT DEFAULT NULL, INOUT o_used BIGINT DEFAULT NULL, INOUT o_stored BIGINT DEFAULT NULL,
                INOUT o_backup BOOLEAN DEFAULT NULL, INOUT o_username TEXT DEFAULT NULL,
                INOUT o_anonymous BOOLEAN DEFAULT NULL, INOUT o_user_created DOUBLE PRECISION DEFAULT NULL,
                INOUT o_key_sealed BOOLEAN DEFAULT NULL)
            LANGUAGE plpgsql AS $$
            BEGIN
            \(signIn(into: "o_"))
                COMMIT;
            END $$
            """

        /// One sign-in's statement and its gone check, in PL/pgSQL, its answers into the variables
        /// named `prefix` + won, used, stored, backup, username, anonymous, user_created, key_sealed
        /// (the single procedure's INOUT parameters, the batch's per-item variables).
        static func signIn(into prefix: String) -> String {
            let into = ["won", "used", "stored", "backup", "username", "anonymous", "user_created", "key_sealed"]
                .map { prefix + $0 }.joined(separator: ", ")
            return """
                    WITH passkey AS (
                        SELECT sign_count, backup_state FROM credentials
                        WHERE id = p_passkey AND user_id = p_owner AND public_key = p_key FOR NO KEY UPDATE
                    ), used AS (
                        INSERT INTO used_challenges (hash, expires_at)
                        SELECT p_hash, p_hash_expires FROM passkey WHERE p_count > sign_count OR (p_count = 0 AND sign_count = 0)
                        ON CONFLICT (hash) DO NOTHING RETURNING 1
                    ), won AS (
                        UPDATE credentials SET sign_count = p_count, backup_state = p_backup, last_used_at = p_used_at
                        WHERE id = p_passkey AND user_id = p_owner AND public_key = p_key
                          AND (p_count > sign_count OR (p_count = 0 AND sign_count = 0)) AND EXISTS (SELECT 1 FROM used)
                        RETURNING 1
                    ), trimmed AS (
                        DELETE FROM sessions WHERE EXISTS (SELECT 1 FROM won) AND token_hash IN
                            (SELECT token_hash FROM sessions WHERE token_hash IN
                                (SELECT token_hash FROM sessions WHERE user_id = p_owner ORDER BY created_at DESC OFFSET p_keep)
                             FOR UPDATE SKIP LOCKED)
                    ), added AS (
                        INSERT INTO sessions (token_hash, user_id, created_at, expires_at, unlocked_until, credential_id, data_key)
                        SELECT p_token, p_owner, p_created, p_expires, p_unlocked, p_session_passkey, p_data_key
                        WHERE EXISTS (SELECT 1 FROM won)
                    )
                    SELECT (SELECT count(*) FROM won), (SELECT count(*) FROM used), passkey.sign_count, passkey.backup_state,
                           u.username, u.is_anonymous, u.created_at, k.passkey_sealed
                    INTO \(into)
                    FROM (SELECT 1) AS one LEFT JOIN passkey ON TRUE LEFT JOIN users u ON u.id = p_owner
                         LEFT JOIN nostr_keys k ON k.user_id = p_owner;
                    -- A removal that committed while the lock waited is not a lost race: gone.
                    IF \(prefix)won = 0 AND NOT EXISTS (SELECT 1 FROM credentials WHERE id = p_passkey AND user_id = p_owner AND public_key = p_key)
                    THEN
                        \(prefix)stored := NULL;
                    END IF;
                """
        }
    }

    enum AppendAudit: StatementText {
        static let sql = """
            INSERT INTO audit_log (user_id, at, client, transport, method, kind, event_id, outcome, code, receipt)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id
            """
        static let writes = true
    }
}
