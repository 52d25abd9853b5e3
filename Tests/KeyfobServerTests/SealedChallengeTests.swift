import Foundation
import KeyfobCodecs
import KeyfobStore
import NIOConcurrencyHelpers
import Testing
import WebAuthn
import WebAuthnTestSupport

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
        return (authenticator.authenticate(fields), options)
    }

    @Test func theChallengeIsSealedAndNoStoreHoldsIt() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var alice = SoftwareAuthenticator()
            #expect(try await client.signUp(&alice, username: "alice").status == .ok)
            let (signed, options) = try await assertion(client, &alice)
            let challenge = try #require((options["challenge"] as? String).flatMap(Base64URL.decode))
            #expect(challenge.count == 45 && challenge[0] == 1)
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
            for position in [0, 1, 14, 25, 44] {
                let (altered, _) = try await assertion(client, &alice) {
                    var c = $0; c[position] ^= 0x01; return c
                }
                #expect(try await client.verifyAuthentication(altered).error == "challenge_not_found", "byte \(position)")
            }
            // 45 bytes a client chose.
            let (chosen, _) = try await assertion(client, &alice) { _ in [1] + [UInt8](repeating: 7, count: 44) }
            #expect(try await client.verifyAuthentication(chosen).error == "challenge_not_found")
            #expect(try await client.signIn(&alice).status == .ok)
        }
    }

    @Test func aRefusalUsesTheChallengeUpAndAnExpiredOneIsRefused() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var alice = SoftwareAuthenticator()
            #expect(try await client.signUp(&alice, username: "alice").status == .ok)
            // Another challenge's key: refused, and the challenge is used up.
            let (signed, _) = try await assertion(client, &alice)
            #expect(try await client.verifyAuthentication(signed, challengeKey: "someone-else").error == "challenge_not_found")
            #expect(try await client.verifyAuthentication(signed).error == "challenge_not_found")
            // A bad signature: refused as such, and used up.
            let options = try await client.authenticationOptions()
            var fields = alice.authenticationFields(
                challenge: try #require((options["challenge"] as? String).flatMap(Base64URL.decode)), rpID: "localhost",
                origin: Harness.origin)
            let good = alice.authenticate(fields)
            fields.corruptSignature = true
            #expect(try await client.verifyAuthentication(alice.authenticate(fields)).error == "signature_invalid")
            #expect(try await client.verifyAuthentication(good).error == "challenge_not_found")
            // Past its timeout.
            let (late, _) = try await assertion(client, &alice)
            harness.clock.advance(TimeInterval(harness.configuration.challengeTimeout) + 1)
            #expect(try await client.verifyAuthentication(late).error == "challenge_expired")
            #expect(try await client.signIn(&alice).status == .ok)
        }
    }

    /// Two instances on one store and master key: options from one, the sign-in on the other, and
    /// the same assertion on the first refused.
    @Test func anyInstanceFinishesASignInAndOnlyOnce() async throws {
        let first = try Harness()
        let second = Harness(sharing: first)
        try await first.run { one async throws in
            var alice = SoftwareAuthenticator()
            #expect(try await one.signUp(&alice, username: "alice").status == .ok)
            let (signed, _) = try await assertion(one, &alice)
            let (refusedThere, _) = try await assertion(one, &alice)
            try await second.run { two async throws in
                #expect(try await two.verifyAuthentication(signed).status == .ok)
                // A refusal on the second uses the challenge up for the first as well.
                var wrong = refusedThere
                wrong.response.signature = Base64URL.encode([UInt8](repeating: 1, count: 70))
                #expect(try await two.verifyAuthentication(wrong).status != .ok)
            }
            #expect(try await one.verifyAuthentication(signed).error == "challenge_not_found")
            #expect(try await one.verifyAuthentication(refusedThere).error == "challenge_not_found")
        }
    }
}
