import Foundation
import KeyfobCodecs
import Testing

@testable import WebAuthn

/// Every response in `Tests/Vectors/webauthn/` through the verifier, with the
/// outcome its file expects. The error code of each negative vector is pinned
/// here, so a change of mapping is a visible decision.
@Suite struct WebAuthnVectorTests {
    static let folder = "webauthn"
    static let names = Vectors.files(folder)

    /// Keyfob's error code for each vector that must fail (DESIGN.md §7).
    static let expectedCodes: [String: WebAuthnError.Code] = [
        "derived-auth-eddsa-bad-signature.json": .signatureInvalid,
        "derived-auth-es256-bad-signature.json": .signatureInvalid,
        "derived-auth-es256-clientdata-type-create.json": .invalidRequest,
        "derived-auth-es256-counter-not-increased.json": .counterRegression,
        "derived-auth-es256-counter-regression.json": .counterRegression,
        "derived-auth-es256-id-rawid-mismatch.json": .invalidRequest,
        "derived-auth-es256-up-flag-cleared.json": .userPresenceRequired,
        "derived-auth-es256-wrong-challenge.json": .challengeNotFound,
        "derived-auth-es256-wrong-origin.json": .originMismatch,
        "derived-auth-es256-wrong-rp-id.json": .rpIdMismatch,
        "derived-auth-rs256-bad-signature.json": .signatureInvalid,
        "derived-reg-fido-u2f-bad-attestation-signature.json": .attestationInvalid,
        "derived-reg-none-wrong-origin-scheme.json": .originMismatch,
        "derived-reg-none-wrong-rp-id.json": .rpIdMismatch,
        "derived-reg-packed-self-bad-attestation-signature.json": .attestationInvalid,
        "derived-reg-packed-x5c-bad-attestation-signature.json": .attestationInvalid,
        "derived-reg-tpm-bad-attestation-signature.json": .attestationInvalid,
        "pyw-auth-raises-exception-on-incorrect-public-key.json": .signatureInvalid,
        "pyw-auth-raises-exception-on-uv-required-but-false.json": .userVerificationRequired,
        "pyw-reg-fido-u2f-with-unsupported-token-binding-status.json": .invalidRequest,
        "pyw-reg-raises-exception-on-unsupported-attestation-type.json": .attestationInvalid,
        "pyw-reg-raises-useful-error-on-bad-attestation-object.json": .invalidRequest,
        "pyw-reg-raises-when-root-cert-invalid-for-response.json": .attestationInvalid,
        // The stored credential id differs from the response's.
        "swa-auth-return-authenticator-extension-output.json": .credentialNotFound,
        "swa-auth-throw-an-error-if-origin-not-in-list-of-expected-origins.json": .originMismatch,
        "swa-auth-throw-an-error-if-rp-id-not-in-list-of-possible-rp-ids.json": .rpIdMismatch,
        "swa-auth-throw-error-if-previous-counter-value-is-not-less-than-in-response.json": .counterRegression,
        "swa-auth-throw-when-response-challenge-is-not-expected-value.json": .challengeNotFound,
        "swa-auth-throw-when-response-origin-is-not-expected-value.json": .originMismatch,
        "swa-reg-enforce-cts-check-by-default.json": .attestationInvalid,
        "swa-reg-fail-if-id-fido-gen-ce-aaguid-extension-is-present-and-does-not-match-.json": .attestationInvalid,
        "swa-reg-fail-if-id-fido-gen-ce-aaguid-extension-is-present-a-tpm.json": .attestationInvalid,
        "swa-reg-throw-an-error-if-origin-not-in-list-of-expected-origins.json": .originMismatch,
        "swa-reg-throw-an-error-if-rp-id-not-in-list-of-possible-rp-ids.json": .rpIdMismatch,
        "swa-reg-throw-when-response-challenge-is-not-expected-value.json": .challengeNotFound,
        "swa-reg-throw-when-response-origin-is-not-expected-value.json": .originMismatch,
    ]

    @Test func theVectorFolderIsThere() {
        #expect(Self.names.count >= 98)
    }

