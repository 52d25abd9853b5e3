import Foundation
import Testing

@testable import Nostr

/// The request forms of DIP-05, NIP-155 and the keyfob links, from the specs' own examples.
@Suite struct SignerCodecTests {
    // MARK: DIP-05

    @Test func dip05ExampleFlowRoundTrips() throws {
        // specs/dip-05-nostrsigner-ios.md, "Example Flow".
        let url =
            "nostrsigner:%7B%22kind%22%3A1%2C%22content%22%3A%22Hello%22%7D?type=sign_event&callbackUrl=primal%3A%2F%2Fnostrsigner&returnType=event"
        let request = try SignerCodec.parse(nostrsignerURL: url)
        #expect(request.transport == .dip05 && request.method == .signEvent)
        #expect(request.content == #"{"kind":1,"content":"Hello"}"#)
        #expect(request.client == "primal")
        #expect(request.returnType == "event")

        let event = #"{"id":"ab","sig":"abc123"}"#
        let callback = SignerCodec.callback(for: request, outcome: .success(result: "abc123", event: event))!
        #expect(callback == "primal://nostrsigner?result=abc123&event=%7B%22id%22%3A%22ab%22%2C%22sig%22%3A%22abc123%22%7D")
    }

    /// NIP-55's web form: `callbackUrl=https://example.com/?event=` takes the value itself.
    @Test func aCallbackEndingInEqualsGetsTheValueItself() throws {
        let event = #"{"id":"ab","sig":"cd"}"#
        let asEvent = try SignerCodec.parse(
            nostrsignerURL: "nostrsigner:%7B%22kind%22%3A1%7D?type=sign_event&returnType=event&callbackUrl=https%3A%2F%2Fexample.com%2F%3Fevent%3D")
        #expect(
            SignerCodec.callback(for: asEvent, outcome: .success(result: "cd", event: event))
                == "https://example.com/?event=%7B%22id%22%3A%22ab%22%2C%22sig%22%3A%22cd%22%7D")
        let asSignature = try SignerCodec.parse(
            nostrsignerURL: "nostrsigner:%7B%22kind%22%3A1%7D?type=sign_event&callbackUrl=https%3A%2F%2Fexample.com%2Fcb%3Fsig%3D%23done")
        #expect(SignerCodec.callback(for: asSignature, outcome: .success(result: "cd", event: event)) == "https://example.com/cb?sig=cd#done")
        // Errors keep their named parameter.
        #expect(
            SignerCodec.callback(for: asSignature, outcome: .failure(code: "invalid_pubkey", message: "x"))
                == "https://example.com/cb?sig=&error=invalid_pubkey#done")
    }

    @Test func queryParametersAreAppendedWithQuestionMarkOrAmpersand() throws {
        let plain = try CallbackURL("primal://nostrsigner")
        #expect(plain.appending([("result", "sig")]) == "primal://nostrsigner?result=sig")
        let withQuery = try CallbackURL("primal://callback?session=123")
        #expect(withQuery.appending([("result", "sig")]) == "primal://callback?session=123&result=sig")
        let withFragment = try CallbackURL("https://app.example/cb?x=1#top")
        #expect(withFragment.appending([("a", "b c")]) == "https://app.example/cb?x=1&a=b%20c#top")
    }

    @Test func dangerousCallbackSchemesAreRefused() {
        for scheme in [
            "javascript:alert(1)", "JavaScript:alert(1)", "data:text/html,x", "file:///etc/passwd", "about:blank",
            "blob:https://x/y", "vbscript:x", "nostrsigner:loop", " javascript:alert(1)", "java\tscript:x", "//no-scheme", "",
        ] {
            #expect(throws: NostrError.self, "\(scheme)") { _ = try CallbackURL(scheme) }
            let url = "nostrsigner:?type=get_public_key&callbackUrl=\(percentEncode(scheme))"
            do { _ = try SignerCodec.parse(nostrsignerURL: url); Issue.record("accepted \(scheme)") } catch {
                #expect(error.code == .invalidCallback, "\(scheme): \(error)")
            }
        }
    }

    @Test func reEntryThroughNostrsignerIsRefused() {
        let url = "nostrsigner:?type=get_public_key&callbackUrl=nostrsigner%3A%3Ftype%3Dget_public_key"
        do { _ = try SignerCodec.parse(nostrsignerURL: url); Issue.record("accepted a nostrsigner callback") } catch {
            #expect(error.code == .invalidCallback)
        }
    }

    @Test func aMissingCallbackIsRefused() {
        do { _ = try SignerCodec.parse(nostrsignerURL: "nostrsigner:?type=get_public_key"); Issue.record("accepted") } catch {
            #expect(error.code == .invalidCallback)
        }
    }

    @Test func clientIdentificationFallsBackFromHostToSchemeToUnknown() throws {
        #expect(try CallbackURL("primal://nostrsigner").clientIdentifier == "primal")
        #expect(try CallbackURL("https://Snort.Social/cb").clientIdentifier == "snort.social")
        #expect(try CallbackURL("myapp:done").clientIdentifier == "myapp")
        // App schemes are named by scheme: another app using the same "host" gets no shared grants.
        #expect(try CallbackURL("evil://nostrsigner").clientIdentifier == "evil")
    }

    @Test func dip05Errors() throws {
        let request = try SignerCodec.parse(nostrsignerURL: "nostrsigner:?type=get_public_key&callbackUrl=app%3A%2F%2Fcb")
        #expect(SignerCodec.callback(for: request, outcome: .rejected) == "app://cb?error=user_rejected&rejected=true")
        #expect(SignerCodec.callback(for: request, outcome: .failure(code: "invalid_pubkey", message: "x")) == "app://cb?error=invalid_pubkey")
        #expect(SignerCodec.callback(for: request, outcome: .failure(code: "decrypt_failed", message: "x")) == "app://cb?error=invalid_content")
    }

    @Test func dip05EncryptNeedsAValidPubkey() throws {
        let peer = SecretKey.generate().publicKey.hex
        let ok = try SignerCodec.parse(nostrsignerURL: "nostrsigner:hello%20world?type=nip44_encrypt&pubkey=\(peer)&callbackUrl=app%3A%2F%2Fcb")
        #expect(ok.content == "hello world" && ok.peer?.hex == peer)
        do {
            _ = try SignerCodec.parse(nostrsignerURL: "nostrsigner:hi?type=nip04_encrypt&pubkey=zz&callbackUrl=app%3A%2F%2Fcb");
            Issue.record("accepted")
        } catch {
            #expect(error.code == .invalidPubkey)
        }
        do { _ = try SignerCodec.parse(nostrsignerURL: "nostrsigner:?type=sign_message&callbackUrl=app%3A%2F%2Fcb"); Issue.record("accepted") } catch
        {
            #expect(error.code == .unsupportedType)
        }
    }

    @Test func signer1GzipEventsDecodeToTheSameJSON() throws {
        let v = try NostrVectors.json("generated_nip55_signer1_gzip.json")
        let decoded = try SignerCodec.gunzipBase64(v["signer1"] as! String, prefix: "Signer1")
        let a = try JSONSerialization.jsonObject(with: Data(decoded.utf8)) as! NSDictionary
        let b = try JSONSerialization.jsonObject(with: Data((v["event_json"] as! String).utf8)) as! NSDictionary
        #expect(a == b)

        let request = try SignerCodec.parse(
            nostrsignerURL:
                "nostrsigner:%7B%7D?type=sign_event&callbackUrl=app%3A%2F%2Fcb&returnType=event&compressionType=gzip")
        let url = SignerCodec.callback(for: request, outcome: .success(result: "sig", event: v["event_json"] as! String))!
        let event = URLComponents(string: url)!.queryItems!.first { $0.name == "event" }!.value!
        #expect(event.hasPrefix("Signer1"))
        #expect(try SignerCodec.gunzipBase64(event, prefix: "Signer1") == v["event_json"] as! String)
    }

    @Test func gzipBombsAreRefused() {
        let bomb = SignerCodec.gzipBase64(String(repeating: "a", count: 2 * 1024 * 1024))
        #expect(throws: NostrError.self) { _ = try SignerCodec.gunzipBase64(bomb, prefix: nil) }
    }

    // MARK: NIP-155

    @Test func nip155SignEventExampleRoundTrips() throws {
        // specs/nip-155-ios-signer.md §14.1 (line breaks removed).
        let url =
            "nostrsigner://sign_event?type=sign_event&event=%7B%22kind%22%3A1%2C%22content%22%3A%22hello%22%7D&current_user=ABCDEF&id=42&returnType=signature&x-success=myapp://nostr/signed&x-error=myapp://nostr/error&x-source=MyNostrClient"
        let request = try SignerCodec.parse(nostrsignerURL: url)
        #expect(request.transport == .nip155 && request.method == .signEvent)
        #expect(request.content == #"{"kind":1,"content":"hello"}"#)
        #expect(request.correlationID == "42" && request.clientName == "MyNostrClient" && request.client == "myapp")
        #expect(SignerCodec.callback(for: request, outcome: .success(result: "abcd", event: "{}")) == "myapp://nostr/signed?id=42&result=abcd")
        #expect(
            SignerCodec.callback(for: request, outcome: .failure(code: "permission_denied", message: "no"))
                == "myapp://nostr/error?code=permission_denied&reason=no&id=42")
        #expect(
            SignerCodec.callback(for: request, outcome: .rejected) == "myapp://nostr/error?code=user_cancelled&reason=the%20user%20declined&id=42")
    }

    @Test func nip155GetPublicKeyFromTheWeb() throws {
        // §14.2.
        let url =
            "nostrsigner://get_public_key?type=get_public_key&x-success=https://example.com/nostr/callback&x-error=https://example.com/nostr/callback-error&permissions=%5B%7B%22type%22%3A%22sign_event%22%7D%5D&x-source=ExampleWeb"
        let request = try SignerCodec.parse(nostrsignerURL: url)
        #expect(request.permissions == #"[{"type":"sign_event"}]"# && request.client == "example.com")
        #expect(
            SignerCodec.callback(for: request, outcome: .success(result: "ab12", event: nil), signerPackage: "keyfob")
                == "https://example.com/nostr/callback?pubkey=ab12&package=keyfob")
    }

    @Test func nip155AppendixBExampleOnAnAppSpecificScheme() throws {
        let event = percentEncode(#"{"kind":1,"content":"hello","tags":[]}"#)
        let url = "nip55-ios-test://sign_event?type=sign_event&event=\(event)&returnType=signature&x-success=myapp://ok&x-error=myapp://err&id=42"
        let request = try SignerCodec.parse(nostrsignerURL: url)
        #expect(request.method == .signEvent && request.content == #"{"kind":1,"content":"hello","tags":[]}"#)
        #expect(SignerCodec.callback(for: request, outcome: .success(result: "sig", event: nil)) == "myapp://ok?id=42&result=sig")
    }

    @Test func nip155WithoutAnErrorCallbackSendsNoErrorAndCancelPrefersXCancel() throws {
        let bare = try SignerCodec.parse(nostrsignerURL: "nostrsigner://get_public_key?type=get_public_key&x-success=app://ok")
        #expect(SignerCodec.callback(for: bare, outcome: .failure(code: "internal_error", message: "x")) == nil)
        let cancel = try SignerCodec.parse(
            nostrsignerURL: "nostrsigner://get_public_key?type=get_public_key&x-success=app://ok&x-cancel=app://cancel&id=7")
        #expect(SignerCodec.callback(for: cancel, outcome: .rejected) == "app://cancel?id=7")
    }

    @Test func nip155GzipAppliesToPayloadsAndResults() throws {
        let peer = SecretKey.generate().publicKey.hex
        let compressed = percentEncode(SignerCodec.gzipBase64("secret text"))
        let request = try SignerCodec.parse(
            nostrsignerURL:
                "nostrsigner://nip44_encrypt?type=nip44_encrypt&plaintext=\(compressed)&pubkey=\(peer)&compressionType=gzip&x-success=app://ok")
        #expect(request.content == "secret text")
        let url = SignerCodec.callback(for: request, outcome: .success(result: "ciphertext", event: nil))!
        let result = URLComponents(string: url)!.queryItems!.first { $0.name == "result" }!.value!
        #expect(try SignerCodec.gunzipBase64(result, prefix: nil) == "ciphertext")
    }

    @Test func nip155ErrorCodesMapFromDesignCodes() {
        #expect(SignerCodec.nip155Code("signer_locked") == "not_logged_in")
        #expect(SignerCodec.nip155Code("unsupported_type") == "unsupported_method")
        #expect(SignerCodec.nip155Code("invalid_pubkey") == "invalid_request")
        #expect(SignerCodec.nip155Code("rate_limited") == "rate_limited")
    }

    // MARK: keyfob universal links

    @Test func keyfobSignLinkRoundTrips() throws {
        let event = #"{"kind":1,"created_at":1700000000,"tags":[],"content":"hi"}"#
        let payload = Data(event.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        let link =
            "https://keyfob.example.com/app/sign?payload=\(payload)&cb=\(percentEncode("https://client.example/callback.html"))&origin=client.example"
        let request = try SignerCodec.parse(keyfobURL: link)
        #expect(request.transport == .keyfobLink && request.method == .signEvent && request.content == event)
        #expect(request.client == "client.example" && request.clientName == "client.example")
        let signed = #"{"id":"aa","pubkey":"bb","sig":"cc"}"#
        #expect(
            SignerCodec.callback(for: request, outcome: .success(result: "cc", event: signed))
                == "https://client.example/callback.html?ok=1&id=aa&sig=cc&pubkey=bb")
        #expect(
            SignerCodec.callback(for: request, outcome: .failure(code: "signer_locked", message: "Sign in first"))
                == "https://client.example/callback.html?ok=0&code=signer_locked&msg=Sign%20in%20first")
    }

    @Test func keyfobPubkeyLinkAndSchemeForm() throws {
        let request = try SignerCodec.parse(keyfobURL: "keyfob://pubkey?cb=app%3A%2F%2Fdone&origin=com.example.app")
        #expect(request.method == .getPublicKey)
        #expect(SignerCodec.callback(for: request, outcome: .success(result: "ab", event: nil)) == "app://done?ok=1&pubkey=ab")
        #expect(throws: NostrError.self) { _ = try SignerCodec.parse(keyfobURL: "https://k.example/app/sign?payload=e30") }
        #expect(throws: NostrError.self) { _ = try SignerCodec.parse(keyfobURL: "https://k.example/app/sign?payload=%%%&cb=app://x") }
        #expect(throws: NostrError.self) { _ = try SignerCodec.parse(keyfobURL: "https://k.example/app/delete?cb=app://x") }
    }
}

