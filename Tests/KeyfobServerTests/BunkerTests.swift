import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import KeyfobCodecs
import KeyfobStore
import Logging
import NIOConcurrencyHelpers
import Nostr
import ServiceLifecycle
import Testing
import WebAuthn

@testable import KeyfobServer

extension Bunker {
    /// A bunker on its own relay hub, for tests that need its keys only.
    static func standalone(store: any KeyfobStore, vault: KeyVault, hub: RelayHub = RelayHub(), maxInFlight: Int = 256) -> Bunker {
        let custody = KeyCustody(store: store, vault: vault, now: { Date() })
        let dispatcher = SignerDispatcher(
            custody: custody, store: store, limiter: RateLimiter(rate: 120, per: 60),
            logger: Logger(label: "test"), now: { Date() })
        return Bunker(
            store: store, vault: vault, custody: custody, hub: hub, dispatcher: dispatcher,
            grants: Grants(store: store, now: { Date() }), pending: PendingRequests(store: store, vault: vault, now: { Date() }),
            origin: "http://localhost:8080", maxInFlight: maxInFlight, logger: Logger(label: "test"), now: { Date() })
    }
}

/// A NIP-46 client written from the NIP (JSON by hand, NIP-44 and a signed kind-24133 event), on
/// a connection of the built-in relay's hub.
final class NIP46TestClient: @unchecked Sendable {
    let key = SecretKey.generate()
    let hub: RelayHub
    let signer: PublicKey
    private let connection: UInt64
    private let frames = NIOLockedValueBox<[String]>([])
    private var counter = 0

