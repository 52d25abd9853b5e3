import Foundation
import HeapModule

/// Pending ceremonies for the SQLite store, in memory: they last a minute, die with the process
/// anyway, and one instance owns a SQLite file, so they never needed the database (a TEMP table
/// cost a statement, its index upkeep and the writer's lock per options request). Same contract
/// as PostgreSQL's table (the contract tests run on both): single use, consumed atomically, at
/// most `maxPerClient` live ones per client, swept in bounded batches — plus a cap on all live
/// ones together, since a crowd of addresses could otherwise fill memory.
///
/// Compact on purpose: a login burst holds a minute of ceremonies, hundreds of thousands. Keys are
/// the challenge's bytes inline (no array per entry), sign-in entries carry no heap object at all
/// (their `key` is short enough for an inline string), registration details go in one box, and
/// each client is a counter rather than a list. 0.25–0.4 KB per entry (depending on where the
/// dictionary is between doublings) against 0.65 KB as records in a dictionary, measured with
/// 200,000 entries; `ChallengeTableTests.entriesStayCompact` pins the layout.
final class ChallengeTable: @unchecked Sendable {
    /// Challenges Keyfob makes are 32 random bytes; anything up to that length fits inline.
    static let maxChallengeLength = 32

    /// The challenge's bytes, inline.
    struct ID: Hashable {
        private var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        private var count: UInt8 = 0

        init?(_ bytes: [UInt8]) {
            guard bytes.count <= ChallengeTable.maxChallengeLength else { return nil }
            count = UInt8(bytes.count)
            bytes.withUnsafeBytes { source in withUnsafeMutableBytes(of: &words) { $0.copyMemory(from: source) } }
        }

        var bytes: [UInt8] {
            withUnsafeBytes(of: words) { Array($0.prefix(Int(count))) }
        }

        static func == (a: ID, b: ID) -> Bool {
            a.words == b.words && a.count == b.count
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(words.0)
            hasher.combine(words.1)
            hasher.combine(words.2)
            hasher.combine(words.3)
            hasher.combine(count)
        }
    }

    /// What a registration adds to a ceremony; sign-ins have none of it.
    private final class Registration {
        let userID: String?, username: String?, isAnonymous: Bool, existingUser: Bool, algorithms: [Int]
        init(_ c: ChallengeRecord) {
            (userID, username, isAnonymous, existingUser, algorithms) = (c.userID, c.username, c.isAnonymous, c.existingUser, c.algorithms)
        }
    }

    private struct Entry {
        var expiresAt: Double
        var key: String
        var clientIP: String?
        var ceremony: ChallengeRecord.Ceremony
        var registration: Registration?

        init(_ c: ChallengeRecord) {
            expiresAt = c.expiresAt.timeIntervalSinceReferenceDate
            key = c.key
            clientIP = c.clientIP
            ceremony = c.ceremony
            let plain = c.userID == nil && c.username == nil && !c.isAnonymous && !c.existingUser && c.algorithms.isEmpty
            registration = plain ? nil : Registration(c)
        }

        func record(_ id: ID) -> ChallengeRecord {
            ChallengeRecord(
                challenge: id.bytes, ceremony: ceremony, key: key, userID: registration?.userID,
                username: registration?.username, isAnonymous: registration?.isAnonymous ?? false,
                existingUser: registration?.existingUser ?? false, algorithms: registration?.algorithms ?? [],
                expiresAt: Date(timeIntervalSinceReferenceDate: expiresAt), clientIP: clientIP)
        }
    }

    private struct Expiry: Comparable {
        let at: Double
        let id: ID
        static func < (a: Expiry, b: Expiry) -> Bool { a.at < b.at }
        static func == (a: Expiry, b: Expiry) -> Bool { a.at == b.at && a.id == b.id }
    }

    /// Expired entries an insert that meets a cap removes at most.
    static let sweepAtCap = 64
    static var entryStride: Int { MemoryLayout<Entry>.stride }