/// Building requests and reading callbacks back: every form round-trips.
@Suite struct SignerRoundTripTests {
    static let peer = try! PublicKey(hex: "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798")

    static func requests() throws -> [SignerRequest] {
        let app = try CallbackURL("myapp://nostr/done?session=1")
        let web = try CallbackURL("https://client.example/callback.html")
        let event = #"{"kind":1,"content":"héllo & ? = /","tags":[["t","x"]],"created_at":1700000000}"#
        var out: [SignerRequest] = []
        for method in SignerMethod.allCases {
            let content = method == .signEvent || method == .decryptZapEvent ? event : method == .getPublicKey ? "" : "text + ünïcode"
            let peer = method.needsPeer ? Self.peer : nil
            out.append(
                SignerRequest(
                    transport: .dip05, method: method, content: content, peer: peer, correlationID: nil,
                    returnType: method == .signEvent ? "event" : nil, compression: method == .signEvent ? .gzip : .none,
                    callbacks: Callbacks(success: app), currentUser: nil, clientName: nil, permissions: nil))
            out.append(
                SignerRequest(
                    transport: .nip155, method: method, content: content, peer: peer, correlationID: "42",
                    returnType: method == .signEvent ? "signature" : nil, compression: method == .nip44Encrypt ? .gzip : .none,
                    callbacks: Callbacks(success: web, error: try CallbackURL("https://client.example/err"), cancel: nil),
                    currentUser: Self.peer.hex, clientName: "Client", permissions: nil))
        }
        for method in [SignerMethod.signEvent, .getPublicKey] {
            out.append(
                SignerRequest(
                    transport: .keyfobLink, method: method, content: method == .signEvent ? event : "", peer: nil,
                    correlationID: nil, returnType: method == .signEvent ? "event" : nil, compression: .none,
                    callbacks: Callbacks(success: web), currentUser: nil, clientName: "client.example", permissions: nil))
        }
        return out
    }

