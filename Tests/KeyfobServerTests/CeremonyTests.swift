import Foundation
import HTTPTypes
import KeyfobCodecs
import KeyfobServer
import KeyfobStore
import Testing
import WebAuthn
import WebAuthnTestSupport

/// The ceremony endpoints through Hummingbird's router, with a software authenticator.
@Suite struct CeremonyTests {
    // MARK: Sign-up and sign-in

    @Test(arguments: [TestPrivateKey.Kind.es256, .rs256, .eddsa])
    func namedSignUpThenUsernamelessSignIn(_ kind: TestPrivateKey.Kind) async throws {
        let harness = try Harness()
        try await harness.run { client in
            var authenticator = SoftwareAuthenticator(kind)
            let options = try await client.registrationOptions(username: "alice")
            #expect(options["challengeKey"] as? String == "alice")
            #expect((options["rp"] as? [String: Any])?["id"] as? String == "localhost")

            let signUp = try await client.signUp(&authenticator, username: "alice")
            #expect(signUp.status == .ok)
            #expect(signUp["verified"] as? Bool == true)
            #expect(signUp["username"] as? String == "alice")
            #expect(signUp["isAnonymous"] as? Bool == false)
            #expect(signUp["credentialId"] as? String == Base64URL.encode(authenticator.credentialID))
            #expect((signUp["token"] as? String)?.count == 43)
            let cookie = signUp.headers[.setCookie] ?? ""
            #expect(cookie.contains("keyfob_session=") && cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"))
            #expect(!cookie.contains("Secure"))  // plain http on localhost

            let authOptions = try await client.authenticationOptions()
            #expect((authOptions["allowCredentials"] as? [Any])?.isEmpty == true)
            for expected in 1...3 {
                let signIn = try await client.signIn(&authenticator)
                #expect(signIn.status == .ok, "\(signIn.json)")
                #expect(signIn["username"] as? String == "alice")
                let stored = try await harness.store.credential(id: authenticator.credentialID)
                #expect(stored?.signCount == UInt32(expected))
                #expect(stored?.lastUsedAt != nil)
            }
        }
    }

    @Test func anonymousSignUpGetsAGeneratedUsername() async throws {
        try await Harness().run { client in
            var authenticator = SoftwareAuthenticator()
            let reply = try await client.signUp(&authenticator, username: nil)
            #expect(reply.status == .ok)
            #expect(reply["isAnonymous"] as? Bool == true)
            #expect((reply["username"] as? String)?.hasPrefix("anon-") == true)
            var again = authenticator
            let signIn = try await client.signIn(&again)
            #expect(signIn["isAnonymous"] as? Bool == true)
        }
    }

    /// Known and unknown usernames get options of the same shape (discoverable, no credential
    /// list), so the endpoint cannot be asked who has an account.
    @Test func aUsernameDoesNotRevealWhetherTheAccountExists() async throws {
        try await Harness().run { client in
            var authenticator = SoftwareAuthenticator()
            _ = try await client.signUp(&authenticator, username: "bob")
            let known = try await client.authenticationOptions(username: "bob")
            let unknown = try await client.authenticationOptions(username: "nobody")
            for options in [known, unknown] {
                #expect(options.status == .ok && (options["allowCredentials"] as? [Any])?.isEmpty == true)
            }
            #expect(Set(known.json.keys) == Set(unknown.json.keys))
            #expect(try await client.signIn(&authenticator, username: "bob").status == .ok)
        }
    }

    @Test func aSecondPasskeyNeedsTheAccountsSession() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var first = SoftwareAuthenticator()
            let signUp = try await client.signUp(&first, username: "carol")
            let token = signUp["token"] as! String

            // Without a session the name is taken; nothing is written.
            var intruder = SoftwareAuthenticator()
            let taken = try await client.signUp(&intruder, username: "carol")
            #expect(taken.status == .conflict && taken.error == "username_taken")
            #expect(try await harness.counts() == [1, 1])

