import Foundation
import HTTPTypes
import KeyfobCodecs
import Nostr
import Testing
import WebAuthn
import WebAuthnTestSupport

@testable import KeyfobServer

@Suite struct PasskeyNamesTests {
    @Test func providersAreNamedByAAGUIDAndUnknownOnesArePasskeys() throws {
        let public_ = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Public").path
        let names = PasskeyNames(publicDirectory: public_)
        let icloud = Hex.decode("fbfc3007154e4ecc8c0b6e020557d7bd")!
        #expect(names.provider(aaguid: icloud) == .init(name: "iCloud Keychain", icon: "manager"))
        #expect(names.provider(aaguid: [UInt8](repeating: 0, count: 16)) == PasskeyNames.unknown)
        #expect(names.provider(aaguid: [1, 2, 3]) == PasskeyNames.unknown)
        #expect(PasskeyNames(publicDirectory: "/nonexistent").provider(aaguid: icloud) == PasskeyNames.unknown)
    }

    @Test func theBrowserAndSystemComeFromTheUserAgent() {
        let cases: [(String?, String?)] = [
            ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/129.0 Safari/537.36", "Chrome on Linux"),
            (
                "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
                "Safari on iPhone"
            ),
            (
                "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/129.0 Safari/537.36 Edg/129.0",
                "Edge on Windows"
            ),
            ("Mozilla/5.0 (Macintosh; Intel Mac OS X 14.5; rv:130.0) Gecko/20100101 Firefox/130.0", "Firefox on Mac"),
            (
                "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/129.0 Mobile Safari/537.36",
                "Chrome on Android"
            ),
            ("curl/8.0", nil), (nil, nil),
        ]
        for (ua, expected) in cases { #expect(PasskeyNames.createdOn(userAgent: ua) == expected, "\(ua ?? "nil")") }
    }

    @Test func aPasskeyCanBeRenamedByItsOwnerOnly() async throws {
        try await Harness().run { client in
            var authenticator = SoftwareAuthenticator()
            let reply = try await client.signUp(
                &authenticator, username: "ines", headers: [.userAgent: "Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) Version/17.5 Safari/604.1"])
            let token = reply["token"] as! String
            let id = Base64URL.encode(authenticator.credentialID)
            var list = try await client.call(.get, "/account/credentials", headers: Client.bearer(token))["credentials"] as! [[String: Any]]
            #expect(list[0]["authenticatorName"] as? String == "Passkey" && list[0]["createdOn"] as? String == "Safari on iPad")
            #expect(list[0]["name"] == nil && list[0]["icon"] as? String == "passkey")
            #expect(
                try await client.call(.patch, "/account/credentials/\(id)", json: ["name": "  kitchen iPad  "], headers: Client.bearer(token)).status
                    == .ok)
            list = try await client.call(.get, "/account/credentials", headers: Client.bearer(token))["credentials"] as! [[String: Any]]
            #expect(list[0]["name"] as? String == "kitchen iPad")
            for bad in [String(repeating: "x", count: 65), "tab\there"] {
                #expect(
                    try await client.call(.patch, "/account/credentials/\(id)", json: ["name": bad], headers: Client.bearer(token)).status
                        == .badRequest)
            }
            let (other, _) = try await client.newAccount("oscar")
            #expect(
                try await client.call(.patch, "/account/credentials/\(id)", json: ["name": "mine"], headers: Client.bearer(other)).status == .notFound
            )
            #expect(try await client.call(.patch, "/account/credentials/\(id)", json: ["name": ""], headers: Client.bearer(token)).status == .ok)
            list = try await client.call(.get, "/account/credentials", headers: Client.bearer(token))["credentials"] as! [[String: Any]]
            #expect(list[0]["name"] == nil)
        }
    }

    @Test func htmlPathsGetPagesAndTheLoopbackAddressGetsALinkToLocalhost() async throws {
        try await Harness().run { client in
            let html: HTTPFields = [.accept: "text/html,application/xhtml+xml"]
            let missing = try await client.raw.execute(uri: "/no-such-page", method: .get, headers: html, body: nil)
            #expect(missing.status == .notFound && String(buffer: missing.body).contains("Page not found"))
            let api = try await client.call(.get, "/api/no-such-thing", headers: html)
            #expect(api.status == .notFound && api.error == "invalid_request")
        }
    }

    /// #27: a passkey no catalog names is a "Security key" when it travels only by USB, NFC or
    /// Bluetooth; a catalogued one keeps its name.
    @Test func anUnnamedKeyThatTravelsByUSBOrNFCIsASecurityKey() {
        let unknown = PasskeyNames.unknown
        #expect(AccountController.fallbackName(unknown, transports: ["usb"]).name == "Security key")
        #expect(AccountController.fallbackName(unknown, transports: ["nfc", "usb"]).name == "Security key")
        #expect(AccountController.fallbackName(unknown, transports: ["internal"]).name == "Passkey")
        #expect(AccountController.fallbackName(unknown, transports: ["hybrid", "usb"]).name == "Passkey")
        #expect(AccountController.fallbackName(unknown, transports: []).name == "Passkey")
        let named = PasskeyNames.Provider(name: "YubiKey 5", icon: "yubikey")
        #expect(AccountController.fallbackName(named, transports: ["usb"]) == named)
    }
}

@Suite struct PasskeyNameAtCreationTests {
    /// A passkey can be named as it is made (#27); a bad name is refused before the ceremony's
    /// challenge is used, and nothing is written.
    @Test func aPasskeyIsNamedAsItIsMade() async throws {
        try await Harness().run { client in
            var authenticator = SoftwareAuthenticator()
            let options = try await client.registrationOptions(username: "nina")
            let challenge = Base64URL.decode(options["challenge"] as! String)!
            authenticator.userHandle = Base64URL.decode((options["user"] as! [String: Any])["id"] as! String)
            let credential = authenticator.register(
                authenticator.registrationFields(challenge: challenge, rpID: "localhost", origin: Harness.origin))
            var body: [String: Any] = [
                "cred": try jsonObject(credential), "username": "nina", "challengeKey": options["challengeKey"] as! String,
                "passkeyName": "bad\u{7}name",
            ]
            let refused = try await client.call(.post, "/verify-registration", json: body, headers: Client.wantsToken)
            #expect(refused.error == "invalid_request")
            #expect(try await client.harness.counts() == [0, 0])
            body["passkeyName"] = "  work laptop  "
            let made = try await client.call(.post, "/verify-registration", json: body, headers: Client.wantsToken)
            #expect(made.status == .ok, "\(made.json)")
            let token = try #require(made["token"] as? String)
            let listed = try await client.call(.get, "/account/credentials", headers: Client.bearer(token))
            #expect(((listed["credentials"] as? [[String: Any]])?.first?["name"] as? String) == "work laptop", "\(listed.json)")
        }
    }
}