    init(hub: RelayHub, signer: PublicKey) throws {
        self.hub = hub
        self.signer = signer
        let frames = self.frames
        connection = try hub.open(address: "test-\(UUID())", send: { frame in frames.withLockedValue { $0.append(frame) } })
        let answers = hub.receive(##"["REQ","replies",{"kinds":[24133],"#p":["\##(key.publicKey.hex)"]}]"##, from: connection)
        precondition(answers.first?.contains("EOSE") == true)
    }

    /// Sends a request; returns its id. `to` overrides the p-tag (a request addressed elsewhere).
    @discardableResult
    func send(_ method: String, _ params: [String], to: String? = nil, encryption: NIP46.Encryption = .nip44) throws -> String {
        counter += 1
        let id = "req-\(counter)"
        let json = try JSONSerialization.data(withJSONObject: ["id": id, "method": method, "params": params])
        let plaintext = String(decoding: json, as: UTF8.self)
        let content =
            encryption == .nip44
            ? try NIP44.encrypt(plaintext, from: key, to: signer)
            : try NIP04.encrypt(plaintext, from: key, to: signer)
        let event = UnsignedEvent(
            createdAt: Int64(Date().timeIntervalSince1970), kind: 24133,
            tags: [["p", to ?? signer.hex]], content: content
        ).sign(with: key)
        let answers = hub.receive(#"["EVENT",\#(event.json)]"#, from: connection)
        #expect(answers.first?.contains("true") == true, "relay refused: \(answers)")
        return id
    }

    /// Frames already returned as replies: an `auth_url` reply and the final one share an id.
    private let consumed = NIOLockedValueBox<Set<Int>>([])

    /// The next reply to request `id` (decrypted from the signer), or nil when none comes within `wait`.
    func reply(to id: String?, wait: TimeInterval = 10) async throws -> [String: Any]? {
        let deadline = Date().addingTimeInterval(wait)
        while Date() < deadline {
            for (index, frame) in frames.withLockedValue({ $0 }).enumerated() where !consumed.withLockedValue({ $0.contains(index) }) {
                guard let array = try JSONSerialization.jsonObject(with: Data(frame.utf8)) as? [Any], array.count == 3,
                    array[0] as? String == "EVENT", let object = array[2] as? [String: Any],
                    object["pubkey"] as? String == signer.hex, let content = object["content"] as? String
                else { continue }
                #expect((object["tags"] as? [[String]])?.contains(["p", key.publicKey.hex]) == true)
                #expect(try verifySignedEvent(object))
                let text =
                    content.contains("?iv=")
                    ? try NIP04.decrypt(content, with: key, from: signer)
                    : try NIP44.decrypt(content, with: key, from: signer)
                guard let message = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
                    throw TestFailure("unreadable reply: \(text.prefix(300))")
                }
                if id == nil || message["id"] as? String == id {
                    consumed.withLockedValue { _ = $0.insert(index) }
                    return message
                }
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }

    func call(_ method: String, _ params: [String], encryption: NIP46.Encryption = .nip44) async throws -> [String: Any]? {
        try await reply(to: try send(method, params, encryption: encryption))
    }
}

extension Client {
    /// The user's bunker URL, parsed.
    func bunkerURL(token: String) async throws -> BunkerURL {
        let reply = try await call(.get, "/api/signer/bunker", headers: Client.bearer(token))
        return try BunkerURL.parse(try #require(reply["url"] as? String, "\(reply.json)"))
    }

    /// A client connected with the user's current secret.
    func connectedClient(token: String, hub: RelayHub, perms: String = "") async throws -> NIP46TestClient {
        let url = try await bunkerURL(token: token)
        let nip46 = try NIP46TestClient(hub: hub, signer: url.signer)
        let ack = try await nip46.call("connect", [url.signer.hex, url.secret!, perms, #"{"name":"Test client"}"#])
        #expect(ack?["result"] as? String == "ack", "\(ack ?? [:])")
        return nip46
    }
}

/// The request id in an auth_url reply.
func approvalID(_ reply: [String: Any]?) throws -> String {
    guard reply?["result"] as? String == "auth_url", let url = reply?["error"] as? String,
        let range = url.range(of: "/approve/")
    else { throw TestFailure("expected auth_url, got \(reply ?? [:])") }
    return String(url[range.upperBound...])
}

@Suite struct BunkerTests {
    @Test func connectNeedsTheCurrentSecretOnceAndOnlyConnectedKeysGetAnswers() async throws {
        let hub = RelayHub()
        try await Harness().run(hub: hub) { client in
            let (token, _) = try await client.newAccount("alice")
            let url = try await client.bunkerURL(token: token)
            let stranger = try NIP46TestClient(hub: hub, signer: url.signer)
            // Before connecting: silence for everything but connect.
            #expect(try await stranger.reply(to: stranger.send("ping", []), wait: 0.3) == nil)
            let wrong = try await stranger.call("connect", [url.signer.hex, "not-the-secret"])
            #expect((wrong?["error"] as? String)?.hasPrefix("unauthorized") == true)
            let ack = try await stranger.call("connect", [url.signer.hex, url.secret!])
            #expect(ack?["result"] as? String == "ack")
            // The secret was single use.
            let late = try NIP46TestClient(hub: hub, signer: url.signer)
            #expect((try await late.call("connect", [url.signer.hex, url.secret!]))?["error"] != nil)
            #expect(try await late.reply(to: late.send("ping", []), wait: 0.3) == nil)

            #expect(try await stranger.call("ping", [])?["result"] as? String == "pong")
            let rest = try await client.signer("get_public_key", token: token)["result"] as? String
            #expect(try await stranger.call("get_public_key", [])?["result"] as? String == rest)
            #expect(try await stranger.call("switch_relays", [])?["result"] is NSNull)
            #expect((try await stranger.call("get_relays", [])?["error"] as? String)?.contains("unknown method") == true)
            // NIP-04 requests are answered in NIP-04.
            #expect(try await stranger.call("ping", [], encryption: .nip04)?["result"] as? String == "pong")
            // A request p-tagged to someone else is not for this signer.
            #expect(try await stranger.reply(to: stranger.send("ping", [], to: SecretKey.generate().publicKey.hex), wait: 0.3) == nil)
            #expect(try await stranger.call("logout", [])?["result"] as? String == "ack")
            #expect(try await stranger.reply(to: stranger.send("ping", []), wait: 0.3) == nil)
        }
    }

    @Test func signingWaitsForApprovalThenAGrantRunsOnlyWhileASessionIsUnlocked() async throws {
        let hub = RelayHub()
        let harness = try Harness { $0.signerUnlockTTL = 600 }
        try await harness.run(hub: hub) { client in
            let (token, _) = try await client.newAccount("alice")
            let nip46 = try await client.connectedClient(token: token, hub: hub)
            let note = #"{"kind":1,"content":"hello over NIP-46","tags":[["t","keyfob"]],"created_at":1700000000}"#
            let firstID = try nip46.send("sign_event", [note])
            let id = try approvalID(try await nip46.reply(to: firstID))
            // Listed for the account page, with the client's own name.
            let waiting = try await client.call(.get, "/api/requests", headers: Client.bearer(token))["requests"] as! [[String: Any]]
            #expect(waiting.map { $0["id"] as? String } == [id] && waiting[0]["clientName"] as? String == "Test client")
            let shown = try await client.call(.get, "/api/requests/\(id)", headers: Client.bearer(token))
            #expect(shown["transport"] as? String == "nip46" && shown["client"] as? String == "nip46:\(nip46.key.publicKey.hex)")
            #expect(shown["clientName"] as? String == "Test client" && shown["kind"] as? Int == 1)
            let approved = try await client.call(
                .post, "/api/requests/\(id)/approve", json: ["remember": "forever"],
                headers: Client.bearer(token))
            #expect(approved.status == .ok && approved["redirect"] is NSNull, "\(approved.json)")
            #expect((try await client.call(.get, "/api/requests", headers: Client.bearer(token))["requests"] as! [Any]).isEmpty)
            // The original request id gets the signed event.
            let signed = try #require(try await nip46.reply(to: firstID, wait: 0.5).flatMap { $0["result"] as? String })
            let event = try JSONSerialization.jsonObject(with: Data(signed.utf8)) as! [String: Any]
            #expect(try verifySignedEvent(event) && event["content"] as? String == "hello over NIP-46")
            let rest = try await client.signer("get_public_key", token: token)["result"] as? String
            #expect(event["pubkey"] as? String == rest)

            // Remembered: the next kind-1 runs at once.
            let again = try await nip46.call("sign_event", [#"{"kind":1,"content":"second","tags":[]}"#])
            #expect((again?["result"] as? String)?.contains("\"sig\"") == true, "\(again ?? [:])")
            // Once no session is unlocked, the grant does not open the key: back to the approval page.
            harness.clock.advance(601)
            _ = try approvalID(try await nip46.call("sign_event", [#"{"kind":1,"content":"third","tags":[]}"#]))

            let history = try await client.call(.get, "/api/signer/history", headers: Client.bearer(token))["entries"] as! [[String: Any]]
            #expect(history.filter { $0["transport"] as? String == "nip46" && $0["outcome"] as? String == "approved" }.count == 2)
        }
    }

    @Test func requestedPermsBecomeGrantsTheUserConfirmsAndEncryptionInteroperates() async throws {
        let hub = RelayHub()
        try await Harness().run(hub: hub) { client in
            let (token, _) = try await client.newAccount("alice")
            let nip46 = try await client.connectedClient(token: token, hub: hub, perms: "nip44_encrypt,nip44_decrypt,sign_event:1,sign_event:0")
            let peer = SecretKey.generate()
            let firstID = try nip46.send("nip44_encrypt", [peer.publicKey.hex, "a secret for the peer"])
            let id = try approvalID(try await nip46.reply(to: firstID))
            let shown = try await client.call(.get, "/api/requests/\(id)", headers: Client.bearer(token))
            #expect(shown["requestedPerms"] as? [String] == ["nip44_encrypt", "nip44_decrypt", "sign_event:1", "sign_event:0"])
            _ = try await client.call(
                .post, "/api/requests/\(id)/approve", json: ["remember": "once", "preset": "requested"],
                headers: Client.bearer(token))
            let ciphertext = try #require(try await nip46.reply(to: firstID, wait: 0.5)?["result"] as? String)
            let user = try PublicKey(hex: try await client.signer("get_public_key", token: token)["result"] as! String)
            #expect(try NIP44.decrypt(ciphertext, with: peer, from: user) == "a secret for the peer")
            // Granted: decrypt runs at once, and reads what the peer encrypted.
            let fromPeer = try NIP44.encrypt("a reply", from: peer, to: user)
            #expect(try await nip46.call("nip44_decrypt", [peer.publicKey.hex, fromPeer])?["result"] as? String == "a reply")
            // Kind 0 was asked for but is never granted in advance.
            _ = try approvalID(try await nip46.call("sign_event", [#"{"kind":0,"content":"{}","tags":[]}"#]))
            // Bad parameters are an error reply with a code, never silence.
            let bad = try await nip46.call("nip44_encrypt", ["not-a-key", "x"])
            #expect((bad?["error"] as? String)?.hasPrefix("invalid_pubkey") == true)
            let rumor = try await nip46.call("sign_event", [#"{"kind":14,"content":"dm","tags":[]}"#])
            #expect((rumor?["error"] as? String)?.hasPrefix("permission_denied") == true)

            // Disconnecting the client drops its grants with it.
            let grants = { try await client.call(.get, "/api/signer/grants", headers: Client.bearer(token))["grants"] as! [[String: Any]] }
            #expect(try await grants().count == 3)
            let revoked = try await client.call(.delete, "/api/signer/bunker/clients/\(nip46.key.publicKey.hex)", headers: Client.bearer(token))
            #expect(revoked.status == .ok)
            #expect(try await grants().isEmpty)
            #expect(try await nip46.reply(to: nip46.send("nip44_decrypt", [peer.publicKey.hex, fromPeer]), wait: 0.3) == nil)
        }
    }

    @Test func aRejectionAndADangerousKindAreAnsweredOnTheOriginalID() async throws {
        let hub = RelayHub()
        try await Harness().run(hub: hub) { client in
            var (token, authenticator) = try await client.newAccount("alice")
            let nip46 = try await client.connectedClient(token: token, hub: hub)
            let rejectedID = try nip46.send("sign_event", [#"{"kind":1,"content":"no","tags":[]}"#])
            let first = try approvalID(try await nip46.reply(to: rejectedID))
            _ = try await client.call(.post, "/api/requests/\(first)/reject", json: [:], headers: Client.bearer(token))
            #expect((try await nip46.reply(to: rejectedID, wait: 0.5)?["error"] as? String)?.hasPrefix("user_rejected") == true)

            // Kind 0 needs the passkey over the request's committed bytes.
            let profileID = try nip46.send("sign_event", [#"{"kind":0,"content":"{\"name\":\"alice\"}","tags":[]}"#])
            let id = try approvalID(try await nip46.reply(to: profileID))
            let plain = try await client.call(.post, "/api/requests/\(id)/approve", json: [:], headers: Client.bearer(token))
            #expect(plain.error == "user_verification_required")
            let options = try await client.call(.post, "/api/requests/\(id)/challenge", json: [:], headers: Client.bearer(token))
            #expect((options["committed"] as? String)?.contains("client:nip46:\(nip46.key.publicKey.hex)") == true)
            var fields = authenticator.authenticationFields(
                challenge: Base64URL.decode(options["challenge"] as! String)!,
                rpID: "localhost", origin: Harness.origin)
            fields.signCount += 1
            authenticator.signCount = fields.signCount
            let approved = try await client.call(
                .post, "/api/requests/\(id)/approve",
                json: ["assertion": try jsonObject(authenticator.authenticate(fields))],
                headers: Client.bearer(token))
            #expect(approved.status == .ok, "\(approved.json)")
            let signed = try #require(try await nip46.reply(to: profileID, wait: 0.5)?["result"] as? String)
            #expect(try verifySignedEvent(JSONSerialization.jsonObject(with: Data(signed.utf8)) as! [String: Any]))
        }
    }

    /// The approval lands on another instance (same database, its own relay): the reply reaches
    /// the client through the instance it is connected to, via the reply queue.
    @Test func anApprovalOnAnotherInstanceIsAnsweredWhereTheClientIsConnected() async throws {
        let harness = try Harness()
        let clientSide = RelayHub()
        try await harness.run(hub: clientSide) { clientA in
            try await harness.run(hub: RelayHub()) { clientB in
                let (token, _) = try await clientA.newAccount("alice")
                let nip46 = try await clientA.connectedClient(token: token, hub: clientSide)
                let requestID = try nip46.send("sign_event", [#"{"kind":1,"content":"across","tags":[]}"#])
                let id = try approvalID(try await nip46.reply(to: requestID))
                let approved = try await clientB.call(.post, "/api/requests/\(id)/approve", json: [:], headers: Client.bearer(token))
                #expect(approved.status == .ok, "\(approved.json)")
                // Instance B has no connection to this client: nothing arrives until A reads the queue.
                #expect(try await nip46.reply(to: requestID, wait: 0.2) == nil)
                let queue = BunkerReplyQueue(
                    store: harness.store, hub: clientSide, interval: 0.5, now: { harness.clock.now },
                    logger: Logger(label: "test"))
                var seen: [Int64: Date] = [:]
                await queue.pollOnce(&seen)
                let signed = try #require(try await nip46.reply(to: requestID, wait: 0.5)?["result"] as? String)
                #expect(try verifySignedEvent(JSONSerialization.jsonObject(with: Data(signed.utf8)) as! [String: Any]))
                #expect(seen.count == 1)
            }
        }
    }

    @Test func aPastedNostrconnectURLConnectsTheClientWithItsOwnSecret() async throws {
        let hub = RelayHub()
        try await Harness().run(hub: hub) { client in
            let (token, _) = try await client.newAccount("alice")
            let signer = try await client.bunkerURL(token: token).signer
            let nip46 = try NIP46TestClient(hub: hub, signer: signer)
            let url =
                "nostrconnect://\(nip46.key.publicKey.hex)?relay=wss%3A%2F%2Frelay.example.com&secret=s3cr3t&perms=sign_event%3A1&name=Nostrudel"
            for bad in [
                "bunker://x", "nostrconnect://\(nip46.key.publicKey.hex)?secret=x",
                "nostrconnect://\(nip46.key.publicKey.hex)?relay=https%3A%2F%2Fexample.com&secret=x",
            ] {
                let refused = try await client.call(.post, "/api/signer/nostrconnect", json: ["url": bad], headers: Client.bearer(token))
                #expect(refused.status == .badRequest && refused.error == "invalid_request", "\(bad): \(refused.json)")
            }
            let reply = try await client.call(.post, "/api/signer/nostrconnect", json: ["url": url], headers: Client.bearer(token))
            #expect(reply.status == .ok && reply["name"] as? String == "Nostrudel", "\(reply.json)")
            // The client hears `connect`'s answer: its own secret, from the user's signer key.
            #expect(try await nip46.reply(to: nil)?["result"] as? String == "s3cr3t")
            #expect(try await nip46.call("ping", [])?["result"] as? String == "pong")
            let listed = try await client.call(.get, "/api/signer/bunker/clients", headers: Client.bearer(token))["clients"] as! [[String: Any]]
            #expect(listed.first?["name"] as? String == "Nostrudel" && listed.first?["perms"] as? String == "sign_event:1")
            #expect(try await harness(client).store.nostrConnectClients().first?.relays == ["wss://relay.example.com"])
        }
    }

    @Test func nostrJSONAdvertisesTheBunkersRelaysAndTheConnectPage() async throws {
        try await Harness { $0.relays = ["wss://relay.example.com"] }.run { client in
            let reply = try await client.call(.get, "/.well-known/nostr.json?name=_")
            let nip46 = try #require(reply["nip46"] as? [String: Any])
            #expect(nip46["relays"] as? [String] == ["ws://localhost:8090/nip46", "wss://relay.example.com"])
            #expect(nip46["nostrconnect_url"] as? String == "http://localhost:8080/connect/<nostrconnect>")
            #expect(reply.headers[.accessControlAllowOrigin] == "*")
            #expect((try await client.call(.get, "/.well-known/nostr.json?name=bob")).json["nip46"] == nil)
        }
    }

    /// Past `maxInFlight` requests being handled, new ones are dropped rather than queued without bound.
    @Test func requestsInFlightAreBounded() async throws {
        let harness = try Harness()
        let hub = RelayHub()
        try await harness.run(hub: hub) { client in
            let (token, _) = try await client.newAccount("alice")
            let url = try await client.bunkerURL(token: token)
            // A second bunker on the same store, reading another hub, that admits nothing.
            let closed = RelayHub()
            Bunker.standalone(store: harness.store, vault: harness.vault, hub: closed, maxInFlight: 0).attach()
            let nip46 = try NIP46TestClient(hub: closed, signer: url.signer)
            #expect(try await nip46.reply(to: nip46.send("connect", [url.signer.hex, url.secret!]), wait: 0.3) == nil)
            // The real one still answers (the secret was not used by the dropped request).
            _ = try await client.connectedClient(token: token, hub: hub)
        }
    }
}

/// #28: the bunker handles requests in child tasks of its service, so graceful shutdown stops it
/// (no request task outlives the server).
@Suite struct BunkerServiceTests {
    @Test func gracefulShutdownStopsTheBunker() async throws {
        let harness = try Harness()
        let hub = RelayHub()
        try await harness.run(hub: hub) { client in
            let (token, _) = try await client.newAccount("alice")
            let url = try await client.bunkerURL(token: token)
            // A second bunker on the same store, on a hub of its own, run by a group of its own.
            let own = RelayHub()
            let bunker = Bunker.standalone(store: harness.store, vault: harness.vault, hub: own)
            bunker.attach()
            let group = ServiceGroup(services: [bunker], logger: Logger(label: "test"))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                let nip46 = try NIP46TestClient(hub: own, signer: url.signer)
                let connect = try nip46.send("connect", [url.signer.hex, url.secret!])
                #expect(try await nip46.reply(to: connect, wait: 15)?["result"] as? String == "ack")
                await group.triggerGracefulShutdown()
                try await tasks.next()  // the service returned
                #expect(try await nip46.reply(to: nip46.send("ping", []), wait: 0.3) == nil)
            }
        }
    }
}

func harness(_ client: Client) -> Harness { client.harness }

/// Guessing the connect secret (#23): each wrong guess cost a database write, a signed reply and
/// a log line. Now a guess touches no table, five a minute per signer are answered, and the log
/// says how many in one line; the real secret still connects at once.
@Suite struct ConnectGuessTests {
    @Test func wrongSecretsAreCheapQuietAndDoNotLockOutTheRealOne() async throws {
        let hub = RelayHub()
        try await Harness().run(hub: hub) { client in
            let (token, _) = try await client.newAccount("alice")
            let url = try await client.bunkerURL(token: token)
            var answered = 0
            for n in 0..<12 {
                let guesser = try NIP46TestClient(hub: hub, signer: url.signer)
                // The first five are answered (waited for generously: the suite runs in parallel on
                // two cores); the rest get silence.
                let reply = try await guesser.reply(to: guesser.send("connect", [url.signer.hex, "guess-\(n)"]), wait: n < 5 ? 15 : 0.2)
                if let error = reply?["error"] as? String {
                    #expect(error.hasPrefix("unauthorized"))
                    answered += 1
                }
            }
            #expect(answered == 5)
            let refusals = client.harness.logs.lines.filter { $0.contains("nip46.connect_refused") }
            #expect(refusals.count <= 1, "\(refusals)")
            #expect(!client.harness.logs.lines.contains { $0.contains("guess-") })
            let real = try NIP46TestClient(hub: hub, signer: url.signer)
            #expect(try await real.call("connect", [url.signer.hex, url.secret!])?["result"] as? String == "ack")
        }
    }
}

/// "New URL" after a leak must void the leaked secret, also when pressed twice in one second
/// (every URL has a new random secret; it once was derived from a whole-second expiry).
@Suite struct BunkerRotationTests {
    @Test func rotatingTwiceInOneSecondVoidsEachEarlierSecret() async throws {
        let hub = RelayHub()
        try await Harness().run(hub: hub) { client in
            let (token, _) = try await client.newAccount("alice")
            let shown = try await client.bunkerURL(token: token)
            var secrets = [shown.secret!]
            for _ in 0..<2 {  // the harness's clock does not move: all three in the same second
                let reply = try await client.call(.post, "/api/signer/bunker/rotate", headers: Client.bearer(token))
                secrets.append(try BunkerURL.parse(try #require(reply["url"] as? String)).secret!)
            }
            #expect(Set(secrets).count == 3, "\(secrets)")
            for old in secrets.dropLast() {
                let leaked = try NIP46TestClient(hub: hub, signer: shown.signer)
                let reply = try await leaked.call("connect", [shown.signer.hex, old])
                #expect((reply?["error"] as? String)?.hasPrefix("unauthorized") == true, "\(reply ?? [:])")
            }
            let fresh = try NIP46TestClient(hub: hub, signer: shown.signer)
            #expect(try await fresh.call("connect", [shown.signer.hex, secrets.last!])?["result"] as? String == "ack")
        }
    }
}
