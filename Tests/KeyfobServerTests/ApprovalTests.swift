import Foundation
import HTTPTypes
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import Nostr
import Testing
import WebAuthn
import WebAuthnTestSupport

@testable import KeyfobServer

/// The path and query Keyfob serves for a request URL built by the client-side codec.
func serverTarget(_ url: String) -> String {
    if url.hasPrefix("nostrsigner://") {  // NIP-155: /nostrsigner/<method>?…
        return "/nostrsigner/" + url.dropFirst("nostrsigner://".count)
    }
    if url.hasPrefix("nostrsigner:") { return "/nostrsigner/" + url.dropFirst("nostrsigner:".count) }
    let components = URLComponents(string: url)!
    return components.percentEncodedPath + "?" + (components.percentEncodedQuery ?? "")
}

extension Client {
    /// GET an entry point; returns the reply and its Location header.
    func open(_ target: String, token: String?) async throws -> (Reply, String?, String) {
        let response = try await raw.execute(uri: target, method: .get, headers: token.map(Client.bearer) ?? [:], body: nil)
        let body = String(buffer: response.body)
        return (Reply(status: response.status, headers: response.headers, json: [:]), response.headers[.location], body)
    }

    /// Entry → approval page API → approve; returns the callback URL Keyfob redirects to.
    /// `trustedBy`: the passkey that confirms the "trusted" preset for this client (`grant.trusted`).
    func approveFlow(
        _ url: String, token: String, remember: String = "once", preset: String? = nil,
        assertion: [String: Any]? = nil, trustedBy: SoftwareAuthenticator? = nil
    ) async throws -> String {
        let (reply, location, body) = try await open(serverTarget(url), token: token)
        guard reply.status == .seeOther, let location, location.hasPrefix("/approve/") else {
            throw TestFailure("expected a redirect to the approval page, got \(reply.status) \(location ?? "") \(body.prefix(300))")
        }
        let id = String(location.dropFirst("/approve/".count))
        var body2: [String: Any] = ["remember": remember]
        if let preset { body2["preset"] = preset }
        if let assertion { body2["assertion"] = assertion }
        if var passkey = trustedBy {
            let client = try await call(.get, "/api/requests/\(id)", headers: Client.bearer(token))["client"] as? String ?? ""
            body2["confirmation"] = try await confirmation("grant.trusted", target: client, by: &passkey, token: token)
        }
        let approved = try await call(.post, "/api/requests/\(id)/approve", json: body2, headers: Client.bearer(token))
        guard let redirect = approved["redirect"] as? String else { throw TestFailure("approve: \(approved.status) \(approved.json)") }
        return redirect
    }
}

func keyfobRequest(
    _ method: SignerMethod, content: String = "", callback: String = "https://client.example/cb",
    transport: SignerRequest.Transport, peer: PublicKey? = nil, gzip: Bool = false, id: String? = nil
) throws -> SignerRequest {
    let cb = try CallbackURL(callback)
    return SignerRequest(
        transport: transport, method: method, content: content, peer: peer, correlationID: id,
        returnType: method == .signEvent ? "event" : "signature", compression: gzip ? .gzip : .none,
        callbacks: Callbacks(success: cb, error: transport == .nip155 ? try CallbackURL(callback + "?failed=1") : nil, cancel: nil),
        currentUser: nil, clientName: nil, permissions: nil)
}

@Suite struct RedirectFlowTests {
    static let note = #"{"kind":1,"content":"hello from an app","tags":[["t","keyfob"]],"created_at":1700000000}"#

