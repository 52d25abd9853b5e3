import Foundation
import Hummingbird
import HummingbirdTesting
import HummingbirdWSTesting
import KeyfobCodecs
import Logging
import Nostr
import Testing

@testable import KeyfobServer

/// The built-in NIP-46 relay (issue #9): NIP-01 frames over a real WebSocket, kind 24133 only,
/// routed in memory to matching subscriptions, bounded per connection and per address.
@Suite struct RelayEndpointTests {
    let signer = try! SecretKey(hex: String(repeating: "01", count: 32))
    let client = try! SecretKey(hex: String(repeating: "02", count: 32))

    func message(from key: SecretKey, to peer: PublicKey, at date: Date = Date(), id: String = "1") throws -> Event {
        try NIP46.wrap(#"{"id":"\#(id)","method":"ping","params":[]}"#, from: key, to: peer, createdAt: Int64(date.timeIntervalSince1970))
    }

    @Test func aNIP46MessageReachesTheSubscriberWhoseFilterMatches() async throws {
        var configuration = ServerConfiguration()
        configuration.nip46Port = 0
        let hub = RelayHub()
        let app = buildRelayApplication(configuration: configuration, hub: hub, logger: Logger(label: "relay-test"))
        let event = try message(from: client, to: signer.publicKey)
        try await app.test(.live) { testClient async throws in
            let (subscribed, ready) = AsyncStream.makeStream(of: Void.self)
            let frames = Received()
            async let subscriber: Void = {
                try await testClient.ws("/nip46") { inbound, outbound, _ in
                    try await outbound.write(.text(##"["REQ","sub",{"kinds":[24133],"#p":["\##(self.signer.publicKey.hex)"]}]"##))
                    for try await message in inbound.messages(maxSize: 1 << 20) {
                        guard case .text(let text) = message else { continue }
                        frames.add("subscriber", text)
                        if text.hasPrefix(#"["EOSE""#) { ready.yield() }
                        if text.hasPrefix(#"["EVENT""#) { return }
                    }
                }
            }()
            for await _ in subscribed { break }
            let received = Received()
            try await testClient.ws("/nip46") { inbound, outbound, _ in
                let kindOne = UnsignedEvent(createdAt: 1, kind: 1, tags: [], content: "hello").sign(with: self.client)
                for frame in [#"["EVENT",\#(kindOne.json)]"#, "not json", #"["EVENT",\#(event.json)]"#] {
                    try await outbound.write(.text(frame))
                }
                for try await message in inbound.messages(maxSize: 1 << 20) {
                    guard case .text(let text) = message else { continue }
                    received.add("publisher", text)
                    if received.frames.count == 3 { return }
                }
            }
            let answers = received.frames.map { $0[1] }
            #expect(answers[0].hasPrefix(#"["OK",""#) && answers[0].contains("false") && answers[0].contains("24133"))
            #expect(answers[1].hasPrefix(#"["NOTICE""#))
            #expect(answers[2] == RelayAnswer.ok(eventID: Hex.encode(event.id), accepted: true, message: ""))
            try await subscriber
            #expect(
                frames.frames.map { $0[1] } == [
                    RelayAnswer.endOfStoredEvents(subscription: "sub"), RelayAnswer.event(subscription: "sub", event: event),
                ])
        }
        #expect(hub.connectionCount == 0)  // both closed and forgotten
    }

    @Test func connectionsSubscriptionsAndFramesAreBounded() throws {
        var limits = RelayHub.Limits()
        limits.connectionsPerAddress = 2
        limits.subscriptionsPerConnection = 2
        let hub = RelayHub(limits: limits)
        let a = try hub.open(address: "10.0.0.1", send: { _ in })
        _ = try hub.open(address: "10.0.0.1", send: { _ in })
        #expect(throws: RelayHub.TooManyConnections.self) { try hub.open(address: "10.0.0.1", send: { _ in }) }
        _ = try hub.open(address: "10.0.0.2", send: { _ in })  // another address has its own budget
        hub.close(a)
        _ = try hub.open(address: "10.0.0.1", send: { _ in })  // a closed one frees its place
        let id = try hub.open(address: "10.0.0.3", send: { _ in })
        #expect(hub.receive(#"["REQ","1",{}]"#, from: id) == [RelayAnswer.endOfStoredEvents(subscription: "1")])
        #expect(hub.receive(#"["REQ","2",{}]"#, from: id) == [RelayAnswer.endOfStoredEvents(subscription: "2")])
        #expect(hub.receive(#"["REQ","3",{}]"#, from: id).first?.hasPrefix(#"["CLOSED","3""#) == true)
        #expect(hub.receive(#"["REQ","1",{"kinds":[1]}]"#, from: id).count == 1)  // replacing one is fine
        #expect(hub.receive(#"["CLOSE","2"]"#, from: id).isEmpty)
        #expect(hub.receive(#"["REQ","3",{}]"#, from: id) == [RelayAnswer.endOfStoredEvents(subscription: "3")])
        let huge = #"["REQ","4",{"authors":["\#(String(repeating: "a", count: 70_000))"]}]"#
        #expect(hub.receive(huge, from: id).first?.hasPrefix(#"["NOTICE""#) == true)
        #expect(hub.receive(#"["AUTH","x"]"#, from: id).first?.hasPrefix(#"["NOTICE""#) == true)
    }

    @Test func eventsGoOnlyToMatchingSubscriptionsAndNothingIsKept() throws {
        let hub = RelayHub()
        let received = Received()
        let signerSide = try hub.open(address: "a", send: { received.add("signer", $0) })
        let otherSide = try hub.open(address: "b", send: { received.add("other", $0) })
        _ = hub.receive(##"["REQ","s",{"kinds":[24133],"#p":["\##(signer.publicKey.hex)"]}]"##, from: signerSide)
        _ = hub.receive(##"["REQ","o",{"kinds":[24133],"#p":["\##(client.publicKey.hex)"]}]"##, from: otherSide)
        let toSigner = try message(from: client, to: signer.publicKey)
        #expect(hub.receive(#"["EVENT",\#(toSigner.json)]"#, from: otherSide).first?.contains("true") == true)
        #expect(received.frames == [["signer", RelayAnswer.event(subscription: "s", event: toSigner)]])
        // A subscription made after the event does not get it: nothing is stored.
        let late = try hub.open(address: "c", send: { received.add("late", $0) })
        #expect(hub.receive(##"["REQ","l",{"kinds":[24133]}]"##, from: late) == [RelayAnswer.endOfStoredEvents(subscription: "l")])
        #expect(received.frames.count == 1)
        // The same event again (a client's retry, or a second relay carrying it) is not handed on twice.
        #expect(hub.publish(toSigner) == false)
        #expect(received.frames.count == 1)
    }

    /// An external relay's link: subscriptions in chunks a relay accepts, with `since`; only valid
    /// kind-24133 events go into the hub.
    @Test func anExternalRelayLinkSubscribesInChunksAndPassesOnlyValidNIP46Events() throws {
        let keys = (0..<450).map { String(format: "%064x", $0) }
        let frames = RelayLink.requests(keys, since: 1_700_000_000)
        #expect(frames.count == 3 && frames[0].hasPrefix(##"["REQ","keyfob-0",{"kinds":[24133],"#p":["##))
        #expect(frames.allSatisfy { $0.hasSuffix(#""since":1700000000}]"#) })
        #expect(RelayLink.requests([], since: 0) == [#"["CLOSE","keyfob-0"]"#])

        let hub = RelayHub()
        let received = Received()
        let side = try hub.open(address: "a", send: { received.add("signer", $0) })
        _ = hub.receive(##"["REQ","s",{"kinds":[24133]}]"##, from: side)
        let link = RelayLink(url: "wss://relay.example", hub: hub, logger: Logger(label: "test"), now: { Date() })
        let good = try message(from: client, to: signer.publicKey)
        var forged = try JSONSerialization.jsonObject(with: Data(good.json.utf8)) as! [String: Any]
        forged["content"] = "changed"
        let note = UnsignedEvent(createdAt: 1_700_000_000, kind: 1, tags: [], content: "hi").sign(with: client)
        for text in [
            #"["EVENT","keyfob-0",\#(String(decoding: try JSONSerialization.data(withJSONObject: forged), as: UTF8.self))]"#,
            #"["EVENT","keyfob-0",\#(note.json)]"#, "not json", #"["NOTICE","hello"]"#, #"["EVENT","keyfob-0",\#(good.json)]"#,
            #"["EVENT","keyfob-0",\#(good.json)]"#,
        ] {
            link.receive(text)
        }
        #expect(received.frames == [["signer", RelayAnswer.event(subscription: "s", event: good)]])
    }
}

/// NIP-46 input is unauthenticated (#23): replays, floods and old captures are refused by the
/// hub, whichever way they come in, and a flood does not crowd out anyone else.
@Suite struct RelayAbuseTests {
    let signer = try! SecretKey(hex: String(repeating: "01", count: 32))
    let client = try! SecretKey(hex: String(repeating: "02", count: 32))
    let attacker = try! SecretKey(hex: String(repeating: "03", count: 32))

    func request(from key: SecretKey, at date: Date, id: String) throws -> Event {
        try NIP46.wrap(
            #"{"id":"\#(id)","method":"logout","params":[]}"#, from: key, to: signer.publicKey,
            createdAt: Int64(date.timeIntervalSince1970))
    }

    @Test func aCapturedRequestResentIsNotHandedOnAgainNowOrLater() throws {
        let clock = ManualClock(Date())
        let hub = RelayHub(now: { clock.now })
        let handed = Received()
        hub.listen { handed.add("bunker", Hex.encode($0.id)) }
        let sender = try hub.open(address: "client", send: { _ in })
        let thief = try hub.open(address: "thief", send: { _ in })
        let captured = try request(from: client, at: clock.now, id: "a")
        #expect(hub.receive(#"["EVENT",\#(captured.json)]"#, from: sender).first?.contains("true,\"\"") == true)
        // Re-published at once, on another connection or through an external relay: handed on once.
        #expect(hub.receive(#"["EVENT",\#(captured.json)]"#, from: thief).first?.contains("duplicate") == true)
        #expect(hub.publish(captured) == false)
        // Two minutes later its id may be forgotten, but its date no longer admits it anywhere.
        clock.now += 125
        #expect(hub.receive(#"["EVENT",\#(captured.json)]"#, from: thief).first?.contains("created_at") == true)
        #expect(hub.publish(captured) == false)
        // Dated ahead so as to outlive the memory of ids: refused too.
        let ahead = try request(from: attacker, at: clock.now + 3600, id: "b")
        #expect(hub.receive(#"["EVENT",\#(ahead.json)]"#, from: thief).first?.contains("created_at") == true)
        #expect(handed.frames.count == 1)
    }

    @Test func aFloodOfEventsIsCutAndOthersAreStillHeard() throws {
        let clock = ManualClock(Date())
        let hub = RelayHub(now: { clock.now })
        let handed = Received()
        hub.listen { handed.add("bunker", Hex.encode($0.id)) }
        let flooder = try hub.open(address: "flooder", send: { _ in })
        var accepted = 0
        for n in 0..<500 {
            let junk = try request(from: SecretKey.generate(), at: clock.now, id: "j\(n)")
            if hub.receive(#"["EVENT",\#(junk.json)]"#, from: flooder).first?.contains("true") == true { accepted += 1 }
        }
        #expect(accepted == hub.limits.eventBurst)  // the burst, then "rate-limited"
        // Many connections from one key: the sender's own budget stops them too.
        var bySender = 0
        for n in 0..<100 {
            let connection = try hub.open(address: "f\(n % 10)", send: { _ in })
            let junk = try request(from: attacker, at: clock.now, id: "k\(n)")
            if hub.receive(#"["EVENT",\#(junk.json)]"#, from: connection).first?.contains("true") == true { bySender += 1 }
            hub.close(connection)
        }
        #expect(bySender == hub.limits.eventBurst)
        // The real client, on its own connection, is still handed on.
        let own = try hub.open(address: "client", send: { _ in })
        let real = try request(from: client, at: clock.now, id: "real")
        #expect(hub.receive(#"["EVENT",\#(real.json)]"#, from: own).first?.contains("true,\"\"") == true)
        #expect(handed.frames.last?[1] == Hex.encode(real.id))
        // A second later the flooder has a little budget again, no more.
        clock.now += 1
        let next = try request(from: SecretKey.generate(), at: clock.now, id: "later")
        #expect(hub.receive(#"["EVENT",\#(next.json)]"#, from: flooder).first?.contains("true") == true)
    }

    @Test func theMemoryOfIdsIsBoundedAndRefusesRatherThanForgets() throws {
        let clock = ManualClock(Date())
        var limits = RelayHub.Limits()
        limits.rememberedIDs = 3
        let hub = RelayHub(limits: limits, now: { clock.now })
        let events = try (0..<4).map { try request(from: client, at: clock.now, id: "\($0)") }
        #expect(events.prefix(3).allSatisfy { hub.publish($0) })
        let connection = try hub.open(address: "a", send: { _ in })
        #expect(hub.receive(#"["EVENT",\#(events[3].json)]"#, from: connection).first?.contains("busy") == true)
        // The first three can still not be replayed; once they are past the window, room again.
        #expect(hub.publish(events[0]) == false)
        clock.now += 121
        let fresh = try request(from: client, at: clock.now, id: "fresh")
        #expect(hub.publish(fresh))
    }
}

private final class ManualClock: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Date
    init(_ start: Date) { value = start }
    var now: Date {
        get { lock.withLock { value } }
        set { lock.withLock { value = newValue } }
    }
}

private final class Received: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [[String]] = []
    func add(_ who: String, _ frame: String) { lock.withLock { list.append([who, frame]) } }
    var frames: [[String]] { lock.withLock { list } }
}
