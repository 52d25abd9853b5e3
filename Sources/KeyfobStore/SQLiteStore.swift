import Foundation

/// The embedded store: one SQLite file in WAL mode. One writer connection behind a lock (SQLite
/// allows one writer at a time anyway, so "database is locked" cannot happen between requests) and
/// a few read-only connections that WAL lets read beside it.
///
/// Calls run on the caller's thread, under a lock held only for the statement or transaction.
/// An actor here cost a hop (a context switch) per call, queued every read behind every write, and
/// still blocked a thread of the concurrency pool while SQLite ran. Nothing slow runs under these
/// locks: the WAL is not synced per commit (synchronous=NORMAL) and checkpoints run on their own
/// connection and thread (`Checkpointer`).
public final class SQLiteStore: KeyfobStore, @unchecked Sendable {
    /// Sessions a user may hold; signing in once more ends the oldest.
    let maxSessionsPerUser: Int
    /// Used only under `writerLock`. Write bodies are synchronous and call no public method,
    /// so the lock is never taken twice on one thread.
    private let connection: SQLiteConnection
    private let writerLock = NSLock()
    private let readers: [(lock: NSLock, connection: SQLiteConnection)]
    private let checkpointer: Checkpointer?
    /// Pending ceremonies: in memory, never in the file (`ChallengeTable`).
    private let challenges: ChallengeTable

    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    /// `":memory:"` gives a private in-memory database (tests; one connection, no readers).
    /// `maxLiveChallenges`: unfinished ceremonies held in memory at most (`capacityReached` past it).
    public init(path: String, maxSessionsPerUser: Int = 50, readers readerCount: Int = 4, maxLiveChallenges: Int = 250_000) throws {
        self.maxSessionsPerUser = maxSessionsPerUser
        challenges = ChallengeTable(capacity: maxLiveChallenges)
        let inMemory = path == ":memory:"
        if !inMemory { try Self.createPrivately(path) }
        let connection = try SQLiteConnection(path: path)
        if !inMemory {
            let mode = try connection.query("PRAGMA journal_mode=WAL").first?.first?.text
            guard mode == "wal" else { throw StoreError.database("could not switch \(path) to WAL (got \(mode ?? "nothing"))") }
        }
        // journal_size_limit: when the WAL starts over, a file past 40 MB is cut back to that. Above
        // what the checkpointer lets it reach under load (about 32 MB), so a busy WAL is rewritten
        // in place rather than cut and grown again (the file system's block allocation and the
        // truncation showed at ~3% of a login's CPU with a 4 MB limit). An idle server truncates it
        // to nothing (`sweepExpired`).
        // secure_delete: a freed page (an old key row, a swept reply) is zeroed, not left readable in the file.
        try connection.execute("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; PRAGMA journal_size_limit=41943040; PRAGMA secure_delete=ON;")
        try Self.migrate(connection)
        self.connection = connection
        readers = inMemory ? [] : try (0..<readerCount).map { _ in (NSLock(), try SQLiteConnection(path: path, readOnly: true)) }
        checkpointer = inMemory ? nil : try Checkpointer(path: path, writer: connection)
    }

    deinit { checkpointer?.stop() }

    /// Runs a write (or a read that must see the writer's own transaction) on the writer.
    @discardableResult
    private func write<T>(_ body: () throws -> T) throws -> T {
        writerLock.lock()
        defer { writerLock.unlock() }
        return try body()
    }