    @Test(arguments: [SignerRequest.Transport.keyfobLink, .dip05, .nip155])
    func signEventInEveryFormVerifies(_ transport: SignerRequest.Transport) async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("alice")
            let pubkey = try await client.signer("get_public_key", token: token)["result"] as! String
            for gzip in transport == .keyfobLink ? [false] : [false, true] {
                let request = try keyfobRequest(.signEvent, content: Self.note, transport: transport, gzip: gzip, id: "req-7")
                let url = SignerCodec.buildURL(request)
                let callback = try await client.approveFlow(url, token: token)
                #expect(callback.hasPrefix("https://client.example/cb?"))
                let parsed = try SignerCodec.parseCallback(callback, for: request)
                guard case .success(let sig, let eventJSON) = parsed.outcome else { Issue.record("\(parsed)"); continue }
                if transport == .nip155 { #expect(parsed.correlationID == "req-7") }
                if let eventJSON {
                    let event = try JSONSerialization.jsonObject(with: Data(eventJSON.utf8)) as! [String: Any]
                    #expect(try verifySignedEvent(event) && event["sig"] as? String == sig && event["pubkey"] as? String == pubkey)
                    #expect(event["created_at"] as? Int == 1_700_000_000)
                } else {
                    // Keyfob links answer id, sig and pubkey: rebuild the event and check both independently.
                    let items = URLComponents(string: callback)!.queryItems!
                    let id = items.first { $0.name == "id" }!.value!
                    #expect(items.first { $0.name == "pubkey" }?.value == pubkey)
                    let serialized = Event.serialize(
                        pubkey: pubkey, createdAt: 1_700_000_000, kind: 1, tags: [["t", "keyfob"]],
                        content: "hello from an app")
                    #expect(Hex.encode(sha256(serialized)) == id)
                    #expect(try PublicKey(hex: pubkey).isValidSignature(Hex.decode(sig)!, for: Hex.decode(id)!))
                }
            }
        }
    }

    @Test func everyMethodOverDIP05AndNIP155() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("alice")
            let me = try PublicKey(hex: try await client.signer("get_public_key", token: token)["result"] as! String)
            let peer = SecretKey.generate()
            for transport in [SignerRequest.Transport.dip05, .nip155] {
                // get_public_key
                let pk = try keyfobRequest(.getPublicKey, transport: transport)
                guard
                    case .success(let result, _) = try SignerCodec.parseCallback(
                        try await client.approveFlow(SignerCodec.buildURL(pk), token: token), for: pk
                    ).outcome
                else {
                    Issue.record("get_public_key"); continue
                }
                #expect(result == me.hex)
                // nip44_encrypt: the peer decrypts with its own key
                let enc = try keyfobRequest(.nip44Encrypt, content: "secret ✓", transport: transport, peer: peer.publicKey)
                if case .success(let ciphertext, _) = try SignerCodec.parseCallback(
                    try await client.approveFlow(SignerCodec.buildURL(enc), token: token), for: enc
                ).outcome {
                    #expect(try NIP44.decrypt(ciphertext, with: peer, from: me) == "secret ✓")
                } else {
                    Issue.record("nip44_encrypt")
                }
                // nip04_decrypt: the server reads what the peer wrote
                let sealed = try NIP04.encrypt("from the peer", from: peer, to: me)
                let dec = try keyfobRequest(.nip04Decrypt, content: sealed, transport: transport, peer: peer.publicKey)
                if case .success(let plaintext, _) = try SignerCodec.parseCallback(
                    try await client.approveFlow(SignerCodec.buildURL(dec), token: token), for: dec
                ).outcome {
                    #expect(plaintext == "from the peer")
                } else {
                    Issue.record("nip04_decrypt")
                }
            }
        }
    }

    @Test func rejectionsReachTheClientInEachSpecsForm() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("alice")
            for (transport, expected) in [
                (SignerRequest.Transport.keyfobLink, "ok=0&code=user_rejected"),
                (.dip05, "error=user_rejected&rejected=true"), (.nip155, "code=user_cancelled"),
            ] {
                let request = try keyfobRequest(.signEvent, content: Self.note, transport: transport)
                let (_, location, _) = try await client.open(serverTarget(SignerCodec.buildURL(request)), token: token)
                let id = String(location!.dropFirst("/approve/".count))
                let rejected = try await client.call(.post, "/api/requests/\(id)/reject", json: [:], headers: Client.bearer(token))
                let redirect = try #require(rejected["redirect"] as? String)
                #expect(redirect.contains(expected), "\(transport): \(redirect)")
                #expect(try SignerCodec.parseCallback(redirect, for: request).outcome == .rejected)
            }
        }
    }

    @Test func dangerousCallbacksAreRefusedWithNothingStored() async throws {
        let harness = try Harness()
        try await harness.run { client in
            let (token, _) = try await client.newAccount("alice")
            let payload = Base64URL.encode(Array(Self.note.utf8))
            let bad = [
                "JavaScript:alert(1)", " javascript:alert(1)", "java\tscript:alert(1)", "DATA:text/html,x", "file:///etc/passwd",
                "nostrsigner:loop", "https://evil.example\\@trusted.example/cb", "https://user:pw@trusted.example/cb",
                "https://trusted.example@evil.example/cb", "vbscript:x", "https:evil.example", "",
            ]
            for cb in bad {
                for target in [
                    "/app/sign?payload=\(payload)&cb=\(percentEncode(cb))",
                    "/nostrsigner/\(percentEncode(Self.note))?type=sign_event&callbackUrl=\(percentEncode(cb))",
                    "/nostrsigner?type=sign_event&event=\(percentEncode(Self.note))&x-success=\(percentEncode(cb))",
                ] {
                    let (reply, location, body) = try await client.open(target, token: token)
                    #expect(reply.status == .badRequest && location == nil, "\(cb): \(reply.status)")
                    #expect(body.contains("cannot be handled") && !body.contains("id=\"back\""), "\(cb)")
                }
            }
            #expect(try await harness.store.pendingRequestCount(now: harness.clock.now) == 0)
        }
    }

    @Test func otherBadRequestsGetAPageWithABackLinkInTheSpecsErrorForm() async throws {
        let harness = try Harness()
        try await harness.run { client in
            let (token, _) = try await client.newAccount("alice")
            let cases: [(String, String)] = [
                ("/app/sign?payload=%%%&cb=https%3A%2F%2Fclient.example%2Fcb", "https://client.example/cb?ok=0&amp;code=invalid_request"),
                ("/app/sign?payload=!!!&cb=https%3A%2F%2Fclient.example%2Fcb", "https://client.example/cb?ok=0&amp;code=invalid_content"),
                (
                    "/app/sign?payload=\(Base64URL.encode(Array(#"{"kind":"1","content":"x"}"#.utf8)))&cb=https%3A%2F%2Fclient.example%2Fcb",
                    "https://client.example/cb?ok=0&amp;code=invalid_content"
                ),
                ("/nostrsigner/x?type=teleport&callbackUrl=myapp%3A%2F%2Fcb", "myapp://cb?error=unsupported_type"),
                ("/nostrsigner/x?type=nip44_encrypt&pubkey=abc&callbackUrl=myapp%3A%2F%2Fcb", "myapp://cb?error=invalid_pubkey"),
                (
                    "/nostrsigner?type=sign_event&event=%7B%7D&x-success=myapp%3A%2F%2Fok&x-error=myapp%3A%2F%2Ferr&id=9",
                    "myapp://err?code=invalid_request"
                ),
                (
                    "/app/sign?payload=\(Base64URL.encode(Array(#"{"kind":14,"content":"rumor"}"#.utf8)))&cb=https%3A%2F%2Fclient.example%2Fcb",
                    "https://client.example/cb?ok=0&amp;code=invalid_content"
                ),
            ]
            for (target, back) in cases {
                let (reply, location, body) = try await client.open(target, token: token)
                #expect(reply.status == .badRequest && location == nil, "\(target)")
                #expect(body.contains("id=\"back\"") && body.contains(back), "\(target): \(body.prefix(600))")
            }
            // NIP-155 without x-error: no error callback to offer.
            let (_, _, body) = try await client.open("/nostrsigner?type=sign_event&event=%7B%7D&x-success=myapp%3A%2F%2Fok", token: token)
            #expect(!body.contains("id=\"back\""))
            #expect(try await harness.store.pendingRequestCount(now: harness.clock.now) == 0)
        }
    }

    @Test func aRequestIsDecidedOnceByItsOwnerWithinFiveMinutes() async throws {
        let harness = try Harness()
        try await harness.run { client in
            let (alice, _) = try await client.newAccount("alice")
            let (bob, _) = try await client.newAccount("bob")
            let url = serverTarget(SignerCodec.buildURL(try keyfobRequest(.signEvent, content: Self.note, transport: .keyfobLink)))
            // Opened without a session: the first signed-in user to open it owns it.
            let (_, location, _) = try await client.open(url, token: nil)
            let id = String(location!.dropFirst("/approve/".count))
            #expect(try await client.call(.get, "/api/requests/\(id)").status == .unauthorized)
            let shown = try await client.call(.get, "/api/requests/\(id)", headers: Client.bearer(alice))
            #expect(shown.status == .ok && shown["client"] as? String == "client.example")
            #expect((shown["event"] as? [String: Any])?["content"] as? String == "hello from an app")
            #expect(try await client.call(.get, "/api/requests/\(id)", headers: Client.bearer(bob)).error == "request_not_found")
            #expect(try await client.call(.post, "/api/requests/\(id)/approve", json: [:], headers: Client.bearer(bob)).status == .notFound)
            #expect(try await client.call(.post, "/api/requests/\(id)/approve", json: [:], headers: Client.bearer(alice)).status == .ok)
            #expect(
                try await client.call(.post, "/api/requests/\(id)/approve", json: [:], headers: Client.bearer(alice)).error == "request_not_found")
            #expect(try await client.call(.post, "/api/requests/\(id)/reject", json: [:], headers: Client.bearer(alice)).status == .notFound)
            // Expired.
            let (_, later, _) = try await client.open(url, token: alice)
            harness.clock.advance(301)
            let expired = String(later!.dropFirst("/approve/".count))
            #expect(try await client.call(.get, "/api/requests/\(expired)", headers: Client.bearer(alice)).error == "request_not_found")
        }
    }

    @Test func cookieApprovalsNeedAnAllowedOrigin() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("alice")
            let (_, location, _) = try await client.open(
                serverTarget(
                    SignerCodec.buildURL(
                        try keyfobRequest(.signEvent, content: Self.note, transport: .keyfobLink))), token: token)
            let id = String(location!.dropFirst("/approve/".count))
            let cookie: HTTPFields = [.cookie: "keyfob_session=\(token)"]
            let forged = try await client.call(.post, "/api/requests/\(id)/approve", json: [:], headers: cookie)
            #expect(forged.status == .forbidden)
            var withOrigin = cookie
            withOrigin[.origin] = "https://evil.example"
            #expect(try await client.call(.post, "/api/requests/\(id)/approve", json: [:], headers: withOrigin).status == .forbidden)
            withOrigin[.origin] = Harness.origin
            #expect(try await client.call(.post, "/api/requests/\(id)/approve", json: [:], headers: withOrigin).status == .ok)
        }
    }

    @Test func theLockIsNeverSkipped() async throws {
        let harness = try Harness()
        try await harness.run { client in
            let (token, _) = try await client.newAccount("alice")
            let url = SignerCodec.buildURL(try keyfobRequest(.signEvent, content: Self.note, transport: .keyfobLink))
            _ = try await client.approveFlow(url, token: token, remember: "day")
            harness.clock.advance(601)
            // Remembered, but locked: the page again, and approving there needs an unlock.
            let (reply, location, _) = try await client.open(serverTarget(url), token: token)
            #expect(reply.status == .seeOther && location?.hasPrefix("/approve/") == true)
            let id = String(location!.dropFirst("/approve/".count))
            #expect(try await client.call(.get, "/api/requests/\(id)", headers: Client.bearer(token))["signerLocked"] as? Bool == true)
            #expect(try await client.call(.post, "/api/requests/\(id)/approve", json: [:], headers: Client.bearer(token)).error == "signer_locked")
        }
    }
}

