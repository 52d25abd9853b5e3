import Foundation
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import NIOConcurrencyHelpers
import Testing
import WebAuthn
import WebAuthnTestSupport

@testable import KeyfobServer

/// The usual sign-in options' challenge is sealed by the server, never stored (#57): any instance
/// of the deployment finishes the sign-in, each challenge signs in once, and nothing a client
/// makes or alters is taken for one.
@Suite struct SealedChallengeTests {
    /// Options, and the assertion `authenticator` makes over their challenge.
    func assertion(
        _ client: Client, _ authenticator: inout SoftwareAuthenticator, edit: ([UInt8]) -> [UInt8] = { $0 }
    ) async throws -> (AuthenticationCredential, Reply) {
        let options = try await client.authenticationOptions()
        let challenge = edit(try #require((options["challenge"] as? String).flatMap(Base64URL.decode)))
        let fields = authenticator.authenticationFields(challenge: challenge, rpID: "localhost", origin: Harness.origin)
        authenticator.signCount = fields.signCount  // each assertion counts on from the last
        return (authenticator.authenticate(fields), options)
    }

    @Test func theChallengeIsSealedAndNoStoreHoldsIt() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var alice = SoftwareAuthenticator()
            #expect(try await client.signUp(&alice, username: "alice").status == .ok)
            let (signed, options) = try await assertion(client, &alice)
            let challenge = try #require((options["challenge"] as? String).flatMap(Base64URL.decode))
            #expect(challenge.count == 41 && challenge[0] == 1)
            #expect(options["challengeKey"] as? String == Base64URL.encode(Array(challenge[1..<12])))
            // Nothing was stored for it.
            #expect(try await harness.store.consumeChallenge(challenge) == nil)
            let reply = try await client.verifyAuthentication(signed, challengeKey: options["challengeKey"] as? String)
            #expect(reply.status == .ok, "\(reply)")
            // Signed in once: the same assertion again is refused.
            #expect(try await client.verifyAuthentication(signed).error == "challenge_not_found")
        }
    }

    @Test func aChallengeNotSealedHereIsRefused() async throws {
        let harness = try Harness(), elsewhere = try Harness()
        try await harness.run { client in
            var alice = SoftwareAuthenticator()
            #expect(try await client.signUp(&alice, username: "alice").status == .ok)
            // Another deployment's (another master key).
            let issued = NIOLockedValueBox<[UInt8]>([])
            try await elsewhere.run { other async throws in
                let options = try await other.authenticationOptions()
                issued.withLockedValue { $0 = (options["challenge"] as? String).flatMap(Base64URL.decode) ?? [] }
            }
            let (fromElsewhere, _) = try await assertion(client, &alice) { _ in issued.withLockedValue { $0 } }
            let foreign = try await client.verifyAuthentication(fromElsewhere)
            #expect(foreign.error == "challenge_not_found", "\(foreign)")
            // Any one byte altered, the expiry's included: it no longer opens.
            for position in [0, 1, 16, 17, 24, 25, 40] {
                let (altered, _) = try await assertion(client, &alice) {
                    var c = $0; c[position] ^= 0x01; return c
                }
                #expect(try await client.verifyAuthentication(altered).error == "challenge_not_found", "byte \(position)")
            }
            // 41 bytes a client chose.
            let (chosen, _) = try await assertion(client, &alice) { _ in [1] + [UInt8](repeating: 7, count: 40) }
            #expect(try await client.verifyAuthentication(chosen).error == "challenge_not_found")
            #expect(try await client.signIn(&alice).status == .ok)
        }
    }

    /// A refusal stores nothing (an assertion refused is refused the same way when sent again), so
    /// the right assertion over the same challenge still signs in, once; an expired one never.
    @Test func aRefusalStoresNothingAndAnExpiredChallengeIsRefused() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var alice = SoftwareAuthenticator()
            #expect(try await client.signUp(&alice, username: "alice").status == .ok)
            // Another challenge's key: refused; without it, the assertion signs in, once.
            let (signed, _) = try await assertion(client, &alice)
            #expect(try await client.verifyAuthentication(signed, challengeKey: "someone-else").error == "challenge_not_found")
            #expect(try await client.verifyAuthentication(signed).status == .ok)
            #expect(try await client.verifyAuthentication(signed).error == "challenge_not_found")
            // A bad signature, then the good one over the same challenge.
            let options = try await client.authenticationOptions()
            var fields = alice.authenticationFields(
                challenge: try #require((options["challenge"] as? String).flatMap(Base64URL.decode)), rpID: "localhost",
                origin: Harness.origin)
            alice.signCount = fields.signCount
            let good = alice.authenticate(fields)
            fields.corruptSignature = true
            #expect(try await client.verifyAuthentication(alice.authenticate(fields)).error == "signature_invalid")
            #expect(try await client.verifyAuthentication(good).status == .ok)
            #expect(try await client.verifyAuthentication(good).error == "challenge_not_found")
            // Past its timeout.
            let (late, _) = try await assertion(client, &alice)
            harness.clock.advance(TimeInterval(harness.configuration.challengeTimeout) + 1)
            #expect(try await client.verifyAuthentication(late).error == "challenge_expired")
            #expect(try await client.signIn(&alice).status == .ok)
        }
    }

    /// The MAC binds the rpID: the same master key for another rpID makes challenges this one
    /// refuses; the expiry comes back to the millisecond; other shapes are not taken for one.
    @Test func aChallengeIsBoundToItsRPIDAndShape() throws {
        let vault = try KeyVault(masterKey: randomBytes(32))
        let here = SealedChallenges(vault: vault, rpID: "example.com"), there = SealedChallenges(vault: vault, rpID: "example.org")
        let expiry = Date(timeIntervalSince1970: 1_800_000_060.125)
        let challenge = here.issue(expiresAt: expiry)
        #expect(here.open(challenge) == expiry && there.open(challenge) == nil)
        #expect(here.issue(expiresAt: expiry) != challenge)  // fresh randomness each time
        var otherVersion = challenge
        otherVersion[0] = 2
        #expect(!SealedChallenges.isSealed(otherVersion) && here.open(otherVersion) == nil)
        #expect(here.open(Array(challenge.dropLast())) == nil && here.open(challenge + [0]) == nil)
        #expect(SealedChallenges.used(challenge, expiresAt: expiry).expiresAt == expiry + SealedChallenges.recordGrace)
    }

    /// Two instances on one store and master key: options from one, the sign-in on the other, and
    /// the same assertion on the first refused; a refusal on one leaves the sign-in to the other.
    @Test func anyInstanceFinishesASignInAndOnlyOnce() async throws {
        let first = try Harness()
        let second = Harness(sharing: first)
        try await first.run { one async throws in
            var alice = SoftwareAuthenticator()
            #expect(try await one.signUp(&alice, username: "alice").status == .ok)
            let (signed, _) = try await assertion(one, &alice)
            let (later, _) = try await assertion(one, &alice)
            try await second.run { two async throws in
                #expect(try await two.verifyAuthentication(signed).status == .ok)
                var wrong = later
                wrong.response.signature = Base64URL.encode([UInt8](repeating: 1, count: 70))
                #expect(try await two.verifyAuthentication(wrong).status != .ok)
            }
            #expect(try await one.verifyAuthentication(signed).error == "challenge_not_found")
            #expect(try await one.verifyAuthentication(later).status == .ok)
            try await second.run { two async throws in
                #expect(try await two.verifyAuthentication(later).error == "challenge_not_found")
            }
        }
    }

    /// A sign-in by a passkey this instance read before checks its assertion against that read and
    /// leaves the rest to the store as it is now (`completeSignIn`): removed on another instance,
    /// the passkey signs in nowhere; a counter another instance moved past keeps a copy of the
    /// passkey that is behind it out, answered as a clone as before.
    @Test func aPasskeyKnownFromAnEarlierSignInIsCheckedAgainstTheStoreAsItIsNow() async throws {
        let first = try Harness()
        let second = Harness(sharing: first)
        try await first.run { one async throws in
            try await second.run { two async throws in
                var alice = SoftwareAuthenticator()
                let token = try #require(try await one.signUp(&alice, username: "alice")["token"] as? String)
                var spare = SoftwareAuthenticator()
                #expect(try await one.addPasskey(&spare, username: "alice", token: token, by: &alice).status == .ok)
                #expect(try await one.signIn(&alice).status == .ok)
                #expect(try await one.signIn(&spare).status == .ok)
                #expect(try await one.signIn(&spare).status == .ok)  // known now: the store alone checks it
                #expect(try await two.signIn(&spare).status == .ok)
                #expect(try await two.signIn(&spare).status == .ok)
                // Ahead of what the first instance read, behind what is stored: a clone.
                spare.signCount -= 2
                #expect(try await one.signIn(&spare).error == "counter_regression")
                spare.signCount += 2
                #expect(try await one.signIn(&spare).status == .ok)

                let userID = try #require(try await first.store.user(named: "alice")).id
                #expect(try await first.store.deleteCredential(id: alice.credentialID, ofUser: userID))
                #expect(try await one.signIn(&alice).error == "credential_not_found")
            }
        }
    }
}