    /// A read that must see everything committed, whatever the readers' snapshots (copying).
    func readOnWriter<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try write { try body(connection) }
    }

    /// Runs a read on the first free reader (waiting for one when all are busy), or on the writer
    /// when there are none.
    @discardableResult
    private func read<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        guard !readers.isEmpty else { return try write { try body(connection) } }
        for reader in readers where reader.lock.try() {
            defer { reader.lock.unlock() }
            return try body(reader.connection)
        }
        let reader = readers[Int.random(in: 0..<readers.count)]
        reader.lock.lock()
        defer { reader.lock.unlock() }
        return try body(reader.connection)
    }

    /// Creates the database file with mode 0600 whatever the umask; SQLite gives the WAL and
    /// shared-memory files the database file's mode.
    static func createPrivately(_ path: String) throws {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreError.database("cannot create \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var info = stat()
        if fstat(fd, &info) == 0, info.st_mode & 0o077 != 0 { fchmod(fd, 0o600) }
    }

    /// Each entry upgrades the schema by one version (`PRAGMA user_version`).
    static let migrations: [String] = [
        """
        CREATE TABLE users (
            id TEXT PRIMARY KEY,
            username TEXT NOT NULL UNIQUE COLLATE NOCASE,
            is_anonymous INTEGER NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE TABLE credentials (
            id BLOB PRIMARY KEY,
            user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            public_key BLOB NOT NULL,
            algorithm INTEGER NOT NULL,
            sign_count INTEGER NOT NULL,
            transports TEXT NOT NULL,
            aaguid BLOB NOT NULL,
            attestation_format TEXT NOT NULL,
            backup_eligible INTEGER NOT NULL,
            backup_state INTEGER NOT NULL,
            created_at REAL NOT NULL,
            last_used_at REAL
        );
        CREATE INDEX credentials_user ON credentials(user_id);
        CREATE TABLE challenges (
            challenge BLOB PRIMARY KEY,
            ceremony TEXT NOT NULL,
            challenge_key TEXT NOT NULL,
            user_id TEXT,
            username TEXT,
            is_anonymous INTEGER NOT NULL,
            existing_user INTEGER NOT NULL,
            algorithms TEXT NOT NULL,
            expires_at REAL NOT NULL
        );
        CREATE INDEX challenges_expiry ON challenges(expires_at);
        CREATE TABLE sessions (
            token_hash BLOB PRIMARY KEY,
            user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            unlocked_until REAL
        );
        CREATE INDEX sessions_expiry ON sessions(expires_at);
        """,
        // 2: the signer. Sessions remember the passkey that started them; nostr keys (sealed);
        // the audit log; a master-key check value.
        """
        ALTER TABLE sessions ADD COLUMN credential_id BLOB;
        CREATE INDEX sessions_user ON sessions(user_id);
        CREATE INDEX sessions_credential ON sessions(credential_id);
        CREATE TABLE nostr_keys (
            user_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
            pubkey TEXT NOT NULL,
            version INTEGER NOT NULL,
            nonce BLOB NOT NULL,
            sealed BLOB NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE TABLE audit_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            user_id TEXT NOT NULL,
            at REAL NOT NULL,
            client TEXT NOT NULL,
            transport TEXT NOT NULL,
            method TEXT NOT NULL,
            kind INTEGER,
            event_id TEXT,
            outcome TEXT NOT NULL,
            code TEXT
        );
        CREATE INDEX audit_user ON audit_log(user_id, id);
        CREATE TABLE meta (name TEXT PRIMARY KEY, value BLOB NOT NULL);
        """,
        // 3: hardening. Challenges remember their client (capped per IP); credentials say whether
        // their attestation was trusted.
        """
        ALTER TABLE challenges ADD COLUMN client_ip TEXT;
        CREATE INDEX challenges_client ON challenges(client_ip, expires_at);
        ALTER TABLE credentials ADD COLUMN attestation_trusted INTEGER NOT NULL DEFAULT 0;
        """,
        // 4: approvals. Pending signer requests (sealed), grants, receipts in the audit log.
        """
        CREATE TABLE signer_requests (
            id TEXT PRIMARY KEY,
            user_id TEXT REFERENCES users(id) ON DELETE CASCADE,
            requester TEXT NOT NULL,
            client TEXT NOT NULL,
            transport TEXT NOT NULL,
            method TEXT NOT NULL,
            kind INTEGER,
            nonce BLOB NOT NULL,
            payload BLOB NOT NULL,
            confirmation_nonce BLOB,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            state TEXT NOT NULL
        );
        CREATE INDEX signer_requests_owner ON signer_requests(requester, client, state, expires_at);
        CREATE INDEX signer_requests_expiry ON signer_requests(expires_at);
        CREATE TABLE grants (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            client TEXT NOT NULL,
            method TEXT NOT NULL,
            kind INTEGER,
            allow INTEGER NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL
        );
        CREATE INDEX grants_user ON grants(user_id, client);
        ALTER TABLE audit_log ADD COLUMN receipt TEXT;
        """,
        // 5: passkeys people recognise: a name the user chose, the browser and system it was made on.
        """
        ALTER TABLE credentials ADD COLUMN name TEXT;
        ALTER TABLE credentials ADD COLUMN created_on TEXT;
        """,
        // 6: keys sealed by passkeys (PRF): a flag on the key, one data-key wrap per sealing
        // passkey (gone with its passkey), and an unlocked session's copy of the data key.
        """
        ALTER TABLE nostr_keys ADD COLUMN passkey_sealed INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE key_wraps (
            user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            credential_id BLOB NOT NULL REFERENCES credentials(id) ON DELETE CASCADE,
            wrapped BLOB NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (user_id, credential_id)
        );
        CREATE INDEX key_wraps_credential ON key_wraps(credential_id);
        ALTER TABLE sessions ADD COLUMN data_key BLOB;
        CREATE INDEX sessions_data_key ON sessions(unlocked_until) WHERE data_key IS NOT NULL;
        """,
        // 7: challenges moved to memory (`ChallengeTable`). A user's sessions
        // by age, so ending the oldest past the cap walks the index instead of sorting.
        """
        DROP TABLE challenges;
        DROP INDEX sessions_user;
        CREATE INDEX sessions_user ON sessions(user_id, created_at);
        """,
        // 8: NIP-46. Each user's signer key (sealed) with the current connection secret's hash,
        // and the clients they connected.
        """
        CREATE TABLE bunker_signers (
            user_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
            pubkey TEXT NOT NULL UNIQUE,
            nonce BLOB NOT NULL,
            sealed BLOB NOT NULL,
            secret_hash BLOB,
            secret_expires_at REAL,
            created_at REAL NOT NULL
        );
        CREATE TABLE bunker_clients (
            user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            client_pubkey TEXT NOT NULL,
            name TEXT,
            url TEXT,
            perms TEXT NOT NULL,
            created_at REAL NOT NULL,
            last_used_at REAL,
            PRIMARY KEY (user_id, client_pubkey)
        );
        """,
        // 9: NIP-46 replies to approved requests, read by whichever instance holds the client's
        // connection. AUTOINCREMENT: an id is never reused after old rows are dropped.
        """
        CREATE TABLE bunker_replies (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            event TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX bunker_replies_created ON bunker_replies(created_at);
        """,
        // 10: the relays a nostrconnect:// client named, one per line.
        """
        ALTER TABLE bunker_clients ADD COLUMN relays TEXT NOT NULL DEFAULT '';
        """,
        // 11: the PRF input of each data-key wrap (random per wrap; NULL: the deployment salt), and
        // NIP-46 signer keys sealed by passkeys along with the nostr key.
        """
        ALTER TABLE key_wraps ADD COLUMN salt BLOB;
        ALTER TABLE bunker_signers ADD COLUMN passkey_sealed INTEGER NOT NULL DEFAULT 0;
        """,
    ]

    static func migrate(_ connection: SQLiteConnection) throws {
        let version = Int(try connection.query("PRAGMA user_version").first?.first?.int ?? 0)
        guard version < migrations.count else { return }
        try connection.transaction {
            for (index, sql) in migrations.enumerated().dropFirst(version) {
                try connection.execute(sql)
                try connection.execute("PRAGMA user_version = \(index + 1)")
            }
        }
    }

    // MARK: Users

    private static let userColumns = "id, username, is_anonymous, created_at"

    private func userRow(_ row: [SQLValue]) -> UserRecord {
        UserRecord(id: row[0].text ?? "", username: row[1].text ?? "", isAnonymous: row[2].bool,
                   createdAt: row[3].date ?? .distantPast)
    }

    public func user(named username: String) async throws -> UserRecord? {
        try read { connection in
            try connection.query("SELECT \(Self.userColumns) FROM users WHERE username = ?", [.text(username)]).first.map(userRow)
        }
    }

    public func user(id: String) async throws -> UserRecord? {
        try read { connection in
            try connection.query("SELECT \(Self.userColumns) FROM users WHERE id = ?", [.text(id)]).first.map(userRow)
        }
    }

    public func users(matching query: String?, after afterName: String?, limit: Int) async throws -> [UserRecord] {
        try read { connection in
            // LIKE with the user's text escaped: % and _ in a search are literal.
            let pattern = query.map { text in
                "%" + text.replacingOccurrences(of: "!", with: "!!").replacingOccurrences(of: "%", with: "!%")
                    .replacingOccurrences(of: "_", with: "!_") + "%"
            } ?? "%"
            return try connection.query(
                "SELECT \(Self.userColumns) FROM users WHERE username LIKE ? ESCAPE '!' AND username > ? ORDER BY username LIMIT ?",
                [.text(pattern), .text(afterName ?? ""), .int(Int64(max(0, limit)))]).map(userRow)
        }
    }

    public func deleteUser(id: String) async throws -> Bool {
        try write {
            try connection.transaction {
                try connection.query("DELETE FROM users WHERE id = ?", [.text(id)])
                return connection.changes == 1
            }
        }
    }

    // MARK: Credentials

    private static let credentialColumns = """
        id, user_id, public_key, algorithm, sign_count, transports, aaguid, attestation_format,
        backup_eligible, backup_state, created_at, last_used_at, attestation_trusted, name, created_on
        """

    private func credentialRow(_ r: [SQLValue]) -> CredentialRecord {
        CredentialRecord(
            id: r[0].blob ?? [], userID: r[1].text ?? "", publicKey: r[2].blob ?? [], algorithm: Int(r[3].int ?? 0),
            signCount: UInt32(clamping: r[4].int ?? 0),
            transports: (r[5].text ?? "").split(separator: ",").map(String.init), aaguid: r[6].blob ?? [],
            attestationFormat: r[7].text ?? "", backupEligible: r[8].bool, backupState: r[9].bool,
            createdAt: r[10].date ?? .distantPast, lastUsedAt: r[11].date, attestationTrusted: r[12].bool,
            name: r[13].text, createdOn: r[14].text)
    }

    public func credential(id: [UInt8]) async throws -> CredentialRecord? {
        try read { connection in
            try connection.query("SELECT \(Self.credentialColumns) FROM credentials WHERE id = ?", [.blob(id)]).first.map(credentialRow)
        }
    }

    public func credentialWithOwner(id: [UInt8]) async throws -> CredentialOwner? {
        try read { connection in
            try connection.query(Self.credentialWithOwnerSQL, [.blob(id)]).first.map { row in
                CredentialOwner(credential: credentialRow(row), user: userRow(Array(row[15..<19])),
                                nostrKey: row[19] == .null ? nil : nostrKeyRow(Array(row[19...])))
            }
        }
    }

    /// The passkey (columns 0–14), its user (15–18), the user's key (19–25, NULL when none).
    private static let credentialWithOwnerSQL = """
        SELECT \(prefixed("c", credentialColumns)), \(prefixed("u", userColumns)), \(prefixed("k", nostrKeyColumns))
        FROM credentials c JOIN users u ON u.id = c.user_id LEFT JOIN nostr_keys k ON k.user_id = u.id
        WHERE c.id = ?
        """

    /// `t.x, t.y, …` for the columns `x, y, …`.
    private static func prefixed(_ table: String, _ columns: String) -> String {
        columns.split(separator: ",").map { "\(table).\($0.trimmingCharacters(in: .whitespacesAndNewlines))" }
            .joined(separator: ", ")
    }

    public func credentials(ofUser userID: String) async throws -> [CredentialRecord] {
        try read { connection in
            try connection.query("SELECT \(Self.credentialColumns) FROM credentials WHERE user_id = ? ORDER BY created_at",
                                 [.text(userID)]).map(credentialRow)
        }
    }

    public func deleteCredential(id: [UInt8], ofUser userID: String) async throws -> Bool {
        try write {
            try connection.transaction {
                let count = try connection.query("SELECT count(*) FROM credentials WHERE user_id = ?", [.text(userID)]).first?.first?.int ?? 0
                guard try connection.query("SELECT 1 FROM credentials WHERE id = ? AND user_id = ?",
                                           [.blob(id), .text(userID)]).first != nil else { return false }
                guard count > 1 else { throw StoreError.conflict }
                let sealed = try connection.query("SELECT passkey_sealed FROM nostr_keys WHERE user_id = ?", [.text(userID)]).first?.first?.bool ?? false
                if sealed {
                    let others = try connection.query("SELECT count(*) FROM key_wraps WHERE user_id = ? AND credential_id != ?",
                                                      [.text(userID), .blob(id)]).first?.first?.int ?? 0
                    guard others > 0 else { throw StoreError.lastSealingPasskey }
                }
                try connection.query("DELETE FROM credentials WHERE id = ? AND user_id = ?", [.blob(id), .text(userID)])
                try connection.query("DELETE FROM sessions WHERE credential_id = ?", [.blob(id)])
                return true
            }
        }
    }

    public func renameCredential(id: [UInt8], ofUser userID: String, name: String?) async throws -> Bool {
        try write {
            try connection.query("UPDATE credentials SET name = ? WHERE id = ? AND user_id = ?",
                                 [name.map(SQLValue.text) ?? .null, .blob(id), .text(userID)])
            return connection.changes == 1
        }
    }

    public func countUsersAndCredentials() async throws -> (users: Int, credentials: Int) {
        try read { connection in
            let users = try connection.query("SELECT count(*) FROM users").first?.first?.int ?? 0
            let credentials = try connection.query("SELECT count(*) FROM credentials").first?.first?.int ?? 0
            return (Int(users), Int(credentials))
        }
    }

    // MARK: Challenges

    public func insertChallenge(_ c: ChallengeRecord, now: Date, maxPerClient: Int) async throws {
        try challenges.insert(c, now: now, maxPerClient: maxPerClient)
    }

    public func sweepExpired(now: Date, limit: Int) async throws -> Int {
        let swept = challenges.sweep(now: now, limit: limit)
        return try write {
            var removed = swept
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

    // MARK: Sessions

    public func session(tokenHash: [UInt8], now: Date) async throws -> SessionRecord? {
        try read { connection in
            try connection.query(
                """
                SELECT token_hash, user_id, created_at, expires_at, unlocked_until, credential_id, data_key
                FROM sessions WHERE token_hash = ? AND expires_at > ?
                """,
                [.blob(tokenHash), .date(now)]
            ).first.map { r in
                SessionRecord(tokenHash: r[0].blob ?? [], userID: r[1].text ?? "", createdAt: r[2].date ?? .distantPast,
                              expiresAt: r[3].date ?? .distantPast, unlockedUntil: r[4].date, credentialID: r[5].blob,
                              dataKey: r[6].blob)
            }
        }
    }

    public func lockAllSessions() async throws -> Int {
        try write {
            try connection.query("UPDATE sessions SET unlocked_until = NULL, data_key = NULL WHERE unlocked_until IS NOT NULL OR data_key IS NOT NULL")
            return connection.changes
        }
    }

    public func unlockSession(tokenHash: [UInt8], until: Date, dataKey: [UInt8]?) async throws -> Bool {
        try write {
            try connection.query("UPDATE sessions SET unlocked_until = ?, data_key = ? WHERE token_hash = ?",
                                 [.date(until), dataKey.map(SQLValue.blob) ?? .null, .blob(tokenHash)])
            return connection.changes == 1
        }
    }

    public func hasUnlockedSession(ofUser userID: String, now: Date) async throws -> Bool {
        try read { connection in
            try !connection.query("SELECT 1 FROM sessions WHERE user_id = ? AND unlocked_until > ? AND expires_at > ? LIMIT 1",
                                  [.text(userID), .date(now), .date(now)]).isEmpty
        }
    }

    public func deleteSessions(ofUser userID: String) async throws {
        try write {
            try connection.query("DELETE FROM sessions WHERE user_id = ?", [.text(userID)])
        }
    }

    public func deleteSession(tokenHash: [UInt8]) async throws {
        try write {
            try connection.query("DELETE FROM sessions WHERE token_hash = ?", [.blob(tokenHash)])
        }
    }

    private func insertSession(_ s: SessionRecord) throws {
        // At most `maxSessionsPerUser`: the oldest ones end first.
        try connection.query(
            """
            DELETE FROM sessions WHERE token_hash IN
                (SELECT token_hash FROM sessions WHERE user_id = ? ORDER BY created_at DESC LIMIT -1 OFFSET ?)
            """, [.text(s.userID), .int(Int64(max(0, maxSessionsPerUser - 1)))])
        try connection.query(
            """
            INSERT INTO sessions (token_hash, user_id, created_at, expires_at, unlocked_until, credential_id, data_key)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """,
            [.blob(s.tokenHash), .text(s.userID), .date(s.createdAt), .date(s.expiresAt), .date(s.unlockedUntil),
             s.credentialID.map(SQLValue.blob) ?? .null, s.dataKey.map(SQLValue.blob) ?? .null])
    }

    // MARK: Multi-row writes

    public func completeRegistration(user: UserRecord, createUser: Bool, nostrKey: NostrKeyRecord?,
                                     credential c: CredentialRecord, session: SessionRecord, wrap: KeyWrapRecord?) async throws {
        try write {
            try connection.transaction {
                if createUser {
                    do {
                        try connection.query("INSERT INTO users (id, username, is_anonymous, created_at) VALUES (?, ?, ?, ?)",
                                             [.text(user.id), .text(user.username), .bool(user.isAnonymous), .date(user.createdAt)])
                    } catch StoreError.conflict { throw StoreError.usernameTaken }
                }
                if let nostrKey { try insertNostrKey(nostrKey, orIgnore: false) }
                do {
                    try connection.query(
                        "INSERT INTO credentials (\(Self.credentialColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [.blob(c.id), .text(c.userID), .blob(c.publicKey), .int(Int64(c.algorithm)), .int(Int64(c.signCount)),
                         .text(c.transports.joined(separator: ",")), .blob(c.aaguid), .text(c.attestationFormat),
                         .bool(c.backupEligible), .bool(c.backupState), .date(c.createdAt), .date(c.lastUsedAt),
                         .bool(c.attestationTrusted), c.name.map(SQLValue.text) ?? .null, c.createdOn.map(SQLValue.text) ?? .null])
                } catch StoreError.conflict { throw StoreError.credentialExists }
                if let wrap { try insertKeyWrap(wrap) }
                try insertSession(session)
            }
        }
    }

    public func completeAuthentication(credentialID: [UInt8], expectedSignCount: UInt32, newSignCount: UInt32,
                                       backupState: Bool, usedAt: Date, session: SessionRecord) async throws {
        try write {
            try connection.transaction {
                try connection.query(
                    "UPDATE credentials SET sign_count = ?, backup_state = ?, last_used_at = ? WHERE id = ? AND sign_count = ?",
                    [.int(Int64(newSignCount)), .bool(backupState), .date(usedAt), .blob(credentialID), .int(Int64(expectedSignCount))])
                guard connection.changes == 1 else { throw StoreError.conflict }
                try insertSession(session)
            }
        }
    }

    // MARK: Nostr keys

    private static let nostrKeyColumns = "user_id, pubkey, version, nonce, sealed, updated_at, passkey_sealed"

    /// Also read with the key (8th column): whether the user has data-key wraps.
    private static let hasWrapsColumn = "EXISTS (SELECT 1 FROM key_wraps w WHERE w.user_id = nostr_keys.user_id)"

    private func nostrKeyRow(_ r: [SQLValue]) -> NostrKeyRecord {
        var record = NostrKeyRecord(userID: r[0].text ?? "", pubkey: r[1].text ?? "", version: Int(r[2].int ?? 0),
                                    nonce: r[3].blob ?? [], sealed: r[4].blob ?? [], updatedAt: r[5].date ?? .distantPast,
                                    passkeySealed: r[6].bool)
        if r.count > 7 { record.hasWraps = r[7].bool }
        return record
    }

    private func insertNostrKey(_ k: NostrKeyRecord, orIgnore: Bool) throws {
        try connection.query(
            "INSERT \(orIgnore ? "OR IGNORE " : "")INTO nostr_keys (\(Self.nostrKeyColumns)) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [.text(k.userID), .text(k.pubkey), .int(Int64(k.version)), .blob(k.nonce), .blob(k.sealed), .date(k.updatedAt),
             .bool(k.passkeySealed)])
    }

    public func nostrKey(ofUser userID: String) async throws -> NostrKeyRecord? {
        try read { connection in
            try connection.query("SELECT \(Self.nostrKeyColumns), \(Self.hasWrapsColumn) FROM nostr_keys WHERE user_id = ?",
                                 [.text(userID)]).first.map(nostrKeyRow)
        }
    }

    public func insertNostrKeyIfAbsent(_ record: NostrKeyRecord) async throws -> NostrKeyRecord {
        try write {
            try connection.transaction {
                try insertNostrKey(record, orIgnore: true)
                // Read back on the writer: a reader would not see this transaction.
                guard let stored = try connection.query("SELECT \(Self.nostrKeyColumns) FROM nostr_keys WHERE user_id = ?",
                                                        [.text(record.userID)]).first.map(nostrKeyRow) else {
                    throw StoreError.notFound
                }
                return stored
            }
        }
    }

    public func replaceNostrKey(_ k: NostrKeyRecord, expectedVersion: Int) async throws {
        try write { try replaceKey(k, expectedVersion: expectedVersion) }
    }

    private func replaceKey(_ k: NostrKeyRecord, expectedVersion: Int) throws {
        try connection.query(
            """
            UPDATE nostr_keys SET pubkey = ?, version = ?, nonce = ?, sealed = ?, updated_at = ?, passkey_sealed = ?
            WHERE user_id = ? AND version = ?
            """,
            [.text(k.pubkey), .int(Int64(k.version)), .blob(k.nonce), .blob(k.sealed), .date(k.updatedAt),
             .bool(k.passkeySealed), .text(k.userID), .int(Int64(expectedVersion))])
        guard connection.changes == 1 else { throw StoreError.conflict }
    }

    // MARK: Key wraps

    public func keyWraps(ofUser userID: String) async throws -> [KeyWrapRecord] {
        try read { connection in
            try connection.query("SELECT user_id, credential_id, wrapped, created_at, salt FROM key_wraps WHERE user_id = ? ORDER BY created_at",
                                 [.text(userID)]).map { r in
                KeyWrapRecord(userID: r[0].text ?? "", credentialID: r[1].blob ?? [], wrapped: r[2].blob ?? [],
                              createdAt: r[3].date ?? .distantPast, salt: r[4].blob ?? [])
            }
        }
    }

    private func insertKeyWrap(_ w: KeyWrapRecord) throws {
        try connection.query(
            "INSERT OR REPLACE INTO key_wraps (user_id, credential_id, wrapped, created_at, salt) VALUES (?, ?, ?, ?, ?)",
            [.text(w.userID), .blob(w.credentialID), .blob(w.wrapped), .date(w.createdAt), w.salt.isEmpty ? .null : .blob(w.salt)])
    }

    public func putKeyWrap(_ w: KeyWrapRecord) async throws -> Bool {
        try write {
            try connection.transaction {
                let sealed = try connection.query("SELECT passkey_sealed FROM nostr_keys WHERE user_id = ?", [.text(w.userID)])
                    .first?.first?.bool ?? false
                let owned = try connection.query("SELECT 1 FROM credentials WHERE id = ? AND user_id = ?",
                                                 [.blob(w.credentialID), .text(w.userID)]).first != nil
                guard sealed, owned else { return false }
                try insertKeyWrap(w)
                return true
            }
        }
    }

    public func changeKeyProtection(_ k: NostrKeyRecord, expectedVersion: Int, wraps: [KeyWrapRecord],
                                    keepingSession: [UInt8]?, sessionDataKey: [UInt8]?, bunkerSigner: BunkerSignerRecord?) async throws {
        try write {
            try connection.transaction {
                try replaceKey(k, expectedVersion: expectedVersion)
                if let bunkerSigner {
                    let old = try connection.query("SELECT pubkey FROM bunker_signers WHERE user_id = ?", [.text(k.userID)]).first?.first?.text
                    try connection.query("DELETE FROM bunker_signers WHERE user_id = ?", [.text(k.userID)])
                    try insertSigner(bunkerSigner, orIgnore: false)
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
                    try connection.query("UPDATE sessions SET data_key = ? WHERE token_hash = ? AND user_id = ?",
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
            try connection.query("SELECT \(Self.nostrKeyColumns) FROM nostr_keys ORDER BY user_id").map(nostrKeyRow)
        }
    }

    public func rewrapNostrKeys(_ records: [NostrKeyRecord], bunkerSigners: [BunkerSignerRecord], masterKeyCheck: [UInt8]) async throws {
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
                    try connection.query("UPDATE bunker_signers SET nonce = ?, sealed = ? WHERE user_id = ? AND pubkey = ?",
                                         [.blob(s.nonce), .blob(s.sealed), .text(s.userID), .text(s.pubkey)])
                    guard connection.changes == 1 else { throw StoreError.conflict }
                }
                try connection.query("INSERT OR REPLACE INTO meta (name, value) VALUES ('master_key_check', ?)", [.blob(masterKeyCheck)])
            }
        }
    }

    // MARK: Meta

    public func metaValue(_ name: String) async throws -> [UInt8]? {
        try read { connection in
            try connection.query("SELECT value FROM meta WHERE name = ?", [.text(name)]).first?.first?.blob
        }
    }

    public func setMetaValue(_ name: String, _ value: [UInt8]) async throws {
        try write {
            try connection.query("INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", [.text(name), .blob(value)])
        }
    }

    public func setMetaValueIfAbsent(_ name: String, _ value: [UInt8]) async throws -> [UInt8] {
        try write {
            try connection.query("INSERT OR IGNORE INTO meta (name, value) VALUES (?, ?)", [.text(name), .blob(value)])
            return try connection.query("SELECT value FROM meta WHERE name = ?", [.text(name)]).first?.first?.blob ?? value
        }
    }

    // MARK: Audit log

    @discardableResult
    public func appendAudit(_ e: AuditRecord) async throws -> Int64 {
        try write {
            try connection.query(
                """
                INSERT INTO audit_log (user_id, at, client, transport, method, kind, event_id, outcome, code, receipt)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id
                """,
                [.text(e.userID), .date(e.at), .text(e.client), .text(e.transport), .text(e.method),
                 e.kind.map { .int(Int64($0)) } ?? .null, e.eventID.map(SQLValue.text) ?? .null, .text(e.outcome),
                 e.code.map(SQLValue.text) ?? .null, e.receipt.map(SQLValue.text) ?? .null]
            ).first?.first?.int ?? 0
        }
    }

    private static let auditColumns = "id, user_id, at, client, transport, method, kind, event_id, outcome, code, receipt"

    private func auditRow(_ r: [SQLValue]) -> AuditRecord {
        AuditRecord(id: r[0].int ?? 0, userID: r[1].text ?? "", at: r[2].date ?? .distantPast, client: r[3].text ?? "",
                    transport: r[4].text ?? "", method: r[5].text ?? "", kind: r[6].int.map { Int($0) },
                    eventID: r[7].text, outcome: r[8].text ?? "", code: r[9].text, receipt: r[10].text)
    }

    public func auditEntries(ofUser userID: String, before: Int64?, limit: Int) async throws -> [AuditRecord] {
        try read { connection in
            try connection.query(
                "SELECT \(Self.auditColumns) FROM audit_log WHERE user_id = ? AND id < ? ORDER BY id DESC LIMIT ?",
                [.text(userID), .int(before ?? Int64.max), .int(Int64(max(0, limit)))]).map(auditRow)
        }
    }

    public func auditEntry(id: Int64, ofUser userID: String) async throws -> AuditRecord? {
        try read { connection in
            try connection.query("SELECT \(Self.auditColumns) FROM audit_log WHERE id = ? AND user_id = ?",
                                 [.int(id), .text(userID)]).first.map(auditRow)
        }
    }

    // MARK: Pending requests and grants

    private static let requestColumns = """
        id, user_id, requester, client, transport, method, kind, nonce, payload, confirmation_nonce, created_at, expires_at, state
        """

    private func requestRow(_ r: [SQLValue]) -> PendingRequestRecord {
        PendingRequestRecord(id: r[0].text ?? "", userID: r[1].text, requester: r[2].text ?? "", client: r[3].text ?? "",
                             transport: r[4].text ?? "", method: r[5].text ?? "", kind: r[6].int.map { Int($0) },
                             nonce: r[7].blob ?? [], payload: r[8].blob ?? [], confirmationNonce: r[9].blob,
                             createdAt: r[10].date ?? .distantPast, expiresAt: r[11].date ?? .distantPast,
                             state: r[12].text ?? "")
    }

    public func insertPendingRequest(_ q: PendingRequestRecord, now: Date, maxPending: Int) async throws {
        try write {
            try connection.transaction {
                let owner = q.userID ?? q.requester
                let live = try connection.query(
                    """
                    SELECT count(*) FROM (SELECT 1 FROM signer_requests
                    WHERE (user_id = ? OR requester = ?) AND client = ? AND state = 'pending' AND expires_at > ? LIMIT ?)
                    """, [.text(owner), .text(owner), .text(q.client), .date(now), .int(Int64(maxPending))]).first?.first?.int ?? 0
                guard live < maxPending else { throw StoreError.limitReached }
                try connection.query(
                    "INSERT INTO signer_requests (\(Self.requestColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [.text(q.id), q.userID.map(SQLValue.text) ?? .null, .text(q.requester), .text(q.client), .text(q.transport),
                     .text(q.method), q.kind.map { .int(Int64($0)) } ?? .null, .blob(q.nonce), .blob(q.payload),
                     q.confirmationNonce.map(SQLValue.blob) ?? .null, .date(q.createdAt), .date(q.expiresAt), .text(q.state)])
            }
        }
    }

    public func claimPendingRequest(id: String, userID: String, now: Date) async throws -> PendingRequestRecord? {
        try write {
            try connection.transaction {
                try connection.query(
                    "UPDATE signer_requests SET user_id = ? WHERE id = ? AND user_id IS NULL AND state = 'pending' AND expires_at > ?",
                    [.text(userID), .text(id), .date(now)])
                return try connection.query(
                    "SELECT \(Self.requestColumns) FROM signer_requests WHERE id = ? AND user_id = ? AND state = 'pending' AND expires_at > ?",
                    [.text(id), .text(userID), .date(now)]).first.map(requestRow)
            }
        }
    }

    public func setConfirmationNonce(id: String, userID: String, nonce: [UInt8], now: Date) async throws -> Bool {
        try write {
            try connection.query(
                "UPDATE signer_requests SET confirmation_nonce = ? WHERE id = ? AND user_id = ? AND state = 'pending' AND expires_at > ?",
                [.blob(nonce), .text(id), .text(userID), .date(now)])
            return connection.changes == 1
        }
    }

    public func decidePendingRequest(id: String, userID: String, state: String, now: Date) async throws -> Bool {
        try write {
            try connection.query(
                "UPDATE signer_requests SET state = ? WHERE id = ? AND user_id = ? AND state = 'pending' AND expires_at > ?",
                [.text(state), .text(id), .text(userID), .date(now)])
            return connection.changes == 1
        }
    }

    public func pendingRequests(ofUser userID: String, now: Date, limit: Int) async throws -> [PendingRequestRecord] {
        try read { connection in
            try connection.query(
                """
                SELECT \(Self.requestColumns) FROM signer_requests
                WHERE user_id = ? AND state = 'pending' AND expires_at > ? ORDER BY created_at, id LIMIT ?
                """, [.text(userID), .date(now), .int(Int64(limit))]).map(requestRow)
        }
    }

    public func pendingRequestCount(now: Date) async throws -> Int {
        try read { connection in
            Int(try connection.query("SELECT count(*) FROM signer_requests WHERE state = 'pending' AND expires_at > ?",
                                     [.date(now)]).first?.first?.int ?? 0)
        }
    }

    public func insertGrant(_ g: GrantRecord) async throws {
        try write {
            try connection.query(
                "INSERT INTO grants (id, user_id, client, method, kind, allow, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [.text(g.id), .text(g.userID), .text(g.client), .text(g.method), g.kind.map { .int(Int64($0)) } ?? .null,
                 .bool(g.allow), .date(g.createdAt), .date(g.expiresAt)])
        }
    }

    public func grants(ofUser userID: String, now: Date) async throws -> [GrantRecord] {
        try read { connection in
            try connection.query(
                """
                SELECT id, user_id, client, method, kind, allow, created_at, expires_at FROM grants
                WHERE user_id = ? AND (expires_at IS NULL OR expires_at > ?) ORDER BY created_at DESC, rowid DESC LIMIT 1000
                """, [.text(userID), .date(now)]
            ).map { r in
                GrantRecord(id: r[0].text ?? "", userID: r[1].text ?? "", client: r[2].text ?? "", method: r[3].text ?? "",
                            kind: r[4].int.map { Int($0) }, allow: r[5].bool, createdAt: r[6].date ?? .distantPast, expiresAt: r[7].date)
            }
        }
    }

    public func deleteGrant(id: String, ofUser userID: String) async throws -> Bool {
        try write {
            try connection.query("DELETE FROM grants WHERE id = ? AND user_id = ?", [.text(id), .text(userID)])
            return connection.changes == 1
        }
    }

    public func updateSignCount(credentialID: [UInt8], expectedSignCount: UInt32, newSignCount: UInt32, backupState: Bool,
                                usedAt: Date) async throws {
        try write {
            try connection.query(
                "UPDATE credentials SET sign_count = ?, backup_state = ?, last_used_at = ? WHERE id = ? AND sign_count = ?",
                [.int(Int64(newSignCount)), .bool(backupState), .date(usedAt), .blob(credentialID), .int(Int64(expectedSignCount))])
            guard connection.changes == 1 else { throw StoreError.conflict }
        }
    }

    public func healthCheck() async throws {
        try read { connection in
            try connection.query("SELECT 1")
        }
    }

    // MARK: NIP-46

    private static let signerColumns = "user_id, pubkey, nonce, sealed, secret_hash, secret_expires_at, created_at, passkey_sealed"

    private func signerRow(_ r: [SQLValue]) -> BunkerSignerRecord {
        BunkerSignerRecord(userID: r[0].text ?? "", pubkey: r[1].text ?? "", nonce: r[2].blob ?? [], sealed: r[3].blob ?? [],
                           secretHash: r[4].blob, secretExpiresAt: r[5].date, createdAt: r[6].date ?? .distantPast,
                           passkeySealed: r[7].bool)
    }

    private func insertSigner(_ s: BunkerSignerRecord, orIgnore: Bool) throws {
        try connection.query(
            "INSERT \(orIgnore ? "OR IGNORE " : "")INTO bunker_signers (\(Self.signerColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [.text(s.userID), .text(s.pubkey), .blob(s.nonce), .blob(s.sealed), s.secretHash.map(SQLValue.blob) ?? .null,
             .date(s.secretExpiresAt), .date(s.createdAt), .bool(s.passkeySealed)])
    }

    public func bunkerSigner(ofUser userID: String) async throws -> BunkerSignerRecord? {
        try read { connection in
            try connection.query("SELECT \(Self.signerColumns) FROM bunker_signers WHERE user_id = ?", [.text(userID)]).first.map(signerRow)
        }
    }

    public func allBunkerSigners() async throws -> [BunkerSignerRecord] {
        try read { connection in
            try connection.query("SELECT \(Self.signerColumns) FROM bunker_signers ORDER BY user_id").map(signerRow)
        }
    }

    public func bunkerSigner(pubkey: String) async throws -> BunkerSignerRecord? {
        try read { connection in
            try connection.query("SELECT \(Self.signerColumns) FROM bunker_signers WHERE pubkey = ?", [.text(pubkey)]).first.map(signerRow)
        }
    }

    public func insertBunkerSignerIfAbsent(_ s: BunkerSignerRecord) async throws -> BunkerSignerRecord {
        try write {
            try insertSigner(s, orIgnore: true)
            guard let stored = try connection.query("SELECT \(Self.signerColumns) FROM bunker_signers WHERE user_id = ?",
                                                    [.text(s.userID)]).first.map(signerRow) else { throw StoreError.notFound }
            return stored
        }
    }

    public func setBunkerSecret(userID: String, secretHash: [UInt8]?, expiresAt: Date?) async throws -> Bool {
        try write {
            try connection.query("UPDATE bunker_signers SET secret_hash = ?, secret_expires_at = ? WHERE user_id = ?",
                                 [secretHash.map(SQLValue.blob) ?? .null, .date(expiresAt), .text(userID)])
            return connection.changes == 1
        }
    }

    public func consumeBunkerSecret(userID: String, secretHash: [UInt8], now: Date) async throws -> Bool {
        try write {
            try connection.query(
                """
                UPDATE bunker_signers SET secret_hash = NULL, secret_expires_at = NULL
                WHERE user_id = ? AND secret_hash = ? AND secret_expires_at > ?
                """, [.text(userID), .blob(secretHash), .date(now)])
            return connection.changes == 1
        }
    }

    private static let clientColumns = "user_id, client_pubkey, name, url, perms, created_at, last_used_at, relays"

    private func clientRow(_ r: [SQLValue]) -> BunkerClientRecord {
        BunkerClientRecord(userID: r[0].text ?? "", clientPubkey: r[1].text ?? "", name: r[2].text, url: r[3].text,
                           perms: r[4].text ?? "", createdAt: r[5].date ?? .distantPast, lastUsedAt: r[6].date,
                           relays: (r[7].text ?? "").split(separator: "\n").map(String.init))
    }

    public func bunkerClients(ofUser userID: String) async throws -> [BunkerClientRecord] {
        try read { connection in
            try connection.query("SELECT \(Self.clientColumns) FROM bunker_clients WHERE user_id = ? ORDER BY created_at, client_pubkey",
                                 [.text(userID)]).map(clientRow)
        }
    }

    public func bunkerClient(userID: String, clientPubkey: String) async throws -> BunkerClientRecord? {
        try read { connection in
            try connection.query("SELECT \(Self.clientColumns) FROM bunker_clients WHERE user_id = ? AND client_pubkey = ?",
                                 [.text(userID), .text(clientPubkey)]).first.map(clientRow)
        }
    }

    public func putBunkerClient(_ c: BunkerClientRecord) async throws {
        try write {
            try connection.query(
                "INSERT OR REPLACE INTO bunker_clients (\(Self.clientColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [.text(c.userID), .text(c.clientPubkey), c.name.map(SQLValue.text) ?? .null, c.url.map(SQLValue.text) ?? .null,
                 .text(c.perms), .date(c.createdAt), .date(c.lastUsedAt), .text(c.relays.joined(separator: "\n"))])
        }
    }

    public func touchBunkerClient(userID: String, clientPubkey: String, at date: Date) async throws {
        try write {
            try connection.query("UPDATE bunker_clients SET last_used_at = ? WHERE user_id = ? AND client_pubkey = ?",
                                 [.date(date), .text(userID), .text(clientPubkey)])
        }
    }

    public func deleteBunkerClient(userID: String, clientPubkey: String) async throws -> Bool {
        try write {
            try connection.query("DELETE FROM bunker_clients WHERE user_id = ? AND client_pubkey = ?", [.text(userID), .text(clientPubkey)])
            return connection.changes == 1
        }
    }

    public func activeBunkerSigners(now: Date, limit: Int) async throws -> [String] {
        try read { connection in
            try connection.query(
                """
                SELECT pubkey FROM bunker_signers s
                WHERE secret_expires_at > ? OR EXISTS (SELECT 1 FROM bunker_clients c WHERE c.user_id = s.user_id)
                ORDER BY pubkey LIMIT ?
                """, [.date(now), .int(Int64(limit))]).compactMap { $0[0].text }
        }
    }

    public func nostrConnectClients() async throws -> [BunkerClientRecord] {
        try read { connection in
            try connection.query("SELECT \(Self.clientColumns) FROM bunker_clients WHERE relays != '' ORDER BY created_at").map(clientRow)
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
            try connection.query("SELECT id, event FROM bunker_replies WHERE created_at >= ? ORDER BY id LIMIT ?",
                                 [.date(since), .int(Int64(limit))]).map { BunkerReplyRecord(id: $0[0].int ?? 0, event: $0[1].text ?? "") }
        }
    }
}
