/// §8.6 FIDO U2F: a P-256 attestation certificate signs the U2F registration data.
enum FIDOU2FAttestation: AttestationFormat {
    static let name = "fido-u2f"

    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> AttestationResult {
        let sig = try input.signature(name)
        guard let chain = try input.certificates(name), chain.count == 1 else {
            throw .attestation(name, "x5c must hold exactly one certificate")
        }
        guard let certKey = chain[0].publicKey, certKey.kind == .ec, certKey.ecGroupName == "prime256v1" else {
            throw .attestation(name, "attestation certificate key is not an EC P-256 key")
        }
        guard case .ec2(1, let x, let y) = input.credentialKey.keyType,
            let credentialID = input.authenticatorData.attestedCredentialData?.credentialID
        else {
            throw .attestation(name, "credential key is not an EC2 P-256 key")
        }
        // verificationData = 0x00 || rpIdHash || clientDataHash || credentialId || publicKeyU2F
        let verificationData =
            [0x00] + input.authenticatorData.rpIDHash + input.clientDataHash
            + credentialID + [0x04] + x + y
        guard certKey.verify(signature: sig, message: verificationData, digest: .sha256) else {
            throw .attestation(name, "attestation signature invalid")
        }
        return input.result(name, .basic, chain, trust: try input.trust(of: chain, name))
    }
}