@Suite struct GrantTests {
    static let note = RedirectFlowTests.note

    @Test func rememberedChoicesSkipThePageForThatClientOnly() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("alice")
            let request = try keyfobRequest(.signEvent, content: Self.note, transport: .keyfobLink)
            _ = try await client.approveFlow(SignerCodec.buildURL(request), token: token, remember: "hour")
            // Same client, method and kind: straight back with the signature.
            let (reply, location, _) = try await client.open(serverTarget(SignerCodec.buildURL(request)), token: token)
            #expect(reply.status == .seeOther && location?.hasPrefix("https://client.example/cb?ok=1") == true)
            // Another client — also http:// or another port of the same host — gets the page.
            for other in ["https://other.example/cb", "http://client.example/cb", "https://client.example:8443/cb"] {
                let r = try keyfobRequest(.signEvent, content: Self.note, callback: other, transport: .keyfobLink)
                let (_, l, _) = try await client.open(serverTarget(SignerCodec.buildURL(r)), token: token)
                #expect(l?.hasPrefix("/approve/") == true, "\(other)")
            }
            // Another kind: the page.
            let reaction = try keyfobRequest(.signEvent, content: #"{"kind":7,"content":"+"}"#, transport: .keyfobLink)
            #expect(try await client.open(serverTarget(SignerCodec.buildURL(reaction)), token: token).1?.hasPrefix("/approve/") == true)
            // Listed, revoked, and the page is back.
            let grants = try await client.call(.get, "/api/signer/grants", headers: Client.bearer(token))["grants"] as! [[String: Any]]
            #expect(grants.count == 1 && grants[0]["client"] as? String == "client.example" && grants[0]["kind"] as? Int == 1)
            let id = grants[0]["id"] as! String
            #expect(try await client.call(.delete, "/api/signer/grants/\(id)", headers: Client.bearer(token)).status == .ok)
            #expect(try await client.open(serverTarget(SignerCodec.buildURL(request)), token: token).1?.hasPrefix("/approve/") == true)
        }
    }

    @Test func aRememberedRejectionAnswersAtOnce() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("alice")
            let request = try keyfobRequest(.signEvent, content: Self.note, transport: .dip05)
            let (_, location, _) = try await client.open(serverTarget(SignerCodec.buildURL(request)), token: token)
            let id = String(location!.dropFirst("/approve/".count))
            _ = try await client.call(.post, "/api/requests/\(id)/reject", json: ["remember": "forever"], headers: Client.bearer(token))
            let (reply, next, _) = try await client.open(serverTarget(SignerCodec.buildURL(request)), token: token)
            #expect(reply.status == .seeOther && next?.contains("error=user_rejected&rejected=true") == true)
        }
    }

    @Test func dangerousKindsAlwaysShowThePageAndCannotBeAllowedInAdvance() async throws {
        try await Harness().run { client in
            let (token, owner) = try await client.newAccount("alice")
            for kind in [0, 3, 5, 10002, 22242, 27235, 24133, 30078] {
                let request = try keyfobRequest(.signEvent, content: #"{"kind":\#(kind),"content":"x"}"#, transport: .keyfobLink)
                let (_, location, _) = try await client.open(serverTarget(SignerCodec.buildURL(request)), token: token)
                let id = String(location!.dropFirst("/approve/".count))
                let shown = try await client.call(.get, "/api/requests/\(id)", headers: Client.bearer(token))
                #expect(shown["needsPasskey"] as? Bool == true && (shown["warnings"] as? [String])?.isEmpty == false)
                // Each kind says what it does (#56: kind 0 had a generic warning).
                let warning = (shown["warnings"] as? [String])?.first ?? ""
                #expect(warning.hasPrefix("This ") && warning.hasSuffix("Approve only if you started this."), "kind \(kind): \(warning)")
                if kind == 0 { #expect(warning.contains("whole profile")) }
                #expect(shown["remember"] as? [String] == ["once"])
                let remembered = try await client.call(.post, "/api/requests/\(id)/approve", json: ["remember": "day"], headers: Client.bearer(token))
                #expect(remembered.status == .forbidden && remembered.error == "permission_denied")
                let unconfirmed = try await client.call(.post, "/api/requests/\(id)/approve", json: [:], headers: Client.bearer(token))
                #expect(unconfirmed.error == "user_verification_required", "kind \(kind)")
            }
            // The "trusted" preset does not cover them either.
            let note = try keyfobRequest(.signEvent, content: Self.note, transport: .keyfobLink)
            _ = try await client.approveFlow(SignerCodec.buildURL(note), token: token, preset: "trusted", trustedBy: owner)
            let profile = try keyfobRequest(.signEvent, content: #"{"kind":0,"content":"{}"}"#, transport: .keyfobLink)
            #expect(try await client.open(serverTarget(SignerCodec.buildURL(profile)), token: token).1?.hasPrefix("/approve/") == true)
            let repost = try keyfobRequest(.signEvent, content: #"{"kind":6,"content":""}"#, transport: .keyfobLink)
            #expect(
                try await client.open(serverTarget(SignerCodec.buildURL(repost)), token: token).1?.hasPrefix("https://client.example/cb?ok=1") == true
            )
        }
    }

    @Test func theEverydayPresetCoversCommonKindsForAnHour() async throws {
        let harness = try Harness()
        try await harness.run { client in
            let (token, _) = try await client.newAccount("alice")
            _ = try await client.approveFlow(
                SignerCodec.buildURL(try keyfobRequest(.signEvent, content: Self.note, transport: .keyfobLink)),
                token: token, preset: "everyday")
            let reaction = try keyfobRequest(.signEvent, content: #"{"kind":7,"content":"+"}"#, transport: .keyfobLink)
            #expect(try await client.open(serverTarget(SignerCodec.buildURL(reaction)), token: token).1?.hasPrefix("https://") == true)
            let other = try keyfobRequest(.signEvent, content: #"{"kind":30311,"content":""}"#, transport: .keyfobLink)
            #expect(try await client.open(serverTarget(SignerCodec.buildURL(other)), token: token).1?.hasPrefix("/approve/") == true)
            harness.clock.advance(3601)
            // An hour later (and re-unlocked), the page is back.
            var authenticator = try await harness.store.credentials(ofUser: harness.store.user(named: "alice")!.id)
            _ = authenticator
            let (reply, location, _) = try await client.open(serverTarget(SignerCodec.buildURL(reaction)), token: token)
            #expect(reply.status == .seeOther && location?.hasPrefix("/approve/") == true)
            authenticator = []
        }
    }

    @Test func atMostTwentyPendingRequestsPerClient() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("alice")
            let url = serverTarget(SignerCodec.buildURL(try keyfobRequest(.signEvent, content: Self.note, transport: .keyfobLink)))
            for _ in 0..<20 { #expect(try await client.open(url, token: token).0.status == .seeOther) }
            let (reply, _, body) = try await client.open(url, token: token)
            #expect(reply.status == .tooManyRequests && body.contains("ok=0&amp;code=rate_limited"))
            let other = serverTarget(
                SignerCodec.buildURL(try keyfobRequest(.signEvent, content: Self.note, callback: "https://b.example/cb", transport: .keyfobLink)))
            #expect(try await client.open(other, token: token).0.status == .seeOther)
        }
    }
}

@Suite struct ReceiptTests {
    @Test func confirmWithPasskeyAsksForEveryApproval() async throws {
        try await Harness { $0.confirmWithPasskey = true }.run { client in
            let (token, _) = try await client.newAccount("alice")
            let request = try keyfobRequest(.signEvent, content: RedirectFlowTests.note, transport: .keyfobLink)
            let (_, location, _) = try await client.open(serverTarget(SignerCodec.buildURL(request)), token: token)
            let id = String(location!.dropFirst("/approve/".count))
            #expect(try await client.call(.get, "/api/requests/\(id)", headers: Client.bearer(token))["needsPasskey"] as? Bool == true)
            let plain = try await client.call(.post, "/api/requests/\(id)/approve", json: [:], headers: Client.bearer(token))
            #expect(plain.status == .forbidden && plain.error == "user_verification_required")
        }
    }

    /// A kind-0 approval needs a passkey assertion over the request's canonical bytes; the
    /// receipt it leaves verifies with the WebAuthn module against the stored credential.
    @Test func aConfirmedApprovalLeavesAReceiptThatVerifies() async throws {
        try await Harness().run { client in
            var (token, authenticator) = try await client.newAccount("alice")
            let request = try keyfobRequest(
                .signEvent, content: #"{"kind":0,"content":"{\"name\":\"alice\"}","created_at":1700000000}"#,
                transport: .keyfobLink)
            let (_, location, _) = try await client.open(serverTarget(SignerCodec.buildURL(request)), token: token)
            let id = String(location!.dropFirst("/approve/".count))
            let options = try await client.call(.post, "/api/requests/\(id)/challenge", json: [:], headers: Client.bearer(token))
            let committed = try #require(options["committed"] as? String)
            #expect(committed.contains("request:\(id)") && committed.contains("client:client.example") && committed.contains("event:"))
            let challenge = Base64URL.decode(options["challenge"] as! String)!
            #expect(challenge == sha256(Array(committed.utf8)))
            var fields = authenticator.authenticationFields(challenge: challenge, rpID: "localhost", origin: Harness.origin)
            // A wrong challenge is refused.
            var forged = fields
            forged.challenge = Base64URL.encode(sha256(Array("something else".utf8)))
            let bad = try await client.call(
                .post, "/api/requests/\(id)/approve",
                json: ["assertion": try jsonObject(authenticator.authenticate(forged))], headers: Client.bearer(token))
            #expect(bad.status.code >= 400 && bad.status.code < 500)
            fields.signCount += 1
            let assertion = try jsonObject(authenticator.authenticate(fields))
            let approved = try await client.call(.post, "/api/requests/\(id)/approve", json: ["assertion": assertion], headers: Client.bearer(token))
            let redirect = try #require(approved["redirect"] as? String, "\(approved.json)")
            #expect(redirect.contains("ok=1"))
            authenticator.signCount = fields.signCount

            let history = try await client.call(.get, "/api/signer/history", headers: Client.bearer(token))["entries"] as! [[String: Any]]
            let entry = history.first { $0["kind"] as? Int == 0 && $0["outcome"] as? String == "approved" }!
            let receiptReply = try await client.call(.get, "/api/signer/history/\(entry["id"] as! String)/receipt", headers: Client.bearer(token))
            let receipt = receiptReply.json
            #expect(receipt["committed"] as? String == committed)
            // Verify the receipt on its own: the stored public key, the committed bytes, the assertion.
            let key = try CredentialPublicKey(cose: Base64URL.decode(receipt["publicKey"] as! String)!)
            let data = try JSONSerialization.data(withJSONObject: receipt["assertion"]!)
            let stored = StoredCredential(id: authenticator.credentialID, publicKey: key, signCount: 0)
            let rp = RelyingParty(id: "localhost", name: "Keyfob", origins: [Harness.origin])
            _ = try rp.verifyAuthentication(
                JSONDecoder().decode(AuthenticationCredential.self, from: data),
                challenge: sha256(Array((receipt["committed"] as! String).utf8)), stored: stored)
            // The committed event id is the id of the event that was signed.
            let eventID = URLComponents(string: redirect)!.queryItems!.first { $0.name == "id" }!.value!
            #expect(committed.contains("event:\(eventID)"))
            // Not someone else's receipt.
            let (other, _) = try await client.newAccount("bob")
            #expect(
                try await client.call(.get, "/api/signer/history/\(entry["id"] as! String)/receipt", headers: Client.bearer(other)).status
                    == .notFound)
            token = other
        }
    }
}
