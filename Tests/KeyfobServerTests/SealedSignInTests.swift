import Foundation
import HTTPTypes
import KeyfobCodecs
import KeyfobCrypto
import Testing
import WebAuthn
import WebAuthnTestSupport

@testable import KeyfobServer
@testable import KeyfobStore

/// One prompt a visit for a sealed account: a browser that signed in to it (or sealed it) is
/// named by a cookie, and its next sign-in offers that account's passkeys with their wraps' PRF
/// salts, so the prompt that signs in also opens the key.
@Suite struct SealedSignInTests {
    /// The `name=value` of the sealed-account cookie a reply sets ("" when it removes it), nil when none.
    static func hint(_ reply: Reply) -> String? {
        reply.headers[values: .setCookie].first { $0.hasPrefix(SealedAccountHint.cookieName + "=") }
            .map { String($0.prefix { $0 != ";" }) }
    }

    /// Sign-in options for a browser sending `cookie`, then `authenticator`'s assertion with the PRF
    /// output for the salt the options give it (or `prf`).
    static func signIn(
        _ client: Client, _ authenticator: inout SoftwareAuthenticator, cookie: String?,
        prf: ((inout SoftwareAuthenticator.Fields) -> Void)? = nil
    ) async throws -> (options: Reply, reply: Reply) {
        let headers: HTTPFields = cookie.map { [.cookie: $0] } ?? [:]
        let options = try await client.call(.get, "/generate-authentication-options", headers: headers)
        let challenge = try #require((options["challenge"] as? String).flatMap(Base64URL.decode))
        var fields = authenticator.authenticationFields(challenge: challenge, rpID: "localhost", origin: Harness.origin)
        if let salts = prfSalts(options.json, for: authenticator.credentialID) { fields.prfSalt = salts.first }
        prf?(&fields)
        var sent = headers
        sent.append(contentsOf: Client.wantsToken)
        let body: [String: Any] = [
            "cred": try jsonObject(authenticator.authenticate(fields)), "challengeKey": options["challengeKey"] as! String,
        ]
        let reply = try await client.call(.post, "/verify-authentication", json: body, headers: sent)
        if reply.status == .ok { authenticator.signCount = fields.signCount }
        return (options, reply)
    }

    @Test func aBrowserThatSignedInToASealedAccountSignsInAndOpensItWithOnePrompt() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var passkey = SoftwareAuthenticator.withPRF()
            let token = try #require(try await client.signUp(&passkey, username: "alice")["token"] as? String)
            let sealed = try await client.seal(&passkey, token: token)
            let cookie = try #require(Self.hint(sealed), "sealing names the account in this browser")
            let userID = try await harness.store.user(named: "alice")!.id
            let wrap = try #require(try await harness.store.keyWraps(ofUser: userID).first)

            // Named: that account's passkeys, each sealing one with its own wrap's salt; the page says whom.
            let (options, reply) = try await Self.signIn(client, &passkey, cookie: cookie)
            #expect(options["account"] as? String == "alice")
            #expect(try await client.call(.get, "/sealed-account", headers: [.cookie: cookie])["account"] as? String == "alice")
            #expect(try await client.call(.get, "/sealed-account")["account"] == nil)
            let allowed = (options["allowCredentials"] as? [[String: Any]])?.compactMap { $0["id"] as? String }
            #expect(allowed == [Base64URL.encode(passkey.credentialID)])
            #expect(prfSalts(options.json, for: passkey.credentialID)?.first == wrap.salt)
            // One prompt: signed in and the key open; a note is signed with no unlock.
            #expect(reply.status == .ok && reply["signerSealed"] as? Bool == true, "\(reply.json)")
            #expect(Self.hint(reply) == cookie, "the sign-in keeps naming the account")
            var session = try #require(reply["token"] as? String)
            #expect(try await client.session(session)["signerLocked"] as? Bool == false)
            #expect(try await client.signNote(session).status == .ok)

            // No cookie, a forged one, or "another account": the usual options, no PRF, no account.
            let forged = cookie.dropLast(2) + (cookie.hasSuffix("AA") ? "AB" : "AA")
            for headers: HTTPFields in [[:], [.cookie: String(forged)], [.cookie: "\(SealedAccountHint.cookieName)=\(userID)"]] {
                let plain = try await client.call(.get, "/generate-authentication-options", headers: headers)
                #expect(plain["extensions"] == nil && plain["account"] == nil && (plain["allowCredentials"] as? [Any])?.isEmpty == true)
            }
            let other = try await client.call(.post, "/generate-authentication-options", json: ["anyAccount": true], headers: [.cookie: cookie])
            #expect(other.status == .ok && other["extensions"] == nil && other["account"] == nil)
            let typed = try await client.call(.post, "/generate-authentication-options", json: ["anyAccount": "yes"], headers: [.cookie: cookie])
            #expect(typed.status == .badRequest)

