import Foundation
import HTTPTypes
import KeyfobCodecs
import KeyfobServer
import KeyfobStore
import Testing
import WebAuthn
import WebAuthnTestSupport

/// One test per rule of DESIGN.md §2 and per class of malformed input: each
/// asserts the error code and that nothing was written.
@Suite struct RejectionTests {
    /// Signs up with one field corrupted; expects `code` and an untouched store.
    func rejectSignUp(
        _ code: String, configure: (inout ServerConfiguration) -> Void = { _ in },
        kind: TestPrivateKey.Kind = .es256,
        _ edit: @escaping @Sendable (inout SoftwareAuthenticator.Fields) -> Void
    ) async throws {
        let harness = try Harness(configure)
        try await harness.run { client in
            var authenticator = SoftwareAuthenticator(kind)
            let reply = try await client.signUp(&authenticator, username: "mallory", edit: edit)
            #expect(reply.error == code, "\(reply.json)")
            #expect(reply.status.code >= 400 && reply.status.code < 500)
            #expect(try await harness.counts() == [0, 0])
        }
    }

    /// Signs up properly, then signs in with one field corrupted; expects `code`, the
    /// counter unchanged and no new session.
    func rejectSignIn(_ code: String, _ edit: @escaping @Sendable (inout SoftwareAuthenticator.Fields) -> Void) async throws {
        let harness = try Harness()
        try await harness.run { client in
            var authenticator = SoftwareAuthenticator(signCount: 10)
            #expect(try await client.signUp(&authenticator, username: "alice").status == .ok)
            let reply = try await client.signIn(&authenticator, edit: edit)
            #expect(reply.error == code, "\(reply.json)")
            #expect(reply.status.code >= 400 && reply.status.code < 500)
            #expect(reply.headers[.setCookie] == nil)
            #expect(try await harness.store.credential(id: authenticator.credentialID)?.signCount == 10)
        }
    }

    // MARK: Registration rules

    @Test func registrationOriginMustBeAllowed() async throws { try await rejectSignUp("origin_mismatch") { $0.origin = "http://localhost:9999" } }
    @Test func registrationRPIDMustMatch() async throws { try await rejectSignUp("rp_id_mismatch") { $0.rpID = "example.com" } }
    @Test func registrationNeedsUserPresence() async throws { try await rejectSignUp("user_presence_required") { $0.flags = 0x04 } }
    @Test func registrationNeedsUserVerification() async throws { try await rejectSignUp("user_verification_required") { $0.flags = 0x01 } }
    @Test func registrationRefusesCrossOrigin() async throws { try await rejectSignUp("origin_mismatch") { $0.crossOrigin = true } }
    @Test func registrationRefusesTopOrigin() async throws { try await rejectSignUp("origin_mismatch") { $0.topOrigin = "http://localhost:8080" } }
    @Test func registrationRefusesBSWithoutBE() async throws { try await rejectSignUp("invalid_request") { $0.flags = 0x15 } }
    @Test func registrationTypeMustBeCreate() async throws { try await rejectSignUp("invalid_request") { $0.type = "webauthn.get" } }
    @Test func registrationAttestationMustVerify() async throws {
        try await rejectSignUp("attestation_invalid") {
            $0.attestation = .packedSelf; $0.corruptSignature = true
        }
    }
    @Test func registrationAlgorithmMustHaveBeenOffered() async throws {
        try await rejectSignUp("unsupported_algorithm", configure: { $0.algorithms = [.es256] }, kind: .rs256, { _ in })
    }
    @Test func registrationChallengeMustBeOneWeIssued() async throws {
        try await rejectSignUp("challenge_not_found") { $0.challenge = Base64URL.encode([UInt8](repeating: 1, count: 32)) }
    }

    @Test func challengesAreSingleUseEvenWhenVerificationFails() async throws {
        let harness = try Harness()
        try await harness.run { client in
            let authenticator = SoftwareAuthenticator()
            let options = try await client.registrationOptions(username: "alice")
            let challenge = Base64URL.decode(options["challenge"] as! String)!
            var bad = authenticator.registrationFields(challenge: challenge, rpID: "localhost", origin: "http://evil.test")
            #expect(try await client.verifyRegistration(authenticator.register(bad)).error == "origin_mismatch")
            bad.origin = Harness.origin
            #expect(try await client.verifyRegistration(authenticator.register(bad)).error == "challenge_not_found")
            #expect(try await harness.counts() == [0, 0])
        }
    }

    @Test func challengesExpire() async throws {
        let harness = try Harness()
        try await harness.run { client in
            let authenticator = SoftwareAuthenticator()
            let options = try await client.registrationOptions(username: "alice")
            harness.clock.advance(61)
            let challenge = Base64URL.decode(options["challenge"] as! String)!
            let reply = try await client.verifyRegistration(
                authenticator.register(authenticator.registrationFields(challenge: challenge, rpID: "localhost", origin: Harness.origin)))
            #expect(reply.error == "challenge_expired")
            #expect(try await harness.counts() == [0, 0])
        }
    }