    @Test func requestsRoundTrip() throws {
        for request in try Self.requests() {
            let url = SignerCodec.buildURL(request)
            let parsed = request.transport == .keyfobLink ? try SignerCodec.parse(keyfobURL: url) : try SignerCodec.parse(nostrsignerURL: url)
            #expect(parsed == request, "\(url)")
        }
    }

    @Test func callbacksRoundTrip() throws {
        let signed = #"{"id":"aa","pubkey":"bb","sig":"cc","content":"x & y"}"#
        for request in try Self.requests() {
            let outcomes: [SignerOutcome] = [
                .success(result: request.method == .getPublicKey ? Self.peer.hex : "cc", event: nil), .rejected,
                .failure(code: "internal_error", message: "went wrong"),
            ]
            for outcome in outcomes {
                guard let url = SignerCodec.callback(for: request, outcome: outcome) else { continue }
                let read = try SignerCodec.parseCallback(url, for: request)
                switch (outcome, read.outcome) {
                case (.success(let a, _), .success(let b, _)): #expect(a == b, "\(url)")
                case (.rejected, .rejected): break
                case (.failure, .failure(let code, _)): #expect(code == "internal_error", "\(url)")
                default: Issue.record("\(outcome) came back as \(read.outcome) via \(url)")
                }
                if request.transport == .nip155 { #expect(read.correlationID == "42") }
            }
            if request.returnType == "event" && request.transport == .dip05 {
                let url = SignerCodec.callback(for: request, outcome: .success(result: "cc", event: signed))!
                #expect(try SignerCodec.parseCallback(url, for: request).outcome == .success(result: "cc", event: signed))
            }
        }
    }
}

/// Callback URLs are read the way browsers read them (WHATWG URL), and clients are named by origin.
@Suite struct CallbackParsingTests {
    @Test func urlsThatBrowsersReadDifferentlyAreRefused() {
        for raw in [
            "https://evil.example\\@trusted.example/cb", "https://trusted.example\\cb", "https://user@trusted.example/cb",
            "https://user:pw@trusted.example/cb", "https://trusted.example@evil.example/cb", "https:trusted.example/cb",
            "https:/trusted.example/cb", "https://tr\u{0443}sted.example/cb", "myapp://x\\y",
        ] {
            #expect(throws: NostrError.self, "\(raw)") { _ = try CallbackURL(raw) }
        }
    }

    @Test func webCallbacksAreRebuiltAndNamedByOrigin() throws {
        let plain = try CallbackURL("HTTPS://Client.Example:443/cb?x=1#frag")
        #expect(plain.string == "https://client.example/cb?x=1#frag")
        #expect(plain.clientIdentifier == "client.example" && plain.origin == "https://client.example")
        #expect(try CallbackURL("http://client.example/cb").clientIdentifier == "http://client.example")
        #expect(try CallbackURL("https://client.example:8443/cb").clientIdentifier == "client.example:8443")
        #expect(try CallbackURL("http://client.example:8080").string == "http://client.example:8080/")
        #expect(try CallbackURL.clientIdentifier(ofOrigin: "https://client.example") == "client.example")
        #expect(throws: NostrError.self) { _ = try CallbackURL.clientIdentifier(ofOrigin: "https://client.example/path") }
        #expect(try CallbackURL("primal://nostrsigner").string == "primal://nostrsigner")
    }
}
