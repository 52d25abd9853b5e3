import KeyfobCrypto

/// §8.8 Apple Anonymous: the credential certificate carries a nonce over the ceremony.
enum AppleAttestation: AttestationFormat {
    static let name = "apple"

    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> AttestationResult {
        guard let chain = try input.certificates(name) else { throw .attestation(name, "x5c is missing") }
        let credCert = chain[0]
        // nonce = SHA-256(authenticatorData || clientDataHash), in extension 1.2.840.113635.100.8.2.
        guard let ext = credCert.extensionValue(oid: "1.2.840.113635.100.8.2"),
            let sequence = try? DER.parse(ext.value[...]), sequence.tag == DER.sequence,
            let tagged = sequence.children.first, tagged.tag == 0xa1,
            let octets = tagged.children.first, octets.tag == DER.octetString
        else {
            throw .attestation(name, "credential certificate lacks the Apple nonce extension")
        }
        guard Array(octets.value) == sha256(input.signedData) else {
            throw .attestation(name, "nonce in the certificate does not match this ceremony")
        }
        guard let key = credCert.publicKey, key.isSameKey(as: input.credentialKey.handle) else {
            throw .attestation(name, "credential public key differs from the certificate's")
        }
        return input.result(name, .anonCA, chain, trust: try input.trust(of: chain, name))
    }
}
