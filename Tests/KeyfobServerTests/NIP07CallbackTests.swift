import Foundation
import HTTPTypes
import KeyfobStore
import Nostr
import Testing
import WebAuthn
import WebAuthnTestSupport

@testable import KeyfobServer

/// Only the page that asked gets the answer (issue #23, high): a NIP-07 result goes through
/// Keyfob's own `/callback.html`, which posts it to the origin the server read. Each attack is
/// written as the attacker sends it, on the approval path (no grant) and on the grant path (a
/// grant for the trusted origin and an unlocked session, where nothing is shown).
@Suite struct NIP07CallbackTests {
    static let own = Harness.origin  // http://localhost:8080
    static let trusted = "https://trusted.example"
    static let peer = try! SecretKey(hex: String(repeating: "42", count: 32)).publicKey

    /// A NIP-155 request whose three callbacks are given (nil: none).
    func decryptRequest(success: String, error: String? = nil, cancel: String? = nil, clientURL: String? = nil) throws -> String {
        // An encryption: the payload needs no key of the user's to be valid; the callback rules are the same.
        var target = "/nostrsigner/meet%20me%20at%205?type=nip44_encrypt&pubkey=\(Self.peer.hex)"
        func add(_ name: String, _ value: String) {
            target += "&\(name)=" + value.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        }
        add("x-success", success)
        if let error { add("x-error", error) }
        if let cancel { add("x-cancel", cancel) }
        if let clientURL { add("client_url", clientURL) }
        return target
    }

    func canonical(_ origin: String = trusted, rid: String = "r1", flag: String? = nil) -> String {
        "\(Self.own)/callback.html?origin=\(origin.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)&rid=\(rid)"
            + (flag.map { "&\($0)=1" } ?? "")
    }

    /// The callbacks an attacker writes, each refused before anything is shown or stored.
    static let attacks: [(String, String)] = [
        ("a second origin", "\(own)/callback.html?origin=https%3A%2F%2Ftrusted.example&rid=y&origin=https%3A%2F%2Fevil.example"),
        ("a second origin spelled ori%67in", "\(own)/callback.html?origin=https%3A%2F%2Ftrusted.example&rid=y&ori%67in=https%3A%2F%2Fevil.example"),
        ("an origin that does not decode", "\(own)/callback.html?origin=https%3A%2F%2Ftrusted.example%ZZ&rid=y"),
        ("an origin before an undecodable one", "\(own)/callback.html?origin=%E0%A4%A&origin=https%3A%2F%2Fevil.example&rid=y"),
        ("a non-canonical origin", "\(own)/callback.html?origin=https%3A%2F%2FTrusted.example%2F&rid=y"),
        ("another parameter", "\(own)/callback.html?origin=https%3A%2F%2Ftrusted.example&rid=y&next=https%3A%2F%2Fevil.example"),
        ("the host with a trailing dot", "http://localhost.:8080/callback.html?origin=https%3A%2F%2Ftrusted.example&rid=y"),
        ("another scheme", "https://localhost:8080/callback.html?origin=https%3A%2F%2Ftrusted.example&rid=y"),
        ("another port", "http://localhost:9999/callback.html?origin=https%3A%2F%2Ftrusted.example&rid=y"),
        ("a loopback address", "http://127.0.0.1:8080/callback.html?origin=https%3A%2F%2Ftrusted.example&rid=y"),
        ("another path in capitals", "http://LOCALHOST:8080/Callback.html?origin=https%3A%2F%2Ftrusted.example&rid=y"),
        ("another page of Keyfob's", "\(own)/account.html?origin=https%3A%2F%2Ftrusted.example&rid=y"),
        ("Keyfob's start page", "http://localhost:8080/"),
        ("an intent: URL", "intent://scan/#Intent;scheme=zxing;package=com.evil;end"),
        ("an android-app: URL", "android-app://com.evil/https/evil.example/"),
        ("a keyfob: URL", "keyfob://sign?x=1"),
        ("a browser extension's page", "chrome-extension://abcdefghijklmnopabcdefghijklmnop/callback.html"),
        ("a Firefox extension's page", "moz-extension://3f1c-4a/callback.html"),
    ]

