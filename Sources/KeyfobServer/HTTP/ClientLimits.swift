import Foundation
import Hummingbird
import KeyfobStore

/// Abuse limits on the anonymous endpoints (per client IP): token buckets for options and
/// verify requests and for new accounts, and a cap on live challenges. Over a limit:
/// `429 rate_limited` with `Retry-After`.
struct ClientLimits: Sendable {
    let options: RateLimiter
    let verify: RateLimiter
    let signUps: RateLimiter
    let maxChallengesPerClient: Int
    let addresses: ClientAddress

    init(configuration: ServerConfiguration) {
        options = RateLimiter(rate: configuration.ipRate, per: 60, burst: configuration.ipBurst)
        verify = RateLimiter(rate: configuration.ipRate, per: 60, burst: configuration.ipBurst)
        signUps = RateLimiter(rate: configuration.signUpsPerHour, per: 3600, burst: configuration.signUpBurst)
        maxChallengesPerClient = configuration.maxChallengesPerIP
        addresses = ClientAddress(trustedProxies: Set(configuration.trustedProxies), ipv6Prefix: configuration.ipv6Prefix)
    }

    /// The client as the limits count it: its address, or its IPv6 prefix (`ClientAddress.limitKey`).
    func clientIP(_ request: Request, _ context: KeyfobRequestContext) -> String {
        ClientAddress.limitKey(addresses.resolve(request, context: context), ipv6Prefix: addresses.ipv6Prefix)
    }

    func check(_ limiter: RateLimiter, _ ip: String, now: Date) throws {
        if let retry = limiter.take(ip, now: now) { throw KeyfobError.rateLimited(retryAfter: retry) }
    }

    func insert(_ challenge: ChallengeRecord, into store: any ChallengeStore, now: Date) async throws {
        do {
            try await store.insertChallenge(challenge, now: now, maxPerClient: maxChallengesPerClient)
        } catch StoreError.limitReached {
            throw KeyfobError(
                .rateLimited, "too many unfinished sign-ins from this address; finish one or wait a minute",
                status: .tooManyRequests, retryAfter: 60)
        } catch StoreError.capacityReached {
            throw KeyfobError(
                .rateLimited, "too many sign-ins are unfinished on this server right now; try again in a minute",
                status: .tooManyRequests, retryAfter: 60)
        }
    }
}