    /// Live ceremonies the table holds at most (expired ones are swept to make room first).
    let capacity: Int
    private let lock = NSLock()
    private var entries: [ID: Entry] = [:]
    /// How many stored entries each client has (expired but unswept ones included).
    private var perClient: [String: Int32] = [:]
    /// Every stored entry by expiry, for the sweep; consumed ones are skipped when reached, or
    /// dropped all at once when they are most of it.
    private var expiries = Heap<Expiry>()

    /// Entries only `mayUseReserve` inserts can take: a tenth of the capacity.
    let reserve: Int

    init(capacity: Int = 250_000) {
        self.capacity = capacity
        reserve = capacity / 10
    }

    var count: Int {
        lock.withLock { entries.count }
    }

    var expiryIndexCount: Int {
        lock.withLock { expiries.count }
    }

    /// Stores `c`. `limitReached` when its client holds `maxPerClient` live ones, `capacityReached`
    /// when the table holds `capacity`.
    func insert(_ c: ChallengeRecord, now: Date, maxPerClient: Int) throws {
        guard let id = ID(c.challenge) else {
            throw StoreError.database("challenges are at most \(Self.maxChallengeLength) bytes")
        }
        let nowValue = now.timeIntervalSinceReferenceDate
        lock.lock()
        defer { lock.unlock() }
        // At a cap, expired entries do not count: the oldest few make room before refusing
        // (a few, so one request's work stays bounded; the sweeper removes the rest).
        if let ip = c.clientIP, Int(perClient[ip] ?? 0) >= maxPerClient {
            removeExpired(now: nowValue, limit: Self.sweepAtCap)
            guard Int(perClient[ip] ?? 0) < maxPerClient else { throw StoreError.limitReached }
        }
        // Strangers fill the table up to `capacity - reserve`; the rest is kept for clients that
        // presented a session or a returning-device cookie, so a flood cannot lock them out.
        let cap = c.mayUseReserve ? capacity : capacity - reserve
        if entries.count >= cap {
            removeExpired(now: nowValue, limit: Self.sweepAtCap)
            guard entries.count < cap else { throw StoreError.capacityReached }
        }
        guard entries.updateValue(Entry(c), forKey: id) == nil else {
            // Challenges are 32 random bytes: a repeat is a bug, never a second ceremony on one value.
            throw StoreError.conflict
        }
        if let ip = c.clientIP { perClient[ip, default: 0] += 1 }
        expiries.insert(Expiry(at: c.expiresAt.timeIntervalSinceReferenceDate, id: id))
    }

    /// Removes and returns the challenge, expired or not (single use).
    func consume(_ value: [UInt8]) -> ChallengeRecord? {
        guard let id = ID(value) else { return nil }
        lock.lock()
        defer { lock.unlock() }
        guard let entry = entries.removeValue(forKey: id) else { return nil }
        forget(entry)
        if expiries.count > 2 * entries.count + 1024 {
            // Mostly consumed entries, waiting for their expiry to be popped: rebuild from the live
            // ones (linear, and at most once per as many consumptions as there are live entries).
            expiries = Heap(entries.lazy.map { Expiry(at: $0.value.expiresAt, id: $0.key) })
        }
        return entry.record(id)
    }

    /// Removes up to `limit` expired challenges; returns how many.
    func sweep(now: Date, limit: Int) -> Int {
        lock.withLock { removeExpired(now: now.timeIntervalSinceReferenceDate, limit: limit) }
    }

    /// Under `lock`.
    @discardableResult
    private func removeExpired(now: Double, limit: Int) -> Int {
        var removed = 0
        while removed < limit, let first = expiries.min, first.at <= now {
            _ = expiries.popMin()
            // Consumed already (or replaced): nothing to remove.
            guard let entry = entries[first.id], entry.expiresAt == first.at else { continue }
            entries[first.id] = nil
            forget(entry)
            removed += 1
        }
        if entries.isEmpty, expiries.isEmpty, entries.capacity > 4096 {
            // After a burst, give the memory back rather than hold its high-water mark forever.
            entries = [:]
            perClient = [:]
        }
        return removed
    }

    private func forget(_ entry: Entry) {
        guard let ip = entry.clientIP, let n = perClient[ip] else { return }
        perClient[ip] = n > 1 ? n - 1 : nil
    }
}