            // The usual options never open a key, even with the right PRF output volunteered.
            let usual = try await client.call(.post, "/generate-authentication-options", json: ["anyAccount": true])
            var volunteered = passkey.authenticationFields(
                challenge: Base64URL.decode(usual["challenge"] as! String)!, rpID: "localhost", origin: Harness.origin)
            volunteered.prfSalt = wrap.salt
            let plainSignIn = try await client.call(
                .post, "/verify-authentication",
                json: ["cred": try jsonObject(passkey.authenticate(volunteered)), "challengeKey": usual["challengeKey"] as! String],
                headers: Client.wantsToken)
            passkey.signCount = volunteered.signCount
            #expect(try await client.session(try #require(plainSignIn["token"] as? String))["signerLocked"] as? Bool == true)

            // A PRF output that opens nothing signs in with the key shut.
            let (_, wrong) = try await Self.signIn(client, &passkey, cookie: cookie) { $0.prfSalt = Array(repeating: 7, count: 32) }
            let shut = try #require(wrong["token"] as? String)
            #expect(try await client.session(shut)["signerLocked"] as? Bool == true)

            // A challenge made for alice does not sign anyone else in.
            var bob = SoftwareAuthenticator.withPRF()
            _ = try await client.signUp(&bob, username: "bob")
            let (_, intruder) = try await Self.signIn(client, &bob, cookie: cookie)
            #expect(intruder.status == .notFound && intruder.error == "credential_not_found")

            // Signing out everywhere forgets the account in the browser that does it.
            var everywhere = Client.bearer(session)
            everywhere[.cookie] = cookie
            let signedOut = try await client.call(
                .post, "/logout?everywhere=1",
                json: ["confirmation": try await client.confirmation("sessions.revoke", by: &passkey, token: session)], headers: everywhere)
            #expect(signedOut.status == .ok && Self.hint(signedOut) == "\(SealedAccountHint.cookieName)=", "\(signedOut.json)")
            let (_, again) = try await Self.signIn(client, &passkey, cookie: cookie)
            session = try #require(again["token"] as? String)

