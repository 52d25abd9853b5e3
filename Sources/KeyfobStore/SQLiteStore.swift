import Foundation

/// The embedded store: one SQLite file in WAL mode. One writer connection behind a lock (SQLite
/// allows one writer at a time anyway, so "database is locked" cannot happen between requests) and
/// a few read-only connections that WAL lets read beside it.
///
/// Calls run on the caller's thread, under a lock held only for the statement or transaction —
/// but for sign-ins' writes and the signer's audit entries, which `GroupCommit` commits in
/// groups on a thread of its own.
/// An actor here cost a hop (a context switch) per call, queued every read behind every write, and
/// still blocked a thread of the concurrency pool while SQLite ran. Nothing slow runs under these
/// locks: the WAL is not synced per commit (synchronous=NORMAL) and checkpoints run on their own
/// connection and thread (`Checkpointer`).
public final class SQLiteStore: KeyfobStore, @unchecked Sendable {
    /// Sessions a user may hold; signing in once more ends the oldest.
    let maxSessionsPerUser: Int
    /// Used only under `writerLock`. Write bodies are synchronous and call no public method,
    /// so the lock is never taken twice on one thread.
    let connection: SQLiteConnection
    let writerLock = NSLock()
    let readers: [(lock: NSLock, connection: SQLiteConnection)]
    let checkpointer: Checkpointer?
    /// Pending ceremonies: in memory, never in the file (`ChallengeTable`).
    let challenges: ChallengeTable
    /// Sign-ins' writes and audit entries, committed in groups off the callers' threads (nil in
    /// memory: tests).
    private(set) var groupCommit: GroupCommit?

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
        if !inMemory {
            // Unowned: the thread must not keep the store alive (its deinit stops the thread).
            groupCommit = GroupCommit { [unowned self] body in try write { try body(self.connection) } }
        }
    }

    deinit {
        groupCommit?.stop()
        checkpointer?.stop()
    }

    /// Runs a write (or a read that must see the writer's own transaction) on the writer.
    @discardableResult
    func write<T>(_ body: () throws -> T) throws -> T {
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
    func read<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
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
        // 12: Polkadot. Substrate accounts (secrets sealed), dapps' signing requests with their
        // outcome, and the chain metadata each dapp offered.
        """
        CREATE TABLE substrate_accounts (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            key_type TEXT NOT NULL,
            public_key BLOB NOT NULL,
            name TEXT NOT NULL,
            network INTEGER NOT NULL,
            nonce BLOB NOT NULL,
            sealed BLOB NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX substrate_accounts_user ON substrate_accounts(user_id, created_at);
        CREATE TABLE polkadot_requests (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            origin TEXT NOT NULL,
            transport TEXT NOT NULL,
            msg_type TEXT NOT NULL,
            request TEXT NOT NULL,
            state TEXT NOT NULL,
            result TEXT,
            confirmation_nonce BLOB,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL
        );
        CREATE INDEX polkadot_requests_user ON polkadot_requests(user_id, state, expires_at);
        CREATE TABLE polkadot_metadata (
            user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            origin TEXT NOT NULL,
            genesis_hash TEXT NOT NULL,
            spec_version INTEGER NOT NULL,
            definition TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (user_id, origin, genesis_hash)
        );
        """,
        // 13: whether a passkey's authenticator can seal a key (PRF), as its browser said at creation.
        "ALTER TABLE credentials ADD COLUMN prf_capable INTEGER;",
        // 14: no index of sessions by passkey. Every sign-in wrote a page of it at a random place;
        // the one reader, removing a passkey, finds the sessions through its account's (≤ 50).
        "DROP INDEX sessions_credential;",
        // 15: a Substrate account may accept transactions Keyfob cannot check (off by default).
        "ALTER TABLE substrate_accounts ADD COLUMN accepts_unverified INTEGER NOT NULL DEFAULT 0;",
        // 16: what holds a session (the browser extension's is `extension`; nil for a sign-in).
        "ALTER TABLE sessions ADD COLUMN kind TEXT;",
        // 17: each runtime's metadata stored once, by its SHA-256, and shared by the rows naming
        // it. The rows kept before held it inline (up to 4 MiB each): they go, and a dapp whose
        // `metadata.list` no longer names its chain provides it again.
        """
        DELETE FROM polkadot_metadata;
        ALTER TABLE polkadot_metadata ADD COLUMN runtime_hash BLOB;
        CREATE INDEX polkadot_metadata_runtime ON polkadot_metadata(runtime_hash) WHERE runtime_hash IS NOT NULL;
        CREATE TABLE polkadot_runtimes (hash BLOB PRIMARY KEY, size INTEGER NOT NULL, bytes BLOB NOT NULL);
        """,
        // 18: how a Substrate secret is protected (0: under a key derived from the nostr key, as
        // every one was before; the server moves them to their own purpose key).
        "ALTER TABLE substrate_accounts ADD COLUMN protection INTEGER NOT NULL DEFAULT 0;",
        // 19: sign-in challenges answered (`UsedChallenge`): the challenge is never stored, so its
        // single use is this row, written in the sign-in's own transaction and kept until it expires.
        """
        CREATE TABLE used_challenges (hash BLOB PRIMARY KEY, expires_at REAL NOT NULL) WITHOUT ROWID;
        CREATE INDEX used_challenges_expiry ON used_challenges(expires_at);
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
}
