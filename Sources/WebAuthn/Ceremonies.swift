import Foundation
import KeyfobCodecs
import KeyfobCrypto

/// A response's clientDataJSON, decoded and parsed once: finding the pending ceremony by its
/// challenge and verifying the response then share one parse.
public struct ClientDataJSON: Sendable {
    /// The field as the client sent it (base64url).
    public let text: String
    public let bytes: [UInt8]
    public let parsed: CollectedClientData

    public init(_ base64url: String) throws(WebAuthnError) {
        text = base64url
        bytes = try Base64URL.decode(base64url, field: "clientDataJSON")
        parsed = try CollectedClientData.parse(bytes)
    }

    /// The challenge the response answers, so a store can find the pending ceremony by value.
    public func challenge() throws(WebAuthnError) -> [UInt8] {
        try Base64URL.decode(parsed.challenge, field: "clientDataJSON.challenge")
    }
}

extension RelyingParty {
    // MARK: - Registration (WebAuthn Level 3 §7.1)

    /// Verifies a registration response step by step as §7.1 says.
    ///
    /// - Parameters:
    ///   - credential: the response as the client sent it.
    ///   - challenge: the challenge of the options this response answers.
    ///   - requireUserVerification: fail unless UV is set (DESIGN.md default: required).
    ///   - requireUserPresence: fail unless UP is set (always true outside tests of old fixtures).
    ///   - allowedAlgorithms: the algorithms the options offered.
    ///   - attestation: trust anchors and format switches.
    ///   - now: the time certificates and timestamps are checked against.
    public func verifyRegistration(
        _ credential: RegistrationCredential,
        challenge: [UInt8],
        requireUserVerification: Bool = true,
        requireUserPresence: Bool = true,
        allowedAlgorithms: [COSEAlgorithm] = COSEAlgorithm.allCases,
        attestation policy: AttestationPolicy = .init(),
        now: Date = Date()
    ) throws(WebAuthnError) -> VerifiedRegistration {
        guard credential.type == "public-key" else { throw .malformed("credential type must be public-key") }
        let id = try Base64URL.decode(credential.id, field: "id")
        let rawID = try Base64URL.decode(credential.rawId, field: "rawId")
        guard id == rawID else { throw .malformed("id and rawId differ") }

        // §7.1 steps 5-6: parse the client data from its exact bytes.
        let clientDataJSON = try Base64URL.decode(credential.response.clientDataJSON, field: "clientDataJSON")
        let clientData = try CollectedClientData.parse(clientDataJSON)
        // Step 7: C.type is webauthn.create.
        guard clientData.type == "webauthn.create" else {
            throw .malformed("clientDataJSON.type is \"\(clientData.type)\", expected \"webauthn.create\"")
        }
        // Steps 8-10: challenge, origin, topOrigin.
        try checkClientData(clientData, challenge: challenge)
        // Step 11: hash of the client data.
        let clientDataHash = sha256(clientDataJSON)

        // Step 12: decode the attestation object.
        let attestationBytes = try Base64URL.decode(credential.response.attestationObject, field: "attestationObject")
        let object = try AttestationObject(bytes: attestationBytes)
        let authData = object.authenticatorData

        // Steps 13-16: rpIdHash, UP, UV, BE/BS.
        try checkAuthenticatorData(
            authData, requireUserVerification: requireUserVerification,
            requireUserPresence: requireUserPresence)

        guard let attested = authData.attestedCredentialData else {
            throw .malformed("authenticator data carries no attested credential data (AT flag clear)")
        }
        // Step 17: the credential's algorithm is one that was offered.
        let publicKey = try CredentialPublicKey(cbor: attested.publicKeyCBOR, bytes: attested.publicKeyCOSE)
        guard allowedAlgorithms.contains(publicKey.algorithm) else {
            throw .init(.unsupportedAlgorithm, "credential algorithm \(publicKey.algorithm.rawValue) was not offered")
        }
        if !policy.allowLegacyAlgorithms {
            guard publicKey.algorithm != .rs1 else {
                throw .init(.unsupportedAlgorithm, "credential algorithm RS1 (SHA-1) is a legacy algorithm and not allowed")
            }
            if let problem = publicKey.handle.checkRSASize(allowLegacy: false) { throw .init(.unsupportedAlgorithm, problem) }
        }

        // Steps 19-22: the attestation statement, its trust path and its type.
        let input = AttestationInput(
            statement: object.statement, authenticatorData: authData, clientDataHash: clientDataHash,
            credentialKey: publicKey, policy: policy, now: now)
        let result = try verifyAttestation(format: object.format, input)

        // Step 23 was enforced by AuthenticatorData (credential id ≤ 1023 bytes).
        // The credential id is signed only inside authenticator data: id and rawId must name it.
        guard attested.credentialID == id else {
            throw .malformed("id/rawId is not the base64url of the credential id in authenticator data")
        }
        return VerifiedRegistration(
            credentialID: attested.credentialID, publicKey: publicKey, signCount: authData.signCount,
            flags: authData.flags, aaguid: attested.aaguid, attestation: result, extensions: authData.extensions)
    }

    // MARK: - Authentication (WebAuthn Level 3 §7.2)