            // Unsealing forgets the account in this browser; signing in to an unsealed account does too.
            var withCookie = Client.bearer(session)
            withCookie[.cookie] = cookie
            let unsealed = try await client.call(
                .post, "/api/signer/unseal",
                json: ["cred": try await client.confirmation("key.unseal", by: &passkey, token: session)], headers: withCookie)
            #expect(unsealed.status == .ok && Self.hint(unsealed) == "\(SealedAccountHint.cookieName)=")
            let (plainOptions, plainReply) = try await Self.signIn(client, &passkey, cookie: cookie)
            #expect(plainOptions["account"] == nil && Self.hint(plainReply) == "\(SealedAccountHint.cookieName)=")
            #expect(try await client.call(.get, "/sealed-account", headers: [.cookie: cookie])["account"] == nil)
        }
    }

    /// Each sealing passkey is offered with its own wrap's salt and opens the key alone; a passkey
    /// cannot open it with another's PRF output, nor without user verification; a cookie naming
    /// another account with this one's MAC names no one.
    @Test func eachSealingPasskeyOpensItsOwnWrapOnlyWithUserVerification() async throws {
        let harness = try Harness { $0.requireUserVerification = false }
        try await harness.run { client in
            var first = SoftwareAuthenticator.withPRF()
            let token = try #require(try await client.signUp(&first, username: "alice")["token"] as? String)
            let cookie = try #require(Self.hint(try await client.seal(&first, token: token)))
            var second = SoftwareAuthenticator.withPRF()
            let added = try await client.addPasskey(&second, username: "alice", token: token, by: &first)
            #expect(added["sealsKey"] as? Bool == true, "\(added.json)")
            let userID = try await harness.store.user(named: "alice")!.id
            let wraps = try await harness.store.keyWraps(ofUser: userID)
            let options = try await client.call(.get, "/generate-authentication-options", headers: [.cookie: cookie])
            for passkey in [first, second] {
                let salt = wraps.first { $0.credentialID == passkey.credentialID }?.salt
                #expect(salt != nil && prfSalts(options.json, for: passkey.credentialID)?.first == salt)
            }
            #expect(wraps.count == 2 && wraps[0].salt != wraps[1].salt)
            var opened = 0
            for index in 0..<2 {
                var passkey = index == 0 ? first : second
                let (_, reply) = try await Self.signIn(client, &passkey, cookie: cookie)
                if try await client.session(try #require(reply["token"] as? String))["signerLocked"] as? Bool == false { opened += 1 }
                if index == 0 { first = passkey } else { second = passkey }
            }
            #expect(opened == 2, "each sealing passkey alone opens the key")

            // The second passkey's assertion carrying the first one's PRF output opens nothing.
            let firstWrap = try #require(wraps.first { $0.credentialID == first.credentialID })
            let firstOutput = try #require(first.prf(firstWrap.salt))
            let bound = try await client.call(.get, "/generate-authentication-options", headers: [.cookie: cookie])
            let fields = second.authenticationFields(
                challenge: Base64URL.decode(bound["challenge"] as! String)!, rpID: "localhost", origin: Harness.origin)
            var cred = try #require(try jsonObject(second.authenticate(fields)) as? [String: Any])
            cred["clientExtensionResults"] = ["prf": ["results": ["first": Base64URL.encode(firstOutput)]]]
            var sent: HTTPFields = [.cookie: cookie]
            sent.append(contentsOf: Client.wantsToken)
            let pasted = try await client.call(
                .post, "/verify-authentication", json: ["cred": cred, "challengeKey": bound["challengeKey"] as! String], headers: sent)
            second.signCount = fields.signCount
            #expect(try await client.session(try #require(pasted["token"] as? String))["signerLocked"] as? Bool == true)

            // Without user verification (allowed by this server's settings) it signs in, shut.
            let (_, unverified) = try await Self.signIn(client, &first, cookie: cookie) { $0.flags = 0x01 }
            #expect(try await client.session(try #require(unverified["token"] as? String))["signerLocked"] as? Bool == true)

            // Bob's id under alice's MAC names no one.
            var bob = SoftwareAuthenticator.withPRF()
            _ = try await client.signUp(&bob, username: "bob")
            let bobID = try await harness.store.user(named: "bob")!.id
            let tag = cookie[cookie.index(after: cookie.lastIndex(of: ".")!)...]
            let swapped = try await client.call(.get, "/sealed-account", headers: [.cookie: "\(SealedAccountHint.cookieName)=\(bobID).\(tag)"])
            #expect(swapped.status == .ok && swapped["account"] == nil)
        }
    }

    /// A new account sealed from the start is named at sign-up: its first sign-in is one prompt too.
    @Test func anAccountSealedAtSignUpIsNamedFromTheStart() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var passkey = SoftwareAuthenticator.withPRF()
            let options = try await client.registrationOptions(username: "carol")
            let challenge = Base64URL.decode(options["challenge"] as! String)!
            passkey.userHandle = Base64URL.decode((options["user"] as! [String: Any])["id"] as! String)
            var fields = passkey.registrationFields(challenge: challenge, rpID: "localhost", origin: Harness.origin)
            fields.prfSalt = prfSalt(options)
            let body: [String: Any] = [
                "cred": try jsonObject(passkey.register(fields)), "username": "carol",
                "challengeKey": options["challengeKey"] as! String, "seal": true,
            ]
            let signedUp = try await client.call(.post, "/verify-registration", json: body)
            #expect(signedUp.status == .ok && signedUp["sealsKey"] as? Bool == true, "\(signedUp.json)")
            let cookie = try #require(Self.hint(signedUp))
            let (named, reply) = try await Self.signIn(client, &passkey, cookie: cookie)
            #expect(named["account"] as? String == "carol")
            let token = try #require(reply["token"] as? String)
            #expect(try await client.session(token)["signerLocked"] as? Bool == false)
        }
    }
}

extension SealedSignInTests {
    /// An account holds at most 32 passkeys, so every list of them (a remembered sealed account's
    /// sign-in options among them) stays bounded; the 33rd is refused before the confirmation is spent.
    @Test func anAccountHoldsAtMost32Passkeys() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var owner = SoftwareAuthenticator()
            let token = try #require(try await client.signUp(&owner, username: "many")["token"] as? String)
            for _ in 1..<CeremonyController.maxPasskeysPerAccount {
                var another = SoftwareAuthenticator()
                let added = try await client.addPasskey(&another, username: "many", token: token, by: &owner)
                #expect(added.status == .ok, "\(added.json)")
            }
            let userID = try await harness.store.user(named: "many")!.id
            #expect(try await harness.store.credentials(ofUser: userID).count == CeremonyController.maxPasskeysPerAccount)
            let confirmation = try await client.confirmation("passkey.add", by: &owner, token: token)
            let refused = try await client.registrationOptions(username: "many", headers: Client.bearer(token), confirmation: confirmation)
            #expect(refused.status == .forbidden && refused.error == "permission_denied", "\(refused.json)")
            #expect((refused["message"] as? String)?.contains("at most 32 passkeys") == true)
            // The confirmation was not spent: once one passkey is removed, it still adds one.
            let last = try #require(try await harness.store.credentials(ofUser: userID).last)
            #expect(try await harness.store.deleteCredential(id: last.id, ofUser: userID))
            #expect(try await client.registrationOptions(username: "many", headers: Client.bearer(token), confirmation: confirmation).status == .ok)
        }
    }
}
