import Foundation
import NIOConcurrencyHelpers

/// Token buckets by key (a session, an IP): `rate` per `period`, bursts up to `burst` (default `rate`).
/// In memory, per instance; with several instances each holds its own buckets.
final class RateLimiter: Sendable {
    private struct Bucket { var tokens: Double; var updated: Date }

    private let buckets = NIOLockedValueBox<[String: Bucket]>([:])
    private let capacity: Double
    private let perSecond: Double
    /// Buckets kept at most; full, idle ones are dropped first, so memory stays bounded.
    private let maxKeys: Int

    init(rate: Int, per period: TimeInterval, burst: Int? = nil, maxKeys: Int = 100_000) {
        capacity = Double(burst ?? rate)
        perSecond = Double(rate) / period
        self.maxKeys = maxKeys
    }

    /// Takes one token for `key`. Returns nil when allowed, else the seconds until one is free.
    func take(_ key: String, now: Date) -> Int? {
        buckets.withLockedValue { buckets in
            var bucket = buckets[key] ?? Bucket(tokens: capacity, updated: now)
            bucket.tokens = min(capacity, bucket.tokens + max(0, now.timeIntervalSince(bucket.updated)) * perSecond)
            bucket.updated = now
            guard bucket.tokens >= 1 else {
                buckets[key] = bucket
                return max(1, Int(((1 - bucket.tokens) / perSecond).rounded(.up)))
            }
            bucket.tokens -= 1
            if buckets[key] == nil, buckets.count >= maxKeys { prune(&buckets, now: now) }
            buckets[key] = bucket
            return nil
        }
    }

    /// Drops buckets that have refilled (they would start full anyway); if none, drops all.
    private func prune(_ buckets: inout [String: Bucket], now: Date) {
        let full = capacity / perSecond
        buckets = buckets.filter { now.timeIntervalSince($0.value.updated) < full }
        if buckets.count >= maxKeys { buckets.removeAll(keepingCapacity: true) }
    }
}