    /// Verifies an authentication response step by step as §7.2 says.
    ///
    /// The caller has found `stored` by the response's credential id; this checks
    /// that the response really is for it and that the counter moved forward.
    public func verifyAuthentication(
        _ credential: AuthenticationCredential,
        challenge: [UInt8],
        stored: StoredCredential,
        requireUserVerification: Bool = true,
        requireUserPresence: Bool = true,
        clientData parsedClientData: ClientDataJSON? = nil
    ) throws(WebAuthnError) -> VerifiedAuthentication {
        guard credential.type == "public-key" else { throw .malformed("credential type must be public-key") }
        let id = try Base64URL.decode(credential.id, field: "id")
        let rawID = try Base64URL.decode(credential.rawId, field: "rawId")
        guard id == rawID else { throw .malformed("id and rawId differ") }
        // Step 5: the credential is the one the RP has on record.
        guard id == stored.id else { throw .init(.credentialNotFound, "the response is for another credential") }

        // Step 6: if a user handle is sent, it must be the credential's user.
        if let handle = credential.response.userHandle, !handle.isEmpty {
            let userHandle = try Base64URL.decode(handle, field: "userHandle")
            if let expected = stored.userHandle, userHandle != expected {
                throw .init(.userHandleMismatch, "userHandle does not belong to this credential's user")
            }
        }

        // Steps 7-9: decode the three fields, parse client data (unless the caller parsed this very field).
        let given = parsedClientData?.text == credential.response.clientDataJSON ? parsedClientData : nil
        let clientDataJSON: [UInt8]
        let clientData: CollectedClientData
        if let given {
            (clientDataJSON, clientData) = (given.bytes, given.parsed)
        } else {
            clientDataJSON = try Base64URL.decode(credential.response.clientDataJSON, field: "clientDataJSON")
            clientData = try CollectedClientData.parse(clientDataJSON)
        }
        let authData = try AuthenticatorData(
            bytes: Base64URL.decode(credential.response.authenticatorData, field: "authenticatorData"))
        let signature = try Base64URL.decode(credential.response.signature, field: "signature")

        // Step 11: C.type is webauthn.get.
        guard clientData.type == "webauthn.get" else {
            throw .malformed("clientDataJSON.type is \"\(clientData.type)\", expected \"webauthn.get\"")
        }
        // Steps 12-14: challenge, origin, topOrigin.
        try checkClientData(clientData, challenge: challenge)
        // Steps 15-18: rpIdHash, UP, UV, BE/BS.
        try checkAuthenticatorData(
            authData, requireUserVerification: requireUserVerification,
            requireUserPresence: requireUserPresence)
        // BE is fixed when the credential is created (§6.1.3): a change means another authenticator.
        if let eligible = stored.backupEligible, eligible != authData.flags.contains(.backupEligible) {
            throw .malformed("backup eligibility (BE) changed since registration")
        }

        // Steps 20-21: the signature over authData || SHA-256(clientDataJSON).
        let message = authData.bytes + sha256(clientDataJSON)
        guard stored.publicKey.isValidSignature(signature, for: message) else {
            throw .init(.signatureInvalid, "assertion signature does not verify with the credential's public key")
        }

        // Step 22: the signature counter, when either side uses one, must move forward.
        if authData.signCount != 0 || stored.signCount != 0 {
            guard authData.signCount > stored.signCount else {
                throw .init(
                    .counterRegression,
                    "sign count \(authData.signCount) is not greater than \(stored.signCount) (possible cloned authenticator)")
            }
        }
        return VerifiedAuthentication(
            credentialID: id, newSignCount: authData.signCount,
            flags: authData.flags, extensions: authData.extensions)
    }

    // MARK: - Steps both ceremonies share

    func checkClientData(_ clientData: CollectedClientData, challenge: [UInt8]) throws(WebAuthnError) {
        // C.challenge equals the base64url encoding of the options' challenge.
        guard let sent = Base64URL.decode(clientData.challenge), sent == challenge else {
            throw .init(.challengeNotFound, "clientDataJSON.challenge is not the challenge that was issued")
        }
        // C.origin is an origin the RP expects.
        guard origins.contains(clientData.origin) else {
            throw .init(.originMismatch, "origin \"\(clientData.origin)\" is not one of the allowed origins")
        }
        // crossOrigin and topOrigin: refused unless configured.
        if clientData.crossOrigin == true && !allowCrossOrigin {
            throw .init(.originMismatch, "cross-origin ceremonies are not allowed")
        }
        if clientData.topOriginPresent {
            guard let top = clientData.topOrigin, allowedTopOrigins.contains(top) else {
                throw .init(.originMismatch, "topOrigin \"\(clientData.topOrigin ?? "(not a string)")\" is not allowed")
            }
        }
        // Token binding (Level 2): a status other than present/supported is malformed.
        if let status = clientData.tokenBinding?.status, status != "present", status != "supported" {
            throw .malformed("tokenBinding.status \"\(status)\" is not valid")
        }
    }

    func checkAuthenticatorData(
        _ authData: AuthenticatorData, requireUserVerification: Bool,
        requireUserPresence: Bool
    ) throws(WebAuthnError) {
        guard acceptedIDs.contains(where: { sha256(Array($0.utf8)) == authData.rpIDHash }) else {
            throw .init(.rpIdMismatch, "rpIdHash is not the SHA-256 of \(acceptedIDs.joined(separator: " or "))")
        }
        if requireUserPresence && !authData.flags.contains(.userPresent) {
            throw .init(.userPresenceRequired, "the authenticator did not report user presence (UP)")
        }
        if requireUserVerification && !authData.flags.contains(.userVerified) {
            throw .init(.userVerificationRequired, "user verification is required but UV is not set")
        }
        if authData.flags.contains(.backupState) && !authData.flags.contains(.backupEligible) {
            throw .malformed("backup state (BS) is set on a credential that is not backup eligible (BE)")
        }
    }
}
