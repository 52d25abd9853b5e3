import Foundation
import HTTPTypes
import KeyfobCodecs
import KeyfobStore
import Nostr
import Testing
import WebAuthn
import WebAuthnTestSupport

@testable import KeyfobServer

/// Nothing takes Keyfob down (issue #25), the parts a router test can show; the crash and
/// shutdown probes run the real binary (Tests/e2e/test_reliability.py).
@Suite struct ReliabilityTests {
    static let forwarded = HTTPField.Name("X-Forwarded-For")!
    func fromIP(_ ip: String) -> HTTPFields { [Self.forwarded: ip] }

    /// An ncryptsec with log_n 0 made scrypt fail and the server answer 500. Every bad NIP-49
    /// parameter is the import's ordinary 400.
    @Test func badNcryptsecParametersAreInvalidContentNot500() async throws {
        try await Harness().run { client in
            let (token, owner0) = try await client.newAccount("alice")
            var owner = owner0
            let good = try NIP49.encrypt(SecretKey.generate(), password: "pw", logN: 1)
            let (_, data) = try #require(Bech32.decode(good))
            for (index, value, words) in [
                (1, UInt8(0), "log_n"), (1, UInt8(21), "log_n"), (1, UInt8(255), "log_n"),
                (0, UInt8(1), "version"), (0, UInt8(3), "version"),
            ] {
                var edited = data
                edited[index] = value
                let reply = try await client.importKey(
                    ["ncryptsec": Bech32.encode(hrp: "ncryptsec", data: edited), "password": "pw"],
                    token: token, by: &owner)
                #expect(reply.status == .badRequest && reply.error == "invalid_content", "byte \(index) = \(value): \(reply.json)")
                #expect((reply["message"] as? String)?.contains(words) == true, "\(reply.json)")
            }
        }
    }

    /// One client filling the server-wide cap on unfinished ceremonies locked everyone out. A
    /// tenth of the cap is kept for browsers that finished a ceremony here before (their
    /// returning-device cookie) and for clients presenting a session. (Sign-ups fill it: sign-in
    /// options hold no challenge, `SealedChallengeTests`.)
    @Test func aFullChallengeTableStillServesReturningBrowsersAndSessions() async throws {
        let harness = try Harness { c in
            c.trustedProxies = ["127.0.0.1"]
            c.maxLiveChallenges = 20
        }
        try await harness.run(.live) { client async throws in
            var alice = SoftwareAuthenticator()
            let signedUp = try await client.signUp(&alice, username: "alice", headers: fromIP("203.0.113.7"))
            #expect(signedUp.status == .ok)
            let cookies = signedUp.headers[values: .setCookie]
            let device = try #require(cookies.first { $0.hasPrefix("keyfob_device=") })
            #expect(device.contains("HttpOnly") && device.contains("Max-Age=34560000"))
            let deviceCookie = String(device.prefix { $0 != ";" })
            let token = try #require(signedUp["token"] as? String)

            // A stranger from many addresses fills what strangers may fill: 18 of 20.
            var strangers = 0
            for i in 0..<40 {
                let reply = try await client.call(.get, "/generate-registration-options", headers: fromIP("198.51.100.\(i)"))
                if reply.status == .ok { strangers += 1 } else { #expect(reply.status == .tooManyRequests) }
            }
            #expect(strangers == 18)
            // The returning browser and a session still start ceremonies, from the reserve.
            var returning = fromIP("198.51.100.200")
            returning[.cookie] = deviceCookie
            #expect(try await client.call(.get, "/generate-registration-options", headers: returning).status == .ok)
            var session = fromIP("198.51.100.201")
            session[.authorization] = "Bearer \(token)"
            #expect(try await client.call(.get, "/generate-registration-options", headers: session).status == .ok)
            // A forged device cookie is a stranger's.
            var forged = fromIP("198.51.100.202")
            forged[.cookie] = "keyfob_device=" + Base64URL.encode([UInt8](repeating: 7, count: 32))
            #expect(try await client.call(.get, "/generate-registration-options", headers: forged).status == .tooManyRequests)
            // The reserve is finite too.
            #expect(try await client.call(.get, "/generate-registration-options", headers: returning).status == .tooManyRequests)
        }
    }

    /// A NIP-46 reader that stops reading held every frame sent to it (~15 MB each). Now a
    /// connection's queue is bounded in bytes, all queues together too, and past a bound the
    /// queue ends (the endpoint then closes the connection).
    @Test func aSlowReadersQueueIsBoundedPerConnectionAndInTotal() async throws {
        let budget = OutboundBudget(maxBytes: 10_000)
        let a = OutboundQueue(maxBytes: 4_000, budget: budget)
        let frame = String(repeating: "x", count: 1_000)
        for _ in 0..<4 { #expect(a.push(frame)) }
        #expect(!a.push(frame))  // the fifth passes the connection's bound
        #expect(a.isOverflowed)
        #expect(await a.next() == nil)  // an overflowed queue hands out nothing more
        #expect(budget.bytesInUse == 0)  // and gave its bytes back

        let queues = (0..<3).map { _ in OutboundQueue(maxBytes: 4_000, budget: budget) }
        for queue in queues.prefix(2) { for _ in 0..<4 { #expect(queue.push(frame)) } }
        #expect(queues[2].push(frame) && queues[2].push(frame))
        #expect(!queues[2].push(frame))  // 10 kB queued in all: the total bound
        #expect(budget.bytesInUse == 10_000)
        queues[2].drain()  // the connection closes: its 2 kB come back
        #expect(budget.bytesInUse == 8_000)
        // A reader that keeps up takes frames as they come and holds nothing.
        #expect(await queues[0].next() == frame)
        #expect(budget.bytesInUse == 7_000)
        for queue in queues { queue.drain() }
        #expect(budget.bytesInUse == 0)

        let live = OutboundQueue(maxBytes: 4_000, budget: budget)
        async let got = live.next()
        try await Task.sleep(for: .milliseconds(20))
        #expect(live.push(frame))
        #expect(await got == frame)
        #expect(budget.bytesInUse == 0)
        live.finish()
        #expect(await live.next() == nil)
    }

    /// Both listeners draw on one budget of descriptors, with a reserve kept for Keyfob's own
    /// files and outgoing connections.
    @Test func bothListenersShareOneDescriptorBudgetWithAReserve() {
        let budget = ConnectionBudget.make(total: 1_000, relayEnabled: true, outgoing: 72)
        #expect(budget.http + budget.relay <= 1_000)
        #expect(budget.relay == 250 || budget.http + budget.relay <= budget.descriptorLimit - budget.reserve)
        #expect(budget.reserve == ConnectionBudget.baseReserve + 72)
        let off = ConnectionBudget.make(total: 1_000, relayEnabled: false, outgoing: 8)
        #expect(off.relay == 0)
        // Whatever is asked, never past the descriptors the process may have, less the reserve.
        let greedy = ConnectionBudget.make(total: 10_000_000, relayEnabled: true, outgoing: 8)
        #expect(greedy.http + greedy.relay <= max(16, greedy.descriptorLimit - greedy.reserve) + 8)
    }
}
