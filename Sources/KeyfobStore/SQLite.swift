import CSQLite
import Foundation

/// SQLite's "copy this buffer now" destructor; the C macro is not imported.
private let SQLITE_TRANSIENT_ = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
/// Extended result codes (macros over other macros, not imported): SQLITE_CONSTRAINT | (n << 8).
private let constraintPrimaryKey: Int32 = 19 | (6 << 8)
private let constraintUnique: Int32 = 19 | (8 << 8)

/// One SQLite connection. Not thread-safe: `SQLiteStore` uses each under its own lock.
final class SQLiteConnection {
    private var db: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]

    init(path: String, readOnly: Bool = false) throws {
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX
        guard sqlite3_open_v2(path, &db, flags, nil) == SQLITE_OK else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close(db)
            throw StoreError.database("cannot open \(path): \(message)")
        }
        sqlite3_busy_timeout(db, 5000)
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close(db)
    }

    var errorMessage: String { String(cString: sqlite3_errmsg(db)) }

    /// Primary result codes that mean the file cannot be written now (a full disk, a read-only or
    /// vanished file, an I/O error, no memory, a lock held too long): the store is unavailable,
    /// which clients see as 503, not a fault in the request or the server.
    static let cannotWrite: Set<Int32> = [SQLITE_FULL, SQLITE_IOERR, SQLITE_READONLY, SQLITE_CANTOPEN, SQLITE_NOMEM, SQLITE_BUSY]

    func execute(_ sql: String) throws {
        var error: UnsafeMutablePointer<CChar>?
        guard sqlite3_exec(db, sql, nil, nil, &error) == SQLITE_OK else {
            let message = error.map { String(cString: $0) } ?? errorMessage
            sqlite3_free(error)
            throw StoreError.database(message)
        }
    }

    /// Runs `sql` with bound values; returns every row as an array of column values.
    /// Statements are prepared once and cached.
    @discardableResult
    func query(_ sql: String, _ values: [SQLValue] = []) throws -> [[SQLValue]] {
        let statement = try prepared(sql)
        defer { sqlite3_reset(statement); sqlite3_clear_bindings(statement) }
        for (i, value) in values.enumerated() {
            let index = Int32(i + 1)
            switch value {
            case .null: sqlite3_bind_null(statement, index)
            case .int(let n): sqlite3_bind_int64(statement, index, n)
            case .real(let d): sqlite3_bind_double(statement, index, d)
            case .text(let s): sqlite3_bind_text(statement, index, s, -1, SQLITE_TRANSIENT_)
            case .blob(let b) where b.isEmpty:
                // An empty array may have no base address, which sqlite3_bind_blob would store as NULL.
                sqlite3_bind_zeroblob(statement, index, 0)
            case .blob(let b):
                b.withUnsafeBytes { _ = sqlite3_bind_blob(statement, index, $0.baseAddress, Int32($0.count), SQLITE_TRANSIENT_) }
            }
        }
        var rows: [[SQLValue]] = []
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else {
                let code = sqlite3_extended_errcode(db)
                if code == constraintUnique || code == constraintPrimaryKey { throw StoreError.conflict }
                throw Self.cannotWrite.contains(code & 0xFF) ? StoreError.unavailable(errorMessage) : StoreError.database(errorMessage)
            }
            var row: [SQLValue] = []
            for column in 0..<sqlite3_column_count(statement) {
                switch sqlite3_column_type(statement, column) {
                case SQLITE_INTEGER: row.append(.int(sqlite3_column_int64(statement, column)))
                case SQLITE_FLOAT: row.append(.real(sqlite3_column_double(statement, column)))
                case SQLITE_TEXT: row.append(.text(String(cString: sqlite3_column_text(statement, column))))
                case SQLITE_BLOB:
                    let count = Int(sqlite3_column_bytes(statement, column))
                    let pointer = sqlite3_column_blob(statement, column)
                    row.append(.blob(count == 0 || pointer == nil ? [] : Array(UnsafeRawBufferPointer(start: pointer, count: count))))
                default: row.append(.null)
                }
            }
            rows.append(row)
        }
        return rows
    }

    var changes: Int { Int(sqlite3_changes(db)) }

    /// Tells `target` after each commit how many pages the WAL holds, in place of SQLite's own
    /// auto-checkpoint (nil: no hook).
    func setWALHook(_ target: Checkpointer?) {
        guard let target else { sqlite3_wal_hook(db, nil, nil); return }
        sqlite3_wal_hook(
            db,
            { context, _, _, pages in
                if let context { Unmanaged<Checkpointer>.fromOpaque(context).takeUnretainedValue().committed(walPages: pages) }
                return SQLITE_OK
            }, Unmanaged.passUnretained(target).toOpaque())
    }

    /// Copies the WAL's frames into the database. Passive: without waiting for, or blocking,
    /// anyone. Restart: also waits for readers to leave the WAL, holding writers back meanwhile, so
    /// the next commit starts the file over. Returns the WAL's size in frames (nil when the
    /// checkpoint could not run).
    @discardableResult
    func checkpoint(restart: Bool) -> Int32? {
        var frames: Int32 = 0
        let mode = restart ? SQLITE_CHECKPOINT_RESTART : SQLITE_CHECKPOINT_PASSIVE
        return sqlite3_wal_checkpoint_v2(db, nil, mode, &frames, nil) == SQLITE_OK ? frames : nil
    }

    /// Runs `body` inside BEGIN IMMEDIATE … COMMIT; rolls back on any error.
    func transaction<T>(_ body: () throws -> T) throws -> T {
        try query("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try query("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    private func prepared(_ sql: String) throws -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK,
            let statement
        else { throw StoreError.database(errorMessage) }
        statements[sql] = statement
        return statement
    }
}

