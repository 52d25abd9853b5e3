import Foundation
import HTTPTypes
import Hummingbird
import KeyfobStore
import NIOCore
import Testing
import WebAuthn
import WebAuthnTestSupport

@testable import KeyfobServer

/// Per-address limits as an attacker meets them (issue #23): IPv6 counted by prefix, every burst
/// configurable, `/metrics` never through a proxy. (The plain cookie name only on localhost:
/// `test_edges.py`, which can send its own Host header.)
@Suite struct AddressLimitTests {
    static let forwarded = HTTPField.Name("X-Forwarded-For")!
    func from(_ ip: String) -> HTTPFields { [Self.forwarded: ip] }

    func harness(_ edit: (inout ServerConfiguration) -> Void = { _ in }) throws -> Harness {
        try Harness { c in
            c.trustedProxies = ["127.0.0.1"]
            c.ipRate = 60
            c.ipBurst = 5
            c.signUpsPerHour = 30
            c.signUpBurst = 3
            c.maxChallengesPerIP = 4
            edit(&c)
        }
    }

    /// The client behind a chain of proxies: the right-most hop no trusted proxy vouches for, across
    /// repeated headers, with spaces or tabs around hops; empty hops skipped; an overlong hop or an
    /// untrusted peer gives the socket's address.
    @Test func theClientIsTheNearestHopNoTrustedProxyVouchesFor() throws {
        let addresses = ClientAddress(trustedProxies: ["127.0.0.1", "10.0.0.2"])
        let proxy = try SocketAddress(ipAddress: "127.0.0.1", port: 1)
        func client(_ values: [String], peer: SocketAddress) -> String {
            var fields = HTTPFields()
            for value in values { fields.append(HTTPField(name: Self.forwarded, value: value)) }
            let head = HTTPRequest(method: .get, scheme: "http", authority: "localhost", path: "/", headerFields: fields)
            return addresses.resolve(Request(head: head, body: .init(buffer: ByteBuffer())), peer: peer)
        }
        #expect(client([], peer: proxy) == "127.0.0.1")
        #expect(client(["192.0.2.7"], peer: proxy) == "192.0.2.7")
        #expect(client(["198.51.100.1, 192.0.2.7 ,\t10.0.0.2"], peer: proxy) == "192.0.2.7")
        #expect(client(["198.51.100.1", "192.0.2.7, 10.0.0.2, "], peer: proxy) == "192.0.2.7")
        #expect(client(["198.51.100.1", " , 10.0.0.2"], peer: proxy) == "198.51.100.1")
        #expect(client(["10.0.0.2, 127.0.0.1"], peer: proxy) == "127.0.0.1")
        #expect(client([String(repeating: "1", count: 65)], peer: proxy) == "127.0.0.1")
        // A port some proxies append is dropped; what is not an address counts as the proxy (one
        // bucket), so per-client limits never become per-connection ones.
        #expect(client(["192.0.2.7:5123"], peer: proxy) == "192.0.2.7")
        #expect(client(["[2001:db8::1]:443"], peer: proxy) == "2001:db8::1")
        #expect(client(["2001:db8::1"], peer: proxy) == "2001:db8::1")
        #expect(client(["unknown"], peer: proxy) == "127.0.0.1")
        #expect(client(["client-\(UInt32.random(in: 0...UInt32.max))"], peer: proxy) == "127.0.0.1")
        #expect(client(["192.0.2.7"], peer: try SocketAddress(ipAddress: "203.0.113.9", port: 1)) == "203.0.113.9")
    }