    @Test func aCredentialRegistersOnce() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var authenticator = SoftwareAuthenticator()
            #expect(try await client.signUp(&authenticator, username: "alice").status == .ok)
            let again = try await client.signUp(&authenticator, username: "bob")
            #expect(again.status == .conflict && again.error == "credential_exists")
            #expect(try await harness.counts() == [1, 1])
        }
    }

    @Test func challengeKeyMustBelongToTheChallenge() async throws {
        let harness = try Harness()
        try await harness.run { client in
            let authenticator = SoftwareAuthenticator()
            let options = try await client.registrationOptions(username: "alice")
            let challenge = Base64URL.decode(options["challenge"] as! String)!
            let reply = try await client.verifyRegistration(
                authenticator.register(authenticator.registrationFields(challenge: challenge, rpID: "localhost", origin: Harness.origin)),
                challengeKey: "someone-else")
            #expect(reply.error == "challenge_not_found")
            #expect(try await harness.counts() == [0, 0])
        }
    }

    // MARK: Authentication rules

    @Test func signInOriginMustBeAllowed() async throws { try await rejectSignIn("origin_mismatch") { $0.origin = "https://localhost" } }
    @Test func signInRPIDMustMatch() async throws { try await rejectSignIn("rp_id_mismatch") { $0.rpID = "127.0.0.1" } }
    @Test func signInNeedsUserPresence() async throws { try await rejectSignIn("user_presence_required") { $0.flags = 0x04 } }
    @Test func signInNeedsUserVerification() async throws { try await rejectSignIn("user_verification_required") { $0.flags = 0x01 } }
    @Test func signInSignatureMustVerify() async throws { try await rejectSignIn("signature_invalid") { $0.corruptSignature = true } }
    @Test func signInCounterMustMoveForward() async throws { try await rejectSignIn("counter_regression") { $0.signCount = 10 } }
    @Test func signInUserHandleMustMatch() async throws {
        try await rejectSignIn("user_handle_mismatch") { $0.userHandle = Base64URL.encode([UInt8](repeating: 9, count: 32)) }
    }
    @Test func signInRefusesCrossOrigin() async throws { try await rejectSignIn("origin_mismatch") { $0.crossOrigin = true } }
    @Test func signInBEMayNotChange() async throws { try await rejectSignIn("invalid_request") { $0.flags = 0x0d } }
    @Test func signInUnknownCredential() async throws {
        try await rejectSignIn("credential_not_found") {
            $0.id = Base64URL.encode([1, 2, 3]); $0.rawId = $0.id
        }
    }
    /// A sign-in refused for its passkey (an unknown one, or a rawId that is not base64url) stores
    /// nothing, so the right passkey's assertion over the same challenge signs in — once.
    @Test func aRefusedSignInLeavesItsChallengeToTheRightPasskeyOnce() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var authenticator = SoftwareAuthenticator()
            #expect(try await client.signUp(&authenticator, username: "alice").status == .ok)
            for badID in [Base64URL.encode([1, 2, 3]), "not base64url!"] {
                let options = try await client.authenticationOptions()
                let challenge = Base64URL.decode(options["challenge"] as! String)!
                var fields = authenticator.authenticationFields(challenge: challenge, rpID: "localhost", origin: Harness.origin)
                fields.signCount = authenticator.signCount + 1
                var assertion = authenticator.authenticate(fields)
                let good = assertion
                (assertion.id, assertion.rawId) = (badID, badID)
                let refused = try await client.verifyAuthentication(assertion)
                #expect(refused.error == (badID.hasSuffix("!") ? "invalid_request" : "credential_not_found"), "\(refused.json)")
                #expect(try await client.verifyAuthentication(good).status == .ok)
                authenticator.signCount = fields.signCount
                let replayed = try await client.verifyAuthentication(good)
                #expect(replayed.error == "challenge_not_found", "\(replayed.json)")
            }
            #expect(try await client.signIn(&authenticator).status == .ok)
        }
    }
    @Test func signInTypeMustBeGet() async throws { try await rejectSignIn("invalid_request") { $0.type = "webauthn.create" } }

    @Test func concurrentAssertionsWithTheSameCounterCannotBothPass() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var authenticator = SoftwareAuthenticator()
            _ = try await client.signUp(&authenticator, username: "alice")
            let a = Base64URL.decode(try await client.authenticationOptions()["challenge"] as! String)!
            let b = Base64URL.decode(try await client.authenticationOptions()["challenge"] as! String)!
            let first = authenticator.authenticate(authenticator.authenticationFields(challenge: a, rpID: "localhost", origin: Harness.origin))
            let second = authenticator.authenticate(authenticator.authenticationFields(challenge: b, rpID: "localhost", origin: Harness.origin))
            async let r1 = client.verifyAuthentication(first)
            async let r2 = client.verifyAuthentication(second)
            let statuses = [try await r1.status, try await r2.status]
            #expect(statuses.filter { $0 == .ok }.count == 1)
            #expect(try await harness.store.credential(id: authenticator.credentialID)?.signCount == 1)
        }
    }

    // MARK: Malformed input, any shape

    @Test func malformedBodiesGetInvalidRequest() async throws {
        let harness = try Harness()
        try await harness.run { client in
            let cases: [(String, [UInt8])] = [
                ("not JSON", Array("{not json".utf8)),
                ("JSON of the wrong shape", Array(#"{"cred": "x"}"#.utf8)),
                ("a missing field", Array(#"{"cred": {"id": "AA", "rawId": "AA", "type": "public-key"}}"#.utf8)),
                ("wrong types", Array(#"{"cred": {"id": 1, "rawId": [], "type": null, "response": 5}}"#.utf8)),
                (
                    "bad base64url",
                    Array(
                        #"{"cred": {"id": "!!", "rawId": "!!", "type": "public-key", "response": {"clientDataJSON": "%%%", "attestationObject": "***"}}}"#
                            .utf8)
                ),
                ("an array", Array("[1,2,3]".utf8)),
                ("empty", []),
            ]
            for endpoint in ["/verify-registration", "/verify-authentication"] {
                for (name, body) in cases {
                    let reply = try await client.call(.post, endpoint, body: body)
                    #expect(reply.status == .badRequest, "\(endpoint) \(name): \(reply.status)")
                    #expect(reply.error == "invalid_request", "\(endpoint) \(name): \(reply.json)")
                    #expect((reply["message"] as? String)?.isEmpty == false)
                }
            }
            #expect(try await harness.counts() == [0, 0])
        }
    }

    @Test func garbageCBORIsRefused() async throws {
        try await rejectSignUp("invalid_request") { f in
            // A valid client data with a CBOR length bomb as the attestation object.
            f.editAuthenticatorData = { _ in [0xba, 0xc1, 0x41, 0x68, 0x3c] }
        }
        let harness = try Harness()
        try await harness.run { client in
            let options = try await client.registrationOptions()
            let clientData = #"{"type":"webauthn.create","challenge":"\#(options["challenge"] as! String)","origin":"http://localhost:8080"}"#
            let reply = try await client.verifyRegistration(
                RegistrationCredential(
                    id: "AAAA", rawId: "AAAA",
                    response: .init(
                        clientDataJSON: Base64URL.encode(Array(clientData.utf8)),
                        attestationObject: Base64URL.encode([0xa3, 0x63, 0x66, 0x6d, 0x74, 0xff, 0x00]))))
            #expect(reply.error == "invalid_request")
            #expect(try await harness.counts() == [0, 0])
        }
    }

    @Test func oversizedBodiesAreRefusedBeforeTheyAreRead() async throws {
        let harness = try Harness()
        try await harness.run { client in
            let big = [UInt8](repeating: UInt8(ascii: "a"), count: 70 * 1024)
            let reply = try await client.call(.post, "/verify-registration", body: big)
            #expect(reply.status == .contentTooLarge && reply.error == "payload_too_large")
            // A body that merely declares a huge Content-Length is refused unread: see Tests/e2e (the
            // router test client always rewrites Content-Length to the real size).
            #expect(try await harness.counts() == [0, 0])
        }
    }

    @Test func theContentTypeMustBeJSON() async throws {
        let harness = try Harness()
        try await harness.run { client in
            let reply = try await client.call(.post, "/verify-registration", body: Array("{}".utf8), contentType: "text/plain")
            #expect(reply.status == .unsupportedMediaType && reply.error == "invalid_request")
            let form = try await client.call(
                .post, "/generate-registration-options", body: Array("username=a".utf8),
                contentType: "application/x-www-form-urlencoded")
            #expect(form.status == .unsupportedMediaType)
        }
    }

    @Test func badUsernamesAreRefused() async throws {
        try await Harness().run { client in
            for name in ["a b", "anon-123", String(repeating: "x", count: 65), "<script>"] {
                let reply = try await client.registrationOptions(username: name)
                #expect(reply.error == "invalid_request", "\(name)")
            }
        }
    }

    @Test func unknownPathsAnswerJSON() async throws {
        try await Harness().run { client in
            let reply = try await client.call(.get, "/no/such/thing")
            #expect(reply.status == .notFound && reply.error != nil)
        }
    }
}