/// Checkpoints the WAL from its own connection and thread, so no request pays for one. SQLite's
/// auto-checkpoint would run inside a commit — under the writer lock, fsync included — every
/// thousand pages; here the writer's commits only signal this thread past its threshold.
///
/// A passive checkpoint copies what it can beside the traffic, but the WAL only starts over when a
/// checkpoint has caught up with the last commit, which steady writes never let it do: the file
/// grew by gigabytes under load. So past four times the threshold the checkpointer restarts the
/// WAL, making writers wait (their busy timeout) for the few milliseconds that takes.
final class Checkpointer: @unchecked Sendable {
    /// WAL pages that start a checkpoint: twice SQLite's default, so a page that several commits
    /// touched (an index's last page, a busy passkey's row) is copied and synced once for more of
    /// them (measured under the login load: fsync's share of the CPU 5.4% → 4.5%, WAL writes 6.4% → 5.2%).
    static let threshold: Int32 = 2000
    private let connection: SQLiteConnection
    private let writer: SQLiteConnection
    private let condition = NSCondition()
    private var pending = false
    private var stopped = false

    init(path: String, writer: SQLiteConnection) throws {
        connection = try SQLiteConnection(path: path)
        // A connection that has read nothing yet does not know the file is in WAL mode, and
        // would take every checkpoint for a no-op.
        try connection.query("SELECT count(*) FROM sqlite_master")
        self.writer = writer
        writer.setWALHook(self)
        let thread = Thread { [self] in run() }
        thread.name = "keyfob-sqlite-checkpoint"
        thread.start()
    }

    /// Called by the writer (under its lock) after each commit.
    func committed(walPages: Int32) {
        guard walPages >= Self.threshold else { return }
        condition.lock()
        pending = true
        condition.signal()
        condition.unlock()
    }

    /// Detaches from the writer and ends the thread (which holds the last reference).
    func stop() {
        writer.setWALHook(nil)
        condition.lock()
        stopped = true
        condition.signal()
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            while !pending && !stopped { condition.wait() }
            let stop = stopped
            pending = false
            condition.unlock()
            if stop { return }
            if let frames = connection.checkpoint(restart: false), frames >= 4 * Self.threshold {
                connection.checkpoint(restart: true)
            }
        }
    }
}

/// A value bound to or read from SQLite.
public enum SQLValue: Equatable {
    case null, int(Int64), real(Double), text(String), blob([UInt8])

    var int: Int64? { if case .int(let n) = self { return n } else { return nil } }
    var real: Double? {
        switch self {
        case .real(let d): return d;
        case .int(let n): return Double(n);
        default: return nil
        }
    }
    var text: String? { if case .text(let s) = self { return s } else { return nil } }
    var blob: [UInt8]? { if case .blob(let b) = self { return b } else { return nil } }
    var date: Date? { real.map(Date.init(timeIntervalSince1970:)) }
    var bool: Bool { int.map { $0 != 0 } ?? false }

    static func date(_ d: Date?) -> SQLValue { d.map { .real($0.timeIntervalSince1970) } ?? .null }
    static func bool(_ b: Bool) -> SQLValue { .int(b ? 1 : 0) }
}

/// A SQLite row read as `StoreRow`: a NULL where a value must be, or a value of another type, throws.
extension Array: StoreRow where Element == SQLValue {
    private func bad(_ i: Int, _ expected: String) -> StoreError {
        .database("column \(i) of a stored row is not \(expected)")
    }
    private func value(_ i: Int) -> SQLValue { i < count ? self[i] : .null }

    public func text(_ i: Int) throws -> String {
        guard case .text(let text) = value(i) else { throw bad(i, "text") }
        return text
    }
    public func optionalText(_ i: Int) throws -> String? {
        if case .null = value(i) { return nil }
        return try text(i)
    }
    public func int(_ i: Int) throws -> Int {
        guard case .int(let n) = value(i), let int = Int(exactly: n) else { throw bad(i, "an integer") }
        return int
    }
    public func optionalInt(_ i: Int) throws -> Int? {
        if case .null = value(i) { return nil }
        return try int(i)
    }
    public func bool(_ i: Int) throws -> Bool { try int(i) != 0 }
    public func bytes(_ i: Int) throws -> [UInt8] {
        guard case .blob(let bytes) = value(i) else { throw bad(i, "bytes") }
        return bytes
    }
    public func optionalBytes(_ i: Int) throws -> [UInt8]? {
        if case .null = value(i) { return nil }
        return try bytes(i)
    }
    public func date(_ i: Int) throws -> Date {
        guard let seconds = value(i).real else { throw bad(i, "a time") }
        return Date(timeIntervalSince1970: seconds)
    }
    public func optionalDate(_ i: Int) throws -> Date? {
        if case .null = value(i) { return nil }
        return try date(i)
    }
    public func optionalBool(_ i: Int) throws -> Bool? {
        if case .null = value(i) { return nil }
        return try bool(i)
    }
}
