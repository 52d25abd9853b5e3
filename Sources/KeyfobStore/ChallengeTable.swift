import Foundation
import HeapModule

/// Pending ceremonies for the SQLite store, in memory: they last a minute, die with the process
/// anyway, and one instance owns a SQLite file, so they never needed the database (a TEMP table
/// cost a statement, its index upkeep and the writer's lock per options request). Same contract
/// as PostgreSQL's table (the contract tests run on both): single use, consumed atomically, at
/// most `maxPerClient` live ones per client, swept in bounded batches.
final class ChallengeTable: @unchecked Sendable {
    private struct Expiry: Comparable {
        let at: Date
        let challenge: [UInt8]
        static func < (a: Expiry, b: Expiry) -> Bool { a.at < b.at }
        static func == (a: Expiry, b: Expiry) -> Bool { a.at == b.at && a.challenge == b.challenge }
    }

    private let lock = NSLock()
    private var byValue: [[UInt8]: ChallengeRecord] = [:]
    /// Each client's challenges still stored (at most the cap, after pruning the expired).
    private var byClient: [String: [(challenge: [UInt8], expiresAt: Date)]] = [:]
    /// Every stored challenge by expiry, for the sweep; consumed ones are skipped when reached.
    private var expiries = Heap<Expiry>()

    func insert(_ c: ChallengeRecord, now: Date, maxPerClient: Int) throws {
        lock.lock()
        defer { lock.unlock() }
        if let ip = c.clientIP {
            var mine = byClient[ip] ?? []
            mine.removeAll { $0.expiresAt <= now }
            guard mine.count < maxPerClient else {
                byClient[ip] = mine
                throw StoreError.limitReached
            }
            mine.append((c.challenge, c.expiresAt))
            byClient[ip] = mine
        }
        guard byValue.updateValue(c, forKey: c.challenge) == nil else {
            // Challenges are 32 random bytes: a repeat is a bug, never a second ceremony on one value.
            throw StoreError.conflict
        }
        expiries.insert(Expiry(at: c.expiresAt, challenge: c.challenge))
    }

    /// Removes and returns the challenge, expired or not (single use).
    func consume(_ value: [UInt8]) -> ChallengeRecord? {
        lock.lock()
        defer { lock.unlock() }
        guard let record = byValue.removeValue(forKey: value) else { return nil }
        forget(record)
        return record
    }

    /// Removes up to `limit` expired challenges; returns how many.
    func sweep(now: Date, limit: Int) -> Int {
        lock.lock()
        defer { lock.unlock() }
        var removed = 0
        while removed < limit, let first = expiries.min, first.at <= now {
            _ = expiries.popMin()
            // Consumed already (or replaced): nothing to remove.
            guard let record = byValue[first.challenge], record.expiresAt == first.at else { continue }
            byValue[first.challenge] = nil
            forget(record)
            removed += 1
        }
        return removed
    }

    private func forget(_ record: ChallengeRecord) {
        guard let ip = record.clientIP, var mine = byClient[ip] else { return }
        mine.removeAll { $0.challenge == record.challenge }
        byClient[ip] = mine.isEmpty ? nil : mine
    }
}
