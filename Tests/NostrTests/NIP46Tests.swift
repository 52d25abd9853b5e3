import Foundation
import KeyfobCodecs
import Testing

@testable import Nostr

/// NIP-46's message layer and NIP-01's relay frames: what the bunker and its built-in relay endpoint
/// will speak (issue #9). Transport-free.
@Suite struct NIP46Tests {
    let signer = try! SecretKey(hex: String(repeating: "01", count: 32))
    let client = try! SecretKey(hex: String(repeating: "02", count: 32))

    @Test func requestsParseStrictlyAndRoundTrip() throws {
        let request = NIP46.Request(id: "r1", method: "sign_event", params: [#"{"kind":1,"content":"hi \"there\"","tags":[]}"#])
        #expect(try NIP46.Request.parse(request.json) == request)
        #expect(try NIP46.Request.parse(#"{"id":"x","method":"ping"}"#).params.isEmpty)
        for bad in [
            "[]", "{}", #"{"id":"","method":"ping"}"#, #"{"id":"x"}"#, #"{"id":1,"method":"ping"}"#,
            #"{"id":"x","method":"ping","params":[1]}"#, #"{"id":"x","method":"ping","params":"a"}"#,
            #"{"id":"x","method":"ping","params":["1","2","3","4","5","6","7","8","9"]}"#,
            "{\"id\":\"\(String(repeating: "i", count: 65))\",\"method\":\"ping\"}", "not json",
            "{\"id\":\"x\",\"method\":\"ping\",\"params\":[\"\(String(repeating: "a", count: 300_000))\"]}",
        ] {
            #expect(throws: NostrError.self, "\(bad.prefix(40))") { try NIP46.Request.parse(bad) }
        }
    }

    @Test func responsesCarryResultErrorOrAuthURL() throws {
        #expect(NIP46.Response(id: "a", result: "pong").json == #"{"id":"a","result":"pong"}"#)
        #expect(NIP46.Response(id: "a", result: nil, error: "no such method").json == #"{"id":"a","result":null,"error":"no such method"}"#)
        let challenge = NIP46.Response.authURL(id: "b", url: "https://keyfob.example/approve/xyz")
        #expect(try NIP46.Response.parse(challenge.json) == challenge)
        #expect(challenge.result == "auth_url" && challenge.error == "https://keyfob.example/approve/xyz")
    }

    @Test func messagesAreSealedForThePeerAndOnlyOpenForIt() throws {
        let request = NIP46.Request(id: "1", method: "get_public_key", params: [])
        let event = try NIP46.wrap(request.json, from: client, to: signer.publicKey, createdAt: 1_700_000_000)
        #expect(event.kind == 24133 && event.tags == [["p", signer.publicKey.hex]] && event.isValid)
        #expect(!event.content.contains("get_public_key"))
        let opened = try NIP46.unwrap(event, with: signer)
        #expect(opened.sender == client.publicKey && opened.message == request.json && opened.encryption == .nip44)
        // Not for this key, not NIP-46, or tampered: refused.
        let other = try SecretKey(hex: String(repeating: "03", count: 32))
        #expect(throws: NostrError.self) { try NIP46.unwrap(event, with: other) }
        let wrongKind = UnsignedEvent(createdAt: 1, kind: 1, tags: event.tags, content: event.content).sign(with: client)
        #expect(throws: NostrError.self) { try NIP46.unwrap(wrongKind, with: signer) }
        let forged = Event(
            id: event.id, pubkey: event.pubkey, createdAt: event.createdAt, kind: event.kind, tags: event.tags,
            content: event.content + "A", sig: event.sig)
        #expect(throws: NostrError.self) { try NIP46.unwrap(forged, with: signer) }
        // Older clients' NIP-04 content opens too, and says so (the answer goes back the same way).
        let legacy = try NIP46.wrap(request.json, from: client, to: signer.publicKey, createdAt: 1, encryption: .nip04)
        #expect(try NIP46.unwrap(legacy, with: signer).encryption == .nip04)
    }

    @Test func bunkerURLsRoundTripWithAwkwardRelays() throws {
        let url = BunkerURL(
            signer: signer.publicKey, relays: ["wss://keyfob.example/nip46", "wss://relay.example/?a=1&b=2"],
            secret: "s3cr3t+/=")
        #expect(url.string.hasPrefix("bunker://\(signer.publicKey.hex)?relay=wss%3A%2F%2Fkeyfob.example%2Fnip46&relay="))
        #expect(try BunkerURL.parse(url.string) == url)
        for bad in ["bunker://nothex?relay=wss://r", "nostrconnect://\(signer.publicKey.hex)", "bunker://", "https://x"] {
            #expect(throws: NostrError.self, "\(bad)") { try BunkerURL.parse(bad) }
        }
    }

    @Test func nostrconnectURLsGiveRelaysSecretPermsAndClaims() throws {
        // The shape of NIP-46's own example.
        let text =
            "nostrconnect://\(client.publicKey.hex)?relay=wss%3A%2F%2Frelay1.example.com&perms=nip44_encrypt%2Cnip44_decrypt%2Csign_event%3A13%2Csign_event%3A14%2Csign_event%3A1059&name=My%20Client&secret=0s8j2djs&relay=wss%3A%2F%2Frelay2.example2.com"
        let url = try NostrConnectURL.parse(text)
        #expect(url.client == client.publicKey && url.secret == "0s8j2djs" && url.name == "My Client")
        #expect(url.relays == ["wss://relay1.example.com", "wss://relay2.example2.com"])
        #expect(url.perms.map(\.string) == ["nip44_encrypt", "nip44_decrypt", "sign_event:13", "sign_event:14", "sign_event:1059"])
        // The earlier form with a metadata object (rust-nostr sends it).
        let older = try NostrConnectURL.parse(
            "nostrconnect://\(client.publicKey.hex)?relay=wss%3A%2F%2Fr.example&secret=x&metadata=%7B%22name%22%3A%22Old%22%2C%22url%22%3A%22https%3A%2F%2Fold.example%22%7D"
        )
        #expect(older.name == "Old" && older.url == "https://old.example")
        for bad in [
            "nostrconnect://\(client.publicKey.hex)?secret=x", "nostrconnect://\(client.publicKey.hex)?relay=wss://r",
            "nostrconnect://\(client.publicKey.hex)?relay=wss://r&secret=x&perms=sign_event:99999",
            "nostrconnect://\(client.publicKey.hex)?relay=wss://r&secret=x&perms=drop%20table",
        ] {
            #expect(throws: NostrError.self, "\(bad)") { try NostrConnectURL.parse(bad) }
        }
    }

    // MARK: Relay frames

    @Test func clientFramesParseAndBadOnesGetTheRightAnswer() throws {
        let event = try NIP46.wrap("{}", from: client, to: signer.publicKey, createdAt: 1_700_000_000)
        #expect(try ClientMessage.parse(#"["EVENT",\#(event.json)]"#) == .event(event))
        let request = try ClientMessage.parse(##"["REQ","s1",{"kinds":[24133],"#p":["\##(signer.publicKey.hex)"],"since":1}]"##)
        guard case .request("s1", let filters) = request else { Issue.record("not a REQ: \(request)"); return }
        #expect(filters.count == 1 && filters[0].matches(event))
        #expect(try ClientMessage.parse(#"["CLOSE","s1"]"#) == .close(subscription: "s1"))

        // A bad event is answered OK false with its id; a bad subscription CLOSED; the rest NOTICE.
        let forged = event.json.replacingOccurrences(of: "\"content\":\"", with: "\"content\":\"x")
        let refusal = try #require(throws: ClientMessage.Refusal.self) { try ClientMessage.parse(#"["EVENT",\#(forged)]"#) }
        #expect(refusal.eventID == Hex.encode(event.id) && refusal.answer.hasPrefix(#"["OK",""#) && refusal.answer.contains("false"))
        let tooMany = #"["REQ","s2"\#(String(repeating: ",{}", count: 11))]"#
        #expect(try #require(throws: ClientMessage.Refusal.self) { try ClientMessage.parse(tooMany) }.answer.hasPrefix(#"["CLOSED","s2""#))
        for bad in [
            #"["REQ","s3",{"kinds":["1"]}]"#, #"["REQ","s3",{"ids":"abc"}]"#, #"["REQ","s3",{"limit":-1}]"#,
            #"["REQ","s3",{"search":"x"}]"#, #"["REQ","s3",[]]"#,
        ] {
            #expect(try #require(throws: ClientMessage.Refusal.self) { try ClientMessage.parse(bad) }.subscription == "s3", "\(bad)")
        }
        for bad in [
            "[]", "{}", #"["AUTH","x"]"#, #"["COUNT","x",{}]"#, "nonsense", #"["REQ",""]"#,
            "[\"EVENT\",\"\(String(repeating: "x", count: 200_000))\"]",
        ] {
            let refused = try #require(throws: ClientMessage.Refusal.self) { try ClientMessage.parse(bad) }
            #expect(refused.answer.hasPrefix(#"["NOTICE""#) || refused.answer.hasPrefix(#"["CLOSED""#), "\(bad.prefix(30))")
        }
    }

    @Test func filtersMatchEveryGivenField() throws {
        let event = try NIP46.wrap("{}", from: client, to: signer.publicKey, createdAt: 1_700_000_000)
        let me = signer.publicKey.hex
        #expect(RelayFilter(kinds: [24133], tags: ["p": [me]]).matches(event))
        #expect(RelayFilter(authors: [client.publicKey.hex]).matches(event))
        #expect(!RelayFilter(authors: [me]).matches(event))
        #expect(!RelayFilter(kinds: [1]).matches(event))
        #expect(!RelayFilter(tags: ["p": ["00"]]).matches(event))
        #expect(!RelayFilter(tags: ["e": [me]]).matches(event))
        #expect(RelayFilter(since: 1_700_000_000, until: 1_700_000_000).matches(event))
        #expect(!RelayFilter(since: 1_700_000_001).matches(event))
        #expect(RelayFilter(ids: [Hex.encode(event.id)]).matches(event))
    }

    @Test func relayAnswersAreJSONEveryClientReads() throws {
        let event = try NIP46.wrap("{}", from: client, to: signer.publicKey, createdAt: 1)
        let frames = [
            RelayAnswer.event(subscription: "s\"1", event: event), RelayAnswer.ok(eventID: "ab", accepted: true, message: ""),
            RelayAnswer.endOfStoredEvents(subscription: "s1"), RelayAnswer.closed(subscription: "s1", message: "error: \"x\""),
            RelayAnswer.notice("bye\n"),
        ]
        for frame in frames {
            let array = try #require(try JSONSerialization.jsonObject(with: Data(frame.utf8)) as? [Any], "\(frame)")
            #expect(array.first is String)
        }
        let decoded = try JSONSerialization.jsonObject(with: Data(frames[0].utf8)) as! [Any]
        #expect(decoded[1] as? String == "s\"1")
        #expect(try Event.parse(object: decoded[2] as! [String: Any]) == event)
    }
}
