import Foundation
import NIOConcurrencyHelpers

/// Token buckets by key (a session, an IP): `rate` per `period`, bursts up to `burst` (default `rate`).
/// In memory, per instance; with several instances each holds its own buckets.
final class RateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: Date
        /// A take was refused since the last one allowed: later refusals are not the first.
        var refused = false
    }

    /// A refused take: when to try again, and whether it is the first refusal since the last
    /// allowed take (what is worth an audit entry; a flood of refusals writes one, not one each).
    struct Refusal: Equatable {
        let retryAfter: Int
        let isFirst: Bool
    }
    private struct State {
        var buckets: [String: Bucket] = [:]
        /// Full passes over the buckets so far (tests count work with it, not time).
        var scans = 0
    }

    private let state = NIOLockedValueBox(State())
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
    func take(_ key: String, now: Date) -> Int? { refusal(key, now: now)?.retryAfter }

    /// Takes one token for `key`. Returns nil when allowed, else the refusal.
    func refusal(_ key: String, now: Date) -> Refusal? {
        state.withLockedValue { state in
            var bucket = state.buckets[key] ?? Bucket(tokens: capacity, updated: now)
            bucket.tokens = min(capacity, bucket.tokens + max(0, now.timeIntervalSince(bucket.updated)) * perSecond)
            bucket.updated = now
            guard bucket.tokens >= 1 else {
                let first = !bucket.refused
                bucket.refused = true
                state.buckets[key] = bucket
                return Refusal(retryAfter: max(1, Int(((1 - bucket.tokens) / perSecond).rounded(.up))), isFirst: first)
            }
            bucket.tokens -= 1
            bucket.refused = false
            if state.buckets[key] == nil, state.buckets.count >= maxKeys { prune(&state, now: now) }
            state.buckets[key] = bucket
            return nil
        }
    }

    var scans: Int { state.withLockedValue { $0.scans } }

    /// Makes room for at least a quarter of `maxKeys`: buckets that have refilled go first (they
    /// would start full anyway), then the least recently used. Freeing a quarter each time keeps
    /// a crowd of new addresses at one pass per `maxKeys / 4` of them: freeing only the few that
    /// had refilled made every new address pay a pass over all the others.
    private func prune(_ state: inout State, now: Date) {
        state.scans += 1
        let full = capacity / perSecond
        let target = maxKeys * 3 / 4
        state.buckets = state.buckets.filter { now.timeIntervalSince($0.value.updated) < full }
        guard state.buckets.count > target else { return }
        let cutoff = state.buckets.values.map(\.updated).sorted()[state.buckets.count - target]
        state.buckets = state.buckets.filter { $0.value.updated > cutoff }
    }
}
