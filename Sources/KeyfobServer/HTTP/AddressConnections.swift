import NIOConcurrencyHelpers
import NIOCore

/// How many HTTP connections each client address holds, so that one address cannot take the
/// whole connection budget (slow headers from one host would otherwise starve every other client,
/// health probes included). Addresses are counted as the rate limits count them (an IPv6 client by
/// its prefix). Loopback (127.0.0.1, ::1) and the trusted proxies are not capped: they carry many clients' traffic
/// (or the operator's own probes), and what they forward is limited per forwarded client instead.
final class AddressConnections: Sendable {
    let limit: Int
    let ipv6Prefix: Int
    /// Connections all capped addresses together may hold: the rest of the budget is a reserve only
    /// uncapped peers (this host's health probes, a trusted proxy) reach.
    let cappedShare: Int
    private let exempt: Set<String>
    private let open = NIOLockedValueBox((byKey: [String: Int](), total: 0))

    init(limit: Int, ipv6Prefix: Int, trustedProxies: [String], cappedShare: Int = .max) {
        self.limit = limit
        self.ipv6Prefix = ipv6Prefix
        self.cappedShare = cappedShare
        exempt = Set(trustedProxies)
    }

    /// The per-address share of an HTTP budget: an eighth, at least 8 (a browser opens 6 to a host)
    /// and at most 32 whatever the budget, so four busy hosts take at most half of a 256 budget.
    static func defaultLimit(budget: Int) -> Int { max(8, min(32, budget / 8)) }

    /// What capped addresses together may hold of `budget`: all but a reserve of an eighth (at least 8).
    static func cappedShare(budget: Int) -> Int { max(1, budget - max(8, budget / 8)) }

    /// The key one connection counts under, or nil when its address is not capped.
    func key(for address: SocketAddress?) -> String? {
        guard let ip = address?.ipAddress else { return nil }
        if exempt.contains(ip) || Self.isLoopback(ip) { return nil }
        return ClientAddress.limitKey(ip, ipv6Prefix: ipv6Prefix)
    }

    /// Takes a place for `key`; false when its address holds `limit` connections already, or capped
    /// addresses together hold their whole share.
    func admit(_ key: String) -> Bool {
        open.withLockedValue { state in
            let held = state.byKey[key, default: 0]
            guard held < limit, state.total < cappedShare else { return false }
            state.byKey[key] = held + 1
            state.total += 1
            return true
        }
    }

    func release(_ key: String) {
        open.withLockedValue { state in
            guard let held = state.byKey[key] else { return }
            state.byKey[key] = held > 1 ? held - 1 : nil
            state.total -= 1
        }
    }

    /// Connections held by `key` now (tests).
    func held(_ key: String) -> Int { open.withLockedValue { $0.byKey[key, default: 0] } }

    /// This host's own usual address (a local proxy, the operator's probes). Only the one: the
    /// rest of 127/8 is left capped, so a test can play another host from 127.0.0.2.
    static func isLoopback(_ ip: String) -> Bool {
        ip == "127.0.0.1" || ip == "::1" || ip == "::ffff:127.0.0.1"
    }
}
