import Foundation
import Hummingbird
import HummingbirdTesting
import HummingbirdWSTesting
@testable import KeyfobServer
import Logging
import Nostr
import Testing

/// The built-in NIP-46 relay (issue #9): NIP-01 frames over a real WebSocket, kind 24133 only,
/// routed in memory to matching subscriptions, bounded per connection and per address.
@Suite struct RelayEndpointTests {
    let signer = try! SecretKey(hex: String(repeating: "01", count: 32))
    let client = try! SecretKey(hex: String(repeating: "02", count: 32))

    func message(from key: SecretKey, to peer: PublicKey) throws -> Event {
        try NIP46.wrap(#"{"id":"1","method":"ping","params":[]}"#, from: key, to: peer, createdAt: 1_700_000_000)
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
            #expect(frames.frames.map { $0[1] } == [RelayAnswer.endOfStoredEvents(subscription: "sub"), RelayAnswer.event(subscription: "sub", event: event)])
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
        for text in [#"["EVENT","keyfob-0",\#(String(decoding: try JSONSerialization.data(withJSONObject: forged), as: UTF8.self))]"#,
                     #"["EVENT","keyfob-0",\#(note.json)]"#, "not json", #"["NOTICE","hello"]"#, #"["EVENT","keyfob-0",\#(good.json)]"#,
                     #"["EVENT","keyfob-0",\#(good.json)]"#] {
            link.receive(text)
        }
        #expect(received.frames == [["signer", RelayAnswer.event(subscription: "s", event: good)]])
    }
}

private final class Received: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [[String]] = []
    func add(_ who: String, _ frame: String) { lock.withLock { list.append([who, frame]) } }
    var frames: [[String]] { lock.withLock { list } }
}