    @Test func everyPollutedOrOwnHostCallbackIsRefusedOnTheApprovalAndTheGrantPath() async throws {
        let harness = try Harness()
        try await harness.run { client in
            let (token, _) = try await client.newAccount("alice")
            // The grant path: the user approved trusted.example once with "always" (a real NIP-07 request).
            let legit = try decryptRequest(
                success: canonical(), error: canonical(flag: "failed"), cancel: canonical(flag: "cancelled"),
                clientURL: Self.trusted)
            let (first, location, _) = try await client.open(legit, token: token)
            #expect(first.status == .seeOther && location?.hasPrefix("/approve/") == true)
            let id = String(location!.dropFirst("/approve/".count))
            let shown = try await client.call(.get, "/api/requests/\(id)", headers: Client.bearer(token))
            #expect(shown["client"] as? String == "trusted.example", "\(shown.json)")
            _ = try await client.call(.post, "/api/requests/\(id)/approve", json: ["remember": "forever"], headers: Client.bearer(token))
            let before = try await harness.store.pendingRequestCount(now: harness.clock.now)

            for (what, callback) in Self.attacks {
                for token in [token, nil] as [String?] {  // with the grant and an unlocked session, and without a session
                    let (reply, location, body) = try await client.open(try decryptRequest(success: callback), token: token)
                    #expect(reply.status == .badRequest, "\(what): \(reply.status) \(location ?? "")")
                    #expect(location == nil, "\(what) redirected to \(location ?? "")")
                    #expect(!body.contains("evil.example") || body.contains("id=\"problem\""), "\(what)")
                }
            }
            // Errors and cancellations may not go into Keyfob when the result goes elsewhere, nor
            // to another page origin or request id than the result's.
            let mixed = [
                try decryptRequest(success: "https://trusted.example/cb", error: canonical()),
                try decryptRequest(success: canonical(), error: canonical("https://evil.example", flag: "failed")),
                try decryptRequest(success: canonical(), cancel: canonical(rid: "other", flag: "cancelled")),
                try decryptRequest(success: canonical(), error: "https://evil.example/err"),
                try decryptRequest(success: canonical(), clientURL: "https://evil.example"),
            ]
            for target in mixed {
                let (reply, location, _) = try await client.open(target, token: token)
                #expect(reply.status == .badRequest && location == nil, "\(target): \(reply.status) \(location ?? "")")
            }
            #expect(try await harness.store.pendingRequestCount(now: harness.clock.now) == before)
            // The canonical request still runs on the grant, straight back to the callback page.
            let (again, back, _) = try await client.open(legit, token: token)
            #expect(again.status == .seeOther && back?.hasPrefix(canonical()) == true, "\(again.status) \(back ?? "")")
        }
    }

    /// The callback page posts to the origin the server rendered into it, read with the same rule.
    @Test func theCallbackPageCarriesExactlyTheOneOriginItWasGivenOrNone() async throws {
        try await Harness().run { client in
            func page(_ query: String) async throws -> (HTTPResponse.Status, String) {
                let response = try await client.raw.execute(uri: "/callback.html?" + query, method: .get, headers: [:], body: nil)
                return (response.status, String(buffer: response.body))
            }
            let (ok, body) = try await page("origin=https%3A%2F%2Ftrusted.example&rid=r1&result=hello%20world")
            #expect(ok == .ok && body.contains(#"data-origin="https://trusted.example""#))
            #expect(body.contains(#"<script src="/callback.js"></script>"#))
            for bad in [
                "origin=https%3A%2F%2Ftrusted.example&rid=r1&origin=https%3A%2F%2Fevil.example",
                "origin=https%3A%2F%2Ftrusted.example&rid=r1&ori%67in=https%3A%2F%2Fevil.example",
                "origin=https%3A%2F%2Ftrusted.example%ZZ&rid=r1", "rid=r1", "origin=https%3A%2F%2Ftrusted.example",
                "origin=javascript%3Aalert(1)&rid=r1", "origin=https%3A%2F%2Ftrusted.example%22%3E&rid=r1",
            ] {
                let (status, body) = try await page(bad)
                #expect(status == .badRequest && !body.contains("data-origin"), "\(bad)")
            }
        }
    }

    @Test func ownHostsAreRecognisedInEverySpelling() throws {
        let own = OwnCallback.Own(["https://keyfob.example"])
        for url in ["https://keyfob.example/x", "http://KEYFOB.example:81/", "https://keyfob.example./", "https://keyfob.example../a"] {
            #expect(own.contains(try CallbackURL(url)), "\(url)")
        }
        #expect(!own.contains(try CallbackURL("https://keyfob.example.evil.example/")))
        #expect(!own.contains(try CallbackURL("primal://nostrsigner")))
        // On localhost other local apps are clients: only Keyfob's port, or a /callback.html anywhere local.
        let local = OwnCallback.Own(["http://localhost:8080"])
        for url in [
            "http://localhost:8080/x", "https://127.0.0.1:8080/", "http://[::1]:8080/", "http://localhost.:8080/",
            "http://localhost:9999/callback.html", "http://127.0.0.1:3000/CALLBACK.html?origin=x",
        ] {
            #expect(local.contains(try CallbackURL(url)), "\(url)")
        }
        for url in ["http://localhost:3000/cb", "https://localhost:4443/cb", "http://127.0.0.1:9/cb-not-served"] {
            #expect(!local.contains(try CallbackURL(url)), "\(url)")
        }
    }
}