            // With carol's session: excludeCredentials names the first passkey.
            // …and a passkey assertion made for adding one.
            let unconfirmed = try await client.registrationOptions(username: "carol", headers: Client.bearer(token))
            #expect(unconfirmed.error == "confirmation_required")
            let options = try await client.registrationOptions(
                username: "carol", headers: Client.bearer(token),
                confirmation: client.confirmation("passkey.add", by: &first, token: token))
            let excluded = options["excludeCredentials"] as? [[String: Any]]
            #expect(excluded?.map { $0["id"] as? String } == [Base64URL.encode(first.credentialID)])
            var second = SoftwareAuthenticator(.eddsa)
            let added = try await client.addPasskey(&second, username: "carol", token: token, by: &first)
            #expect(added.status == .ok, "\(added.json)")
            #expect(try await harness.counts() == [1, 2])
            #expect(try await client.signIn(&second).status == .ok)
        }
    }

    // MARK: Sessions

    @Test func cookieAndBearerBothWorkAndLogoutEndsTheSession() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var authenticator = SoftwareAuthenticator()
            let signUp = try await client.signUp(&authenticator, username: "dave")
            let token = signUp["token"] as! String

            let viaBearer = try await client.call(.get, "/session", headers: Client.bearer(token))
            #expect(viaBearer.status == .ok && viaBearer["username"] as? String == "dave")
            #expect(viaBearer["signerLocked"] as? Bool == false)
            let viaCookie = try await client.call(.get, "/session", headers: [.cookie: "keyfob_session=\(token)"])
            #expect(viaCookie.status == .ok && viaCookie["username"] as? String == "dave")

            // Cookie-authenticated state changes need an allowed Origin.
            let noOrigin = try await client.call(.post, "/logout", headers: [.cookie: "keyfob_session=\(token)"])
            #expect(noOrigin.status == .forbidden)
            let evil = try await client.call(.post, "/logout", headers: [.cookie: "keyfob_session=\(token)", .origin: "https://evil.example"])
            #expect(evil.status == .forbidden)
            let logout = try await client.call(.post, "/logout", headers: [.cookie: "keyfob_session=\(token)", .origin: Harness.origin])
            #expect(logout.status == .ok)
            #expect(logout.headers[.setCookie]?.contains("Max-Age=0") == true)
            #expect(try await client.call(.get, "/session", headers: Client.bearer(token)).status == .unauthorized)
        }
    }

    @Test func sessionsExpireAndTheSignerLocks() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var authenticator = SoftwareAuthenticator()
            let token = try await client.signUp(&authenticator, username: "erin")["token"] as! String
            harness.clock.advance(601)
            #expect(try await client.call(.get, "/session", headers: Client.bearer(token))["signerLocked"] as? Bool == true)
            harness.clock.advance(12 * 3600)
            #expect(try await client.call(.get, "/session", headers: Client.bearer(token)).status == .unauthorized)
            #expect(try await client.call(.get, "/session", headers: Client.bearer("garbage")).status == .unauthorized)
        }
    }

    @Test func theAccountPageCanListAndRemovePasskeys() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var first = SoftwareAuthenticator()
            let token = try await client.signUp(&first, username: "fay")["token"] as! String
            let auth = Client.bearer(token)
            let list = try await client.call(.get, "/account/credentials", headers: auth)
            #expect((list["credentials"] as? [[String: Any]])?.count == 1)
            // The only passkey cannot be removed.
            let id = Base64URL.encode(first.credentialID)
            func remove() async throws -> Reply {
                try await client.call(
                    .delete, "/account/credentials/\(id)",
                    json: client.confirmed([:], "passkey.remove", target: id, by: &first, token: token), headers: auth)
            }
            #expect(try await remove().status == .conflict)
            var second = SoftwareAuthenticator()
            _ = try await client.addPasskey(&second, username: "fay", token: token, by: &first)
            #expect(try await remove().status == .ok)
            #expect(try await harness.counts() == [1, 1])
        }
    }

    @Test func healthz() async throws {
        try await Harness().run { client in
            let reply = try await client.call(.get, "/healthz")
            #expect(reply.status == .ok && reply["status"] as? String == "ok")
        }
    }

    @Test func theSignUpPageIsServed() async throws {
        try await Harness().run { client in
            let response = try await client.raw.execute(uri: "/", method: .get)
            #expect(response.status == .ok)
            #expect(String(buffer: response.body).contains("<title>Keyfob"))
        }
    }
}