    /// #55: four addresses at their cap once took every connection (a quarter each), and health
    /// checks from this host timed out. Now an address holds an eighth (8 to 32), and capped
    /// addresses together leave a reserve only uncapped peers (loopback, trusted proxies) reach.
    @Test func fourCappedAddressesLeaveRoomForAFifthAndTheReserve() {
        let budget = 150  // what `ulimit -n 256` leaves the HTTP port
        let addresses = AddressConnections(
            limit: AddressConnections.defaultLimit(budget: budget), ipv6Prefix: 64, trustedProxies: [],
            cappedShare: AddressConnections.cappedShare(budget: budget))
        #expect(addresses.limit == 18 && addresses.cappedShare == 132)
        for host in 1...4 {
            while addresses.admit("198.51.100.\(host)") {}
            #expect(addresses.held("198.51.100.\(host)") == addresses.limit)
        }
        #expect(addresses.admit("203.0.113.5"), "a fifth client is served")
        #expect(addresses.key(for: try? SocketAddress(ipAddress: "127.0.0.1", port: 1)) == nil, "this host's probes are not capped")
        // Every capped address together stops short of the budget: the reserve stays free.
        var taken = 4 * addresses.limit + 1
        var host = 0
        while taken < budget {
            host += 1
            guard addresses.admit("192.0.2.\(host % 250)") || addresses.admit("10.1.\(host).1") else { break }
            taken += 1
        }
        #expect(taken == addresses.cappedShare && budget - taken >= 8)
        addresses.release("203.0.113.5")
        #expect(addresses.admit("203.0.113.6"))
    }

    @Test func ipv6AddressesAreCountedByTheirSlash64() {
        #expect(ClientAddress.limitKey("2001:db8:1:2:aaaa:bbbb:cccc:dddd", ipv6Prefix: 64) == "2001:db8:1:2::/64")
        #expect(ClientAddress.limitKey("2001:db8:1:2::1", ipv6Prefix: 64) == "2001:db8:1:2::/64")
        #expect(ClientAddress.limitKey("2001:db8:1:3::1", ipv6Prefix: 64) == "2001:db8:1:3::/64")
        #expect(ClientAddress.limitKey("2001:db8:1:3::1", ipv6Prefix: 48) == "2001:db8:1::/48")
        #expect(ClientAddress.limitKey("::ffff:192.0.2.7", ipv6Prefix: 64) == "192.0.2.7")
        #expect(ClientAddress.limitKey("192.0.2.7", ipv6Prefix: 64) == "192.0.2.7")
        #expect(ClientAddress.limitKey("not an address", ipv6Prefix: 64) == "not an address")
    }

    /// One /64 used to be 2^64 clients: it filled the server-wide challenge cap and made the
    /// sign-up limit unbounded. Through a trusted proxy and X-Forwarded-For, as behind nginx.
    @Test func addressesFromOneSlash64ShareOneBudget() async throws {
        try await harness().run(.live) { client async throws in
            var statuses: [HTTPResponse.Status] = []
            for i in 1...8 {
                statuses.append(try await client.call(.get, "/generate-authentication-options", headers: from("2001:db8:7:7::\(i)")).status)
            }
            // One request budget for the whole /64 (a burst of 5).
            #expect(statuses.prefix(5).allSatisfy { $0 == .ok } && statuses.dropFirst(5).allSatisfy { $0 == .tooManyRequests }, "\(statuses)")
            // Another /64 has its own budget.
            #expect(try await client.call(.get, "/generate-authentication-options", headers: from("2001:db8:7:8::1")).status == .ok)
            // Sign-ups too: a burst of 3 for the whole /64.
            var signUps: [HTTPResponse.Status] = []
            for i in 1...5 {
                signUps.append(
                    try await client.call(.get, "/generate-registration-options?username=u\(i)", headers: from("2001:db8:9:9::\(i)")).status)
            }
            #expect(signUps == [.ok, .ok, .ok, .tooManyRequests, .tooManyRequests], "\(signUps)")
        }
    }

    @Test func metricsAreRefusedThroughAProxy() async throws {
        try await harness().run(.live) { client async throws in
            #expect(try await client.call(.get, "/metrics").status == .ok)  // loopback, directly
            for header in ["X-Forwarded-For", "X-Forwarded-Proto", "X-Real-IP", "Forwarded"] {
                let reply = try await client.call(.get, "/metrics", headers: [HTTPField.Name(header)!: "203.0.113.9"])
                #expect(reply.status == .forbidden, "\(header)")
            }
        }
    }
}
