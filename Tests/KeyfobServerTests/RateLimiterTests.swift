import Foundation
import Testing

@testable import KeyfobServer

/// The per-address and per-session token buckets: limits hold, and memory and work stay bounded
/// whatever the number of addresses (work is counted, not timed).
@Suite struct RateLimiterTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func aBurstIsAllowedThenRefused() {
        let limiter = RateLimiter(rate: 60, per: 60, burst: 3)
        for _ in 0..<3 { #expect(limiter.take("a", now: t0) == nil) }
        #expect(limiter.take("a", now: t0) == 1)
        #expect(limiter.take("b", now: t0) == nil)
        #expect(limiter.take("a", now: t0 + 1) == nil)  // one token a second
    }

    /// A steady crowd of new addresses past the cap: before, each one paid a pass over all the
    /// buckets (only the one or two that had just refilled were freed), a quadratic cost anyone
    /// with many addresses could buy. Now each pass frees a quarter of the cap.
    @Test func aCrowdOfNewAddressesCostsOnePassPerQuarterOfTheCap() {
        let limiter = RateLimiter(rate: 60, per: 60, burst: 30, maxKeys: 1_000)
        var now = t0
        for i in 0..<20_000 {
            now += 0.031  // a bucket refills in 30 s: at the cap, the oldest one or two have
            #expect(limiter.take("10.\(i >> 16).\((i >> 8) & 255).\(i & 255)", now: now) == nil)
        }
        #expect(limiter.scans <= 20_000 / 250 + 1, "\(limiter.scans) passes")
    }

    /// Buckets that have refilled go first, and those are all that go when they are enough.
    @Test func refilledBucketsMakeRoomFirst() {
        let limiter = RateLimiter(rate: 60, per: 60, burst: 2, maxKeys: 100)
        for i in 0..<100 { _ = limiter.take("old\(i)", now: t0) }
        for i in 0..<99 { _ = limiter.take("new\(i)", now: t0 + 10) }  // old ones refilled after 2 s
        #expect(limiter.scans == 1)
        _ = limiter.take("recent", now: t0 + 10)
        _ = limiter.take("recent", now: t0 + 10)
        #expect(limiter.take("recent", now: t0 + 10) != nil)
    }
}