    @Test(arguments: names)
    func vector(_ name: String) throws {
        let v = try Vectors.json(Self.folder, name)
        let expected = v["expected"] as! [String: Any]
        let shouldVerify = expected["verified"] as! Bool
        let outcome = Result { () throws(WebAuthnError) -> [String: Any] in try Self.run(v) }

        switch outcome {
        case .success(let got):
            #expect(shouldVerify, "\(name) verified but must fail")
            if shouldVerify { Self.compare(got, expected, name) }
        case .failure(let error):
            #expect(!shouldVerify, "\(name) failed: \(error)")
            if !shouldVerify {
                let code =
                    (expected["keyfob_code"] as? String).flatMap(WebAuthnError.Code.init(rawValue:))
                    ?? Self.expectedCodes[name]
                #expect(code != nil, "\(name): no expected code pinned (got \(error))")
                if let code { #expect(error.code == code, "\(name): \(error)") }
            }
        }
    }

    // MARK: - Running one vector

    static func relyingParty(_ v: [String: Any]) -> RelyingParty {
        let ids = (v["rp_id"] as? [String]) ?? [v["rp_id"] as! String]
        let origins = (v["expected_origin"] as? [String]) ?? [v["expected_origin"] as! String]
        return RelyingParty(id: ids[0], name: "test", origins: origins, acceptedIDs: ids)
    }

    static func run(_ v: [String: Any]) throws(WebAuthnError) -> [String: Any] {
        let rp = relyingParty(v)
        let challenge = Base64URL.decode(v["expected_challenge_b64url"] as! String)!
        let uv = v["require_user_verification"] as? Bool ?? false
        let up = v["require_user_presence"] as? Bool ?? true
        if v["kind"] as! String == "registration" {
            let credential = try! Vectors.decode(RegistrationCredential.self, from: v["credential"]!)
            let options = v["simplewebauthn_options"] as? [String: Any]
            let policy = AttestationPolicy(
                trustAnchors: ((v["attestation_root_certs_pem"] as? [String: [String]]) ?? [:]).mapValues { $0.map(pemToDER) },
                safetyNetRequireCTSProfileMatch: (options?["attestationSafetyNetEnforceCTSCheck"] as? Bool) ?? true,
                safetyNetCheckTimestamp: !((v["safetynet_skip_timestamp_check"] as? Bool) ?? false),
                // The public vectors include SHA-1 TPMs; the server's default refuses them (see LegacyAlgorithmTests).
                allowLegacyAlgorithms: true)
            let now = (v["verification_time"] as? String).flatMap(Vectors.date) ?? Date()
            let result = try rp.verifyRegistration(
                credential, challenge: challenge, requireUserVerification: uv, requireUserPresence: up,
                attestation: policy, now: now)
            return [
                "fmt": result.attestation.format, "sign_count": Int(result.signCount),
                "credential_id_b64url": Base64URL.encode(result.credentialID),
                "credential_public_key_b64url": Base64URL.encode(result.publicKey.cose),
                "aaguid": result.aaguid.map { String(format: "%02x", $0) }.joined(),
                "alg": result.publicKey.algorithm.rawValue, "flags": flags(result.flags),
            ]
        } else {
            let credential = try! Vectors.decode(AuthenticationCredential.self, from: v["credential"]!)
            let key = try CredentialPublicKey(cose: Base64URL.decode(v["credential_public_key_b64url"] as! String)!)
            let storedID =
                (v["stored_credential_id_b64url"] as? String).flatMap(Base64URL.decode)
                ?? Base64URL.decode(credential.rawId) ?? []
            let stored = StoredCredential(
                id: storedID, publicKey: key,
                signCount: UInt32(v["prior_sign_count"] as? Int ?? 0))
            let result = try rp.verifyAuthentication(
                credential, challenge: challenge, stored: stored,
                requireUserVerification: uv, requireUserPresence: up)
            return [
                "new_sign_count": Int(result.newSignCount), "flags": flags(result.flags),
                "credential_id_b64url": Base64URL.encode(result.credentialID),
            ]
        }
    }

    static func flags(_ f: AuthenticatorData.Flags) -> [String: Bool] {
        [
            "up": f.contains(.userPresent), "uv": f.contains(.userVerified), "be": f.contains(.backupEligible),
            "bs": f.contains(.backupState), "at": f.contains(.attestedCredentialData), "ed": f.contains(.extensionData),
        ]
    }

    static func compare(_ got: [String: Any], _ expected: [String: Any], _ name: String) {
        for key in ["fmt", "credential_id_b64url", "credential_public_key_b64url", "aaguid"] {
            if let want = expected[key] as? String { #expect(got[key] as? String == want, "\(name): \(key)") }
        }
        for key in ["sign_count", "new_sign_count", "alg"] {
            if let want = expected[key] as? Int { #expect(got[key] as? Int == want, "\(name): \(key)") }
        }
        if let want = expected["flags"] as? [String: Bool], let have = got["flags"] as? [String: Bool] {
            for (flag, value) in want { #expect(have[flag] == value, "\(name): flag \(flag)") }
        }
    }
}

func pemToDER(_ pem: String) -> [UInt8] {
    let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
    return [UInt8](Data(base64Encoded: body) ?? Data())
}

/// Trust anchors: the TPM vector's own intermediate as the anchor for `tpm` makes
/// the chain trusted; an anchor configured for another format leaves it unjudged.
@Suite struct TrustAnchorTests {
    let v: [String: Any]
    let credential: RegistrationCredential
    let intermediate: [UInt8]

    init() throws {
        v = try Vectors.json("webauthn", "swa-reg-verify-tpm-response.json")
        credential = try Vectors.decode(RegistrationCredential.self, from: v["credential"]!)
        let object = try CBORDecoder.decode(Base64URL.decode(credential.response.attestationObject)!)
        intermediate = object[text: "attStmt"]![text: "x5c"]!.array!.last!.bytes!
    }

    func verify(_ anchors: [String: [[UInt8]]], at time: String = "2025-01-30T23:59:59.000Z") throws -> AttestationResult {
        try WebAuthnVectorTests.relyingParty(v).verifyRegistration(
            credential, challenge: Base64URL.decode(v["expected_challenge_b64url"] as! String)!,
            requireUserVerification: false, attestation: .init(trustAnchors: anchors), now: Vectors.date(time)!
        ).attestation
    }

    @Test func aChainThatReachesAnAnchorIsTrusted() throws {
        let result = try verify(["tpm": [intermediate]])
        #expect(result.trust == .trusted && result.type == .attCA && result.certificateChain.count >= 2)
    }

    @Test func withoutAnchorsTrustIsNotEstablished() throws {
        #expect(try verify([:]).trust == .notEstablished)
        #expect(try verify(["packed": [intermediate]]).trust == .notEstablished)
    }

    @Test func anExpiredChainFailsAgainstAnAnchor() {
        #expect(throws: WebAuthnError.self) { _ = try verify(["tpm": [intermediate]], at: "2045-01-01T00:00:00Z") }
    }
}
